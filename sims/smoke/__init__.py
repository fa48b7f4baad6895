"""Smoke: the initial velocity field that makes smoke draw a target image.

DiffTaichi's 2D smoke example (examples/smoke_taichi_cpu.py). A periodic n x n
grid (velocities in cells per step, dx = 1/n) holds a velocity field v and a
smoke density. Each of `steps` time steps:

1. self-advection: v_adv(x) = v sampled at x - v(x), bilinear (semi-Lagrangian);
2. pressure projection: div = -dx/2 * (central-difference divergence of v_adv),
   `jacobi_iters` Jacobi sweeps p = (div + sum of the 4 neighbours of p) / 4 from
   p = 0, then v = v_adv - (central-difference gradient of p) / (2 dx);
3. the smoke is advected by the projected v the same way.

All indices wrap around (periodic boundaries). Training optimizes the initial
velocity field by plain gradient descent (DiffTaichi's 150 iterations at learning
rate 100) so that the final density matches a target image; the loss is
DiffTaichi's: sum over cells of (smoke - target)^2, times 1 / n^2. The initial
density (a smooth horizontal band) and the target (a smooth ring) are drawn with
numpy. Unlike DiffTaichi's file, every step starts its Jacobi sweeps from p = 0
and subtracts the gradient of the last sweep (as the JAX/autograd version does),
and the rollout runs all `steps` steps.

Every state is time-indexed and written once per rollout (v[t], v_adv[t],
p[t, k], smoke[t]), so the tape's global fields are valid checkpoints. The first
sweep from p = 0 is div / 4, so p[t, 0] doubles as the divergence (div = 4 p[t, 0]).

Speed: one kernel per time step, whose four phases are loops over the grid run one
after the other (a kernel's top-level loops run in order). By default they are
serial loops (`parallel=False`): their adjoints then accumulate with plain adds,
where parallel loops need atomic adds, which on a 110^2 grid cost more than a
second core gains. Each stencil row runs its two edge cells apart from the
interior, whose neighbours need no wrapping, so the interior loop vectorizes.
"""
import numpy as np

import engine as ti
from sims.base import Simulation
from sims.render import Canvas


def _smooth_step(distance, width):
    """~1 where distance < 0, ~0 where distance > 0, with a tanh edge `width` wide."""
    return 0.5 * (1 - np.tanh(distance / width))


def _cell_centers(n):
    """x[i, 0] and y[0, j] of the cell centers in the unit square."""
    c = (np.arange(n) + 0.5) / n
    return c[:, None], c[None, :]


def initial_density(n, half_width=0.15, edge=0.025):
    """A smooth horizontal band of smoke across the middle of the box."""
    _, y = _cell_centers(n)
    return np.repeat(_smooth_step(np.abs(y - 0.5) - half_width, edge), n, axis=0)


def target_density(n, radius=0.28, half_width=0.04, edge=0.025):
    """A smooth ring around the center of the box."""
    x, y = _cell_centers(n)
    return _smooth_step(np.abs(np.hypot(x - 0.5, y - 0.5) - radius) - half_width, edge)


