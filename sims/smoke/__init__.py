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
import engine as ti
from sims.base import Simulation

from . import kernels, render
from .scene import initial_density, target_density


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
        self.v0 = ti.Vector.field(2, float, shape=(n, n), name='v0', needs_grad=True)   # the parameters
        self.v = ti.Vector.field(2, float, shape=(steps + 1, n, n), name='v', needs_grad=True)
        self.v_adv = ti.Vector.field(2, float, shape=(steps, n, n), name='v_adv', needs_grad=True)
        # p[t, k]: pressure after Jacobi sweep k + 1 of step t (sweep 1 from p = 0 gives div / 4,
        # so p[t, 0] also stands for the divergence: div = 4 p[t, 0]).
        self.p = ti.field(float, shape=(steps, J, n, n), name='p', needs_grad=True)
        self.smoke = ti.field(float, shape=(steps + 1, n, n), name='smoke', needs_grad=True)
        self.target = ti.field(float, shape=(n, n), name='target')
        self.loss = ti.field(float, shape=(), name='loss', needs_grad=True)
        serial = not c.parallel
        self.start = kernels.start_kernel(self.v0, self.v, n, serial)
        self.step = kernels.step_kernel(self.v, self.v_adv, self.p, self.smoke, n, J, 1.0 / n, serial)
        self.compute_loss = kernels.loss_kernel(self.smoke, self.target, self.loss, n, steps, serial)

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
        return render.frames(self, frames, size)
