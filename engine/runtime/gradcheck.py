"""Diagnosing gradients: a finite-difference gradient checker and a rollout health report.

* `check_gradients(fn, loss, fields)` and `ti.ad.Tape(loss, grad_check=[fields])` compare
  the autodiff gradient with central differences (f(x + h) - f(x - h)) / 2h on sampled
  entries of the chosen fields and report the worst ones. The tape replays its recorded
  launches from a snapshot of every field taken when it started, so the forward pass is
  reproduced exactly for each perturbed entry.
* `rollout_report(field)` takes a time-indexed field after a backward pass and reports the
  gradient norm per step, its growth rate and the first non-finite step: the tool for an
  exploding or vanishing gradient through a long simulation.
"""
import math
from dataclasses import dataclass

import numpy as np

from .finite_diff import apply_shift, display_name, compare, restore_fields, snapshot_fields
from ..language.fields import Field
from .tape import Tape


def check_gradients(fn, loss, fields, samples=16, eps=None, rtol=None, atol=1e-6):
    """Run `fn` (kernels computing the 0-D `loss` from `fields`) on a tape and compare the
    gradients with finite differences; returns a GradCheckReport (`.ok`, `.worst()`, str)."""
    for field in fields:
        if not field.dtype.is_float or getattr(field, 'grad', None) is None:
            raise TypeError(f'ti.ad.check_gradients: {display_name(field)} has dtype {field.dtype} and '
                            f'no gradient; only float fields and ndarrays with needs_grad=True have one')
    before = snapshot_fields(fields)
    with Tape(loss):
        fn()
    after = snapshot_fields(fields)

    def evaluate(shift=None):   # from the fields as they were at the call, one entry moved
        restore_fields(before)
        apply_shift(shift)
        loss[None] = 0
        fn()
        return float(loss[None])
    try:
        return compare(evaluate, loss, fields, samples, eps, rtol, atol)
    finally:
        restore_fields(after)


@dataclass
class RolloutReport:
    field: str
    norms: np.ndarray            # gradient norm at each time step

    @property
    def first_non_finite(self):
        bad = np.flatnonzero(~np.isfinite(self.norms))
        return int(bad[-1]) if bad.size else None     # backward runs from the last step

    def growth_per_step(self):
        """Geometric mean of the norm ratio from one step to the one before it (backwards)."""
        finite = self.norms[np.isfinite(self.norms) & (self.norms > 0)]
        if finite.size < 2:
            return float('nan')
        return math.exp((math.log(finite[0]) - math.log(finite[-1])) / (finite.size - 1))

    @property
    def exploding(self):
        return self.first_non_finite is not None or self.norms.max() > 1e6 * max(self.norms[-1], 1e-30)

    def __str__(self):
        n = len(self.norms)
        picks = sorted(set(np.linspace(0, n - 1, min(n, 9)).astype(int)))
        lines = [f'rollout gradient report for {self.field} ({n} steps): ||grad|| per step']
        lines += [f'  step {t:6d}: {self.norms[t]:.3e}' for t in picks]
        lines.append(f'  growth per step backwards: x{self.growth_per_step():.4f}')
        if self.first_non_finite is not None:
            lines.append(f'  NON-FINITE gradient from step {self.first_non_finite} backwards')
        elif self.exploding:
            lines.append('  EXPLODING: the gradient grows by more than 1e6 through the rollout')
        return '\n'.join(lines)


def rollout_report(field, time_axis=0):
    """Per-step gradient norms of a time-indexed field, after a backward pass.

    The adjoint of a plain store uses up the stored element's adjoint (so that overwrites
    differentiate right): after the backward pass, `field.grad` of a state that a kernel
    wrote holds 0. `ti.ad.keep_adjoints(field)`, called before the backward pass, keeps
    what each store used up, and the report adds it back."""
    grad = field.grad.to_numpy().astype(np.float64)
    kept = getattr(field, 'kept_adjoints', None)
    if kept is not None and kept.placed:
        grad += kept.to_numpy()
    grad = np.moveaxis(grad, time_axis, 0)
    norms = np.sqrt((grad.reshape(grad.shape[0], -1) ** 2).sum(axis=1))
    return RolloutReport(field.name, norms)


def keep_adjoints(field):
    """From now on, the adjoint that a store to `field` uses up is also added to
    `field.kept_adjoints` (zeroed with the gradients), for `rollout_report`: the gradient
    of the loss with respect to each state as its kernel wrote it. Adjoint kernels that
    store to `field` are compiled again once."""
    if field.grad is None:
        raise ValueError(f'field {field.name} has no gradient to keep')
    field.ensure_placed()
    if getattr(field, 'kept_adjoints', None) is None:
        kept = Field(field.dtype, field.element_shape, None, field.name + '.kept_adjoints',
                     primal=field, role='grad')
        kept._allocate(field.shape, by_user=False)
        field.kept_adjoints = kept
    return field.kept_adjoints
