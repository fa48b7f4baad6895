"""Polar decomposition and SVD of 2x2 and 3x3 matrices (`ti.svd`, `ti.polar_decompose`).

Everything is straight-line code made of +, -, *, /, sqrt/rsqrt, abs, min/max
and select, so it runs on Python floats (Python scope) and on IR values
(kernels), and the engine's autodiff can differentiate it. Two rules follow:

* no Python branching on entries: conditions become `select`;
* both sides of a `select` are always evaluated (eagerly in Python, and by the
  adjoint pass, where 0 * inf = NaN), so a guarded branch must itself stay
  finite, with a finite derivative. Guards therefore clamp the *argument* of
  sqrt/rsqrt/division, never just the result.

Conventions (Taichi's): U and V are rotations (det +1); singular values are in
decreasing order and the last one carries the sign of det(A) when it is
negative, so A = U @ S @ V.transpose() always holds with rotations. Taichi's 2x2
SVD (through its polar decomposition) and its 3x3 one (McAdams et al.) both return
this; it keeps U @ V^T the rotation of A's polar decomposition and S's product det(A),
which corotated and MPM stress models rely on for inverted elements (a non-negative S
would turn U @ V^T into a reflection there).

`sym_eig` (2x2: closed form, 3x3: the Jacobi sweeps of the SVD) returns eigenvalues in
decreasing order, eigenvectors as the columns of a rotation, as Taichi's does.

Taichi's sparse matrices and their solvers are here too, as `ti.linalg` holds them
(sparse_matrix.py, sparse_solver.py).
"""
import math as _pymath
import warnings

from . import math as tm
from ..ir import ops
from ..core import dtypes as T
from ..core.errors import TaichiTypeError, missing_attribute, unknown_name
from .matrix import Matrix
from .frontend.triplets import SparseMatrixBuilderType
from . import sparse_matrix as _sparse_matrix, sparse_solver as _sparse_solver

# ti.linalg's sparse matrices and their solvers
SparseMatrix, SparseMatrixBuilder = _sparse_matrix.SparseMatrix, _sparse_matrix.SparseMatrixBuilder
SparseSolver, SparseCG, CG = _sparse_solver.SparseSolver, _sparse_solver.SparseCG, _sparse_solver.CG

# Guard thresholds per float width: (TINY, TINY2). Values below TINY count as
# zero where we divide by them, values below TINY2 where we take rsqrt; both
# keep the derivatives 1/x^2 and x^-1.5 finite in the type.
_GUARDS = {32: (1e-18, 1e-24), 64: (1e-150, 1e-200)}
# Jacobi sweeps of the 3x3 SVD (3 rotations each). The paper uses 4 for f32;
# with its approximate rotations that leaves ~1e-5 errors on some inputs, 5
# reach f32 rounding level everywhere we tried, f64 needs 7.
_SWEEPS = {32: 5, 64: 7}

# Approximate Givens rotations (McAdams et al. 2011): use the first-order
# half angle unless it exceeds pi/8, then rotate by exactly pi/4.
_GAMMA = 3.0 + 2.0 * _pymath.sqrt(2.0)          # cot(pi/8)^2
_COS_PI_8 = _pymath.cos(_pymath.pi / 8)
_SIN_PI_8 = _pymath.sin(_pymath.pi / 8)


class _Config:
    """Float type of the computation, its guards and sweep count."""

    def __init__(self, bits):
        self.tiny, self.tiny2 = _GUARDS[bits]
        self.sweeps = _SWEEPS[bits]


# ----------------------------------------------------------------------------
# Public API

def polar_decompose(A, dt=None):
    """(U, P) with A = U @ P, U a rotation and P symmetric."""
    A, cfg = _prepare(A, dt, 'polar_decompose')
    if A.n == 2:
        return _polar2(A, cfg)
    U, S, V = _svd3(A, cfg)
    return U @ V.transpose(), _sandwich(V, [S[i, i] for i in range(3)])


def svd(A, dt=None):
    """(U, S, V) with A = U @ S @ V.transpose(), U and V rotations, S diagonal."""
    A, cfg = _prepare(A, dt, 'svd')
    return _svd2(A, cfg) if A.n == 2 else _svd3(A, cfg)


