"""DiffTaichi's smoke example, rewritten for the benchmark (scripts/bench.py): a velocity
field advected, its divergence removed by 6 Jacobi sweeps per step into a pressure field
indexed by `t * sweeps + k` (steps * (sweeps + 1) slices of 110^2: 34 MB), the smoke
density advected; the loss compares the last density with a target; gradient descent on
the initial velocity. The configuration is the paper's: 110^2 cells, 100 steps."""
import numpy as np

import engine as ti


def build(n=110, steps=100, sweeps=6):
    """(one training iteration, the loss field), in the current program."""
    f = _fields(n, steps, sweeps)
    advect, divergence, jacobi, project = _step_kernels(f, n, sweeps)
    compute_loss, descend = _loss_kernels(f, n, steps)
    grid = np.mgrid[0:n, 0:n] / n
    f['smoke'].data[0] = (np.hypot(grid[0] - 0.5, grid[1] - 0.5) < 0.3).astype(np.float32)
    f['target'].from_numpy((np.abs(grid[0] - grid[1]) < 0.15).astype(np.float32))

    def iteration():
        with ti.ad.Tape(f['loss']):
            for t in range(1, steps):
                advect(f['v'], f['v_new'], -1, t)
                divergence(t)
                for k in range(sweeps):
                    jacobi(t, k)
                project(t)
                advect(f['smoke'], f['smoke'], 0, t)
            compute_loss()
        descend()
    return iteration, f['loss']


def _fields(n, steps, sweeps):
    def scalar(shape):
        return ti.field(ti.f32, shape=shape, needs_grad=True)
    return dict(v=ti.Vector.field(2, ti.f32, shape=(steps, n, n), needs_grad=True),
                v_new=ti.Vector.field(2, ti.f32, shape=(steps, n, n), needs_grad=True),
                div=scalar((steps, n, n)), smoke=scalar((steps, n, n)), p=scalar((steps * (sweeps + 1), n, n)),
                target=scalar((n, n)), loss=scalar(()))


def _step_kernels(f, n, sweeps):
    v, v_new, div, p = f['v'], f['v_new'], f['div'], f['p']

    @ti.func
    def wrap(i):
        return (i + n) % n

    @ti.kernel
    def divergence(t: ti.i32):
        for y, x in ti.ndrange(n, n):
            div[t, y, x] = -0.5 / n * (v_new[t, wrap(y + 1), x][0] - v_new[t, wrap(y - 1), x][0]
                                       + v_new[t, y, wrap(x + 1)][1] - v_new[t, y, wrap(x - 1)][1])

    @ti.kernel
    def jacobi(t: ti.i32, k: ti.template()):
        for y, x in ti.ndrange(n, n):
            a = k + t * sweeps
            p[a + 1, y, x] = 0.25 * (div[t, y, x] + p[a, wrap(y - 1), x] + p[a, wrap(y + 1), x]
                                     + p[a, y, wrap(x - 1)] + p[a, y, wrap(x + 1)])

    @ti.kernel
    def project(t: ti.i32):
        for y, x in ti.ndrange(n, n):
            a = sweeps * t - 1
            v[t, y, x] = v_new[t, y, x] - 0.5 * n * ti.Vector([p[a, wrap(y + 1), x] - p[a, wrap(y - 1), x],
                                                              p[a, y, wrap(x + 1)] - p[a, y, wrap(x - 1)]])

    @ti.kernel
    def advect(q: ti.template(), q_out: ti.template(), shift: ti.template(), t: ti.i32):
        for y, x in ti.ndrange(n, n):
            fy, fx = y - v[t + shift, y, x][0], x - v[t + shift, y, x][1]
            iy, ix = ti.cast(ti.floor(fy), ti.i32), ti.cast(ti.floor(fx), ti.i32)
            wy, wx = fy - iy, fx - ix
            iy, ix = wrap(iy % n), wrap(ix % n)
            q_out[t, y, x] = (1 - wy) * ((1 - wx) * q[t - 1, iy, ix] + wx * q[t - 1, iy, wrap(ix + 1)]) \
                + wy * ((1 - wx) * q[t - 1, wrap(iy + 1), ix] + wx * q[t - 1, wrap(iy + 1), wrap(ix + 1)])
    return advect, divergence, jacobi, project


def _loss_kernels(f, n, steps):
    v, smoke, target, loss = f['v'], f['smoke'], f['target'], f['loss']

    @ti.kernel
    def compute_loss():
        for y, x in ti.ndrange(n, n):
            loss[None] += (target[y, x] - smoke[steps - 1, y, x]) ** 2 / n ** 2

    @ti.kernel
    def descend():
        for y, x in ti.ndrange(n, n):
            v[0, y, x] -= 100.0 * v.grad[0, y, x]
    return compute_loss, descend
