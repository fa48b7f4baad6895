"""engine.linalg: svd and polar_decompose of 2x2 / 3x3 matrices.

Most tests run in Python scope (Matrix of Python floats). A second group traces
the same code into IR (no kernel, no JIT) and evaluates the statements with
numpy, in f64 and in emulated f32, including a reverse-mode pass that mimics
the engine's adjoints: this checks that the code is branch-free, uses only
differentiable ops, and never produces inf/NaN derivatives at edge cases.
"""
import numpy as np
import pytest

from engine.language import linalg
from engine.ir import ops
from engine.core import dtypes as T
from engine.core.errors import TaichiTypeError
from engine.ir.nodes import Builder, building
from engine.language.matrix import Matrix


def _rot3(axis, angle):
    c, s = np.cos(angle), np.sin(angle)
    i, j = (axis + 1) % 3, (axis + 2) % 3
    R = np.eye(3)
    R[i, i], R[i, j], R[j, i], R[j, j] = c, -s, s, c
    return R


def _random_rotation(rng, n):
    Q, R = np.linalg.qr(rng.standard_normal((n, n)))
    Q = Q * np.sign(np.diag(R))
    if np.linalg.det(Q) < 0:
        Q[:, 0] = -Q[:, 0]
    return Q


EDGE_2 = {
    'zero': np.zeros((2, 2)),
    'identity': np.eye(2),
    'minus_identity': -np.eye(2),
    'repeated': np.diag([3.0, 3.0]),
    'reflection': np.diag([1.0, -1.0]),
    'reflection_swap': np.array([[0.0, 1.0], [1.0, 0.0]]),
    'rotation': np.array([[np.cos(0.3), -np.sin(0.3)], [np.sin(0.3), np.cos(0.3)]]),
    'negative_diag': np.diag([-2.0, 1.0]),
    'rank1': np.array([[1.0, 2.0], [2.0, 4.0]]),
    'near_singular': np.array([[1.0, 2.0], [1.0, 2.0 + 1e-9]]),
    'one_entry': np.array([[0.0, 0.0], [0.0, 5.0]]),
    'shear': np.array([[1.0, 1e3], [0.0, 1.0]]),
    'tiny_scale': 1e-12 * np.array([[1.0, 2.0], [3.0, 4.0]]),
    'huge_scale': 1e12 * np.array([[1.0, 2.0], [3.0, 4.0]]),
}

