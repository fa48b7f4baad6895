"""FEM: a neo-Hookean soft robot of triangles, its nodal forces the autodiff gradient of its energy.

The body is generated in code (`robot_mesh`): a grid of square cells (side `cell`), each cut
into two triangles along a diagonal, forming a block of 12 x 2 cells standing on two legs of
4 x 2 cells, 59 nodes and 80 triangles, resting on the ground at y = 0.1. The elastic energy is
the sum over triangles of area * psi(F), with the deformation gradient F = D_s D_m^-1 (D_s,
D_m: the triangle's edge vectors x0 - x2, x1 - x2 now and at rest) and the compressible
neo-Hookean density

    psi(F) = mu/2 (tr(F^T F) - 2) - mu log J + lambda/2 (log J)^2,    J = det F,

mu and lambda from Young's modulus `E` and Poisson's ratio `nu` (Taichi's fem99/fem128
examples). Each leg has two actuators (its left and right halves): actuation a in [-1, 1]
stretches the rest shape of their triangles vertically by 1 + `actuation` * a, that is
F = D_s D_m^-1 diag(1, 1 / (1 + actuation * a)).

The nodal forces are f = -dE/dx. In the rollout they are compiled inline as the gradient of
the per-triangle energy (`ti.ad.grad` of the ti.func `triangle_energy`, forward mode), which
the tape then differentiates in reverse for training (reverse over forward). `autodiff_forces`
computes the same forces as the seed docs do, by running a kernel of the total energy on a
`ti.ad.Tape`; `analytic_forces` is the closed form (first Piola stress P = mu (F - F^-T) +
lambda log J F^-T); the tests check that the three agree.

Each step (symplectic Euler, lumped node masses rho * area / 3): v <- exp(-dt * damping) v +
dt (f / m + gravity); a node that would move below the ground while moving down stops for the
step (the sticky floor of DiffTaichi's mass_spring.py without time of impact); x <- x + dt v.
A controller (`--controller sine`, open loop, or `mlp`, closed loop; its observation is the
centre of mass's displacement from the start, times 10, and its velocity) gives the four
actuations at each step. The loss is the squared distance from the centre of mass after the
last step to the target (`target_x`, `target_y`) = (0.6, 0.155), 0.35 to the right of
where it starts: the robot learns to walk right. As in DiffTaichi, `steps` counts the states:
the rollout makes steps - 1 advances.

Defaults: 1,200 states of dt = 5e-4 (0.6 s), E = 200, nu = 0.3, rho = 1, gravity -4.8,
damping 10, actuation 0.3, sine waves of omega = 40; Adam at learning rate 0.01 for 30
iterations (the floor contacts make the loss rough at larger steps). The time step is explicit:
keep dt below about 0.5 * cell / sqrt((lambda + 2 mu) / rho). The energy takes J at least
MIN_J = 1e-6 and the stretch at least MIN_STRETCH = 0.05: neither floor binds in a sound rollout,
and they let the engine prove the gradient's terms finite (no NaN guards: fem runs twice as fast);
a triangle crushed or inverted past the floor has no restoring log term. `--quick`: 200 states, 5 iterations at lr 0.05.

The step kernel's loops are serial (80 triangles, 59 nodes): the force sums are then
deterministic and their adjoints need no atomics.
"""
from types import SimpleNamespace

import numpy as np

import engine as ti
from sims.base import Simulation, zero_fields
from sims.controlled import damping_factor, make_controller, serial_observation

from . import closed_form, kernels, render
from .scene import N_OBS, centre_of_mass, lame, rest_shape, robot_mesh


