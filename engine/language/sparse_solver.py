"""Linear solvers for sparse matrices: `ti.linalg.SparseSolver` (direct: LLT, LDLT, LU) and
`ti.linalg.SparseCG` (conjugate gradients), on scipy.sparse.linalg.

Taichi's CPU solvers are Eigen's; these follow what they compute and report:
- LLT and LDLT read the lower triangle of the matrix (Eigen's default, `Lower`), so a
  matrix that is not symmetric is solved as the symmetric matrix of its lower triangle.
  Both factor it with SuperLU in symmetric mode, pivoting on the diagonal only; LLT
  fails (info() is False) unless every pivot is positive (the matrix is positive
  definite), LDLT when a pivot is zero, as Eigen's SimplicialLLT / SimplicialLDLT do.
- LU is SuperLU with partial pivoting; a singular matrix makes info() False.
- SparseCG is Jacobi-preconditioned CG whose `atol` is relative to |b|, as Eigen's
  ConjugateGradient (Taichi's CPU CG) takes its tolerance.
A failed factorization is a status, not an exception: solve() then gives NaNs.
"""
import numpy as np

from ..core import dtypes as T
from ..core.errors import TaichiRuntimeError
from .fields import Field, Ndarray
from .sparse_matrix import OnFirstUse, SparseMatrix, float_dtype, sp

spla = OnFirstUse('scipy.sparse.linalg')

SOLVER_TYPES = ('LLT', 'LDLT', 'LU')
ORDERINGS = {'AMD': 'MMD_AT_PLUS_A', 'COLAMD': 'COLAMD'}    # Taichi's names, SuperLU's orderings


def _lower_symmetric(matrix):
    """The symmetric matrix whose lower triangle is `matrix`'s."""
    return (sp.tril(matrix, format='csc') + sp.tril(matrix, k=-1, format='csc').T).tocsc()


def _superlu(matrix, **options):
    """SuperLU's factors of `matrix`, or None where it is exactly singular."""
    try:
        return spla.splu(matrix, **options)
    except RuntimeError:            # "Factor is exactly singular"
        return None


def _symmetric_factor(matrix, positive):
    """LDL^T through SuperLU with diagonal pivots: the factors, or None when a pivot is
    zero (or, for `positive` (LLT), not positive)."""
    lu = _superlu(_lower_symmetric(matrix), permc_spec='MMD_AT_PLUS_A', diag_pivot_thresh=0.0,
                  options={'SymmetricMode': True, 'Equil': False})
    if lu is None or not np.array_equal(lu.perm_r, lu.perm_c):     # pivoted off the diagonal
        return None
    pivots = lu.U.diagonal()
    if (positive and not (pivots > 0).all()) or not (pivots != 0).all():
        return None
    return lu


def factorize(matrix, solver_type, ordering):
    """A SuperLU object for `matrix` (a scipy sparse array), or None when the factorization fails."""
    if not np.isfinite(matrix.data).all():
        return None
    if solver_type == 'LU':
        return _superlu(matrix.tocsc(), permc_spec=ORDERINGS[ordering])
    return _symmetric_factor(matrix, positive=solver_type == 'LLT')


def host_vector(b, n, what):
    """A right-hand side (numpy array, field or ti.ndarray) as a numpy vector of length n."""
    if isinstance(b, (Field, Ndarray)):
        array = b.to_numpy()
    elif isinstance(b, np.ndarray):
        array = b
    else:
        raise TaichiRuntimeError(f'{what} must be a numpy array, a field or a ti.ndarray, got {type(b).__name__}')
    if array.shape != (n,):
        raise TaichiRuntimeError(f'{what} has shape {array.shape}; the system needs a vector of {n} entries')
    return array


