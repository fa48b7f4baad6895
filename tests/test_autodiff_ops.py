"""Reverse-mode derivative rules of the op table, checked by finite differences.

Every op of `engine.ir.ops.OPS` that has a `partials` rule gets one kernel,
vectorized over N random inputs in the op's domain (away from kinks and
discontinuities): y[i] = f(a[i], b[i], c[i]). The adjoint kernel (`k.grad()`)
with y.grad = w (random weights) must give a.grad = w * df/da (and so on for b
and c), compared with central differences in float64 (relative error < 1e-5).
The gradient is checked w.r.t. each operand (an operand an op does not take is
still an input, and must get exactly the gradient finite differences give).

The op is found in the kernel's IR, so each spec really exercises its op; an op
added to the table with a derivative rule fails here until it gets a spec.
"""
import zlib
from dataclasses import dataclass, field as dc_field
from typing import Callable, Optional

import numpy as np
import pytest

import engine as ti
from engine.ir import ops
from engine.ir.nodes import walk

from ad_helpers import assert_grad_close

N = 16
EPS = 1e-6


def _u(lo, hi):
    return lambda r: r.uniform(lo, hi, N)


def _away_from(values_fn, bad, margin):
    """Resample until every value is at least `margin` from the nearest point of `bad`(x)."""
    def sample(r):
        x = values_fn(r)
        for _ in range(1000):
            d = bad(x)
            if (d >= margin).all():
                return x
            x = np.where(d >= margin, x, values_fn(r))
        raise RuntimeError('could not sample the domain')
    return sample


def _signed(lo, hi):
    return lambda r: r.choice([-1.0, 1.0], N) * r.uniform(lo, hi, N)


def _frac_dist(x, points):
    """Distance of x to the nearest value k + p (integer k, p in points)."""
    f = x - np.floor(x)
    return np.min([np.minimum(np.abs(f - p), 1 - np.abs(f - p)) for p in points], axis=0)


@dataclass
class Spec:
    fn: Callable                       # (a, b, c) -> kernel value, using the op
    a: Callable = _u(-2, 2)            # samplers of the inputs
    b: Callable = _u(-2, 2)
    c: Callable = _u(-2, 2)
    joint: Optional[Callable] = None   # (r) -> (a, b, c), for coupled domains
    dtypes: dict = dc_field(default_factory=dict)   # input name -> dtype (default f64)
    out_dtype: object = None           # dtype of y (default f64)
    eps: float = EPS
    rtol: float = 1e-5
    expected: Optional[Callable] = None   # numpy (a, b, c) -> (da, db, dc) instead of FD
    zero_partial: bool = False         # the op itself contributes a zero gradient


def _mod_domain(sign):
    def joint(r):
        b = sign * r.uniform(0.5, 2.0, N)
        q = r.integers(-3, 3, N) + r.uniform(0.1, 0.9, N)   # a / b, not near an integer
        return q * b, b, r.uniform(-2, 2, N)
    return joint


def _atan2_domain(r):
    rad = r.uniform(0.5, 2.0, N)
    ang = r.uniform(-3.0, 3.0, N)          # away from the branch cut at +-pi
    return rad * np.sin(ang), rad * np.cos(ang), r.uniform(-2, 2, N)


def _minmax_domain(r):
    a = r.uniform(-2, 2, N)
    b = a + r.choice([-1.0, 1.0], N) * r.uniform(0.1, 1.0, N)   # no ties, both sides
    return a, b, r.uniform(-2, 2, N)


_NOT_NEAR_INT = _away_from(_u(-3, 3), lambda x: _frac_dist(x, [0.0]), 0.05)
_NOT_NEAR_INT_OR_HALF = _away_from(_u(-3, 3), lambda x: _frac_dist(x, [0.0, 0.5]), 0.05)

