"""Small vectors and matrices, scalarized: a Matrix is a grid of scalars.

Entries are Python numbers (Python scope, compile-time constants) or IR values
(kernel scope), so every method here is plain arithmetic and gets its
derivative from the scalar op table for free.
"""
import itertools
import numbers

import numpy as np

from ..core import dtypes as T
from ..ir import ops
from ..core.errors import TaichiTypeError


def _is_scalar(x):
    return ops.is_value(x) or isinstance(x, (numbers.Number, np.number))


class Matrix:
    """An n (vector) or n x m (matrix) grid of scalars, stored row-major."""
    __array_priority__ = 2000

    def __init__(self, data, dt=None):
        if isinstance(data, Matrix):
            shape, entries = data.shape, list(data.entries)
        elif isinstance(data, np.ndarray):
            shape, entries = data.shape, [x.item() for x in data.ravel()]
        elif len(data) and isinstance(data[0], (list, tuple, Matrix, np.ndarray)):
            rows = [list(r.entries) if isinstance(r, Matrix) else list(r) for r in data]
            if any(len(r) != len(rows[0]) for r in rows):
                raise TaichiTypeError('matrix rows must all have the same length')
            shape, entries = (len(rows), len(rows[0])), [x for r in rows for x in r]
        else:
            shape, entries = (len(data),), list(data)
        if dt is not None:
            entries = [ops.cast(x, dt) for x in entries]
        state = self.__dict__       # written directly: past the swizzle setter
        state['shape'], state['entries'] = tuple(shape), entries

    @classmethod
    def _make(cls, shape, entries):
        m = object.__new__(Matrix)
        state = m.__dict__          # written directly: past the swizzle setter
        state['shape'], state['entries'] = tuple(shape), list(entries)
        return m

    # --- shape and access -------------------------------------------------
    @property
    def n(self):
        return self.shape[0]

    @property
    def m(self):
        return self.shape[1] if len(self.shape) == 2 else 1

    @property
    def ndim(self):
        return len(self.shape)

    def __len__(self):
        return self.shape[0]

    def _flat_index(self, index):
        if not isinstance(index, tuple):
            index = (index,)
        if len(index) != self.ndim:
            if self.ndim == 2 and len(index) == 1:
                return None
            raise TaichiTypeError(f'a {self.ndim}-D matrix takes {self.ndim} indices, got {len(index)}')
        flat = 0
        for i, n in zip(index, self.shape):
            if ops.is_value(i):
                return index
            if not -n <= i < n:
                raise IndexError(f'matrix index {i} out of range for shape {self.shape}')
            flat = flat * n + (i % n)
        return flat

    def __getitem__(self, index):
        if _is_slice(index):
            return self._slice(index)
        flat = self._flat_index(index)
        if flat is None:                      # a row of a matrix
            i = index[0] if isinstance(index, tuple) else index
            n, m = self.shape
            if ops.is_value(i):               # at a run-time index: each entry a select over the rows
                ops.check_component(i, n)
                return Matrix._make((m,), [self._row_select(i, j) for j in range(m)])
            return Matrix._make((m,), self.entries[i * m:(i + 1) * m])
        if isinstance(flat, tuple):
            return self._dynamic_get(flat)
        return self.entries[flat]

    def slice_positions(self, index):
        """(shape, positions) of a slice (`v[:2]`, `m[:, j]`, j also a run-time index): the
        shape of the result (axes given an index dropped) and the index of each entry."""
        index = index if isinstance(index, tuple) else (index,)
        if len(index) != len(self.shape):
            raise TaichiTypeError(f'a slice of a {self.shape} matrix needs {len(self.shape)} indices, got {len(index)}')
        picks = [range(n)[i] if isinstance(i, slice) else [i] for i, n in zip(index, self.shape)]
        shape = tuple(len(p) for p, i in zip(picks, index) if isinstance(i, slice))
        return shape, [c if len(c) > 1 else c[0] for c in itertools.product(*picks)]

    def _slice(self, index):
        """`v[:2]`, `m[0, :]`, `m[:, j]`: the entries picked, as a vector or matrix."""
        shape, positions = self.slice_positions(index)
        entries = [self[p] for p in positions]
        return Matrix._make(shape, entries) if shape else entries[0]

    def _row_select(self, i, j):
        """Entry j of row i, i a run-time value."""
        m = self.shape[1]
        result = self.entries[j]
        for row in range(1, self.shape[0]):
            result = ops.select(i == row, self.entries[row * m + j], result)
        return result

    def _dynamic_get(self, index):
        """Indexing with a run-time value: a chain of selects over the entries."""
        flat = 0
        for i, n in zip(index, self.shape):
            if ops.is_value(i):
                ops.check_component(i, n)
            flat = flat * n + i
        result = self.entries[0]
        for k in range(1, len(self.entries)):
            result = ops.select(flat == k, self.entries[k], result)
        return result

    def __setitem__(self, index, value):
        if _is_slice(index):
            shape, positions = self.slice_positions(index)
            values = value.entries if isinstance(value, Matrix) else list(np.ravel(value)) \
                if isinstance(value, (list, tuple, np.ndarray)) else [value] * len(positions)
            if len(values) != len(positions):
                raise TaichiTypeError(f'cannot assign {len(values)} values to a slice of {len(positions)} entries')
            for p, v in zip(positions, values):
                self[p] = v
            return
        flat = self._flat_index(index)
        if not isinstance(flat, int):
            raise TaichiTypeError('assigning to a matrix entry needs constant indices here')
        self.entries[flat] = value

    def __iter__(self):
        if self.ndim == 1:
            return iter(self.entries)
        return (self[i] for i in range(self.n))

    def __array__(self, dtype=None, copy=None):
        return np.array(self.entries, dtype=dtype).reshape(self.shape)

    def to_numpy(self, keep_dims=False):
        """As Taichi's: an n x 1 matrix gives a vector unless keep_dims."""
        shape = self.shape[:1] if len(self.shape) == 2 and self.shape[1] == 1 and not keep_dims else self.shape
        return np.array(self.entries).reshape(shape)

    def to_list(self):
        return self.to_numpy(keep_dims=True).tolist()

    def __repr__(self):
        return f'Matrix({self.to_list() if all(not ops.is_value(e) for e in self.entries) else self.entries})'

    def __str__(self):
        """`print(v)` in Python scope shows the entries as numpy does, as Taichi's print."""
        return repr(self) if any(map(ops.is_value, self.entries)) else str(self.to_numpy(keep_dims=True))

    # --- swizzles: v.x, v.zyx, v.rgb, v.xxx; v.x = 1, v.xy = (1, 2) -----------------------
    # Kernels reach them too (the frontend loads a vector as a Matrix of values), so they
    # differentiate as any entry does.
    def __getattr__(self, name):        # only for names that are no attribute
        picks = swizzle(name)
        if picks is None or 'entries' not in self.__dict__:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")
        self._check_swizzle(name, picks)
        if len(picks) == 1:
            return self.entries[picks[0]]
        return Matrix._make((len(picks),), [self.entries[k] for k in picks])

    def __setattr__(self, name, value):
        picks = swizzle(name)
        if picks is None:
            return object.__setattr__(self, name, value)
        self._check_swizzle(name, picks)
        values = [value] if len(picks) == 1 else list(value.entries if isinstance(value, Matrix) else value)
        if len(values) != len(picks) or len(set(picks)) != len(picks):
            raise TaichiTypeError(f'v.{name} = ... needs {len(picks)} values for {len(picks)} distinct '
                                  f'entries, got {len(values)}')
        for k, v in zip(picks, values):
            self[k] = v                 # through __setitem__: a field element writes the field

    def _check_swizzle(self, name, picks):
        if self.ndim != 1:
            raise AttributeError(f'.{name}: swizzles name entries of vectors, not of a {self.shape} matrix')
        if max(picks) >= self.n:
            raise AttributeError(f'.{name}: a {self.n}-vector has no entry {_letters(name)[max(picks)]!r} '
                                 f'(its entries are {", ".join(_letters(name)[:self.n])})')

    def map(self, fn):
        return Matrix._make(self.shape, [fn(e) for e in self.entries])

    # --- arithmetic ---------------------------------------------------------
    def _zip(self, other, fn, swap=False):
        if isinstance(other, Matrix):
            if other.shape != self.shape:
                return self._broadcast(other, fn, swap)
            pairs = zip(self.entries, other.entries)
        elif _is_scalar(other):
            pairs = ((e, other) for e in self.entries)
        elif isinstance(other, (list, tuple, np.ndarray)):
            return self._zip(Matrix(other), fn, swap)
        else:
            return NotImplemented
        return Matrix._make(self.shape, [fn(b, a) if swap else fn(a, b) for a, b in pairs])

    def _broadcast(self, other, fn, swap):
        """Operands of two shapes: in Python scope, numpy's broadcasting (a vector against a
        matrix's rows), as Taichi's Python-scope matrices do; in a kernel an error, as in Taichi."""
        if ops.current_builder() is not None:
            raise TaichiTypeError(f'shape mismatch: {self.shape} and {other.shape}')
        try:
            shape = np.broadcast_shapes(self.shape, other.shape)
        except ValueError:
            raise TaichiTypeError(f'shape mismatch: {self.shape} and {other.shape}') from None
        mine, theirs = (np.broadcast_to(np.array(m.entries, dtype=object).reshape(m.shape), shape).ravel()
                        for m in (self, other))
        return Matrix._make(shape, [fn(b, a) if swap else fn(a, b) for a, b in zip(mine, theirs)])

    def __add__(self, o): return self._zip(o, lambda a, b: a + b)
    def __radd__(self, o): return self._zip(o, lambda a, b: a + b, True)
    def __sub__(self, o): return self._zip(o, lambda a, b: a - b)
    def __rsub__(self, o): return self._zip(o, lambda a, b: a - b, True)
    def __mul__(self, o): return self._zip(o, lambda a, b: a * b)
    def __rmul__(self, o): return self._zip(o, lambda a, b: a * b, True)
    def __truediv__(self, o): return self._zip(o, _divide)
    def __rtruediv__(self, o): return self._zip(o, _divide, True)
    def __floordiv__(self, o): return self._zip(o, lambda a, b: a // b)
    def __rfloordiv__(self, o): return self._zip(o, lambda a, b: a // b, True)
    def __mod__(self, o): return self._zip(o, lambda a, b: a % b)
    def __rmod__(self, o): return self._zip(o, lambda a, b: a % b, True)
    def __pow__(self, o): return self._zip(o, lambda a, b: a ** b)
    def __rpow__(self, o): return self._zip(o, lambda a, b: a ** b, True)
    def __lt__(self, o): return self._zip(o, lambda a, b: a < b)
    def __le__(self, o): return self._zip(o, lambda a, b: a <= b)
    def __gt__(self, o): return self._zip(o, lambda a, b: a > b)
    def __ge__(self, o): return self._zip(o, lambda a, b: a >= b)
    def __eq__(self, o): return self._zip(o, lambda a, b: a == b)
    def __ne__(self, o): return self._zip(o, lambda a, b: a != b)
    __hash__ = object.__hash__      # compared entry by entry, hashed as an object
    # integer bit operations, entry by entry; two literals fold as a kernel computes them
    def __and__(self, o): return self._zip(o, _bits('bit_and'))
    def __rand__(self, o): return self._zip(o, _bits('bit_and'), True)
    def __or__(self, o): return self._zip(o, _bits('bit_or'))
    def __ror__(self, o): return self._zip(o, _bits('bit_or'), True)
    def __xor__(self, o): return self._zip(o, _bits('bit_xor'))
    def __rxor__(self, o): return self._zip(o, _bits('bit_xor'), True)
    def __lshift__(self, o): return self._zip(o, _bits('shl'))
    def __rlshift__(self, o): return self._zip(o, _bits('shl'), True)
    def __rshift__(self, o): return self._zip(o, _bits('shr'))
    def __rrshift__(self, o): return self._zip(o, _bits('shr'), True)
    def __invert__(self): return self.map(lambda a: ops.unary('bit_not', a))
    def __neg__(self): return self.map(lambda a: -a)
    def __pos__(self): return self
    def __abs__(self): return self.map(abs)

    def __matmul__(self, other):
        if not isinstance(other, Matrix):
            other = Matrix(other)
        a_rows = [self.entries] if self.ndim == 1 else [list(r.entries) for r in self]
        if other.ndim == 1:
            if self.ndim == 1:
                return self.dot(other)
            return Matrix._make((self.n,), [_sum(x * y for x, y in zip(row, other.entries)) for row in a_rows])
        if self.ndim == 2 and self.m != other.n:
            raise TaichiTypeError(f'matmul shape mismatch: {self.shape} @ {other.shape}')
        cols = [[other.entries[k * other.m + j] for k in range(other.n)] for j in range(other.m)]
        out = [_sum(x * y for x, y in zip(row, col)) for row in a_rows for col in cols]
        return Matrix._make((len(a_rows), other.m) if self.ndim == 2 else (other.m,), out)

    def __rmatmul__(self, other):
        return Matrix(other) @ self

    # --- methods ------------------------------------------------------------
    def dot(self, other):
        other = other if isinstance(other, Matrix) else Matrix(other)
        if other.shape != self.shape:
            raise TaichiTypeError(f'dot of shapes {self.shape} and {other.shape}')
        return _sum(a * b for a, b in zip(self.entries, other.entries))

    def cross(self, other):
        a, b = self.entries, (other if isinstance(other, Matrix) else Matrix(other)).entries
        if self.shape == (2,):
            return a[0] * b[1] - a[1] * b[0]
        if self.shape != (3,):
            raise TaichiTypeError('cross needs 2- or 3-vectors')
        return Matrix._make((3,), [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])

    def outer_product(self, other):
        other = other if isinstance(other, Matrix) else Matrix(other)
        return Matrix._make((self.n, other.n), [a * b for a in self.entries for b in other.entries])

    def norm_sqr(self):
        return _sum(e * e for e in self.entries)

    def norm(self, eps=0):
        if not _is_zero(eps):
            return ops.unary('sqrt', self.norm_sqr() + eps)
        # at v = 0 the gradient is the 0 subgradient (as PyTorch's), not 0 * inf
        squared = self.norm_sqr()
        return ops.select(squared > 0, ops.unary('sqrt', squared), 0.0)

    def norm_inv(self, eps=0):
        return ops.unary('rsqrt', self.norm_sqr() + eps)

    def normalized(self, eps=0):
        """v / (|v| + eps), as Taichi computes it (eps is added to the norm, not under the root)."""
        norm = self.norm() if _is_zero(eps) else self.norm() + eps
        return (1.0 / norm) * self

    def sum(self):
        return _sum(self.entries)

    def any(self):
        """1 if some entry is non-zero, else 0."""
        return _reduce('bit_or', _nonzero(self.entries))

    def all(self):
        """1 if every entry is non-zero, else 0."""
        return _reduce('bit_and', _nonzero(self.entries))

    def max(self):
        return _reduce('max', self.entries)

    def min(self):
        return _reduce('min', self.entries)

    def transpose(self):
        if self.ndim == 1:      # a vector has one axis: itself, as Taichi's matrix_ops.transpose
            return self
        n, m = self.shape
        return Matrix._make((m, n), [self.entries[i * m + j] for j in range(m) for i in range(n)])

    @property
    def T(self):
        return self.transpose()

    def trace(self):
        return _sum(self.entries[i * self.m + i] for i in range(self.n))

    def _square(self, what):
        if self.ndim != 2 or self.n != self.m:
            raise TaichiTypeError(f'{what} needs a square matrix, got shape {self.shape}')
        return self.n

    def determinant(self):
        n = self._square('determinant')
        a = lambda i, j: self.entries[i * n + j]  # noqa: E731
        if n == 1:
            return a(0, 0)
        if n == 2:
            return a(0, 0) * a(1, 1) - a(0, 1) * a(1, 0)
        if n == 3:
            return (a(0, 0) * (a(1, 1) * a(2, 2) - a(1, 2) * a(2, 1))
                    - a(0, 1) * (a(1, 0) * a(2, 2) - a(1, 2) * a(2, 0))
                    + a(0, 2) * (a(1, 0) * a(2, 1) - a(1, 1) * a(2, 0)))
        return _sum((-1) ** j * a(0, j) * self._minor(0, j).determinant() for j in range(n))

    def _minor(self, row, col):
        n = self.n
        keep = [self.entries[i * n + j] for i in range(n) for j in range(n) if i != row and j != col]
        return Matrix._make((n - 1, n - 1), keep)

    def inverse(self):
        n = self._square('inverse')
        inv_det = 1.0 / self.determinant()
        if n == 1:
            return Matrix._make((1, 1), [inv_det])
        if n == 2:
            a, b, c, d = self.entries
            return Matrix._make((2, 2), [d * inv_det, -b * inv_det, -c * inv_det, a * inv_det])
        cof = [(-1) ** (i + j) * self._minor(j, i).determinant() * inv_det
               for i in range(n) for j in range(n)]
        return Matrix._make((n, n), cof)

    def fill(self, value):
        """Every entry set to `value`, in place (a field element read in Python writes through)."""
        for flat in range(len(self.entries)):
            self[divmod(flat, self.m) if self.ndim == 2 else flat] = value

    def cast(self, dtype):
        resolved = T.resolve(dtype)
        if resolved is None:
            raise TaichiTypeError(f'cast: {dtype!r} is not a data type (ti.f32, ti.i32, float, int, ...)')
        return self.map(lambda e: ops.cast(e, resolved))

    @staticmethod
    def identity(dt, n):
        return Matrix._make((n, n), [1 if i == j else 0 for i in range(n) for j in range(n)]).cast(dt)

    @staticmethod
    def diag(dim, val):
        return Matrix._make((dim, dim), [val if i == j else 0 for i in range(dim) for j in range(dim)])

    @staticmethod
    def zero(dt, n, m=None):
        shape = (n,) if m is None else (n, m)
        return Matrix._make(shape, [0] * int(np.prod(shape))).cast(dt)

    @staticmethod
    def one(dt, n, m=None):
        shape = (n,) if m is None else (n, m)
        return Matrix._make(shape, [1] * int(np.prod(shape))).cast(dt)

    @staticmethod
    def rows(rows):
        return Matrix([list(r) for r in rows])

    @staticmethod
    def cols(cols):
        return Matrix([list(c) for c in cols]).transpose()


class Vector(Matrix):
    """`ti.Vector([...])` builds a 1-D Matrix."""

    def __new__(cls, data, dt=None):
        m = Matrix(list(data) if not isinstance(data, (Matrix, np.ndarray)) else data, dt)
        if m.ndim != 1:
            m = Matrix._make((len(m.entries),), m.entries)
        return m

    @staticmethod
    def zero(dt, n):
        return Matrix.zero(dt, n)

    @staticmethod
    def one(dt, n):
        return Matrix.one(dt, n)

    @staticmethod
    def unit(n, i, dt=None):
        v = Matrix._make((n,), [1 if k == i else 0 for k in range(n)])
        return v.cast(dt) if dt is not None else v


_SWIZZLE_GROUPS = ('xyzw', 'rgba', 'stpq')


def swizzle(name):
    """The entries a swizzle picks (`zyx` -> (2, 1, 0)), or None for any other name: up
    to four letters, all of one group."""
    if not 1 <= len(name) <= 4:
        return None
    for group in _SWIZZLE_GROUPS:
        if all(c in group for c in name):
            return tuple(group.index(c) for c in name)
    return None


def _letters(name):
    return next(g for g in _SWIZZLE_GROUPS if name[0] in g)


def _nonzero(entries):
    """1 or 0 per entry (i32 values in a kernel)."""
    flags = [ops.binary('ne', e, 0) for e in entries]
    return [f if ops.is_value(f) else int(f) for f in flags]


def _is_zero(x):
    return not ops.is_value(x) and x == 0


def _reduce(op, items):
    result = items[0]
    for x in items[1:]:
        result = ops.binary(op, result, x)
    return result


def _bits(op):
    return lambda a, b: ops.binary(op, a, b)


def _divide(a, b):
    """a / b; a Python-scope float division by zero gives inf or NaN, as Taichi's numpy
    entries do, instead of raising."""
    if ops.is_number(a) and ops.is_number(b) and b == 0:
        with np.errstate(divide='ignore', invalid='ignore'):
            return float(np.float64(a) / np.float64(b))
    return a / b


def _sum(items):
    items = list(items)
    total = items[0]
    for x in items[1:]:
        total = total + x
    return total


def _is_slice(index):
    return isinstance(index, slice) or (isinstance(index, tuple) and any(isinstance(i, slice) for i in index))
