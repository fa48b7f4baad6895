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

from . import kernels, render
from .scene import initial_positions, pair_forces


class Gravity(Simulation):
    """Gravity: initial velocities that bring particle 0 to a target."""
    name = 'gravity'
    summary = 'initial velocities of gravitating particles that bring particle 0 to a target'
    defaults = dict(n=8, steps=256, dt=2e-3, G=0.02, eps=0.01, target_x=0.8, target_y=0.75,
                    iters=30, lr=2.0, clip=1.0)
    quick = dict(n=4, steps=32, iters=4, lr=4.0)

    def build(self):
        c = self.cfg
        n = c.n
        self.x = ti.Vector.field(2, float, shape=(c.steps + 1, n), needs_grad=True)
        self.v = ti.Vector.field(2, float, shape=(c.steps + 1, n), needs_grad=True)
        self.v0 = ti.Vector.field(2, float, shape=n, name='v0', needs_grad=True)  # the parameters
        self.positions = ti.Vector.field(2, float, shape=n, needs_grad=True)    # for autodiff forces
        self.potential = ti.field(float, shape=(), needs_grad=True)
        self.loss = ti.field(float, shape=(), needs_grad=True)
        self.compute_potential = kernels.potential_kernel(self.positions, self.potential, n, c.G, c.eps)
        self.start = kernels.start_kernel(self.v, self.v0, n)
        self.step_kernel = kernels.step_kernel(self.x, self.v, n, c.dt, c.G, c.eps)
        self.compute_loss = kernels.loss_kernel(self.x, self.loss, c.steps, ti.Vector([c.target_x, c.target_y]))

    def parameters(self):
        return [self.v0]

    def initialize(self, rng):
        self.v0.fill(0)
        self.x.data[0] = initial_positions(self.cfg.n, rng)

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
        """Forces at step t in closed form (numpy)."""
        return pair_forces(self.x.data[t].astype(np.float64), self.cfg.G, self.cfg.eps)

    def render_frames(self):
        return render.frames(self)
