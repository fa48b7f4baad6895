"""Checkpointed rollouts: memory grows with steps/k + k instead of steps.

The state fields hold k + 1 time slots (axis 0) instead of steps + 1. The
forward pass runs the whole rollout segment by segment, keeping a copy of the
state at the start of each segment (steps/k copies). The backward pass takes
the segments in reverse: restore the segment's first state, re-run its k steps
on a tape, seed the gradient of its last slot with what the later segment (or
the loss) produced, and replay the tape. Parameters' gradients accumulate over
the segments; the gradient of slot 0 becomes the seed of the previous segment.
"""
import numpy as np

import engine as ti


class CheckpointedRollout:
    """`step(slot, t)` advances the state from `slot` to `slot + 1` at global step t."""

    def __init__(self, state_fields, step, n_steps, segment):
        slots = {f.shape[0] for f in state_fields}
        if slots != {segment + 1}:
            raise ValueError(f'state fields need segment + 1 = {segment + 1} time slots, got {sorted(slots)}')
        self.fields, self.step, self.n_steps, self.segment = list(state_fields), step, n_steps, segment
        self.starts = list(range(0, n_steps, segment))
        self.saved = [[np.empty_like(f.data[0]) for f in self.fields] for _ in self.starts]

    def _length(self, start):
        return min(self.segment, self.n_steps - start)

    def _copy_slot(self, src, dst):
        for f in self.fields:
            f.data[dst] = f.data[src]

    def forward(self):
        """Run all steps; returns the slot that holds the final state."""
        for n, start in enumerate(self.starts):
            if n:
                self._copy_slot(self.segment, 0)
            for f, saved in zip(self.fields, self.saved[n]):
                saved[...] = f.data[0]
            for s in range(self._length(start)):
                self.step(s, start + s)
        return self._length(self.starts[-1])

    def backward(self):
        """Given the gradient of the final slot (from the loss), accumulate the parameters'."""
        for n in reversed(range(len(self.starts))):
            start, length = self.starts[n], self._length(self.starts[n])
            if n < len(self.starts) - 1:       # seed: gradient of the next segment's first state
                for f in self.fields:
                    f.grad.data[length] = f.grad.data[0]
            for f, saved in zip(self.fields, self.saved[n]):
                f.grad.data[:length] = 0
                f.data[0] = saved
            with ti.ad.Tape(loss=None):          # records the re-run, replays it on exit
                for s in range(length):
                    self.step(s, start + s)

    def memory_bytes(self):
        """Bytes held by the saved states (the state fields are counted by their owner)."""
        return sum(a.nbytes for seg in self.saved for a in seg)