class Smoke(Simulation):
    """Smoke: optimize the initial velocity field so that the smoke forms a target image."""
    name = 'smoke'
    summary = 'the initial velocity of 2D smoke so that its final density draws a target ring'
    defaults = dict(n_grid=110, steps=100, jacobi_iters=6, iters=150, lr=100.0, parallel=False)
    quick = dict(n_grid=32, steps=24, iters=5)

    def build(self):
        c = self.cfg
        n, steps, J = c.n_grid, c.steps, c.jacobi_iters
        if J < 1:
            raise ValueError('smoke: jacobi_iters must be at least 1')
        if n < 3:
            raise ValueError('smoke: n_grid must be at least 3')
        serial = not c.parallel
        dx = 1.0 / n
        self.v0 = ti.Vector.field(2, float, shape=(n, n), name='v0', needs_grad=True)   # the parameters
        self.v = ti.Vector.field(2, float, shape=(steps + 1, n, n), name='v', needs_grad=True)
        self.v_adv = ti.Vector.field(2, float, shape=(steps, n, n), name='v_adv', needs_grad=True)
        # p[t, k]: pressure after Jacobi sweep k + 1 of step t (sweep 1 from p = 0 gives div / 4,
        # so p[t, 0] also stands for the divergence: div = 4 p[t, 0]).
        self.p = ti.field(float, shape=(steps, J, n, n), name='p', needs_grad=True)
        self.smoke = ti.field(float, shape=(steps + 1, n, n), name='smoke', needs_grad=True)
        self.target = ti.field(float, shape=(n, n), name='target')
        self.loss = ti.field(float, shape=(), name='loss', needs_grad=True)
        v0, v, v_adv, p, smoke, target, loss = (
            self.v0, self.v, self.v_adv, self.p, self.smoke, self.target, self.loss)

        @ti.func
        def sample(f: ti.template(), t, i, j, vel):
            """f[t] at (i, j) - vel: bilinear interpolation, periodic."""
            ci = i - vel[0]
            cj = j - vel[1]
            fi = ti.floor(ci)
            fj = ti.floor(cj)
            wi = ci - fi                    # weight of the next cell along i
            wj = cj - fj
            i0 = ti.cast(fi, ti.i32) % n
            j0 = ti.cast(fj, ti.i32) % n
            i1 = ti.select(i0 == n - 1, 0, i0 + 1)
            j1 = ti.select(j0 == n - 1, 0, j0 + 1)
            return ((1 - wi) * ((1 - wj) * f[t, i0, j0] + wj * f[t, i0, j1])
                    + wi * ((1 - wj) * f[t, i1, j0] + wj * f[t, i1, j1]))

        # The stencils below get the wrapped neighbour indices (im, ip, jm, jp) from their
        # caller: each row runs its two edge cells apart from the interior, whose neighbours
        # need no wrapping (a plain, vectorizable loop).
        @ti.func
        def first_sweep(t, k, i, j, im, ip, jm, jp):
            div = -0.5 * dx * (v_adv[t, ip, j][0] - v_adv[t, im, j][0]
                               + v_adv[t, i, jp][1] - v_adv[t, i, jm][1])
            p[t, k, i, j] = 0.25 * div

        @ti.func
        def sweep(t, k, i, j, im, ip, jm, jp):
            # (div + neighbours) / 4 with div = 4 p[t, 0]
            p[t, k, i, j] = p[t, 0, i, j] + 0.25 * (p[t, k - 1, ip, j] + p[t, k - 1, im, j]
                                                    + p[t, k - 1, i, jp] + p[t, k - 1, i, jm])

        @ti.func
        def project_and_advect(t, k, i, j, im, ip, jm, jp):
            """v[t + 1] = v_adv[t] - grad p; smoke[t + 1] = smoke[t] advected by v[t + 1]."""
            grad_p = ti.Vector([p[t, k, ip, j] - p[t, k, im, j], p[t, k, i, jp] - p[t, k, i, jm]])
            vel = v_adv[t, i, j] - (0.5 / dx) * grad_p
            v[t + 1, i, j] = vel
            smoke[t + 1, i, j] = sample(smoke, t, i, j, vel)

        @ti.func
        def row(cell: ti.template(), t, k, i):
            ip = (i + 1) % n
            im = (i + n - 1) % n
            cell(t, k, i, 0, im, ip, n - 1, 1)
            for j in range(1, n - 1):
                cell(t, k, i, j, im, ip, j - 1, j + 1)
            cell(t, k, i, n - 1, im, ip, n - 2, 0)

        @ti.kernel
        def start():
            ti.loop_config(serialize=serial)
            for i, j in ti.ndrange(n, n):
                v[0, i, j] = v0[i, j]

        @ti.kernel
        def step(t: ti.i32):
            """One time step: four phases, each a loop over the grid, run in order."""
            ti.loop_config(serialize=serial)
            for i in range(n):                                  # 1. self-advection
                for j in range(n):
                    v_adv[t, i, j] = sample(v, t, i, j, v[t, i, j])
            ti.loop_config(serialize=serial)
            for i in range(n):                                  # 2. divergence, first sweep
                row(first_sweep, t, 0, i)
            ti.loop_config(serialize=True)                      # each sweep reads the previous one:
            for k in range(1, J):                               # 3. the other Jacobi sweeps, in turn
                for i in range(n):
                    row(sweep, t, k, i)
            ti.loop_config(serialize=serial)
            for i in range(n):                                  # 4. projection, smoke advection
                row(project_and_advect, t, J - 1, i)

        @ti.kernel
        def compute_loss():
            ti.loop_config(serialize=serial)
            for i in range(n):
                for j in range(n):
                    d = smoke[steps, i, j] - target[i, j]
                    loss[None] += d * d * (1.0 / (n * n))

        self.start, self.step, self.compute_loss = start, step, compute_loss

    def parameters(self):
        return [self.v0]

    def initialize(self, rng):
        n = self.cfg.n_grid
        self.v0.fill(0)                      # DiffTaichi starts from rest
        self.smoke.data[0] = initial_density(n)
        self.target.from_numpy(target_density(n))

    def forward(self):
        step = self.step
        self.start()
        for t in range(self.cfg.steps):
            step(t)
        self.compute_loss()

    def render_frames(self, frames=50, size=256):
        """The density over the rollout (left) next to the target (right)."""
        self.evaluate()
        steps = self.cfg.steps
        vmax = max(1.0, float(self.target.data.max()))
        target = Canvas(size)
        target.field(self.target.data, cmap='magma', vmin=0, vmax=vmax)
        gap = np.full((size, 8, 3), 255, np.uint8)
        times = np.unique(np.linspace(0, steps, min(frames, steps + 1)).round().astype(int))
        for t in list(times) + [steps] * 10:          # hold the last frame
            canvas = Canvas(size)
            canvas.field(self.smoke.data[t], cmap='magma', vmin=0, vmax=vmax)
            yield np.concatenate([canvas.image, gap, target.image], axis=1)
