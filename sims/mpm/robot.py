"""MPMRobot: what the 2D and 3D MLS-MPM robots (sims.diffmpm, sims.diffmpm3d) share.

sims/mpm is split by concern:
- robot.py (here): `MPMRobot`, the Simulation subclass that allocates the state, builds
  the kernels and runs the rollout (plain or checkpointed) and its gradient;
- kernels.py: one factory per MLS-MPM kernel, over dim (the grid clears, p2g, grid_op
  with the boundary conditions, g2p, the observation and the loss);
- materials.py: the material models (fixed-corotated, neo-Hookean) and the actuation
  stress, as ti.funcs that p2g calls;
- render.py: the particles and their colours of the frames a robot renders.
sims/mpm has no __init__.py on purpose: `sims.names()` takes every regular package
under sims/ for a simulator, and this one is none (as a namespace package it imports
all the same: `from sims.mpm.robot import MPMRobot`).

A subclass sets `dim`, `incremental` (the formulation of the stencil sums, see
kernels.py), `scene()` (particle positions, actuator ids, number of actuators) and
`material()` (a ti.func of materials.py). This class allocates the particle state
`x, v, C, F` (indexed by time slot: `steps` slots, or K + 1 with `--checkpoint K`), the
grid and the controller, builds the kernels and runs the rollout.

A step is MLS-MPM's particle-to-grid scatter (with the actuation stress), the grid
update (gravity, walls, floor) and the grid-to-particle gather. The grid fields are
scratch space that every step overwrites, so a step is recorded on the tape as one
custom-gradient unit (`ti.ad.grad_replaced`): its gradient re-runs the grid part
forward, then the adjoints of the gather, grid update and scatter in reverse. The grid
kernels visit only the box of cells that the step's particles touch. With
`checkpoint=K` the state holds K + 1 slots and `CheckpointedRollout` re-runs the
segments in the backward pass (memory ~ steps/K + K instead of steps).
"""
from types import SimpleNamespace

import numpy as np

import controllers
import engine as ti

from ..base import Simulation
from ..checkpointing import CheckpointedRollout
from . import kernels

# The MLP's observation: displacement of the centre of mass from its start and its
# velocity (dim entries each), scaled to O(1) by these factors.
OBS_SCALE = (10.0, 4.0)


