# Sparse layouts as Taichi's documentation uses them: a pointer grid of dense blocks that
# fills where particles land, a bitmask over single cells, lists under a dynamic node, and
# the explicit activation API.
import taichi as ti

ti.init(arch=ti.cpu)

# --- a pointer grid: 4 x 4 blocks of 4 x 4 cells; writes activate whole blocks -----------
density = ti.field(ti.f32)
blocks = ti.root.pointer(ti.ij, 4)
blocks.dense(ti.ij, 4).place(density)
points = ti.Vector.field(2, ti.f32, shape=6)


@ti.kernel
def splat():
    for p in points:
        cell = ti.cast(points[p] * 16, ti.i32)
        density[cell] += 1.0


@ti.kernel
def active_blocks() -> ti.i32:
    n = 0
    for i, j in blocks:
        n += 1
    return n


@ti.kernel
def active_cells() -> ti.i32:
    n = 0
    for I in ti.grouped(density):
        n += 1
    return n


@ti.kernel
def total() -> ti.f32:
    s = 0.0
    for i, j in density:
        s += density[i, j]
    return s


points.from_numpy(__import__('numpy').array([[0.1, 0.1], [0.12, 0.1], [0.9, 0.9], [0.5, 0.3],
                                             [0.55, 0.3], [0.1, 0.95]], dtype='float32'))
splat()
print('pointer blocks', active_blocks(), 'cells', active_cells(), 'total', total())
blocks.deactivate_all()
print('after deactivate_all', active_blocks(), active_cells(), total())
density[15, 0] = 2.0            # a write from Python activates its block too
print('python write', active_blocks(), active_cells(), total())

# --- bitmasked cells under pointers: activity per cell ------------------------------------
x = ti.field(ti.i32)
block1 = ti.root.pointer(ti.ij, (3, 3))
block2 = block1.pointer(ti.ij, (2, 2))
pixel = block2.bitmasked(ti.ij, (2, 2))
pixel.place(x)


@ti.kernel
def activity(snode: ti.template(), i: ti.i32, j: ti.i32) -> ti.i32:
    return ti.is_active(snode, [i, j])


@ti.kernel
def activate_some():
    ti.activate(block1, [1, 0])
    ti.activate(block2, [3, 1])
    ti.activate(pixel, [7, 3])
    x[0, 0] = 5


@ti.kernel
def count_pixels() -> ti.i32:
    n = 0
    for i, j in x:
        n += 1
    return n


@ti.kernel
def drop_first_column():
    for i, j in block1:
        if i == 0:
            ti.deactivate(block1, [i, j])


activate_some()
print('activity', activity(block1, 1, 0), activity(block2, 3, 1), activity(pixel, 7, 3), activity(pixel, 6, 3),
      'pixels', count_pixels())
print('rescale', ti.rescale_index(x, block1, ti.Vector([7, 3])), ti.rescale_index(x, block2, [7, 3]),
      ti.rescale_index(block2, block1, [3, 1]))
drop_first_column()
print('after deactivate', count_pixels(), activity(block1, 0, 0), x[0, 0])

# --- lists under a dynamic node ------------------------------------------------------------
neighbours = ti.field(ti.i32)
ti.root.dense(ti.i, 4).dynamic(ti.j, 8, chunk_size=2).place(neighbours)


@ti.kernel
def build_lists():
    for i in range(4):
        for j in range(i + 1):
            neighbours[i].append(10 * i + j)


@ti.kernel
def list_lengths() -> ti.i32:
    code = 0
    ti.loop_config(serialize=True)
    for i in range(4):
        code = code * 10 + neighbours[i].length()
    return code


@ti.kernel
def list_sum() -> ti.i32:
    s = 0
    for i, j in neighbours:
        s += neighbours[i, j]
    return s


@ti.kernel
def clear_odd():
    for i in range(4):
        if i % 2 == 1:
            neighbours[i].deactivate()


build_lists()
print('lists', list_lengths(), list_sum(), neighbours.to_numpy()[3].tolist())
clear_odd()
print('cleared', list_lengths(), list_sum())
