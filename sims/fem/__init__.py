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
import math

import numpy as np

import controllers
import engine as ti
from sims.base import Simulation, zero_fields
from sims.render import Canvas, color_map

GROUND = 0.1
ORIGIN = (0.1, GROUND)          # lower-left corner of the robot's cell grid
# The robot's cells: 12 x 4 cells; the lower 2 rows only under the legs. Actuator of each
# leg cell column (the other cells are passive).
COLUMNS, ROWS, LEG_ROWS = 12, 4, 2
LEG_ACTUATORS = {0: 0, 1: 0, 2: 1, 3: 1, 8: 2, 9: 2, 10: 3, 11: 3}
N_OBS = 4
OBS_SCALE = (10.0, 1.0)         # displacement, velocity
# Floors that bound the energy's divisor and log argument away from zero, so that the engine
# proves their derivatives finite and compiles the gradient without NaN guards (twice as fast,
# docs/performance.md). Neither binds in a sound rollout (stretch >= 1 - actuation, J near 1).
MIN_STRETCH = 0.05
MIN_J = 1e-6


def robot_mesh(cell=0.025):
    """Node positions (n, 2), triangles (m, 3) counter-clockwise, actuator per triangle (-1: none)."""
    cells = [(i, j) for j in range(ROWS) for i in range(COLUMNS) if j >= LEG_ROWS or i in LEG_ACTUATORS]
    corners = sorted({(i + di, j + dj) for i, j in cells for di in (0, 1) for dj in (0, 1)},
                     key=lambda ij: (ij[1], ij[0]))
    index = {ij: k for k, ij in enumerate(corners)}
    nodes = np.array([(ORIGIN[0] + i * cell, ORIGIN[1] + j * cell) for i, j in corners])
    triangles, actuators = [], []
    for i, j in cells:
        a, b, c, d = index[i, j], index[i + 1, j], index[i + 1, j + 1], index[i, j + 1]
        if (i + j) % 2 == 0:            # alternate the diagonals: no preferred shear direction
            triangles += [(a, b, c), (a, c, d)]
        else:
            triangles += [(a, b, d), (b, c, d)]
        act = LEG_ACTUATORS.get(i, -1) if j < LEG_ROWS else -1
        actuators += [act, act]
    return nodes, np.array(triangles, np.int32), np.array(actuators, np.int32)


