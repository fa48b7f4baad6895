"""Wave: the initial height field whose waves draw a target pattern.

DiffTaichi's examples/wave.py. A height field p on an n x n grid (n = 256, dx = 1/n)
follows the damped wave equation with the finite-difference time-domain update

    p[t] = 2 p[t-1] - p[t-2] + (c^2 dt^2 + c alpha dt) L p[t-1] - c alpha dt L p[t-2],

L the 5-point Laplacian / dx^2, zero outside the grid (the field is stored with a
one-cell border of zeros, never written, so the stencil needs no branches). DiffTaichi's
constants: wave speed c = 340, damping alpha = 0, dt = (sqrt(alpha^2 + dx^2/3) - alpha) / c
(a Courant number of 1/sqrt(3) at alpha = 0). As in DiffTaichi, p[0] is the trained initial
field, p[1] is zero, and `steps` = 256 time levels p[0] ... p[steps - 1] are computed.

The loss is DiffTaichi's: dx^2 * sum over cells of (target - p[steps - 1])^2. DiffTaichi's
target is an image (taichi.png, minus its mean); here `target_pattern` draws a Taichi-like
yin-yang symbol with numpy (dark on a light background, minus its mean). Training: DiffTaichi's
plain gradient descent at learning rate 1 for 200 iterations, from a zero initial field.

Each time step is one launch of `step(t)`. Its grid loop is serial by default
(`parallel=False`): the adjoint of a stencil then accumulates with plain adds where a
parallel loop needs atomic adds (the same trade-off as sims/smoke).
"""
import engine as ti
from sims.base import Simulation

from . import kernels, render
from .scene import coefficients, target_pattern, time_step


class Wave(Simulation):
    """Wave: optimize the initial height field so that the final field matches a target."""
    name = 'wave'
    summary = 'the initial height field whose waves form a target pattern'
    defaults = dict(n_grid=256, steps=256, c=340.0, alpha=0.0, iters=200, lr=1.0, parallel=False)
    quick = dict(n_grid=32, steps=32, iters=5)

    @classmethod
    def config(cls, quick=False, **overrides):
        cfg = super().config(quick, **overrides)
        if cfg.steps < 3:
            raise ValueError('wave: steps must be at least 3')
        if cfg.n_grid < 2:
            raise ValueError('wave: n_grid must be at least 2')
        return cfg

    def build(self):
        c = self.cfg
        n, steps = c.n_grid, c.steps
        serial = not c.parallel
        self.dx = 1.0 / n
        self.dt = time_step(self.dx, c.c, c.alpha)
        a, b = coefficients(self.dx, self.dt, c.c, c.alpha)      # on dx^2 L p[t-1], on dx^2 L p[t-2]
        self.initial = ti.field(float, shape=(n, n), name='initial', needs_grad=True)   # the parameters
        # p[t, i + 1, j + 1] is the height of cell (i, j); the border stays zero
        self.p = ti.field(float, shape=(steps, n + 2, n + 2), name='p', needs_grad=True)
        self.target = ti.field(float, shape=(n, n), name='target')
        self.loss = ti.field(float, shape=(), name='loss', needs_grad=True)
        self.start = kernels.start_kernel(self.initial, self.p, n, serial)
        self.step = kernels.step_kernel(self.p, n, a, b, serial)
        self.compute_loss = kernels.loss_kernel(self.p, self.target, self.loss, n, steps, self.dx, serial)

    def parameters(self):
        return [self.initial]

    def initialize(self, rng):
        self.initial.fill(0)                 # DiffTaichi starts from a flat field
        self.target.from_numpy(target_pattern(self.cfg.n_grid))

    def forward(self):
        step = self.step
        self.start()
        for t in range(2, self.cfg.steps):
            step(t)
        self.compute_loss()

    def heights(self, t):
        """The height field at time level t (n x n, without the border)."""
        return self.p.data[t, 1:-1, 1:-1]

    def render_frames(self, frames=64, size=256):
        """The height field over the rollout (left) next to the target (right)."""
        return render.frames(self, frames, size)
