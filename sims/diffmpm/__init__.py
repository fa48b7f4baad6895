"""DiffMPM: a 2D soft robot simulated with MLS-MPM learns to walk to the right.

DiffTaichi's diffmpm example. The robot is five rectangles of elastic
(fixed-corotated) material sampled with 2 particles per dx per axis: a body
and four legs; each leg is one actuator, which adds an active stress along its
vertical axis. A controller (default: DiffTaichi's open-loop sine controller)
gives the actuation at each step; the loss is minus the mean x of the
particles (all solid) after the last step, and training follows its gradient.
As in DiffTaichi, `steps` counts the states: the rollout makes steps - 1
advances.

`quick` is a coarser robot (n_grid 64: 744 particles) over 160 steps, with a
larger learning rate so that a few iterations visibly lower the loss.

A step is MLS-MPM's particle-to-grid scatter (with the actuation stress), the
grid update (gravity, walls, floor) and the grid-to-particle gather. The grid
fields are scratch space that every step overwrites, so a step is recorded on
the tape as one custom-gradient unit (`ti.ad.grad_replaced`): its gradient
re-runs the grid part forward, then the adjoints of the gather, grid update and
scatter in reverse. The particle state x, v, C, F is indexed by the time slot;
with `checkpoint=K` it holds K + 1 slots and `CheckpointedRollout` re-runs the
segments in the backward pass (memory ~ steps/K + K instead of steps).

DiffTaichi's floor zeroes the grid velocity of every cell near the floor that
moves into it before its friction projection, which makes the projection a
no-op: the floor is sticky. `sticky_floor` (default) keeps that behaviour;
`--no-sticky-floor` applies the Coulomb projection with coefficient `friction`.
"""
import numpy as np

import controllers
import engine as ti
from sims.mpm import MPMRobot
from sims.checkpointing import CheckpointedRollout
from sims.render import Canvas, color_map

# The robot: (x, y, width, height, actuator) rectangles, offset by ROBOT_OFFSET.
ROBOT = [(0.0, 0.1, 0.3, 0.1, -1),
         (0.0, 0.0, 0.05, 0.1, 0),
         (0.05, 0.0, 0.05, 0.1, 1),
         (0.2, 0.0, 0.05, 0.1, 2),
         (0.25, 0.0, 0.05, 0.1, 3)]
ROBOT_OFFSET = (0.1, 0.03)
# The MLP's observation: displacement of the centre of mass from its start (x, y) and its
# velocity (x, y), scaled to O(1).
N_OBS = 4
OBS_SCALE = (10.0, 4.0)


def robot_scene(n_grid):
    """Particle positions, actuator ids (-1: passive) and the number of actuators."""
    dx = 1 / n_grid
    positions, actuators = [], []
    for x, y, w, h, actuator in ROBOT:
        w_count, h_count = int(w / dx) * 2, int(h / dx) * 2
        i, j = np.meshgrid(np.arange(w_count), np.arange(h_count), indexing='ij')
        px = x + (i.reshape(-1) + 0.5) * (w / w_count) + ROBOT_OFFSET[0]
        py = y + (j.reshape(-1) + 0.5) * (h / h_count) + ROBOT_OFFSET[1]
        positions.append(np.stack([px, py], axis=1))
        actuators.append(np.full(w_count * h_count, actuator, np.int32))
    actuator_ids = np.concatenate(actuators)
    return np.concatenate(positions), actuator_ids, int(actuator_ids.max()) + 1


