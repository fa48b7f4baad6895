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
import math

import numpy as np

import engine as ti
from sims.base import Simulation
from sims.render import Canvas


def _smooth_step(distance, width):
    """~1 where distance < 0, ~0 where distance > 0, with a tanh edge `width` wide."""
    return 0.5 * (1 - np.tanh(distance / width))


def target_pattern(n, radius=0.3, edge=0.006):
    """A yin-yang symbol (the Taichi logo's shape) on an n x n grid ([i, j]: x, y), minus its mean.

    Light background (1); inside a circle of `radius`: the left half dark (0) and the right
    half light, swapped inside two circles of radius/2 above and below the centre, each with a
    small dot of the other shade; a dark ring around the symbol."""
    c = (np.arange(n) + 0.5) / n
    x, y = c[:, None] - 0.5, c[None, :] - 0.5
    r = np.hypot(x, y)
    r_top, r_bottom = np.hypot(x, y - radius / 2), np.hypot(x, y + radius / 2)
    # dark: the left half, minus the top lobe, plus the bottom lobe
    left = _smooth_step(x, edge)
    top, bottom = _smooth_step(r_top - radius / 2, edge), _smooth_step(r_bottom - radius / 2, edge)
    dark = np.clip(left * (1 - top) + bottom * (1 - left), 0, 1)
    dot_top, dot_bottom = _smooth_step(r_top - radius / 8, edge), _smooth_step(r_bottom - radius / 8, edge)
    dark = dark * (1 - dot_bottom) + dot_top * (1 - dark)
    inside = _smooth_step(r - radius, edge)
    ring = _smooth_step(np.abs(r - radius - 0.01) - 0.01, edge)
    image = 1 - np.clip(inside * dark + ring, 0, 1)
    return image - image.mean()


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
        dx = 1.0 / n
        self.dx = dx
        self.dt = (math.sqrt(c.alpha ** 2 + dx * dx / 3) - c.alpha) / c.c
        a = c.c * c.c * self.dt * self.dt / (dx * dx) + c.c * c.alpha * self.dt / (dx * dx)  # on L p[t-1]
        b = c.c * c.alpha * self.dt / (dx * dx)                                            # on L p[t-2]
        self.initial = ti.field(float, shape=(n, n), name='initial', needs_grad=True)   # the parameters
        # p[t, i + 1, j + 1] is the height of cell (i, j); the border stays zero
        self.p = ti.field(float, shape=(steps, n + 2, n + 2), name='p', needs_grad=True)
        self.target = ti.field(float, shape=(n, n), name='target')
        self.loss = ti.field(float, shape=(), name='loss', needs_grad=True)
        initial, p, target, loss = self.initial, self.p, self.target, self.loss

        @ti.func
        def laplacian(t, i, j):
            """dx^2 times the Laplacian of p[t] at padded cell (i, j)."""
            return p[t, i - 1, j] + p[t, i + 1, j] + p[t, i, j - 1] + p[t, i, j + 1] - 4 * p[t, i, j]

        @ti.kernel
        def start():
            ti.loop_config(serialize=serial)
            for i in range(n):
                for j in range(n):
                    p[0, i + 1, j + 1] = initial[i, j]

        @ti.kernel
        def step(t: ti.i32):
            ti.loop_config(serialize=serial)
            for i in range(1, n + 1):
                for j in range(1, n + 1):
                    update = 2 * p[t - 1, i, j] - p[t - 2, i, j] + a * laplacian(t - 1, i, j)
                    if ti.static(b != 0):
                        update -= b * laplacian(t - 2, i, j)
                    p[t, i, j] = update

        @ti.kernel
        def compute_loss():
            ti.loop_config(serialize=serial)
            for i in range(n):
                for j in range(n):
                    d = target[i, j] - p[steps - 1, i + 1, j + 1]
                    loss[None] += dx * dx * d * d

        self.start, self.step, self.compute_loss = start, step, compute_loss

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
        self.evaluate()
        steps = self.cfg.steps
        target = self.target.data
        vmax = float(np.abs(target).max()) or 1.0
        right = Canvas(size)
        right.field(target, cmap='RdBu_r', vmin=-vmax, vmax=vmax)
        gap = np.full((size, 8, 3), 255, np.uint8)
        times = np.unique(np.linspace(0, steps - 1, min(frames, steps)).round().astype(int))
        for t in list(times) + [steps - 1] * 10:       # hold the last frame
            canvas = Canvas(size)
            canvas.field(self.heights(t), cmap='RdBu_r', vmin=-vmax, vmax=vmax)
            yield np.concatenate([canvas.image, gap, right.image], axis=1)