class FEM(Simulation):
    """FEM: a neo-Hookean soft robot (autodiff elastic forces) learns to walk to a target."""
    name = 'fem'
    summary = 'neo-Hookean triangle-mesh robot (autodiff elastic forces) learns to walk to a target'
    defaults = dict(controller='sine', steps=1200, dt=5e-4, E=200.0, nu=0.3, rho=1.0, gravity=-4.8,
                    damping=10.0, actuation=0.3, target_x=0.6, target_y=0.155,
                    n_waves=4, omega=40.0, hidden=32, frames=80,
                    iters=30, optimizer='adam', lr=0.01, clip=None)
    quick = dict(steps=200, iters=5, lr=0.05, frames=20)

    @classmethod
    def config(cls, quick=False, **overrides):
        cfg = super().config(quick, **overrides)
        if cfg.steps < 2:
            raise ValueError('fem: steps must be at least 2')
        return cfg

    # --- building ----------------------------------------------------------------
    def build(self):
        c = self.cfg
        nodes, triangles, actuators = robot_mesh()
        self.nodes0, self.triangles, self.actuators = nodes, triangles, actuators
        self.n_nodes, self.n_triangles = len(nodes), len(triangles)
        self.mu, self.lam = lame(c.E, c.nu)
        self.B0, self.area0, self.mass0 = rest_shape(nodes, triangles, c.rho)
        self._allocate()
        self.controller = make_controller(c, N_OBS, int(actuators.max()) + 1, c.omega)
        self._build_kernels()

    def _allocate(self):
        """The fields: the time-indexed state, the mesh's, and the seed docs' autodiff forces
        (positions -> total energy, differentiated on a tape)."""
        n, m, steps = self.n_nodes, self.n_triangles, self.cfg.steps
        self.x = ti.Vector.field(2, float, shape=(steps, n), name='x', needs_grad=True)
        self.v = ti.Vector.field(2, float, shape=(steps, n), name='v', needs_grad=True)
        self.f = ti.Vector.field(2, float, shape=(steps, n), name='f', needs_grad=True)
        self.vertex = ti.Vector.field(3, ti.i32, shape=m, name='vertex')
        self.B = ti.Matrix.field(2, 2, float, shape=m, name='B')
        self.area = ti.field(float, shape=m, name='area')
        self.amplitude = ti.field(float, shape=m, name='amplitude')     # 0 for passive triangles
        self.act_id = ti.field(ti.i32, shape=m, name='act_id')           # clamped to >= 0
        self.mass = ti.field(float, shape=n, name='mass')
        self.com = ti.Vector.field(2, float, shape=steps, name='com', needs_grad=True)
        self.loss = ti.field(float, shape=(), name='loss', needs_grad=True)
        self.positions = ti.Vector.field(2, float, shape=n, name='positions', needs_grad=True)
        self.stretch = ti.field(float, shape=m, name='stretch')
        self.energy = ti.field(float, shape=(), name='energy', needs_grad=True)

        self.vertex.from_numpy(self.triangles)
        self.B.from_numpy(self.B0)
        self.area.from_numpy(self.area0)
        self.amplitude.from_numpy(np.where(self.actuators >= 0, self.cfg.actuation, 0.0))
        self.act_id.from_numpy(np.maximum(self.actuators, 0))
        self.mass.from_numpy(self.mass0)
        self.x.fill(0)
        self.v.fill(0)
        self.x.data[0] = self.nodes0

    def _build_kernels(self):
        c = self.cfg
        mesh = SimpleNamespace(vertex=self.vertex, B=self.B, area=self.area, amplitude=self.amplitude,
                               act_id=self.act_id, mass=self.mass)
        act, obs = self.controller.actuation, self.controller.observation
        inv_total, com0 = centre_of_mass(self.nodes0, self.mass0)
        triangle_energy = kernels.energy_density(self.mu, self.lam)
        add_forces = kernels.force_adder(self.x, self.f, act, mesh, triangle_energy)
        advance = kernels.node_advancer(self.x, self.v, self.f, self.mass, c.dt, damping_factor(c),
                                        ti.Vector([0.0, c.gravity]))
        write_observation = kernels.observation_writer(self.x, self.v, self.mass, self.com, obs, self.n_nodes,
                                                       inv_total, ti.Vector(list(com0)),
                                                       self.controller.uses_observation)
        self.step_kernel = kernels.step_kernel(self.n_triangles, self.n_nodes, add_forces, advance, write_observation)
        self.observe_initial = serial_observation(write_observation)      # com[0], with or without observing
        self.compute_loss = kernels.loss_kernel(self.com, self.loss, c.steps - 1,
                                                ti.Vector([c.target_x, c.target_y]))
        self.total_energy = kernels.total_energy_kernel(self.positions, self.stretch, self.energy, mesh,
                                                        self.n_triangles, triangle_energy)

    # --- the Simulation interface -------------------------------------------------
    def parameters(self):
        return self.controller.parameters()

    def initialize(self, rng):
        self.controller.initialize(rng)

    def forward(self):
        zero_fields(self.f)
        self.run_controlled()
        self.compute_loss()

    def render_frames(self, size=512):
        """`frames` frames of a rollout: triangles (actuated ones colored by their actuation),
        the centre of mass (red) and the target (orange)."""
        return render.frames(self, size)

    # --- the forces three ways (tests) --------------------------------------------
    def stretches(self, t):
        """The rest-shape stretch 1 + actuation * a of every triangle at step t."""
        act = self.controller.actuation.to_numpy()[t]
        return 1.0 + self.amplitude.to_numpy() * act[np.maximum(self.actuators, 0)]

    def autodiff_forces(self, t=0):
        """-dE/dx at step t by reverse-mode autodiff of the total energy kernel (on a tape)."""
        self.positions.from_numpy(self.x.to_numpy()[t])
        self.stretch.from_numpy(self.stretches(t))
        with ti.ad.Tape(self.energy):
            self.total_energy()
        return -self.positions.grad.to_numpy()

    def rollout_forces(self, t=0):
        """The forces the rollout applied at step t (the inline ti.ad.grad of the triangle energy)."""
        return self.f.to_numpy()[t]

    def analytic_forces(self, t=0):
        """-dE/dx at step t in closed form (numpy)."""
        x = self.x.to_numpy()[t].astype(np.float64)
        return closed_form.elastic_forces(x, self.triangles, self.B0, self.area0, self.stretches(t),
                                          self.mu, self.lam)
