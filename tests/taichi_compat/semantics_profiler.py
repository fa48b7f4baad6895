# Taichi's semantics and its kernel profiler, as Taichi's documentation writes programs:
# min/max with NaN, svd of a reflection, sym_eig, more of ti.math, ti.init keywords.
import sys

import taichi as ti

ti.init(arch=ti.cpu, default_fp=ti.f64, kernel_profiler=True, packed=True, device_memory_GB=1.0,
        offline_cache=True, check_out_of_bound=True, advanced_optimization=True)

if len(sys.argv) > 1 and sys.argv[1] == 'bad-init':
    ti.init(arch=ti.cpu, kernel_profile=True)       # a typo: the error names it

vec2, vec3 = ti.math.vec2, ti.math.vec3
values = ti.field(float, shape=8)
eigen = ti.Vector.field(3, float, shape=())
x = ti.field(float, shape=4, needs_grad=True)
loss = ti.field(float, shape=(), needs_grad=True)


@ti.kernel
def semantics(nan: float):
    values[0] = ti.max(nan, 1.0)
    values[1] = ti.min(nan, 1.0)
    U, S, V = ti.svd(ti.Matrix([[1.0, 0.0], [0.0, -2.0]]))
    values[2] = S[0, 0]
    values[3] = S[1, 1]
    lam, Q = ti.sym_eig(ti.Matrix([[2.0, 1.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 5.0]]))
    eigen[None] = lam
    values[4] = ti.math.log2(8.0) + ti.math.degrees(ti.math.pi / 2)
    values[5] = ti.math.rotation2d(ti.math.radians(90.0))[1, 0] - ti.math.sign(-3.0)
    values[6] = ti.math.cmul(vec2(1.0, 1.0), vec2(0.0, 1.0))[1] + ti.math.isnan(nan)
    values[7] = (ti.math.translate(1.0, 2.0, 3.0) @ ti.Vector([0.0, 0.0, 0.0, 1.0]))[2]


@ti.kernel
def compute_loss():
    for i in x:
        loss[None] += ti.max(x[i], 0.5) ** 2


semantics(float('nan'))
print('max/min nan', values[0], values[1])
print('svd S', values[2], values[3])
print('sym_eig', [round(v, 6) for v in eigen[None].to_list()])
print('math', [round(v, 6) for v in values.to_numpy()[4:].tolist()])

x.from_numpy(__import__('numpy').array([0.0, 1.0, 2.0, 3.0]))
for _ in range(3):
    with ti.ad.Tape(loss=loss):
        compute_loss()
print('grad', x.grad.to_numpy().tolist())

print('counts', ti.profiler.query_kernel_profiler_info('compute_loss').counter,
      ti.profiler.query_kernel_profiler_info('compute_loss.grad').counter,
      ti.profiler.query_kernel_profiler_info(semantics.__name__).counter)
print('total positive', ti.profiler.get_kernel_profiler_total_time() > 0)
ti.profiler.print_kernel_profiler_info()
ti.profiler.clear_kernel_profiler_info()
print('after clear', ti.profiler.get_kernel_profiler_total_time())