class DiffMPM(MPMRobot):
    """DiffMPM: an MLS-MPM soft robot learns to walk right."""
    name = 'diffmpm'
    summary = '2D MLS-MPM soft robot: train its sine (or MLP) actuation to walk right'
    defaults = dict(steps=1024, n_grid=128, dt=1e-3, E=10.0, p_vol=1.0, gravity=3.8,
                    act_strength=4.0, bound=3, friction=0.5, sticky_floor=True,
                    controller='sine', n_sin_waves=4, omega=20.0, hidden=32,
                    checkpoint=0, frames=80,
                    iters=10, optimizer='gd', lr=0.1, clip=None)
    quick = dict(steps=160, n_grid=64, iters=4, lr=10.0, frames=20)

    # ------------------------------------------------------------------ build
    def build(self):
        c = self.cfg
        if c.steps < 2:
            raise ValueError('diffmpm needs steps >= 2')
        self.n_advance = c.steps - 1                # state slots 0 .. steps-1, as in DiffTaichi
        positions, actuator_ids, n_act = robot_scene(c.n_grid)
        self.scene_x, self.scene_actuators = positions, actuator_ids
        n = self.n_particles = len(positions)
        self.n_actuators = n_act
        slots = c.checkpoint + 1 if c.checkpoint else c.steps

        self.controller = controllers.make(c.controller, n_obs=N_OBS, n_act=n_act, steps=c.steps,
                                           dt=c.dt, omega=c.omega, n_waves=c.n_sin_waves,
                                           hidden=c.hidden)
        self.x = ti.Vector.field(2, float, shape=(slots, n), needs_grad=True)
        self.v = ti.Vector.field(2, float, shape=(slots, n), needs_grad=True)
        self.C = ti.Matrix.field(2, 2, float, shape=(slots, n), needs_grad=True)
        self.F = ti.Matrix.field(2, 2, float, shape=(slots, n), needs_grad=True)
        self.actuator_id = ti.field(ti.i32, shape=n)
        self.grid_v_in = ti.Vector.field(2, float, shape=(c.n_grid, c.n_grid), needs_grad=True)
        self.grid_m_in = ti.field(float, shape=(c.n_grid, c.n_grid), needs_grad=True)
        self.grid_v_out = ti.Vector.field(2, float, shape=(c.n_grid, c.n_grid), needs_grad=True)
        self.loss = ti.field(float, shape=(), needs_grad=True)
        self.start_center = ti.Vector.field(2, float, shape=())
        self._define_kernels()

        self.rollout = None
        if c.checkpoint:
            self.rollout = CheckpointedRollout([self.x, self.v, self.C, self.F], self.step,
                                               self.n_advance, c.checkpoint)

    def _define_kernels(self):
        c = self.cfg
        n, n_grid = self.n_particles, c.n_grid
        dx, inv_dx, dt = 1 / n_grid, float(n_grid), c.dt
        mu = la = c.E
        p_vol, gravity, act_strength, bound = c.p_vol, c.gravity, c.act_strength, c.bound
        friction, sticky = c.friction, c.sticky_floor
        mass = 1.0
        inv_n = 1.0 / n
        x_scale, v_scale = OBS_SCALE[0] / n, OBS_SCALE[1] / n
        x, v, C, F, actuator_id = self.x, self.v, self.C, self.F, self.actuator_id
        grid_v_in, grid_m_in, grid_v_out = self.grid_v_in, self.grid_m_in, self.grid_v_out
        loss, start_center = self.loss, self.start_center
        actuation, observation = self.controller.actuation, self.controller.observation

        # The grid kernels visit only the box of cells that this step's particles touch
        # (i0 <= i < i1, j0 <= j < j1, see grid_box): the other cells are never read.
        @ti.kernel
        def clear_grid(i0: ti.i32, i1: ti.i32, j0: ti.i32, j1: ti.i32):
            for i, j in ti.ndrange((i0, i1), (j0, j1)):
                grid_v_in[i, j] = [0, 0]
                grid_m_in[i, j] = 0

        @ti.kernel
        def clear_grid_and_grads(i0: ti.i32, i1: ti.i32, j0: ti.i32, j1: ti.i32):
            for i, j in ti.ndrange((i0, i1), (j0, j1)):
                grid_v_in[i, j] = [0, 0]
                grid_m_in[i, j] = 0
                grid_v_in.grad[i, j] = [0, 0]
                grid_m_in.grad[i, j] = 0
                grid_v_out.grad[i, j] = [0, 0]

        @ti.kernel
        def p2g(s: ti.i32, t: ti.i32):
            for p in range(n):
                xp = x[s, p]
                base = ti.cast(xp * inv_dx - 0.5, ti.i32)
                fx = xp * inv_dx - ti.cast(base, float)
                w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
                Cp, Fp = C[s, p], F[s, p]
                new_F = Fp + (dt * Cp) @ Fp                      # (I + dt C) F
                F[s + 1, p] = new_F
                J = new_F.determinant()
                r, _ = ti.polar_decompose(new_F)
                act = 0.0
                a = actuator_id[p]
                if a >= 0:
                    act = actuation[t, a] * act_strength
                # cauchy = 2 mu (F - R) F^T + la (J - 1) J I + F A F^T with A = diag(0, act)
                column = ti.Vector([new_F[0, 1], new_F[1, 1]])
                cauchy = (2 * mu) * (new_F - r) @ new_F.transpose() + act * column.outer_product(column)
                pressure = la * (J - 1) * J
                cauchy[0, 0] += pressure
                cauchy[1, 1] += pressure
                stress = -(dt * p_vol * 4 * inv_dx * inv_dx) * cauchy
                affine = stress + mass * Cp
                momentum = mass * v[s, p]
                for i in ti.static(range(3)):
                    for j in ti.static(range(3)):
                        dpos = (ti.Vector([i, j]) - fx) * dx
                        weight = w[i][0] * w[j][1]
                        grid_v_in[base[0] + i, base[1] + j] += weight * (momentum + affine @ dpos)
                        grid_m_in[base[0] + i, base[1] + j] += weight * mass

        @ti.kernel
        def grid_op(i0: ti.i32, i1: ti.i32, j0: ti.i32, j1: ti.i32):
            for i, j in ti.ndrange((i0, i1), (j0, j1)):
                inv_m = 1 / (grid_m_in[i, j] + 1e-10)
                v_out = inv_m * grid_v_in[i, j]
                v_out[1] -= dt * gravity
                if i < bound and v_out[0] < 0:
                    v_out = ti.Vector([0.0, 0.0])
                if i > n_grid - bound and v_out[0] > 0:
                    v_out = ti.Vector([0.0, 0.0])
                if j < bound and v_out[1] < 0:
                    if ti.static(sticky):
                        v_out = ti.Vector([0.0, 0.0])
                    else:    # Coulomb friction against the floor (normal (0, 1))
                        lin = v_out[1]
                        vit = ti.Vector([v_out[0], 0.0])
                        lit = ti.abs(v_out[0]) + 1e-10
                        if lit + friction * lin <= 0:
                            v_out = ti.Vector([0.0, 0.0])
                        else:
                            v_out = (1 + friction * lin / lit) * vit
                if j > n_grid - bound and v_out[1] > 0:
                    v_out = ti.Vector([0.0, 0.0])
                grid_v_out[i, j] = v_out

        @ti.kernel
        def g2p(s: ti.i32):
            for p in range(n):
                xp = x[s, p]
                base = ti.cast(xp * inv_dx - 0.5, ti.i32)
                fx = xp * inv_dx - ti.cast(base, float)
                w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
                new_v = ti.Vector([0.0, 0.0])
                new_C = ti.Matrix([[0.0, 0.0], [0.0, 0.0]])
                for i in ti.static(range(3)):
                    for j in ti.static(range(3)):
                        dpos = ti.Vector([i, j]) - fx
                        g_v = grid_v_out[base[0] + i, base[1] + j]
                        weight = w[i][0] * w[j][1]
                        new_v += weight * g_v
                        new_C += (4 * inv_dx * weight) * g_v.outer_product(dpos)
                v[s + 1, p] = new_v
                x[s + 1, p] = xp + dt * new_v
                C[s + 1, p] = new_C

        @ti.kernel
        def observe(s: ti.i32, t: ti.i32):
            # observation[t, :] must be zero on entry (step() clears it)
            for p in range(n):
                d = (x[s, p] - start_center[None]) * x_scale
                u = v[s, p] * v_scale
                observation[t, 0] += d[0]
                observation[t, 1] += d[1]
                observation[t, 2] += u[0]
                observation[t, 3] += u[1]

        @ti.kernel
        def compute_loss(s: ti.i32):
            for p in range(n):
                loss[None] += -inv_n * x[s, p][0]

        self.clear_grid, self.clear_grid_and_grads = clear_grid, clear_grid_and_grads
        self.p2g, self.grid_op, self.g2p = p2g, grid_op, g2p
        self.observe, self.compute_loss = observe, compute_loss

        self.substep = self.make_substep()

    # ------------------------------------------------------------------ rendering
    def render_frames(self):
        c = self.cfg
        stride = max(1, self.n_advance // max(1, c.frames))
        times = list(range(0, self.n_advance + 1, stride))
        captured = self.positions_at(times)
        captured[0] = self.scene_x
        actuation = self.controller.actuation.to_numpy()
        ids = self.scene_actuators
        active = ids >= 0
        floor = c.bound / c.n_grid
        for t in times:
            canvas = Canvas(512)
            canvas.lines([0.0, floor], [1.0, floor], 3, (0, 0, 0))
            colors = np.empty((self.n_particles, 3), np.uint8)
            colors[...] = (40, 40, 40)
            act = actuation[max(t - 1, 0)][ids[active]]     # the actuation that led here
            colors[active] = color_map(act) * 0.75               # darkened: zero is mid grey
            canvas.circles(captured[t], 1.5, colors)
            yield canvas.image
