"""Sparse matrices: `ti.linalg.SparseMatrixBuilder` and `ti.linalg.SparseMatrix`, stored as
scipy.sparse arrays (a well-kept sparse library rather than formats written by hand).

A builder owns four fields: the rows, columns and values of up to `max_num_triplets`
triplets, and how many kernels added. In a kernel, `A[i, j] += v` (frontend/triplets.py)
takes the next slot with an atomic add on the count and writes the triplet there only
when the slot is below the capacity. An atomic whose result is used runs its loop
serially and in order (backend/cpu/ordering.py), so a matrix built in a parallel loop is
the same on any number of threads. Too many triplets are an error after the launch
(runtime/kernels.py) and at build(). `build()` sums duplicates, as Eigen's
setFromTriplets does for Taichi, and empties the builder for the next assembly.
"""
import importlib
import numbers
import warnings

import numpy as np

from ..core import dtypes as T
from ..core.errors import TaichiIndexError, TaichiRuntimeError, TaichiTypeError
from .fields import Field, Ndarray
from .naming import guess_name



class OnFirstUse:
    """A module imported when first used: scipy takes a third of a second to import, which
    only programs with sparse matrices should pay."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        return getattr(importlib.import_module(self._name), attr)


sp, scipy_io = OnFirstUse('scipy.sparse'), OnFirstUse('scipy.io')
FORMATS = {'col_major': 'csc', 'row_major': 'csr'}     # Taichi's storage formats, scipy's names


def float_dtype(dtype, what):
    """ti.f32 or ti.f64: the types of Taichi's sparse matrices on the CPU."""
    resolved = T.resolve(dtype)
    if resolved not in (T.f32, T.f64):
        raise TaichiTypeError(f'{what}: dtype must be ti.f32 or ti.f64, got {dtype!r}')
    return resolved


def _storage_kind(storage_format, what):
    if storage_format not in FORMATS:
        raise TaichiRuntimeError(f"{what}: storage_format must be 'col_major' or 'row_major', "
                                 f'got {storage_format!r}')
    return FORMATS[storage_format]