class SparseSolver:
    """A direct solver: `analyze_pattern(A)`, `factorize(A)` (or `compute(A)`), then
    `x = solve(b)` as many times as needed; `info()` says whether it succeeded."""

    def __init__(self, dtype=T.f32, solver_type='LLT', ordering='AMD'):
        if solver_type not in SOLVER_TYPES or ordering not in ORDERINGS:
            raise TaichiRuntimeError(f'The solver type {solver_type} with {ordering} is not supported: the solver '
                                     f'types are {list(SOLVER_TYPES)} and the orderings {list(ORDERINGS)}')
        self.dtype = float_dtype(dtype, 'SparseSolver')
        self.solver_type, self.ordering = solver_type, ordering
        self._shape = self._factors = None
        self._success = False

    def _matrix_of(self, sparse_matrix, step):
        if not isinstance(sparse_matrix, SparseMatrix):
            raise TaichiRuntimeError(f'SparseSolver.{step} takes a SparseMatrix, got {type(sparse_matrix).__name__}')
        if sparse_matrix.n != sparse_matrix.m:
            raise TaichiRuntimeError(f'SparseSolver.{step}: the matrix must be square, got {sparse_matrix.shape}')
        return sparse_matrix._matrix.astype(self.dtype.np)

    def analyze_pattern(self, sparse_matrix):
        """Takes the matrix's shape (SuperLU chooses its ordering when it factorizes)."""
        self._shape = self._matrix_of(sparse_matrix, 'analyze_pattern').shape

    def factorize(self, sparse_matrix):
        self._factors = factorize(self._matrix_of(sparse_matrix, 'factorize'), self.solver_type, self.ordering)
        self._shape = sparse_matrix.shape
        self._success = self._factors is not None

    def compute(self, sparse_matrix):
        """analyze_pattern, then factorize."""
        self.analyze_pattern(sparse_matrix)
        self.factorize(sparse_matrix)

    def solve(self, b):
        """x with A x = b: a numpy array for a numpy array or a field, a ti.ndarray for a
        ti.ndarray (as Taichi returns them); NaNs when the factorization failed."""
        if self._shape is None:
            raise TaichiRuntimeError('SparseSolver.solve: call analyze_pattern(A) and factorize(A) (or '
                                     'compute(A)) first')
        rhs = host_vector(b, self._shape[0], 'SparseSolver.solve: b').astype(self.dtype.np)
        if self._factors is None:
            x = np.full(self._shape[1], np.nan, self.dtype.np)
        else:
            x = self._factors.solve(rhs).astype(self.dtype.np)
        self._success = self._factors is not None and bool(np.isfinite(x).all())
        if isinstance(b, Ndarray):
            out = Ndarray(b.dtype, (self._shape[1],))
            out.from_numpy(x)
            return out
        return x

    def info(self):
        """Whether the last factorization (and solve) succeeded."""
        return self._success


class SparseCG:
    """Conjugate gradients for a symmetric positive definite SparseMatrix: `solve()` gives
    (x, success). `atol` is relative to |b| (Eigen's tolerance, as Taichi's CPU CG)."""

    def __init__(self, A, b, x0=None, max_iter=50, atol=1e-6):
        if not isinstance(A, SparseMatrix):
            raise TaichiRuntimeError(f'SparseCG takes a SparseMatrix, got {type(A).__name__}')
        self.dtype = A.dtype
        self.matrix, self.b = A, host_vector(b, A.n, 'SparseCG: b')
        self.x0 = None if x0 is None else host_vector(x0, A.m, 'SparseCG: x0')
        self.max_iter, self.atol = int(max_iter), float(atol)

    def solve(self):
        matrix = self.matrix._matrix
        diagonal = matrix.diagonal()
        inverse = np.divide(1.0, diagonal, out=np.ones_like(diagonal), where=diagonal != 0)
        with np.errstate(all='ignore'):     # an indefinite matrix: NaN and False, as Taichi's, no warning
            x, status = spla.cg(matrix, self.b.astype(matrix.dtype), x0=self.x0, rtol=self.atol, atol=0.0,
                                maxiter=self.max_iter, M=sp.diags_array(inverse))
        return x.astype(matrix.dtype), status == 0


CG = SparseCG       # the name Taichi's releases before SparseCG gave it
