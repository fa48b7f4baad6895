# Language items a Taichi program may use: bit operations on integer vectors, vector
# components written at run-time indices, a serial loop nest's locals, the walrus
# operator, ti.ndrange in Python scope and the scalar components of a 0-D vector field.
import taichi as ti

ti.init(arch=ti.cpu)

masks = ti.Vector.field(3, ti.i32, shape=4)
ramp = ti.Vector.field(3, ti.f32, shape=4)
heights = ti.field(ti.f32, shape=8)
tallest = ti.field(ti.f32, shape=())
center = ti.Vector.field(2, ti.f32, shape=())


@ti.kernel
def make_masks():
    for i in masks:
        v = ti.Vector([i, 3 * i, 7])
        masks[i] = ((v & 6) | 1) ^ (v >> 1)


@ti.kernel
def make_ramp():
    for k in ramp:
        for d in range(3):
            ramp[k][d] = k + 0.25 * d


@ti.kernel
def find_tallest():
    best = heights[0]
    for _ in range(1):
        for i in range(8):
            if best < heights[i]:
                best = heights[i]
    tallest[None] = best


@ti.kernel
def halvings(n: ti.i32) -> ti.i32:
    count = 0
    while (n := n // 2) > 0:
        count += 1
    return count


make_masks()
print('masks', masks.to_numpy().tolist())
make_ramp()
print('ramp', ramp[3].to_list())
for i, h in enumerate([0.5, 2.0, 1.5, 4.25, 3.0, 0.0, 4.0, 1.0]):
    heights[i] = h
find_tallest()
print('tallest', tallest[None])
print('halvings', halvings(37))
print('cells', [cell for cell in ti.ndrange(2, (1, 3))])
center.get_scalar_field(0)[None] = 1.5
center.get_scalar_field(1)[None] = center.get_scalar_field(0)[None] * 2
print('center', center[None].to_list())
