"""Gravity: particles whose forces are the autodiff gradient of their potential energy.

The seed docs' case study: U = sum over ordered pairs of -G / sqrt(|x_i - x_j|^2 + eps),
forces F = -dU/dx computed by `ti.ad.Tape(U)` (see `autodiff_forces`), checked
against the closed form in the tests. The inverse problem: find the initial
velocities of all particles so that particle 0 ends at `target` after `steps`
steps of symplectic Euler. The rollout that training differentiates uses the
closed-form force kernel (differentiating through autodiff forces would need
second-order derivatives); the tests check the two force computations agree.
"""
import numpy as np

import engine as ti
from sims.base import Simulation
from sims.render import Canvas


class Gravity(Simulation):
    """Gravity: initial velocities that bring particle 0 to a target."""
    name = 'gravity'
    summary = 'initial velocities of gravitating particles that bring particle 0 to a target'
    defaults = dict(n=8, steps=256, dt=2e-3, G=0.02, eps=0.01, target_x=0.8, target_y=0.75,
                    iters=30, lr=2.0, clip=1.0)
    quick = dict(n=4, steps=32, iters=4, lr=4.0)

    def build(self):
        c = self.cfg
        n, dt, G, eps = c.n, c.dt, c.G, c.eps
        self.x = ti.Vector.field(2, float, shape=(c.steps + 1, n), needs_grad=True)
        self.v = ti.Vector.field(2, float, shape=(c.steps + 1, n), needs_grad=True)
        self.v0 = ti.Vector.field(2, float, shape=n, name='v0', needs_grad=True)  # the parameters
        self.positions = ti.Vector.field(2, float, shape=n, needs_grad=True)    # for autodiff forces
        self.potential = ti.field(float, shape=(), needs_grad=True)
        self.loss = ti.field(float, shape=(), needs_grad=True)
        x, v, v0, positions, potential, loss = self.x, self.v, self.v0, self.positions, self.potential, self.loss
        target = ti.Vector([c.target_x, c.target_y])

        @ti.kernel
        def compute_potential():
            for i, j in ti.ndrange(n, n):
                r = positions[i] - positions[j]
                potential[None] += -G / r.norm(eps)

        @ti.func
        def force(t, i):
            f = ti.Vector([0.0, 0.0])
            for j in range(n):
                r = x[t, i] - x[t, j]
                s = r.norm(eps)
                f += -2 * G * r / (s * s * s)
            return f

        @ti.kernel
        def step(t: ti.i32):
            for i in range(n):
                v[t + 1, i] = v[t, i] + dt * force(t, i)
                x[t + 1, i] = x[t, i] + dt * v[t + 1, i]

        @ti.kernel
        def start():
            for i in range(n):
                v[0, i] = v0[i]

        @ti.kernel
        def compute_loss():
            d = x[c.steps, 0] - target
            loss[None] = d.dot(d)

        self.compute_potential, self.start, self.step_kernel, self.compute_loss = (
            compute_potential, start, step, compute_loss)

    def parameters(self):
        return [self.v0]

    def initialize(self, rng):
        self.v0.fill(0)
        x0 = 0.3 + 0.4 * rng.random((self.cfg.n, 2))
        self.x.data[0] = x0

    def forward(self):
        self.start()
        for t in range(self.cfg.steps):
            self.step_kernel(t)
        self.compute_loss()

    def autodiff_forces(self, t=0):
        """Forces at step t as -dU/dx, by reverse-mode autodiff of the potential."""
        self.positions.from_numpy(self.x.data[t])
        with ti.ad.Tape(self.potential):
            self.compute_potential()
        return -self.positions.grad.to_numpy()

    def analytic_forces(self, t=0):
        x = self.x.data[t].astype(np.float64)
        r = x[:, None, :] - x[None, :, :]
        s = np.sqrt((r ** 2).sum(-1) + self.cfg.eps)
        return (-2 * self.cfg.G * r / s[..., None] ** 3).sum(1)

    def render_frames(self):
        self.evaluate()
        c = self.cfg
        trail = []
        for t in range(0, c.steps + 1, max(1, c.steps // 64)):
            canvas = Canvas(384)
            trail.append(self.x.data[t, 0].copy())
            canvas.circles([c.target_x, c.target_y], 7, (220, 60, 60))
            canvas.circles(np.array(trail), 1.5, (120, 120, 200))
            canvas.circles(self.x.data[t], 5, (40, 40, 40))
            canvas.circles(self.x.data[t, :1], 5, (40, 90, 220))
            yield canvas.image
