# A Taichi program as Taichi's documentation writes it: `import taichi`, a GPU arch, a
# layout whose axes are nested out of order, struct-of-arrays placement, command-line args.
import sys

import numpy as np
import taichi as ti

ti.init(arch=ti.gpu, default_fp=ti.f64)

steps, n = 5, 3
hidden = ti.field(ti.f64)
ti.root.dense(ti.l, steps).dense(ti.i, n).place(hidden)      # Taichi's axis order: hidden[i, t]
v = ti.Vector.field(2, ti.f64)
block = ti.root.dense(ti.i, 4)


def soa(x):
    if isinstance(x, ti.ScalarField):
        block.place(x)
    else:
        for k in range(x.n):
            soa(x.get_scalar_field(k))


soa(v)
noise = ti.field(ti.f64, shape=20000)


@ti.kernel
def fill():
    ti.static_assert(n == 3, 'three rows')
    ti.static_print('compiling fill')
    ti.block_local(hidden)
    for i, t in hidden:
        hidden[i, t] = i * 10 + t
    for i in v:
        v[i] = [i, -i]
    for k in noise:
        noise[k] = ti.randn()


fill()
fill()
ti.sync()
samples = noise.to_numpy()
print('args', sys.argv[1:])
print('hidden', hidden.shape, hidden[2, 4])
print('v', v.shape, v[3][1])
print('randn mean, std', round(abs(samples.mean()), 1), round(samples.std(), 1))
