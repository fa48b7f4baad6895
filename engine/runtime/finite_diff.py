"""Finite differences against autodiff: the comparison both `ti.ad.check_gradients` and
`ti.ad.Tape(loss, grad_check=[fields])` make (engine/runtime/gradcheck.py, engine/runtime/tape.py).

`compare` takes central differences (f(x + h) - f(x - h)) / 2h of an `evaluate(shift)`
that reproduces the forward pass from a snapshot of the fields with one entry moved,
at sampled entries, and reports the worst. A tape replays its recorded launches for it
(`check_tape`).
"""
from dataclasses import dataclass, field as dc_field

import numpy as np

from ..language.fields import Field
from ..core.program import current as current_program


class GradientCheckError(AssertionError):
    """Autodiff and finite differences disagree beyond the tolerance."""


def snapshot_fields(ndarrays=()):
    """Copies of every field's values, and of the given ndarrays'."""
    fields = [f for f in current_program().fields if f.placed and f.role == 'primal']
    return [(f, values_of(f).copy()) for f in fields + [a for a in ndarrays if not isinstance(a, Field)]]


def values_of(obj):
    """The numpy array of a field, a ti.ndarray or a numpy array."""
    return obj if isinstance(obj, np.ndarray) else obj.data


def restore_fields(snapshot, keep=()):
    for f, data in snapshot:
        if not any(f is k for k in keep):
            values_of(f)[...] = data


@dataclass
class Entry:
    field: str
    index: tuple
    autodiff: float
    finite_difference: float

    @property
    def error(self):
        return abs(self.autodiff - self.finite_difference) / max(abs(self.finite_difference), 1e-12)


@dataclass
class GradCheckReport:
    rtol: float
    atol: float
    entries: list = dc_field(default_factory=list)

    def bad(self):
        return [e for e in self.entries
                if not abs(e.autodiff - e.finite_difference) <= self.rtol * abs(e.finite_difference) + self.atol]

    @property
    def ok(self):
        return not self.bad()

    def worst(self, n=5):
        return sorted(self.entries, key=lambda e: -e.error)[:n]

    def __str__(self):
        lines = [f'gradient check: {len(self.entries)} entries, {len(self.bad())} beyond '
                 f'rtol={self.rtol:g} atol={self.atol:g}; worst:']
        for e in self.worst():
            lines.append(f'  {e.field}{list(e.index)}: autodiff {e.autodiff:+.6e}  '
                         f'finite differences {e.finite_difference:+.6e}  rel. error {e.error:.2e}')
        return '\n'.join(lines)


def apply_shift(shift):
    """Move one entry: shift = (field or ndarray, index, delta), or None."""
    if shift is not None:
        obj, index, delta = shift
        values_of(obj)[index] += delta


def display_name(obj):
    return getattr(obj, 'name', None) or f'ndarray{list(obj.data.shape)}'


def _default_eps(field):
    return 1e-6 if field.dtype.bits == 64 else 1e-3


def _sample(field, samples, rng):
    size = field.data.size
    picks = range(size) if size <= samples else rng.choice(size, samples, replace=False)
    return [np.unravel_index(int(k), field.data.shape) for k in picks]


def compare(evaluate, loss, fields, samples=16, eps=None, rtol=None, atol=1e-6, seed=0):
    """Central differences of `evaluate()` (returns the loss) at sampled entries of `fields`,
    against the gradients now in their `.grad`."""
    rng = np.random.default_rng(seed)
    rtol = rtol if rtol is not None else (1e-4 if loss.dtype.bits == 64 else 5e-2)
    grads = {f: f.grad.to_numpy().astype(np.float64) for f in fields}
    report = GradCheckReport(rtol, atol)
    for f in fields:
        h = eps or _default_eps(f)
        for index in _sample(f, samples, rng):
            plus = evaluate((f, index, h))
            minus = evaluate((f, index, -h))
            report.entries.append(Entry(display_name(f), tuple(int(i) for i in index), float(grads[f][index]),
                                        (plus - minus) / (2 * h)))
    evaluate()     # leave the fields as the unperturbed forward pass left them
    return report


def loss_key(loss):
    """The index of the loss's one element: None for a 0-D loss, (0, ...) for an ndarray of
    shape (1,) or (1, 1) (Taichi takes an ndarray of one element as a loss)."""
    return None if loss.shape == () else (0,) * len(loss.shape)


def check_tape(tape):
    """Tape(loss, grad_check=[...]): raise GradientCheckError with the report on a mismatch."""
    def evaluate(shift=None):
        tape.replay_forward(lambda: apply_shift(shift))
        return float(tape.loss[loss_key(tape.loss)])
    report = compare(evaluate, tape.loss, tape.grad_check)
    if not report.ok:
        raise GradientCheckError(str(report))
    return report