def _extent(value, what, low=1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise TaichiRuntimeError(f'{what} must be an integer of at least {low}, got {value!r}')
    return int(value)


class SparseMatrixBuilder:
    """Collects (row, column, value) triplets that kernels add with `A[i, j] += v` (or
    `-= v`) into an argument annotated `ti.types.sparse_matrix_builder()`."""

    def __init__(self, num_rows=None, num_cols=None, max_num_triplets=0, dtype=T.f32,
                 storage_format='col_major'):
        self.num_rows = _extent(num_rows, 'SparseMatrixBuilder: num_rows')
        self.num_cols = _extent(num_cols, 'SparseMatrixBuilder: num_cols') if num_cols else self.num_rows
        self.max_num_triplets = _extent(max_num_triplets, 'SparseMatrixBuilder: max_num_triplets', low=0)
        self.dtype = float_dtype(dtype, 'SparseMatrixBuilder')
        self.storage_format = storage_format
        _storage_kind(storage_format, 'SparseMatrixBuilder')
        self.name = guess_name()
        slots = max(1, self.max_num_triplets)       # a field has at least one element
        self.rows = Field(T.i32, (), (slots,), f'{self.name}.rows')
        self.cols = Field(T.i32, (), (slots,), f'{self.name}.cols')
        self.values = Field(self.dtype, (), (slots,), f'{self.name}.values')
        self.count = Field(T.i32, (), (), f'{self.name}.count')
        self._checked = 0       # how many of the triplets check_triplets() found good

    def __repr__(self):
        return (f'<SparseMatrixBuilder {self.name}: {self.num_rows} x {self.num_cols}, '
                f'max_num_triplets={self.max_num_triplets}, {self.dtype}>')

    def _added(self):
        """How many triplets kernels added since the last build, those past the capacity too."""
        return int(self.count.data)

    def check_triplets(self, kernel_name=None):
        """An error when kernels added more triplets than the builder holds, or one outside
        the matrix (runtime/kernels.py calls it after each launch that is passed the builder;
        the triplets checked before are not checked again)."""
        added = self._added()
        by = f' by kernel {kernel_name}' if kernel_name else ''
        if added > self.max_num_triplets:
            last = f' (the last{by})' if by else ''
            raise TaichiRuntimeError(
                f'SparseMatrixBuilder {self.name} was given {added} triplets{last}, more than its '
                f'max_num_triplets={self.max_num_triplets}: the last {added - self.max_num_triplets} were '
                f'not stored; create it with max_num_triplets={added} or more')
        rows, cols, _ = self._triplets(self._checked)
        outside = (rows < 0) | (rows >= self.num_rows) | (cols < 0) | (cols >= self.num_cols)
        if outside.any():
            k = int(np.argmax(outside))
            raise TaichiIndexError(f'SparseMatrixBuilder {self.name} was given the triplet ({rows[k]}, {cols[k]})'
                                   f'{by}, outside its {self.num_rows} x {self.num_cols} matrix')
        self._checked = added

    def _triplets(self, start=0):
        """The stored triplets from `start` on, in the order the kernels added them: views of
        the rows, columns and values."""
        n = min(self._added(), self.max_num_triplets)
        return tuple(field.data[start:n] for field in (self.rows, self.cols, self.values))

    def print_triplets(self):
        """Prints the shape, the number of triplets and each triplet, as Taichi's does."""
        rows, cols, values = self._triplets()
        print(f'n={self.num_rows}, m={self.num_cols}, num_triplets={len(rows)} (max={self.max_num_triplets})')
        for i, j, v in zip(rows, cols, values):
            print(f'({i}, {j}) val={v}')
        print()

    def build(self, dtype=None, _format='CSR'):
        """The matrix of the triplets added since the last build (duplicates summed); the
        builder is then empty. `dtype` and `_format` are Taichi's and change nothing: the
        builder's dtype and storage format apply."""
        try:
            self.check_triplets()
            rows, cols, values = self._triplets()
        finally:
            self.count[None] = self._checked = 0
        coo = sp.coo_array((values.copy(), (rows.copy(), cols.copy())), shape=(self.num_rows, self.num_cols))
        return SparseMatrix(sm=coo.asformat(FORMATS[self.storage_format]))


class SparseMatrix:
    """An n x m sparse matrix of f32 or f64: built by a SparseMatrixBuilder, or empty
    (`SparseMatrix(n, m, dtype)`) and filled with build_from_ndarray() or `A[i, j] = v`."""
    __array_ufunc__ = None          # `2.0 * A` with a numpy scalar comes to __rmul__

    def __init__(self, n=None, m=None, sm=None, dtype=T.f32, storage_format='col_major'):
        if sm is None:
            n = _extent(n, 'SparseMatrix: n')
            m = _extent(m, 'SparseMatrix: m') if m else n
            kind = _storage_kind(storage_format, 'SparseMatrix')
            sm = sp.coo_array((n, m), dtype=float_dtype(dtype, 'SparseMatrix').np).asformat(kind)
        elif isinstance(sm, SparseMatrix):
            sm = sm._matrix.copy()
        elif sp.issparse(sm):
            own = sm.dtype if sm.dtype in (np.float32, np.float64) else np.float64
            sm = sp.csc_array(sm, dtype=own) if sm.format != 'csr' else sp.csr_array(sm, dtype=own)
        else:
            raise TaichiRuntimeError(f'SparseMatrix(sm=...) takes a SparseMatrix or a scipy sparse matrix, '
                                     f'got {type(sm).__name__}')
        self._matrix = sm

    @property
    def n(self):
        return self._matrix.shape[0]

    @property
    def m(self):
        return self._matrix.shape[1]

    @property
    def shape(self):
        return self._matrix.shape

    @property
    def dtype(self):
        return T.from_numpy(self._matrix.dtype)

    def _like(self, matrix):
        """A result in this matrix's storage format and dtype."""
        return SparseMatrix(sm=matrix.asformat(self._matrix.format).astype(self._matrix.dtype, copy=False))

    def _same_shape(self, other, op):
        if not isinstance(other, SparseMatrix):
            raise TaichiRuntimeError(f'SparseMatrix {op} {type(other).__name__}: both operands must be '
                                     f'sparse matrices')
        if other.shape != self.shape:
            raise TaichiRuntimeError(f'dimension mismatch between sparse matrices {self.shape} and {other.shape}')

    def __add__(self, other):
        self._same_shape(other, '+')
        return self._like(self._matrix + other._matrix)

    def __sub__(self, other):
        self._same_shape(other, '-')
        return self._like(self._matrix - other._matrix)

    def __iadd__(self, other):
        self._same_shape(other, '+=')
        self._matrix = self._like(self._matrix + other._matrix)._matrix
        return self

    def __isub__(self, other):
        self._same_shape(other, '-=')
        self._matrix = self._like(self._matrix - other._matrix)._matrix
        return self

    def __mul__(self, other):
        """A scalar times the matrix, or the element-wise product of two matrices."""
        if isinstance(other, SparseMatrix):
            self._same_shape(other, '*')
            return self._like(self._matrix.multiply(other._matrix))
        if isinstance(other, numbers.Real):
            return self._like(self._matrix * float(other))
        return NotImplemented

    def __rmul__(self, other):
        return self.__mul__(other) if isinstance(other, numbers.Real) else NotImplemented

    def transpose(self):
        return self._like(self._matrix.T)

    def __matmul__(self, other):
        """A sparse matrix for a sparse matrix; for a vector, a numpy array (a ti.ndarray for
        a ti.ndarray), as Taichi returns them."""
        if isinstance(other, SparseMatrix):
            if self.m != other.n:
                raise TaichiRuntimeError(f'dimension mismatch between sparse matrices {self.shape} and {other.shape}')
            return self._like(self._matrix @ other._matrix)
        if isinstance(other, Ndarray):
            out = Ndarray(other.dtype if other.dtype.is_float else self.dtype, (self.n,))
            out.from_numpy(self._matrix @ self._vector(other.to_numpy(), 'ti.ndarray'))
            return out
        if isinstance(other, Field):
            return self._matrix @ self._vector(other.to_numpy(), f'field {other.name}')
        if isinstance(other, np.ndarray):
            return self._matrix @ self._vector(other, 'numpy array', matrices=True)
        raise TaichiRuntimeError(f'SparseMatrix @ {type(other).__name__} is not supported: the other operand '
                                 f'must be a SparseMatrix, a 1-D field, a ti.ndarray or a numpy array')

    def _vector(self, array, what, matrices=False):
        """`array` as the right operand of a product, in the matrix's dtype."""
        if array.ndim not in ((1, 2) if matrices else (1,)) or array.shape[0] != self.m:
            raise TaichiRuntimeError(f'dimension mismatch between sparse matrix {self.shape} and {what} of '
                                     f'shape {array.shape}')
        return array.astype(self._matrix.dtype, copy=False)

    def _entry(self, indices):
        if not (isinstance(indices, tuple) and len(indices) == 2):
            raise TaichiIndexError(f'a sparse matrix entry is read and written as A[i, j], got A[{indices!r}]')
        i, j = (int(k) for k in indices)
        if not (-self.n <= i < self.n and -self.m <= j < self.m):
            raise TaichiIndexError(f'entry ({i}, {j}) is outside the {self.n} x {self.m} sparse matrix')
        return i, j

    def __getitem__(self, indices):
        return float(self._matrix[self._entry(indices)])

    def __setitem__(self, indices, value):
        with warnings.catch_warnings():     # a new nonzero changes the structure: fine here
            warnings.simplefilter('ignore', sp.SparseEfficiencyWarning)
            self._matrix[self._entry(indices)] = value

    def __str__(self):
        """The dense matrix, a row a line, as Taichi prints it (Eigen's format: four
        significant digits, entries right-aligned to one width)."""
        texts = [[f'{v:.4g}' for v in row] for row in self._matrix.toarray().astype(np.float64)]
        width = max((len(t) for row in texts for t in row), default=0)
        return '\n'.join('[' + ', '.join(t.rjust(width) for t in row) + ']' for row in texts)

    __repr__ = __str__

    def build_from_ndarray(self, ndarray):
        """Sets the matrix to the triplets (row, column, value) of a ti.ndarray (or numpy
        array) of 3-vectors or of 3k scalars, duplicates summed."""
        data = ndarray.to_numpy() if isinstance(ndarray, Ndarray) else ndarray
        if not isinstance(data, np.ndarray):
            raise TaichiRuntimeError(f'build_from_ndarray takes a ti.ndarray, got {type(ndarray).__name__}')
        if data.size % 3:
            raise TaichiRuntimeError(f'build_from_ndarray: the ndarray has {data.size} numbers, not a '
                                     f'multiple of 3 (row, column, value triplets)')
        triplets = data.reshape(-1, 3)
        rows, cols = triplets[:, 0].astype(np.int64), triplets[:, 1].astype(np.int64)
        self._set_triplets(rows, cols, triplets[:, 2])

    def build_coo(self, row_coo, col_coo, value_coo):
        """Sets the matrix to the entries of three ndarrays (rows, columns, values)."""
        rows, cols, values = (a.to_numpy() if isinstance(a, Ndarray) else np.asarray(a)
                              for a in (row_coo, col_coo, value_coo))
        self._set_triplets(rows.astype(np.int64), cols.astype(np.int64), values)

    def _set_triplets(self, rows, cols, values):
        if ((rows < 0) | (rows >= self.n) | (cols < 0) | (cols >= self.m)).any():
            raise TaichiIndexError(f'a triplet lies outside the {self.n} x {self.m} sparse matrix')
        coo = sp.coo_array((values, (rows, cols)), shape=self.shape, dtype=self._matrix.dtype)
        self._matrix = coo.asformat(self._matrix.format)

    def spmv(self, x, y):
        """y = A @ x for ndarrays x and y."""
        if not isinstance(x, Ndarray) or not isinstance(y, Ndarray):
            raise TaichiRuntimeError('SparseMatrix.spmv takes two ti.ndarrays')
        y.from_numpy((self._matrix @ self._vector(x.to_numpy(), 'ti.ndarray')).astype(y.data.dtype))

    def mmwrite(self, filename):
        """Writes the matrix to a Matrix Market file."""
        scipy_io.mmwrite(filename, self._matrix)