def sym_eig(A, dt=None):
    """(eigenvalues, eigenvectors) of a symmetric 2x2 or 3x3 matrix: a vector of
    eigenvalues in decreasing order, and a rotation whose columns are their unit
    eigenvectors. A is read as (A + A^T) / 2, so its gradient comes out symmetric.
    Differentiable where the eigenvalues are distinct."""
    A, cfg = _prepare(A, dt, 'sym_eig')
    A = (A + A.transpose()) * 0.5
    if A.n == 2:
        l1, l2, W = _sym_eig2(A.entries, cfg)
        return Matrix._make((2,), [l1, l2]), W
    return _sym_eig3(A, cfg)


def eig(A, dt=None):
    """Eigenvalues and right eigenvectors of a real 2x2 matrix in complex form (Taichi's
    layout): a 2x2 matrix whose rows are the eigenvalues (real, imaginary), and a 4x2
    matrix whose columns are unit eigenvectors (re, im of the first entry, re, im of the
    second). Real eigenvalues come larger first; a complex pair, +imaginary first."""
    A, cfg = _prepare(A, dt, 'eig')
    if A.n != 2:
        raise TaichiTypeError(f'eig supports 2x2 matrices, got shape {A.shape}')
    a, b, c, d = A.entries
    mean, half = (a + d) * 0.5, (a - d) * 0.5
    disc = half * half + b * c                  # the eigenvalues are mean +- sqrt(disc)
    real = disc >= 0
    root = tm.sqrt(tm.abs(disc))
    re, im = tm.select(real, root, 0.0), tm.select(real, 0.0, root)
    values = Matrix._make((2, 2), [mean + re, im, mean - re, -im])
    # (A - l2 I)(A - l1 I) = 0: the columns of A - l2 I lie along l1's eigenvector
    v1 = _eigvector2(a, b, c, d, mean - re, -im, 0, cfg)
    v2 = _eigvector2(a, b, c, d, mean + re, im, 1, cfg)
    return values, Matrix._make((4, 2), [x for pair in zip(v1, v2) for x in pair])


def _eigvector2(a, b, c, d, xr, xi, fallback, cfg):
    """The larger column of A - (xr + i xi) I, normalized: [re0, im0, re1, im1]; the unit
    vector e_fallback where both vanish (A is a multiple of I)."""
    col0 = [a - xr, -xi, c, 0.0]
    col1 = [b, 0.0, d - xr, -xi]
    n0, n1 = _sum_of_squares(col0), _sum_of_squares(col1)
    first = n0 >= n1
    col = [tm.select(first, x, y) for x, y in zip(col0, col1)]
    norm = tm.max(n0, n1)
    ok = norm > cfg.tiny2
    inv = tm.rsqrt(tm.select(ok, norm, 1.0))
    unit = [1.0, 0.0, 0.0, 0.0] if fallback == 0 else [0.0, 0.0, 1.0, 0.0]
    return [tm.select(ok, x * inv, u) for x, u in zip(col, unit)]


def _sum_of_squares(xs):
    total = xs[0] * xs[0]
    for x in xs[1:]:
        total = total + x * x
    return total


def solve(A, b, dt=None):
    """x with A @ x = b, for a 2x2 or 3x3 A (through its inverse: differentiable)."""
    A, _ = _prepare(A, dt, 'solve')
    b = b if isinstance(b, Matrix) else Matrix(b)
    if b.shape != (A.n,):
        raise TaichiTypeError(f'solve: b must be a vector of {A.n} entries, got shape {b.shape}')
    return A.inverse() @ b


def _prepare(A, dt, what):
    """A as a float matrix of the working type, and the config for that type."""
    if not isinstance(A, Matrix):
        A = Matrix(A)
    if A.shape not in ((2, 2), (3, 3)):
        raise TaichiTypeError(f'{what} supports 2x2 and 3x3 matrices, got shape {A.shape}')
    dtype = T.resolve(dt) if dt is not None else _entry_float_type(A)
    if dtype is None:                   # plain Python numbers: double precision
        return A.map(float), _Config(64)
    if not dtype.is_float:
        raise TaichiTypeError(f'{what} needs a float dtype, got {dtype}')
    return A.cast(dtype), _Config(dtype.bits)


