# Run-time print and assert in the Taichi scope, as Taichi's debugging guide uses them.
import taichi as ti

ti.init(arch=ti.cpu, debug=True)

x = ti.field(ti.f32, 4)


@ti.func
def describe(i):
    print(f'x[{i}] = {x[i]:.2f}')


@ti.kernel
def inside_taichi_scope():
    a = 256
    print('hello', a)
    print('hello', a * 2 + 200)
    print('hello', a, sep='')
    print('hello', a, sep='', end='')
    print('world', a, sep='')
    m = ti.Matrix([[2, 3, 4], [5, 6, 7]])
    print('m =', m)
    v = ti.Vector([3, 4])
    print('v =', v)
    ray_dir = ti.Vector([0.0, 0.0, 1.0])
    print('ray.dir =', ray_dir, ', ray.len =', 1.0)


@ti.kernel
def fill(scale: ti.f32):
    for i in x:
        x[i] = i * scale
    for _ in range(1):
        for i in range(4):
            describe(i)


@ti.kernel
def do_sqrt_all():
    for i in x:
        assert x[i] >= 0, f'x[{i}] is negative'
        x[i] = ti.sqrt(x[i])


inside_taichi_scope()
fill(0.5)
do_sqrt_all()
print('sqrt', [round(v, 3) for v in x.to_numpy().tolist()])
x[2] = -1.0
try:
    do_sqrt_all()
except AssertionError as error:
    print('AssertionError:', str(error).strip().splitlines()[-1])