class MPMRobot(Simulation):
    capture_forward = False     # each step's grid box is computed from the particles in Python
    _capture = None             # {step: None} filled by step() while rendering
    dim = None                  # 2 or 3
    incremental = False         # the stencil sums of kernels.scatter_incremental / gather_moments

    def scene(self):
        """(positions (n x dim), actuator ids (n, -1: passive), number of actuators)."""
        raise NotImplementedError

    def material(self):
        """The material's stress ti.func (see materials.py)."""
        raise NotImplementedError

    # --- build ------------------------------------------------------------------------
    def build(self):
        c = self.cfg
        if c.steps < 2:
            raise ValueError(f'{self.name} needs steps >= 2')
        self.n_advance = c.steps - 1                # state slots 0 .. steps-1, as in DiffTaichi
        positions, actuator_ids, n_act = self.scene()
        self.scene_x, self.scene_actuators = positions, actuator_ids
        self.n_particles, self.n_actuators = len(positions), n_act
        self.controller = controllers.make(c.controller, n_obs=2 * self.dim, n_act=n_act, steps=c.steps,
                                           dt=c.dt, omega=c.omega, n_waves=c.n_sin_waves,
                                           hidden=c.hidden)
        self._allocate(c.checkpoint + 1 if c.checkpoint else c.steps)
        self._define_kernels()
        self.rollout = None
        if c.checkpoint:
            self.rollout = CheckpointedRollout([self.x, self.v, self.C, self.F], self.step,
                                               self.n_advance, c.checkpoint)

    def _allocate(self, slots):
        dim, n, grid = self.dim, self.n_particles, (self.cfg.n_grid,) * self.dim
        self.x = ti.Vector.field(dim, float, shape=(slots, n), needs_grad=True)
        self.v = ti.Vector.field(dim, float, shape=(slots, n), needs_grad=True)
        self.C = ti.Matrix.field(dim, dim, float, shape=(slots, n), needs_grad=True)
        self.F = ti.Matrix.field(dim, dim, float, shape=(slots, n), needs_grad=True)
        self.actuator_id = ti.field(ti.i32, shape=n)
        self.grid_v_in = ti.Vector.field(dim, float, shape=grid, needs_grad=True)
        self.grid_m_in = ti.field(float, shape=grid, needs_grad=True)
        self.grid_v_out = ti.Vector.field(dim, float, shape=grid, needs_grad=True)
        self.grid_box_cells = ti.field(ti.i32, shape=(dim, 2))     # (lo, hi) per axis
        self.loss = ti.field(float, shape=(), needs_grad=True)
        self.start_center = ti.Vector.field(dim, float, shape=())

    def _define_kernels(self):
        c, dim, incremental = self.cfg, self.dim, self.incremental
        particles = SimpleNamespace(x=self.x, v=self.v, C=self.C, F=self.F, actuator_id=self.actuator_id)
        grid = SimpleNamespace(v_in=self.grid_v_in, m_in=self.grid_m_in, v_out=self.grid_v_out,
                               box=self.grid_box_cells)
        self.clear_grid = kernels.clear_grid(grid, dim)
        self.clear_grid_and_grads = kernels.clear_grid(grid, dim, grads=True)
        self.p2g = kernels.p2g(particles, grid, self.controller.actuation, self.material(), dim, c, incremental)
        self.grid_op = kernels.grid_op(grid, dim, c)
        self.g2p = kernels.g2p(particles, grid, dim, c, incremental)
        self.observe = kernels.observe(particles, self.start_center, self.controller.observation, dim, OBS_SCALE)
        self.compute_loss = kernels.mean_x_loss(self.x, self.loss)
        self.substep = self.make_substep()

    def make_substep(self):
        """A step's grid part as one custom-gradient unit. The grid is scratch that every
        step overwrites, so the gradient rebuilds this step's grid, then runs the adjoints
        of the gather, the grid update and the scatter in reverse. The grid kernels visit
        the box of cells of the step's particles, computed in Python before them."""
        clear_grid, clear_grid_and_grads = self.clear_grid, self.clear_grid_and_grads
        p2g, grid_op, g2p, grid_box = self.p2g, self.grid_op, self.g2p, self.grid_box
        box_cells = self.grid_box_cells.data
        boxes = {}     # step -> grid box, so that the backward pass reuses it

        @ti.ad.grad_replaced
        def substep(s, t):
            box_cells[...] = boxes[t] = grid_box(s)
            clear_grid()
            p2g(s, t)
            grid_op()
            g2p(s)

        @ti.ad.grad_for(substep)
        def substep_grad(s, t):
            box = boxes.pop(t, None)
            box_cells[...] = grid_box(s) if box is None else box
            clear_grid_and_grads()
            p2g(s, t)
            grid_op()
            g2p.grad(s)
            grid_op.grad()
            p2g.grad(s, t)

        return substep

    # --- the interface of Simulation --------------------------------------------------
    def parameters(self):
        return self.controller.parameters()

    def initialize(self, rng):
        self.controller.initialize(rng)
        self.actuator_id.from_numpy(self.scene_actuators)
        self.start_center[None] = self.scene_x.mean(axis=0)
        for f in (self.x, self.v, self.C, self.F):
            f.fill(0)
        self._set_initial_state()

    def _set_initial_state(self):
        self.x.data[0] = self.scene_x
        self.v.data[0] = 0
        self.C.data[0] = 0
        self.F.data[0] = np.eye(self.dim)

    def grid_box(self, slot):
        """[(lo, hi) per axis]: the cells that the B-spline stencils of the
        particles in `slot` cover (base .. base + 2 per axis), with one cell of margin for
        rounding."""
        n_grid = self.cfg.n_grid
        columns = np.ascontiguousarray(self.x.data[slot].T)      # contiguous rows reduce fastest
        low = np.floor(columns.min(axis=1).astype(np.float64) * n_grid - 0.5).astype(int) - 1
        high = np.floor(columns.max(axis=1).astype(np.float64) * n_grid - 0.5).astype(int) + 4
        return [(min(max(lo, 0), n_grid), min(max(hi, 0), n_grid))        # faster than np.clip
                for lo, hi in zip(low.tolist(), high.tolist())]

    def step(self, slot, t):
        """Advance the state from `slot` to `slot + 1` at global step t."""
        if self.controller.uses_observation:
            self.controller.observation.data[t] = 0
            self.observe(slot, t)
        self.controller.compute(t)
        self.substep(slot, t)
        if self._capture is not None and t + 1 in self._capture:
            self._capture[t + 1] = self.x.data[slot + 1].copy()

    def forward(self):
        if self.rollout is not None:
            self._set_initial_state()
            final = self.rollout.forward()
        else:
            for t in range(self.n_advance):
                self.step(t, t)
            final = self.n_advance
        self.compute_loss(final)

    def loss_and_grad(self):
        if self.rollout is None:
            return super().loss_and_grad()
        ti.ad.clear_all_gradients()
        self._set_initial_state()
        final = self.rollout.forward()
        with ti.ad.Tape(self.loss, clear_gradients=False):
            self.compute_loss(final)
        self.rollout.backward()
        return float(self.loss[None])

    def positions_at(self, times):
        """Particle positions at the given steps of a rollout with the current parameters."""
        self._capture = dict.fromkeys(times)
        try:
            self.evaluate()
        finally:
            captured, self._capture = self._capture, None
        return captured