def _entry_float_type(A):
    for e in A.entries:
        if ops.is_value(e):
            return e.dtype if e.dtype.is_float else T.defaults.fp
    return None


# ----------------------------------------------------------------------------
# Scalar helpers

def _unit2(x, y, tiny):
    """(c, s, r): the unit vector along (x, y) and its length r.

    Scale-safe (no under/overflow of x*x + y*y); (1, 0, 0) for a zero vector.
    """
    m = tm.max(tm.abs(x), tm.abs(y))
    ok = m > tiny
    inv_m = 1.0 / tm.select(ok, m, 1.0)
    xs, ys = x * inv_m, y * inv_m
    # Whenever ok, xs^2 + ys^2 is in [1, 2]: the clamp only keeps the unused
    # branch (a zero vector) away from rsqrt(0).
    q = tm.max(xs * xs + ys * ys, 0.5)
    inv_n = tm.rsqrt(q)
    c = tm.select(ok, xs * inv_n, 1.0)
    s = tm.select(ok, ys * inv_n, 0.0)
    r = tm.select(ok, m * q * inv_n, 0.0)
    return c, s, r


def _rotate_pair(u, v, c, s):
    """(c*u + s*v, c*v - s*u): a plane rotation of two rows or columns."""
    return c * u + s * v, c * v - s * u


def _sandwich(V, d):
    """V @ diag(d) @ V^T, built exactly symmetric."""
    n = V.n
    out = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            terms = [V[i, k] * d[k] * V[j, k] for k in range(n)]
            total = terms[0]
            for t in terms[1:]:
                total = total + t
            out[i][j] = out[j][i] = total
    return Matrix._make((n, n), [x for row in out for x in row])


# ----------------------------------------------------------------------------
# 2x2: closed forms

def _polar2(A, cfg):
    """Taichi's closed form: U is the rotation by the angle of
    (a00 + a11, a10 - a01), which makes U^T A symmetric."""
    a, b, c, d = A.entries
    co, si, _ = _unit2(a + d, c - b, cfg.tiny)
    U = Matrix._make((2, 2), [co, -si, si, co])
    return U, U.transpose() @ A


def _svd2(A, cfg):
    """A = R P (polar), then P = W diag(l1, l2) W^T (symmetric eigen): U = R W.

    trace(P) = |(a00 + a11, a10 - a01)| >= 0 and det(P) = det(A), so
    l1 = mean + r >= |l2|, and l2 < 0 exactly when det(A) < 0.
    """
    R, P = _polar2(A, cfg)
    l1, l2, W = _sym_eig2(P.entries, cfg)
    S = Matrix._make((2, 2), [l1, 0.0, 0.0, l2])
    return R @ W, S, W


def _sym_eig2(entries, cfg):
    """(l1 >= l2, W): P = W diag(l1, l2) W^T for a symmetric 2x2 P, W a rotation."""
    p00, p01, p10, p11 = entries
    mean = (p00 + p11) * 0.5
    # (cos 2t, sin 2t) of the eigenvector angle t, and the half spread r.
    c2, s2, r = _unit2((p00 - p11) * 0.5, (p01 + p10) * 0.5, cfg.tiny)
    # Half angle: (1 + c2, s2) and (s2, 1 - c2) are both parallel to
    # (cos t, sin t); take the one without cancellation. Its norm is >= 1.
    pos = c2 >= 0
    vx = tm.select(pos, 1.0 + c2, s2)
    vy = tm.select(pos, s2, 1.0 - c2)
    inv = tm.rsqrt(vx * vx + vy * vy)
    c, s = vx * inv, vy * inv
    return mean + r, mean - r, Matrix._make((2, 2), [c, -s, s, c])


def _sym_eig3(A, cfg):
    """Jacobi sweeps on A itself (as `_svd3` does on A^T A), then the eigenvalues sorted
    in decreasing order with V's columns (a swap negates one: V stays a rotation)."""
    A, scale = _normalized(A, cfg)
    S = [[A[i, j] for j in range(3)] for i in range(3)]
    q = [1.0, 0.0, 0.0, 0.0]
    for _ in range(cfg.sweeps):
        for p, r, k in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
            _jacobi_rotation(S, q, p, r, k, cfg)
    V = _quat_to_rows(q)
    w = [S[i][i] for i in range(3)]
    for i, j in ((0, 1), (1, 2), (0, 1)):
        swap = w[i] < w[j]
        w[i], w[j] = tm.select(swap, w[j], w[i]), tm.select(swap, w[i], w[j])
        for row in V:
            row[i], row[j] = tm.select(swap, row[j], row[i]), tm.select(swap, -row[i], row[j])
    return Matrix._make((3,), [x * scale for x in w]), _rows_matrix(V)