def lame(E, nu):
    return E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))


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
        n, m, steps = len(nodes), len(triangles), c.steps
        self.n_nodes, self.n_triangles = n, m
        n_act = int(actuators.max()) + 1
        self.mu, self.lam = lame(c.E, c.nu)

        # rest shape: D_m^-1 and area per triangle; lumped masses
        Dm = np.stack([nodes[triangles[:, 0]] - nodes[triangles[:, 2]],
                       nodes[triangles[:, 1]] - nodes[triangles[:, 2]]], axis=2)   # columns: edges
        self.B0 = np.linalg.inv(Dm)
        self.area0 = 0.5 * np.abs(np.linalg.det(Dm))
        mass = np.zeros(n)
        np.add.at(mass, triangles.reshape(-1), np.repeat(c.rho * self.area0 / 3, 3))
        self.mass0 = mass

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
        # the seed docs' autodiff forces: positions -> total energy, differentiated on a tape
        self.positions = ti.Vector.field(2, float, shape=n, name='positions', needs_grad=True)
        self.stretch = ti.field(float, shape=m, name='stretch')
        self.energy = ti.field(float, shape=(), name='energy', needs_grad=True)

        self.vertex.from_numpy(triangles)
        self.B.from_numpy(self.B0)
        self.area.from_numpy(self.area0)
        self.amplitude.from_numpy(np.where(actuators >= 0, c.actuation, 0.0))
        self.act_id.from_numpy(np.maximum(actuators, 0))
        self.mass.from_numpy(mass)
        self.x.fill(0)
        self.v.fill(0)
        self.x.data[0] = nodes

        self.controller = controllers.make(c.controller, n_obs=N_OBS, n_act=n_act, steps=steps, dt=c.dt,
                                           omega=c.omega, n_waves=c.n_waves, hidden=c.hidden)
        self._build_kernels()

    def _build_kernels(self):
        c = self.cfg
        n, m, dt, last = self.n_nodes, self.n_triangles, c.dt, c.steps - 1
        mu, lam = self.mu, self.lam
        x, v, f, com, loss = self.x, self.v, self.f, self.com, self.loss
        vertex, B, area, amplitude, act_id, mass = (
            self.vertex, self.B, self.area, self.amplitude, self.act_id, self.mass)
        positions, stretch, energy = self.positions, self.stretch, self.energy
        act, obs = self.controller.actuation, self.controller.observation
        observe = self.controller.uses_observation
        decay = math.exp(-dt * c.damping)
        gravity = ti.Vector([0.0, c.gravity])
        inv_total = 1.0 / float(self.mass0.sum())
        target = ti.Vector([c.target_x, c.target_y])
        com0 = ti.Vector(list((self.mass0[:, None] * self.nodes0).sum(0) * inv_total))
        obs_x, obs_v = OBS_SCALE

        @ti.func
        def triangle_energy(P, Binv, s):
            """Rest-area-free neo-Hookean energy of a triangle: P (2 x 3) its vertices,
            Binv its D_m^-1, s its vertical rest-shape stretch."""
            Ds = ti.Matrix([[P[0, 0] - P[0, 2], P[0, 1] - P[0, 2]],
                            [P[1, 0] - P[1, 2], P[1, 1] - P[1, 2]]])
            F = Ds @ Binv @ ti.Matrix([[1.0, 0.0], [0.0, 1.0 / ti.max(s, MIN_STRETCH)]])
            log_J = ti.log(ti.max(F.determinant(), MIN_J))
            return mu / 2 * ((F.transpose() @ F).trace() - 2) - mu * log_J + lam / 2 * log_J * log_J

        energy_gradient = ti.ad.grad(triangle_energy)        # d psi / d P, compiled inline

        @ti.func
        def vertices(pos: ti.template(), t, k):
            a, b, d = vertex[k][0], vertex[k][1], vertex[k][2]
            return ti.Matrix([[pos[t, a][0], pos[t, b][0], pos[t, d][0]],
                              [pos[t, a][1], pos[t, b][1], pos[t, d][1]]])

        @ti.func
        def centre_of_mass(t):
            total = ti.Vector([0.0, 0.0])
            for i in range(n):
                total += mass[i] * x[t, i]
            return total * inv_total

        @ti.func
        def write_observation(t):
            centre = centre_of_mass(t)
            com[t] = centre
            if ti.static(observe):
                velocity = ti.Vector([0.0, 0.0])
                for i in range(n):
                    velocity += mass[i] * v[t, i]
                velocity *= inv_total
                obs[t, 0] = (centre[0] - com0[0]) * obs_x
                obs[t, 1] = (centre[1] - com0[1]) * obs_x
                obs[t, 2] = velocity[0] * obs_v
                obs[t, 3] = velocity[1] * obs_v

        @ti.kernel
        def observe_initial():
            for _ in range(1):
                write_observation(0)

        @ti.kernel
        def step(t: ti.i32):
            """Elastic forces at t (-dE/dx, compiled inline), then the nodes from t to t + 1.
            Serial loops (a few dozen elements): deterministic sums, no atomics in the adjoint."""
            ti.loop_config(serialize=True)
            for k in range(m):
                # the stretch passed as an expression, not a local: the engine bounds it
                g = area[k] * energy_gradient(vertices(x, t, k), B[k], 1.0 + amplitude[k] * act[t, act_id[k]])
                for j in ti.static(range(3)):
                    ti.atomic_add(f[t, vertex[k][j]], -ti.Vector([g[0, j], g[1, j]]))
            ti.loop_config(serialize=True)
            for i in range(n):
                new_v = decay * v[t, i] + dt * (f[t, i] / mass[i] + gravity)
                if x[t, i][1] + dt * new_v[1] < GROUND and new_v[1] < 0:
                    new_v = ti.Vector([0.0, 0.0])            # sticky floor: the node stops
                v[t + 1, i] = new_v
                x[t + 1, i] = x[t, i] + dt * new_v
            for _ in range(1):
                write_observation(t + 1)

        @ti.kernel
        def compute_loss():
            d = com[last] - target
            loss[None] = d.dot(d)

        @ti.kernel
        def total_energy():
            for k in range(m):
                a, b, d = vertex[k][0], vertex[k][1], vertex[k][2]
                P = ti.Matrix([[positions[a][0], positions[b][0], positions[d][0]],
                               [positions[a][1], positions[b][1], positions[d][1]]])
                energy[None] += area[k] * triangle_energy(P, B[k], stretch[k])

        self.observe_initial, self.step_kernel, self.compute_loss = observe_initial, step, compute_loss
        self.total_energy = total_energy

    # --- the Simulation interface -------------------------------------------------
    def parameters(self):
        return self.controller.parameters()

    def initialize(self, rng):
        self.controller.initialize(rng)

    def forward(self):
        zero_fields(self.f)
        self.run_controlled()
        self.compute_loss()

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
        """-dE/dx at step t in closed form (numpy): H = -area P(F) (D_m^-1 S^-1)^T."""
        x = self.x.to_numpy()[t].astype(np.float64)
        tri = self.triangles
        Ds = np.stack([x[tri[:, 0]] - x[tri[:, 2]], x[tri[:, 1]] - x[tri[:, 2]]], axis=2)
        S_inv = np.zeros((len(tri), 2, 2))
        S_inv[:, 0, 0] = 1
        S_inv[:, 1, 1] = 1 / self.stretches(t)
        G = self.B0 @ S_inv
        F = Ds @ G
        F_inv_T = np.linalg.inv(F).transpose(0, 2, 1)
        log_J = np.log(np.linalg.det(F))
        P = self.mu * (F - F_inv_T) + self.lam * log_J[:, None, None] * F_inv_T
        H = -self.area0[:, None, None] * P @ G.transpose(0, 2, 1)
        forces = np.zeros_like(x)
        np.add.at(forces, tri[:, 0], H[:, :, 0])
        np.add.at(forces, tri[:, 1], H[:, :, 1])
        np.add.at(forces, tri[:, 2], -H[:, :, 0] - H[:, :, 1])
        return forces

    # --- rendering ----------------------------------------------------------------
    def render_frames(self, size=512):
        """`frames` frames of a rollout: triangles (actuated ones colored by their actuation),
        the centre of mass (red) and the target (orange)."""
        self.evaluate()
        c = self.cfg
        frames = c.frames
        x = self.x.to_numpy()
        com = self.com.to_numpy()
        act = self.controller.actuation.to_numpy()
        tri, actuated = self.triangles, self.actuators >= 0
        for t in np.unique(np.linspace(0, c.steps - 1, frames).round().astype(int)):
            canvas = Canvas(size)
            canvas.image[int((1 - GROUND) * size):] = (200, 200, 200)
            colors = np.tile(np.array([[120, 160, 200]], np.uint8), (len(tri), 1))
            colors[actuated] = color_map(act[max(t - 1, 0), self.actuators[actuated]])
            fill_triangles(canvas, x[t][tri], colors)
            edges = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])
            canvas.lines(x[t][edges[:, 0]], x[t][edges[:, 1]], 1, (40, 40, 40))
            canvas.circles([[c.target_x, c.target_y]], 6, (220, 160, 60))
            canvas.circles(com[t], 4, (200, 40, 60))
            yield canvas.image


def fill_triangles(canvas, corners, colors):
    """Fill triangles (m, 3, 2) in unit-square coordinates on `canvas`, one RGB color each."""
    size = canvas.size
    pixels = np.stack([corners[..., 0] * size, (1 - corners[..., 1]) * size], axis=-1)
    for (a, b, c), color in zip(pixels, colors):
        lo = np.maximum(np.floor(np.minimum(np.minimum(a, b), c)).astype(int), 0)
        hi = np.minimum(np.ceil(np.maximum(np.maximum(a, b), c)).astype(int), size - 1)
        if np.any(hi < lo):
            continue
        px, py = np.meshgrid(np.arange(lo[0], hi[0] + 1) + 0.5, np.arange(lo[1], hi[1] + 1) + 0.5)
        def edge(p, q):
            return (q[0] - p[0]) * (py - p[1]) - (q[1] - p[1]) * (px - p[0])
        e0, e1, e2 = edge(a, b), edge(b, c), edge(c, a)
        inside = ((e0 >= 0) & (e1 >= 0) & (e2 >= 0)) | ((e0 <= 0) & (e1 <= 0) & (e2 <= 0))
        rows, cols = np.nonzero(inside)
        canvas.image[rows + lo[1], cols + lo[0]] = color
