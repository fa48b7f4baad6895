"""DiffMPM3D: a 3D soft robot simulated with MLS-MPM learns to walk along +x.

DiffTaichi's diffmpm3d example. The robot (DiffTaichi's scene, offset
(0.1, 0.05, 0.3), block size 0.1) is an H seen from above: four legs of
0.1 x 0.07 x 0.1 at the corners of a 0.3 x 0.3 square and a passive body strip
of three 0.1 x 0.07 x 0.1 blocks joining them along x. Each leg is a 2 x 2
stack (in x and y) of actuated blocks, 16 actuators in all. Particles sit on a
regular lattice of `density` particles per dx per axis. The material is
neo-Hookean (stress mu (F F^T - I) + la log(J) I, E = mu = la = 10, particle
volume and mass 1); an actuator adds the active stress act * F a a^T F^T with
a = e_z, the axis DiffTaichi actuates. An open-loop sine controller (default;
`--controller mlp` also works, observing the centre of mass's displacement and
velocity) gives the actuation at each step; the loss is minus the mean x of
the particles (all solid) after the last step. As in DiffTaichi, `steps`
counts the states: the rollout makes steps - 1 advances.

Sizes. DiffTaichi runs n_grid 64 (64^3 cells), density 3 (30,495 particles)
and 512 steps (dt 2e-3, about 1 s of simulated time, 8 periods of the
omega = 40 sine waves) on a GPU: here that costs about 16 s of CPU time per
training iteration, too slow for a 2-core CPU. The default keeps DiffTaichi's
scene, constants, dt and number of steps and halves the resolution: n_grid
32, density 3 (3,186 particles, 27 per cell as in DiffTaichi), 512 steps,
with `bound` 2 instead of 3 so that the floor layer and the walls sit where
DiffTaichi's do (grid nodes at y <= 1/32; `--n-grid 64 --bound 3` is
DiffTaichi's full-size scene). Measured on the shared 2-core development
machine (float32, sine controller, steady state): 1.7-1.8 s per training
iteration with `--threads 1` (1.74 s of CPU time); with 2 threads 1.9-2.0 s
wall (2.0 s of CPU time) while other jobs kept the second core busy; the
kernels' work splits over the threads, so expect about 1-1.2 s on an idle
machine. The first iteration adds 2-4 s of compilation. `--checkpoint
32` adds a forward pass (2.3 s of CPU time per iteration). Without
checkpointing the rollout keeps values and gradients of x, v, C, F for 512
slots: about 0.31 GB.

Training: DiffTaichi's plain gradient descent (learning rate 30) barely moves
at the start, because the initial actuation (sine weights of 0.01) hardly
deforms the robot and the gradient is ~1e-3; the default is Adam with learning
rate 0.1 (`--optimizer gd --lr 30` is DiffTaichi's), which moves the centre
of mass about 7 cm (loss -0.250 -> -0.326) in 20 iterations.

`quick` is a sparser robot (density 2: 1,008 particles) over 128 steps, with
a larger learning rate so that four iterations visibly lower the loss.

A step is MLS-MPM's particle-to-grid scatter (with the actuation stress), the
grid update (gravity, walls in x and z, floor and ceiling in y) and the
grid-to-particle gather. The grid fields are scratch space that every step
overwrites, so a step is recorded on the tape as one custom-gradient unit
(`ti.ad.grad_replaced`): its gradient re-runs the grid part forward, then the
adjoints of the gather, grid update and scatter in reverse. The grid kernels
visit only the box of cells that the step's particles touch (about 1,500 of
the 32,768 cells at the start). The particle state x, v, C, F is indexed by the time slot;
with `checkpoint=K` it holds K + 1 slots and `CheckpointedRollout` re-runs the
segments in the backward pass (memory ~ steps/K + K instead of steps).

The floor: like DiffTaichi, every cell within `bound` cells of the floor whose
velocity points into it is zeroed (DiffTaichi zeroes it before its Coulomb
projection, which then does nothing): the floor is sticky. `--no-sticky-floor`
applies the Coulomb projection with coefficient `friction` (DiffTaichi's 1.5)
instead. The robot starts 0.05 above the ground and settles onto the sticky
nodes (its lowest particles come to rest about 1.5 dx above y = 0).
"""
import numpy as np