# ----------------------------------------------------------------------------
# 3x3: McAdams, Selle, Tamstorf, Teran, Sifakis (2011)

def _svd3(A, cfg):
    """Jacobi eigenvectors V of A^T A; the largest column of B = A V first;
    Givens rotations clear B's first column (B = U R); a closed-form 2x2 SVD
    of R's trailing block finishes the two smaller singular values.

    That last step replaces the paper's third Givens rotation and column
    sort: A^T A resolves singular values only down to ~sqrt(eps) * s1, so
    the paper's diag(R) loses the smaller ones below that; the 2x2 SVD of
    the block works on A's own scale.
    """
    A, scale = _normalized(A, cfg)
    S = [[None] * 3 for _ in range(3)]                                      # A^T A
    for i in range(3):
        for j in range(i, 3):
            S[i][j] = S[j][i] = _column_dot(A, A, i, j)
    q = [1.0, 0.0, 0.0, 0.0]
    for _ in range(cfg.sweeps):
        for p, r, k in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
            _jacobi_rotation(S, q, p, r, k, cfg)
    V = _quat_to_rows(q)
    B = [[A[i, 0] * V[0][j] + A[i, 1] * V[1][j] + A[i, 2] * V[2][j]
          for j in range(3)] for i in range(3)]                             # A V
    _largest_column_first(B, V)
    U = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    for r in (1, 2):
        _givens_qr_step(B, U, 0, r, cfg)
    # B = [[s1, ~0, ~0], [0, block], [0, block]]: r01, r02 are rounding-level
    # once the Jacobi converged, since the first column is A's top singular one.
    block = Matrix._make((2, 2), [B[1][1], B[1][2], B[2][1], B[2][2]])
    U2, S2, V2 = _svd2(block, cfg)
    U, V = _rotate_last_two_columns(U, U2), _rotate_last_two_columns(V, V2)
    sigma = [B[0][0] * scale, S2[0, 0] * scale, S2[1, 1] * scale]
    S = Matrix._make((3, 3), [sigma[i] if i == j else 0.0 for i in range(3) for j in range(3)])
    return _rows_matrix(U), S, _rows_matrix(V)


def _column_dot(A, B, i, j):
    """(A^T B)[i, j] of 3x3 matrices."""
    return A[0, i] * B[0, j] + A[1, i] * B[1, j] + A[2, i] * B[2, j]


def _normalized(A, cfg):
    """A / max|a_ij| and that scale (1 for a zero matrix).

    Makes every later threshold relative, and keeps A^T A from under- or
    overflowing in f32.
    """
    m = tm.max(*[tm.abs(e) for e in A.entries])
    scale = tm.select(m > cfg.tiny, m, 1.0)
    inv = 1.0 / scale
    return A.map(lambda e: e * inv), scale


def _jacobi_rotation(S, q, p, r, k, cfg):
    """Conjugate the symmetric S by an approximate Givens rotation in the
    (p, r) plane (about axis k), and append that rotation to quaternion q."""
    a, d, b = S[p][p], S[r][r], S[p][r]
    # Half angle to first order: tan(t/2) ~ b / (2 (a - d)). Outside its
    # range (and for a ~ d, b ~ 0) rotate by pi/4 instead, as the paper does.
    ch, sh = 2.0 * (a - d), b
    use = _GAMMA * sh * sh + cfg.tiny2 < ch * ch
    w = tm.rsqrt(tm.max(ch * ch + sh * sh, cfg.tiny2))
    ch = tm.select(use, w * ch, _COS_PI_8)
    sh = tm.select(use, w * sh, _SIN_PI_8)
    c, s = ch * ch - sh * sh, 2.0 * ch * sh          # the full angle
    cc, ss, cs = c * c, s * s, c * s
    S[p][p] = cc * a + 2.0 * cs * b + ss * d
    S[r][r] = ss * a - 2.0 * cs * b + cc * d
    S[p][r] = S[r][p] = (cc - ss) * b + cs * (d - a)
    S[p][k], S[r][k] = _rotate_pair(S[p][k], S[r][k], c, s)
    S[k][p], S[k][r] = S[p][k], S[r][k]
    _quat_mul_axis(q, ch, sh, k)