# One or more specs per op with a derivative rule. Zero-gradient ops are wrapped
# in an expression with other paths (op(a) * b + a * c) so that a wrong non-zero
# partial shows up in a.grad.
SPECS = {
    'add': [Spec(lambda a, b, c: a + b)],
    'sub': [Spec(lambda a, b, c: a - b)],
    'mul': [Spec(lambda a, b, c: a * b)],
    'truediv': [Spec(lambda a, b, c: a / b, b=_signed(0.5, 2.0))],
    'mod': [Spec(lambda a, b, c: a % b, joint=_mod_domain(1.0)),
            Spec(lambda a, b, c: a % b, joint=_mod_domain(-1.0))],
    'pow': [Spec(lambda a, b, c: ti.pow(a, b), a=_u(0.3, 2.5)),
            Spec(lambda a, b, c: a ** b * c, a=_u(0.3, 2.5))],
    'min': [Spec(lambda a, b, c: ti.min(a, b), joint=_minmax_domain)],
    'max': [Spec(lambda a, b, c: ti.max(a, b), joint=_minmax_domain)],
    'atan2': [Spec(lambda a, b, c: ti.atan2(a, b), joint=_atan2_domain)],
    'neg': [Spec(lambda a, b, c: -a)],
    'abs': [Spec(lambda a, b, c: ti.abs(a), a=_signed(0.1, 2.0))],
    'sin': [Spec(lambda a, b, c: ti.sin(a), a=_u(-3, 3))],
    'cos': [Spec(lambda a, b, c: ti.cos(a), a=_u(-3, 3))],
    'tan': [Spec(lambda a, b, c: ti.tan(a), a=_u(-1.3, 1.3))],
    'asin': [Spec(lambda a, b, c: ti.asin(a), a=_u(-0.9, 0.9))],
    'acos': [Spec(lambda a, b, c: ti.acos(a), a=_u(-0.9, 0.9))],
    'atan': [Spec(lambda a, b, c: ti.math.atan(a), a=_u(-3, 3))],
    'tanh': [Spec(lambda a, b, c: ti.tanh(a), a=_u(-2, 2))],
    'exp': [Spec(lambda a, b, c: ti.exp(a), a=_u(-2, 2))],
    'log': [Spec(lambda a, b, c: ti.log(a), a=_u(0.2, 3))],
    'sqrt': [Spec(lambda a, b, c: ti.sqrt(a), a=_u(0.2, 3))],
    'rsqrt': [Spec(lambda a, b, c: ti.rsqrt(a), a=_u(0.2, 3))],
    'floor': [Spec(lambda a, b, c: ti.floor(a) * b + a * c, a=_NOT_NEAR_INT, zero_partial=True)],
    'ceil': [Spec(lambda a, b, c: ti.ceil(a) * b + a * c, a=_NOT_NEAR_INT, zero_partial=True)],
    'round': [Spec(lambda a, b, c: ti.round(a) * b + a * c, a=_NOT_NEAR_INT_OR_HALF, zero_partial=True)],
    'floordiv': [Spec(lambda a, b, c: (a // b) * b + a * c,
                      joint=_mod_domain(1.0), zero_partial=True)],
    # select: the condition carries no gradient (c.grad == 0), the taken side gets it.
    'select': [Spec(lambda a, b, c: ti.select(c > 0, a * a, b), c=_signed(0.2, 2.0))],
    # cast between floats: f32 input widened to f64 (FD exact on the stored f32 values) ...
    'cast': [Spec(lambda a, b, c: ti.sin(ti.cast(a, ti.f64)) * b, a=_u(0.5, 2.0),
                  dtypes={'a': ti.f32}, eps=2.0 ** -12),
             # ... and f64 narrowed to f32 arithmetic (f32 rounding: FD only to ~1e-3).
             Spec(lambda a, b, c: ti.cast(ti.cast(a, ti.f32) * ti.cast(b, ti.f32), ti.f64),
                  a=_u(0.5, 2.0), b=_u(0.5, 2.0), eps=1e-3, rtol=2e-3)],
    # stop_grad: the value passes, the gradient does not (so not FD: d/da of a*b + a*c is b + c).
    'stop_grad': [Spec(lambda a, b, c: ti.stop_grad(a) * b + a * c,
                       expected=lambda a, b, c: (c, a, a))],
}

DIFFERENTIABLE = sorted(name for name, op in ops.OPS.items() if op.partials is not None)
CASES = [(name, k) for name in DIFFERENTIABLE for k in range(max(1, len(SPECS.get(name, ()))))]


def test_specs_cover_every_differentiable_op():
    missing = [name for name in DIFFERENTIABLE if name not in SPECS]
    assert not missing, f'ops with a derivative rule but no finite-difference spec: {missing}'
    for name in ('add', 'sub', 'mul', 'truediv', 'mod', 'pow', 'min', 'max', 'atan2', 'neg', 'abs',
                 'sin', 'cos', 'tan', 'asin', 'acos', 'atan', 'tanh', 'exp', 'log', 'sqrt', 'rsqrt',
                 'select', 'cast', 'floor', 'ceil', 'round'):
        assert name in DIFFERENTIABLE, f'{name} lost its derivative rule'


def elementwise_fd(kernel, field, y, eps):
    """dy[i]/dfield[i] of an elementwise kernel by central differences (all entries at
    once), divided by the perturbation actually stored (exact for f32 inputs)."""
    base = field.to_numpy()
    field.from_numpy((base + eps).astype(base.dtype))
    hi_x = field.to_numpy().astype(np.float64)
    kernel()
    hi = y.to_numpy().astype(np.float64)
    field.from_numpy((base - eps).astype(base.dtype))
    lo_x = field.to_numpy().astype(np.float64)
    kernel()
    lo = y.to_numpy().astype(np.float64)
    field.from_numpy(base)
    return (hi - lo) / (hi_x - lo_x)


def _inputs(spec, rng):
    if spec.joint is not None:
        return spec.joint(rng)
    return spec.a(rng), spec.b(rng), spec.c(rng)


@pytest.mark.parametrize('name,variant', CASES, ids=[f'{n}-{k}' for n, k in CASES])
def test_op_partials_match_finite_differences(name, variant):
    assert name in SPECS, f'op {name!r} has a derivative rule but no finite-difference spec in SPECS'
    spec = SPECS[name][variant]
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    rng = np.random.default_rng(zlib.crc32(f'{name}/{variant}'.encode()))

    names = ('a', 'b', 'c')
    fields = {n: ti.field(spec.dtypes.get(n, ti.f64), shape=N, needs_grad=True) for n in names}
    a, b, c = fields['a'], fields['b'], fields['c']
    y = ti.field(spec.out_dtype or ti.f64, shape=N, needs_grad=True)
    fn = spec.fn

    @ti.kernel
    def k():
        for i in range(N):
            y[i] = fn(a[i], b[i], c[i])

    values = _inputs(spec, rng)
    for n, v in zip(names, values):
        fields[n].from_numpy(np.asarray(v, dtype=fields[n].dtype.np))
    w = rng.uniform(0.5, 1.5, N) * rng.choice([-1.0, 1.0], N)

    k()
    base_y = y.to_numpy()
    # The kernel really contains the op.
    body = next(iter(k._cache.values())).body
    assert any(s.op == name for s in walk(body)), f'the spec of {name} does not emit {name}'

    y.grad.from_numpy(w)
    k.grad()
    grads = {n: fields[n].grad.to_numpy().astype(np.float64) for n in names}
    assert np.isfinite(base_y).all()

    stored = {n: fields[n].to_numpy().astype(np.float64) for n in names}
    if spec.expected is not None:
        expected = spec.expected(*(stored[n] for n in names))
        for n, e in zip(names, expected):
            assert_grad_close(grads[n], w * np.asarray(e, dtype=np.float64), f'd{name}/d{n}')
    else:
        # Elementwise kernel: perturbing all entries of one input at once gives all
        # N central differences from two launches.
        for n in names:
            fd = w * elementwise_fd(k, fields[n], y, spec.eps)
            assert_grad_close(grads[n], fd, f'd{name}/d{n}', rtol=spec.rtol)

    # Not vacuous: some operand receives a gradient.
    assert any(np.abs(g).max() > 0 for g in grads.values())
    if spec.zero_partial:
        # op(a) * b + a * c: a's gradient is exactly c * w (the op adds exactly nothing).
        assert np.array_equal(grads['a'], w * stored['c'])