EDGE_3 = {
    'zero': np.zeros((3, 3)),
    'identity': np.eye(3),
    'minus_identity': -np.eye(3),
    'repeated_2': np.diag([2.0, 2.0, 1.0]),
    'repeated_2_low': np.diag([1.0, 3.0, 3.0]),
    'repeated_3': np.diag([3.0, 3.0, 3.0]),
    'reflection': np.diag([1.0, 1.0, -1.0]),
    'reflection_rotated': _rot3(0, 0.4) @ np.diag([1.0, -1.0, 1.0]) @ _rot3(2, 1.1),
    'negative_diag': np.diag([-1.0, 2.0, -3.0]),
    'rotation': _rot3(2, 0.7) @ _rot3(0, -1.2) @ _rot3(1, 2.5),
    'rotation_90': np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]),
    'permutation': np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]),
    'rank1': np.outer([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]),
    'rank2': np.arange(1.0, 10.0).reshape(3, 3),
    'near_singular': _rot3(1, 0.3) @ np.diag([1.0, 1e-4, 1e-10]) @ _rot3(0, 0.9),
    'diag_with_zero': np.diag([1.0, 0.0, 2.0]),
    'one_entry': np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 7.0], [0.0, 0.0, 0.0]]),
    'shear': np.array([[1.0, 50.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
    'clustered': _rot3(0, 0.5) @ np.diag([1.0, 1.0 + 1e-7, 1.0 - 1e-7]) @ _rot3(2, 0.2),
    'tiny_scale': 1e-20 * np.arange(1.0, 10.0).reshape(3, 3) + 1e-20 * np.eye(3),
    'huge_scale': 1e20 * (np.arange(1.0, 10.0).reshape(3, 3) + np.eye(3)),
}


def _random_matrices(n, count, seed):
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        kind = k % 4
        if kind == 0:
            A = rng.standard_normal((n, n))
        elif kind == 1:              # deformation gradients near a rotation
            A = _random_rotation(rng, n) @ (np.eye(n) + 0.1 * rng.standard_normal((n, n)))
        elif kind == 2:              # prescribed spread of singular values, any det sign
            s = 10.0 ** rng.uniform(-6, 0, n) * rng.choice([-1.0, 1.0], n)
            A = _random_rotation(rng, n) @ np.diag(s) @ _random_rotation(rng, n)
        else:                        # wide range of scales
            A = rng.standard_normal((n, n)) * 10.0 ** rng.uniform(-8, 8)
        out.append(A)
    return out


def _np(M):
    return np.array(M.entries, dtype=float).reshape(M.shape)


def _check_rotation(R, tol):
    n = R.shape[0]
    assert np.abs(R.T @ R - np.eye(n)).max() < tol
    assert abs(np.linalg.det(R) - 1.0) < tol


def _check_svd(A, tol):
    U, S, V = (_np(M) for M in linalg.svd(Matrix(A)))
    assert np.isfinite(U).all() and np.isfinite(S).all() and np.isfinite(V).all()
    scale = max(np.abs(A).max(), 1e-300)
    assert np.abs(U @ S @ V.T - A).max() <= tol * scale
    _check_rotation(U, 1e-13)
    _check_rotation(V, 1e-13)
    s = np.diag(S)
    assert np.all(S - np.diag(s) == 0), 'S must be exactly diagonal'
    # Taichi's convention: decreasing |s|, only the last one may be negative,
    # and it is negative when det(A) is (clearly) negative.
    assert np.all(s[:-1] >= 0)
    assert np.all(np.abs(s[:-1]) >= np.abs(s[1:]) - tol * scale)
    reference = np.linalg.svd(A, compute_uv=False)
    assert np.abs(np.abs(s) - reference).max() <= tol * scale
    if reference[-1] > 1e-8 * reference[0]:        # det's sign is meaningful
        assert (s[-1] < 0) == (np.linalg.det(A) < 0)


def _check_polar(A, tol):
    U, P = (_np(M) for M in linalg.polar_decompose(Matrix(A)))
    assert np.isfinite(U).all() and np.isfinite(P).all()
    scale = max(np.abs(A).max(), 1e-300)
    assert np.abs(U @ P - A).max() <= tol * scale
    assert np.abs(P - P.T).max() <= tol * scale
    _check_rotation(U, 1e-13)


# ----------------------------------------------------------------------------
# Python scope

@pytest.mark.parametrize('n', [2, 3])
def test_random_matrices(n):
    # Both reach ~1e-15 (3D: 7 Jacobi sweeps in double precision).
    for A in _random_matrices(n, 400, seed=n):
        _check_svd(A, 1e-13)
        _check_polar(A, 1e-13)


@pytest.mark.parametrize('name', sorted(EDGE_2))
def test_edge_cases_2d(name):
    _check_svd(EDGE_2[name], 1e-13)
    _check_polar(EDGE_2[name], 1e-13)


@pytest.mark.parametrize('name', sorted(EDGE_3))
def test_edge_cases_3d(name):
    _check_svd(EDGE_3[name], 1e-13)
    _check_polar(EDGE_3[name], 1e-13)


@pytest.mark.parametrize('A', [np.zeros((2, 2)), np.zeros((3, 3))])
def test_zero_matrix_is_exact(A):
    # V is some rotation (the 3D Jacobi turns by pi/4 when it cannot tell),
    # but nothing may be NaN and S, P must be exactly zero.
    U, S, V = (_np(M) for M in linalg.svd(Matrix(A)))
    assert np.all(S == 0)
    _check_rotation(U, 1e-14)
    _check_rotation(V, 1e-14)
    R, P = (_np(M) for M in linalg.polar_decompose(Matrix(A)))
    assert np.all(P == 0)
    _check_rotation(R, 1e-14)


def test_sign_convention_reflection():
    _, S, _ = linalg.svd(Matrix(np.diag([3.0, -1.0, 2.0])))
    assert np.allclose(np.diag(_np(S)), [3.0, 2.0, -1.0])
    _, S, _ = linalg.svd(Matrix([[0.0, 2.0], [1.0, 0.0]]))
    assert np.allclose(np.diag(_np(S)), [2.0, -1.0])


def test_polar_of_rotation_times_spd():
    rng = np.random.default_rng(7)
    for n in (2, 3):
        R = _random_rotation(rng, n)
        M = rng.standard_normal((n, n))
        P = M @ M.T + n * np.eye(n)
        U2, P2 = (_np(X) for X in linalg.polar_decompose(Matrix(R @ P)))
        assert np.allclose(U2, R, atol=1e-12) and np.allclose(P2, P, atol=1e-12)


def test_integer_and_list_inputs():
    U, S, V = linalg.svd(Matrix([[2, 0], [0, 1]]))
    assert _np(S).tolist() == [[2.0, 0.0], [0.0, 1.0]]
    U, P = linalg.polar_decompose([[1, 2, 0], [0, 1, 0], [0, 0, 3]])
    assert np.allclose(_np(U) @ _np(P), [[1, 2, 0], [0, 1, 0], [0, 0, 3]])


def test_f32_dtype_in_python_scope_uses_fewer_sweeps():
    A = np.random.default_rng(3).standard_normal((3, 3))
    U, S, V = (_np(M) for M in linalg.svd(Matrix(A), dt=T.f32))
    assert np.abs(U @ S @ V.T - A).max() < 1e-4 * np.abs(A).max()


@pytest.mark.parametrize('shape', [(1, 1), (4, 4), (2, 3), (3,)])
def test_bad_shapes(shape):
    with pytest.raises(TaichiTypeError):
        linalg.svd(Matrix(np.ones(shape)))
    with pytest.raises(TaichiTypeError):
        linalg.polar_decompose(Matrix(np.ones(shape)))


# ----------------------------------------------------------------------------
# Traced into IR, evaluated with numpy

_ALLOWED = {'const', 'add', 'sub', 'mul', 'truediv', 'neg', 'abs', 'sqrt', 'rsqrt',
            'max', 'min', 'select', 'cast', 'lt', 'le', 'gt', 'ge'}


def _forward(op, a, out_t):
    if op == 'rsqrt':
        return out_t(1) / out_t(np.sqrt(a[0]))          # two roundings, as lowered
    return {'add': lambda: a[0] + a[1], 'sub': lambda: a[0] - a[1],
            'mul': lambda: a[0] * a[1], 'truediv': lambda: a[0] / a[1],
            'neg': lambda: -a[0], 'abs': lambda: abs(a[0]), 'sqrt': lambda: np.sqrt(a[0]),
            'min': lambda: a[0] if a[0] < a[1] else a[1],
            'max': lambda: a[1] if a[0] < a[1] else a[0],
            'lt': lambda: a[0] < a[1], 'le': lambda: a[0] <= a[1],
            'gt': lambda: a[0] > a[1], 'ge': lambda: a[0] >= a[1],
            'select': lambda: a[1] if a[0] else a[2], 'cast': lambda: a[0]}[op]()


def _partials(op, a, out):
    """The engine's derivative rules (engine/ir/ops.py), evaluated numerically."""
    if op in ('min', 'max'):
        first = (a[0] < a[1]) == (op == 'min')
        return float(first), float(not first)
    rules = {'add': lambda: (1, 1), 'sub': lambda: (1, -1), 'mul': lambda: (a[1], a[0]),
             'truediv': lambda: (1 / a[1], -out / a[1]), 'neg': lambda: (-1,),
             'abs': lambda: (np.sign(a[0]),), 'sqrt': lambda: (0.5 / out,),
             'rsqrt': lambda: (-0.5 * out / a[0],), 'cast': lambda: (1,),
             'select': lambda: (0, float(bool(a[0])), float(not a[0]))}
    return rules[op]() if op in rules else None


class _Traced:
    """svd / polar_decompose traced once on IR inputs, evaluable many times."""

    def __init__(self, fn, n, dtype):
        self.dtype = dtype
        builder = Builder()
        with building(builder):
            self.inputs = [ops.const(0.0, dtype) for _ in range(n * n)]
            outs = fn(Matrix._make((n, n), self.inputs))
        self.shapes = [M.shape for M in outs]
        self.outputs = [e for M in outs for e in M.entries]
        self.stmts = list(builder.root.stmts)
        assert all(s.op in _ALLOWED for s in self.stmts), {s.op for s in self.stmts} - _ALLOWED

    def run(self, A, weights=None):
        """Outputs (as numpy matrices) and, given weights, d(weights . outputs)/dA."""
        values = {}
        given = dict(zip(self.inputs, np.asarray(A, dtype=float).ravel()))
        with np.errstate(all='ignore'):
            for s in self.stmts:
                t = s.dtype.np.type
                if s.op == 'const':
                    values[s] = t(given.get(s, s.attrs['value']))
                else:
                    values[s] = t(_forward(s.op, [values[x] for x in s.args], t))
            outs, k = [], 0
            for shape in self.shapes:
                size = int(np.prod(shape))
                outs.append(np.array([values[e] if ops.is_value(e) else e   # literal 0.0
                                      for e in self.outputs[k:k + size]],
                                     dtype=float).reshape(shape))
                k += size
            if weights is None:
                return outs, None
            return outs, self._gradient(values, weights)

    def _gradient(self, values, weights):
        t = self.dtype.np.type
        adj = {s: t(0) for s in self.stmts}
        for e, w in zip(self.outputs, weights):
            if ops.is_value(e):
                adj[e] += t(w)
        for s in reversed(self.stmts):
            partials = _partials(s.op, [values[x] for x in s.args], values[s])
            if partials is None:
                continue
            for x, p in zip(s.args, partials):
                if x.dtype.is_float:           # 0 * inf = NaN on purpose, like the engine
                    adj[x] = t(adj[x] + adj[s] * t(p))
        return np.array([adj[x] for x in self.inputs], dtype=float)


_TRACED = {}


def _traced(which, n, dtype):
    key = (which, n, dtype.name)
    if key not in _TRACED:
        _TRACED[key] = _Traced(getattr(linalg, which), n, dtype)
    return _TRACED[key]


@pytest.mark.parametrize('n', [2, 3])
def test_traced_f64_matches_python(n):
    tr = _traced('svd', n, T.f64)
    for A in _random_matrices(n, 12, seed=10 + n) + list((EDGE_2 if n == 2 else EDGE_3).values()):
        outs, _ = tr.run(A)
        ref = [_np(M) for M in linalg.svd(Matrix(A))]
        for got, want in zip(outs, ref):
            assert np.array_equal(got, want)


@pytest.mark.parametrize('n', [2, 3])
def test_traced_f32_accuracy(n):
    # Emulated f32 arithmetic (every op rounded to float32); 3D uses 5 sweeps.
    tr = _traced('svd', n, T.f32)
    worst = 0.0
    edges = [A for k, A in (EDGE_2 if n == 2 else EDGE_3).items() if k != 'tiny_scale']
    for A in _random_matrices(n, 200, seed=20 + n) + edges:
        A32 = A.astype(np.float32).astype(float)
        (U, S, V), _ = tr.run(A32)
        assert np.isfinite(U).all() and np.isfinite(S).all() and np.isfinite(V).all()
        scale = max(np.abs(A32).max(), 1e-30)
        worst = max(worst, np.abs(U @ S @ V.T - A32).max() / scale)
        _check_rotation(U, 1e-5)
        _check_rotation(V, 1e-5)
    assert worst < 3e-6          # f32 rounding level (~1e-7 typical, ~8e-7 worst seen)


def _loss_weights(n, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(3 * n * n)


@pytest.mark.parametrize('which', ['svd', 'polar_decompose'])
@pytest.mark.parametrize('n', [2, 3])
@pytest.mark.parametrize('dtype', [T.f32, T.f64])
def test_gradients_finite_at_edge_cases(which, n, dtype):
    tr = _traced(which, n, dtype)
    w = _loss_weights(n, 0)[:sum(int(np.prod(s)) for s in tr.shapes)]
    for name, A in (EDGE_2 if n == 2 else EDGE_3).items():
        if dtype is T.f32 and name in ('tiny_scale', 'huge_scale'):
            continue                           # out of f32's range by design
        _, grad = tr.run(A, w)
        assert np.isfinite(grad).all(), name


@pytest.mark.parametrize('which', ['svd', 'polar_decompose'])
@pytest.mark.parametrize('n', [2, 3])
def test_gradients_match_finite_differences(which, n):
    tr = _traced(which, n, T.f64)
    w = _loss_weights(n, 1)[:sum(int(np.prod(s)) for s in tr.shapes)]
    loss = lambda A: sum(float(np.dot(wk, o.ravel())) for wk, o in  # noqa: E731
                         zip(np.split(w, np.cumsum([int(np.prod(s)) for s in tr.shapes])[:-1]),
                             (_np(M) for M in getattr(linalg, which)(Matrix(A)))))
    rng = np.random.default_rng(5)
    for _ in range(5):
        # Well separated singular values, so that U, V are smooth functions.
        s = np.array([3.0, 2.0, 1.0][:n]) * rng.choice([-1.0, 1.0])
        A = _random_rotation(rng, n) @ np.diag(s) @ _random_rotation(rng, n)
        _, grad = tr.run(A, w)
        h = 1e-6
        numeric = np.array([(loss(A + h * E) - loss(A - h * E)) / (2 * h)
                            for E in np.eye(n * n).reshape(n * n, n, n)])
        assert np.allclose(grad, numeric, rtol=1e-5, atol=1e-6)