import controllers
import engine as ti
from sims.mpm import MPMRobot
from sims.checkpointing import CheckpointedRollout
from sims.render import Canvas, color_map

BLOCK = 0.1
ROBOT_OFFSET = (0.1, 0.05, 0.3)
# The MLP's observation: displacement of the centre of mass from its start (x, y, z) and
# its velocity (x, y, z), scaled to O(1).
N_OBS = 6
OBS_SCALE = (10.0, 4.0)


def robot_boxes():
    """DiffTaichi's robot: (corner, size, actuator) boxes; actuator -1 is passive."""
    boxes = []
    half, low = BLOCK / 2, 0.7 * BLOCK / 2
    for leg in range(4):
        lx, lz = leg // 2 * BLOCK * 2, leg % 2 * BLOCK * 2
        for part in range(4):
            boxes.append(((lx + half * (part // 2), low * (part % 2), lz), (half, low, BLOCK), len(boxes)))
    for i in range(3):
        boxes.append(((BLOCK * i, 0.0, BLOCK), (BLOCK, 0.7 * BLOCK, BLOCK), -1))
    return boxes


def robot_scene(n_grid, density=3):
    """Particle positions, actuator ids (-1: passive) and the number of actuators."""
    dx = 1 / n_grid
    positions, actuators = [], []
    for corner, size, actuator in robot_boxes():
        counts = [int(s / dx * density) for s in size]
        axes = [corner[a] + ROBOT_OFFSET[a] + (np.arange(counts[a]) + 0.5) * (size[a] / counts[a])
                for a in range(3)]
        grid = np.meshgrid(*axes, indexing='ij')
        positions.append(np.stack([g.reshape(-1) for g in grid], axis=1))
        actuators.append(np.full(int(np.prod(counts)), actuator, np.int32))
    actuator_ids = np.concatenate(actuators)
    return np.concatenate(positions), actuator_ids, int(actuator_ids.max()) + 1


class DiffMPM3D(MPMRobot):
    """DiffMPM3D: a 3D MLS-MPM soft robot learns to walk along +x."""
    name = 'diffmpm3d'
    summary = '3D MLS-MPM soft robot: train its sine (or MLP) actuation to walk along +x'
    defaults = dict(steps=512, n_grid=32, density=3, dt=2e-3, E=10.0, p_vol=1.0, gravity=10.0,
                    act_strength=5.0, bound=2, friction=1.5, sticky_floor=True,
                    controller='sine', n_sin_waves=4, omega=40.0, hidden=32,
                    checkpoint=0, frames=64,
                    iters=10, optimizer='adam', lr=0.1, clip=None)
    quick = dict(steps=128, density=2, iters=4, lr=0.3, frames=16)

    # ------------------------------------------------------------------ build
    def build(self):
        c = self.cfg
        if c.steps < 2:
            raise ValueError('diffmpm3d needs steps >= 2')
        self.n_advance = c.steps - 1                # state slots 0 .. steps-1, as in DiffTaichi
        positions, actuator_ids, n_act = robot_scene(c.n_grid, c.density)
        self.scene_x, self.scene_actuators = positions, actuator_ids
        n = self.n_particles = len(positions)
        self.n_actuators = n_act
        slots = c.checkpoint + 1 if c.checkpoint else c.steps

        self.controller = controllers.make(c.controller, n_obs=N_OBS, n_act=n_act, steps=c.steps,
                                           dt=c.dt, omega=c.omega, n_waves=c.n_sin_waves,
                                           hidden=c.hidden)
        self.x = ti.Vector.field(3, float, shape=(slots, n), needs_grad=True)
        self.v = ti.Vector.field(3, float, shape=(slots, n), needs_grad=True)
        self.C = ti.Matrix.field(3, 3, float, shape=(slots, n), needs_grad=True)
        self.F = ti.Matrix.field(3, 3, float, shape=(slots, n), needs_grad=True)
        self.actuator_id = ti.field(ti.i32, shape=n)
        grid = (c.n_grid,) * 3
        self.grid_v_in = ti.Vector.field(3, float, shape=grid, needs_grad=True)
        self.grid_m_in = ti.field(float, shape=grid, needs_grad=True)
        self.grid_v_out = ti.Vector.field(3, float, shape=grid, needs_grad=True)
        self.loss = ti.field(float, shape=(), needs_grad=True)
        self.start_center = ti.Vector.field(3, float, shape=())
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
        # (i0 <= i < i1 and so on, see grid_box): the other cells are never read.
        @ti.kernel
        def clear_grid(i0: ti.i32, i1: ti.i32, j0: ti.i32, j1: ti.i32, k0: ti.i32, k1: ti.i32):
            for i, j, k in ti.ndrange((i0, i1), (j0, j1), (k0, k1)):
                grid_v_in[i, j, k] = [0, 0, 0]
                grid_m_in[i, j, k] = 0

        @ti.kernel
        def clear_grid_and_grads(i0: ti.i32, i1: ti.i32, j0: ti.i32, j1: ti.i32, k0: ti.i32, k1: ti.i32):
            for i, j, k in ti.ndrange((i0, i1), (j0, j1), (k0, k1)):
                grid_v_in[i, j, k] = [0, 0, 0]
                grid_m_in[i, j, k] = 0
                grid_v_in.grad[i, j, k] = [0, 0, 0]
                grid_m_in.grad[i, j, k] = 0
                grid_v_out.grad[i, j, k] = [0, 0, 0]

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
                act = 0.0
                a = actuator_id[p]
                if a >= 0:
                    act = actuation[t, a] * act_strength
                # neo-Hookean mu F F^T + (la log J - mu) I, plus F A F^T with A = diag(0, 0, act)
                column = ti.Vector([new_F[0, 2], new_F[1, 2], new_F[2, 2]])
                stress = mu * new_F @ new_F.transpose() + act * column.outer_product(column)
                diagonal = la * ti.log(J) - mu
                for d in ti.static(range(3)):
                    stress[d, d] += diagonal
                affine = (-(dt * p_vol * 4 * inv_dx * inv_dx) * stress + mass * Cp) * dx
                # momentum + affine @ dpos with dpos = ((i, j, k) - fx) dx, built up column by
                # column over the (compile-time) offsets
                c0 = ti.Vector([affine[0, 0], affine[1, 0], affine[2, 0]])
                c1 = ti.Vector([affine[0, 1], affine[1, 1], affine[2, 1]])
                c2 = ti.Vector([affine[0, 2], affine[1, 2], affine[2, 2]])
                mi = mass * v[s, p] - affine @ fx
                for i in ti.static(range(3)):
                    if ti.static(i > 0):
                        mi = mi + c0
                    mij = mi
                    for j in ti.static(range(3)):
                        if ti.static(j > 0):
                            mij = mij + c1
                        mijk = mij
                        for k in ti.static(range(3)):
                            if ti.static(k > 0):
                                mijk = mijk + c2
                            weight = w[i][0] * w[j][1] * w[k][2]
                            cell = (base[0] + i, base[1] + j, base[2] + k)
                            grid_v_in[cell] += weight * mijk
                            grid_m_in[cell] += weight * mass

        @ti.kernel
        def grid_op(i0: ti.i32, i1: ti.i32, j0: ti.i32, j1: ti.i32, k0: ti.i32, k1: ti.i32):
            for i, j, k in ti.ndrange((i0, i1), (j0, j1), (k0, k1)):
                inv_m = 1 / (grid_m_in[i, j, k] + 1e-10)
                v_out = inv_m * grid_v_in[i, j, k]
                v_out[1] -= dt * gravity
                zero = ti.Vector([0.0, 0.0, 0.0])
                if i < bound and v_out[0] < 0:
                    v_out = zero
                if i > n_grid - bound and v_out[0] > 0:
                    v_out = zero
                if k < bound and v_out[2] < 0:
                    v_out = zero
                if k > n_grid - bound and v_out[2] > 0:
                    v_out = zero
                if j < bound and v_out[1] < 0:
                    if ti.static(sticky):
                        v_out = zero
                    else:    # Coulomb friction against the floor (normal (0, 1, 0))
                        lin = v_out[1]
                        # the tangential speed, kept differentiable at zero
                        lit = ti.sqrt(v_out[0] * v_out[0] + v_out[2] * v_out[2] + 1e-20)
                        if lit + friction * lin <= 0:
                            v_out = zero
                        else:
                            scale = 1 + friction * lin / lit
                            v_out = ti.Vector([scale * v_out[0], 0.0, scale * v_out[2]])
                if j > n_grid - bound and v_out[1] > 0:
                    v_out = zero
                grid_v_out[i, j, k] = v_out

        @ti.kernel
        def g2p(s: ti.i32):
            for p in range(n):
                xp = x[s, p]
                base = ti.cast(xp * inv_dx - 0.5, ti.i32)
                fx = xp * inv_dx - ti.cast(base, float)
                w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
                # new_C = 4 inv_dx sum_cells weight g_v (offset - fx)^T, gathered as
                # 4 inv_dx (sum weight g_v offset^T - new_v fx^T) (the offsets are constants)
                new_v = ti.Vector([0.0, 0.0, 0.0])
                moment = [ti.Vector([0.0, 0.0, 0.0]), ti.Vector([0.0, 0.0, 0.0]), ti.Vector([0.0, 0.0, 0.0])]
                for i in ti.static(range(3)):
                    for j in ti.static(range(3)):
                        for k in ti.static(range(3)):
                            weight = w[i][0] * w[j][1] * w[k][2]
                            wg = weight * grid_v_out[base[0] + i, base[1] + j, base[2] + k]
                            new_v += wg
                            offset = (i, j, k)
                            for a in ti.static(range(3)):
                                if ti.static(offset[a] == 1):
                                    moment[a] += wg
                                if ti.static(offset[a] == 2):
                                    moment[a] += 2.0 * wg
                new_C = ti.Matrix([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
                for r in ti.static(range(3)):
                    for a in ti.static(range(3)):
                        new_C[r, a] = (4 * inv_dx) * (moment[a][r] - new_v[r] * fx[a])
                v[s + 1, p] = new_v
                x[s + 1, p] = xp + dt * new_v
                C[s + 1, p] = new_C

        @ti.kernel
        def observe(s: ti.i32, t: ti.i32):
            # observation[t, :] must be zero on entry (step() clears it)
            for p in range(n):
                d = (x[s, p] - start_center[None]) * x_scale
                u = v[s, p] * v_scale
                for q in ti.static(range(3)):
                    observation[t, q] += d[q]
                    observation[t, 3 + q] += u[q]

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
        """Two orthographic views of each frame at the same scale: the side (x right, y up,
        seen from +z) in the upper half and the top (x right, z down, seen from +y; z from
        0.2 to 0.7) in the lower half; particles coloured by their actuation (passive: dark
        grey), nearer ones drawn over farther ones."""
        c = self.cfg
        stride = max(1, self.n_advance // max(1, c.frames))
        times = list(range(0, self.n_advance + 1, stride))
        captured = self.positions_at(times)
        captured[0] = self.scene_x
        actuation = self.controller.actuation.to_numpy()
        ids = self.scene_actuators
        active = ids >= 0
        floor = (c.bound - 0.5) / c.n_grid    # where particles come to rest on the sticky nodes
        for t in times:
            xs = np.asarray(captured[t], np.float64)
            colors = np.empty((self.n_particles, 3), np.uint8)
            colors[...] = (40, 40, 40)
            act = actuation[max(t - 1, 0)][ids[active]]     # the actuation that led here
            colors[active] = color_map(act) * 0.75               # darkened: zero is mid grey
            canvas = Canvas(512)
            canvas.lines([0.0, 0.5], [1.0, 0.5], 2, (160, 160, 160))            # between the views
            canvas.lines([0.0, 0.5 + floor], [1.0, 0.5 + floor], 3, (0, 0, 0))  # the floor
            views = ((np.stack([xs[:, 0], 0.5 + xs[:, 1]], axis=1), xs[:, 2], 0.5, 1.0),   # side
                     (np.stack([xs[:, 0], 0.7 - xs[:, 2]], axis=1), xs[:, 1], 0.0, 0.5))   # top
            for points, depth, y0, y1 in views:
                order = np.argsort(depth, kind='stable')          # far particles first
                points, shade = points[order], colors[order]
                inside = (points[:, 1] > y0) & (points[:, 1] < y1)
                canvas.circles(points[inside], 1.5, shade[inside])
            yield canvas.image
