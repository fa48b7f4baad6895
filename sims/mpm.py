"""What the 2D and 3D MLS-MPM robots (sims.diffmpm, sims.diffmpm3d) share.

A subclass builds the particle state `x, v, C, F` (indexed by time slot), `controller`,
the kernels `observe(slot, t)`, `clear_grid(*box)`, `clear_grid_and_grads(*box)`,
`p2g(slot, t)`, `grid_op(*box)`, `g2p(slot)`, `compute_loss(slot)`, the fields
`actuator_id` and `start_center`, the scene (`scene_x`, `scene_actuators`), `n_advance`
and `rollout` (a CheckpointedRollout with `--checkpoint K`, else None), then calls
`make_substep()`. This class runs the rollout, plain or checkpointed, and its gradient.
"""
import numpy as np

import engine as ti

from .base import Simulation


class MPMRobot(Simulation):
    capture_forward = False     # each step's grid box is computed from the particles in Python
    _capture = None             # {step: None} filled by step() while rendering

    def make_substep(self):
        """A step's grid part as one custom-gradient unit. The grid is scratch that every
        step overwrites, so the gradient rebuilds this step's grid, then runs the adjoints
        of the gather, the grid update and the scatter in reverse."""
        clear_grid, clear_grid_and_grads = self.clear_grid, self.clear_grid_and_grads
        p2g, grid_op, g2p, grid_box = self.p2g, self.grid_op, self.g2p, self.grid_box
        boxes = {}     # step -> grid box, so that the backward pass reuses it

        @ti.ad.grad_replaced
        def substep(s, t):
            box = boxes[t] = grid_box(s)
            clear_grid(*box)
            p2g(s, t)
            grid_op(*box)
            g2p(s)

        @ti.ad.grad_for(substep)
        def substep_grad(s, t):
            box = boxes.pop(t, None) or grid_box(s)
            clear_grid_and_grads(*box)
            p2g(s, t)
            grid_op(*box)
            g2p.grad(s)
            grid_op.grad(*box)
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
        self.F.data[0] = np.eye(self.scene_x.shape[1])

    def grid_box(self, slot):
        """(lo, hi) per axis: the cells that the B-spline stencils of the particles in `slot`
        cover (base .. base + 2 per axis), with one cell of margin for rounding."""
        n_grid = self.cfg.n_grid
        columns = np.ascontiguousarray(self.x.data[slot].T)      # contiguous rows reduce fastest
        low = np.floor(columns.min(axis=1).astype(np.float64) * n_grid - 0.5).astype(int) - 1
        high = np.floor(columns.max(axis=1).astype(np.float64) * n_grid - 0.5).astype(int) + 4
        box = []
        for lo, hi in zip(low.tolist(), high.tolist()):
            box += [min(max(lo, 0), n_grid), min(max(hi, 0), n_grid)]
        return box

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
