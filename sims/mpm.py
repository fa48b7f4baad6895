"""What the 2D and 3D MLS-MPM robots (sims.diffmpm, sims.diffmpm3d) share.

A subclass builds `x` (particle positions by time slot), `controller`, `observe(slot, t)`,
`substep(slot, t)` (one custom-gradient unit: grid scatter, update, gather),
`compute_loss(slot)`, `_set_initial_state()`, `n_advance` and `rollout` (a
CheckpointedRollout with `--checkpoint K`, else None). This class runs the rollout,
plain or checkpointed, and its gradient.
"""
import numpy as np

import engine as ti

from .base import Simulation


class MPMRobot(Simulation):
    capture_forward = False     # each step's grid box is computed from the particles in Python
    _capture = None             # {step: None} filled by step() while rendering

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