def _quat_mul_axis(q, ch, sh, k):
    """q <- q * (ch + sh e_k), in place. q = [w, x, y, z]."""
    i, j = (k + 1) % 3, (k + 2) % 3
    w, v = q[0], q[1:]
    q[0] = ch * w - sh * v[k]
    q[1 + k] = ch * v[k] + sh * w
    q[1 + i] = ch * v[i] + sh * v[j]
    q[1 + j] = ch * v[j] - sh * v[i]


def _quat_to_rows(q):
    """Rotation matrix (list of rows) of a quaternion, normalizing it."""
    w, x, y, z = q
    # |q| stays ~1; the clamp proves the division finite (engine/autodiff/finite.py: no NaN guards)
    two = 2.0 / tm.max(w * w + x * x + y * y + z * z, 0.25)
    return [[1.0 - two * (y * y + z * z), two * (x * y - w * z), two * (x * z + w * y)],
            [two * (x * y + w * z), 1.0 - two * (x * x + z * z), two * (y * z - w * x)],
            [two * (x * z - w * y), two * (y * z + w * x), 1.0 - two * (x * x + y * y)]]


def _largest_column_first(B, V):
    """Swap the largest column of B = A V (by norm) into column 0, moving V's
    columns alike. A swap negates one column so that det(V) stays +1."""
    norms = [B[0][j] * B[0][j] + B[1][j] * B[1][j] + B[2][j] * B[2][j] for j in range(3)]
    for j in (1, 2):
        swap = norms[0] < norms[j]
        for M in (B, V):
            for row in M:
                row[0], row[j] = tm.select(swap, row[j], row[0]), tm.select(swap, -row[0], row[j])
        if j == 1:
            norms[0] = tm.max(norms[0], norms[1])


def _givens_qr_step(B, U, p, r, cfg):
    """Zero B[r][p] by rotating rows p, r of B; U absorbs the inverse rotation
    (columns p, r), so U @ B is unchanged. B[p][p] becomes its norm >= 0."""
    c, s, rho = _unit2(B[p][p], B[r][p], cfg.tiny)
    B[p][p], B[r][p] = rho, 0.0
    for col in range(p + 1, 3):
        B[p][col], B[r][col] = _rotate_pair(B[p][col], B[r][col], c, s)
    for row in U:
        row[p], row[r] = _rotate_pair(row[p], row[r], c, s)


def _rotate_last_two_columns(M, R):
    """M @ diag(1, R) for a 3x3 M (list of rows) and a 2x2 Matrix R."""
    return [[row[0],
             row[1] * R[0, 0] + row[2] * R[1, 0],
             row[1] * R[0, 1] + row[2] * R[1, 1]] for row in M]


def _rows_matrix(rows):
    return Matrix._make((len(rows), len(rows[0])), [x for row in rows for x in row])


class sparse_matrix_builder(SparseMatrixBuilderType):
    """Taichi's older name of `ti.types.sparse_matrix_builder()`, deprecated there too."""

    def __init__(self):
        warnings.warn('ti.linalg.sparse_matrix_builder is deprecated: use ti.types.sparse_matrix_builder',
                      DeprecationWarning, stacklevel=2)


# Taichi's names that ti.linalg lacks, and what they are (docs/taichi_programs.md lists them)
MISSING = dict.fromkeys(['MatrixFreeCG', 'LinearOperator'], 'matrix-free conjugate gradients on fields '
                                                            '(ti.linalg.MatrixFreeCG, LinearOperator)')


def __getattr__(name):
    """A name ti.linalg lacks (one of Taichi's, or a typo): the engine's message, not Python's."""
    if name in MISSING:
        raise unknown_name('ti.linalg', name, (), what=MISSING[name])
    raise missing_attribute('ti.linalg', name, globals())

