"""Math functions of the kernel language (`ti.sin`, `ti.min`, ...).

Each works on Python numbers (evaluated at once), on IR values (emits the op)
and on matrices (entry by entry).
"""
import math as _pymath
import random as _pyrandom

from . import ops
from . import dtypes as T
from .errors import TaichiTypeError
from .matrix import Matrix


def _unary(name):
    def fn(x):
        if isinstance(x, Matrix):
            return x.map(fn)
        return ops.unary(name, x)
    fn.__name__ = name
    fn.__doc__ = f'`{name}` of a scalar, or entry by entry of a matrix.'
    return fn


def _binary(name):
    def fn(a, b):
        if isinstance(a, Matrix) or isinstance(b, Matrix):
            return _zip2(fn, a, b)
        return ops.binary(name, a, b)
    fn.__name__ = name
    return fn


def _zip2(fn, a, b):
    shape = a.shape if isinstance(a, Matrix) else b.shape
    ea = a.entries if isinstance(a, Matrix) else [a] * len(b.entries)
    eb = b.entries if isinstance(b, Matrix) else [b] * len(a.entries)
    return Matrix._make(shape, [fn(x, y) for x, y in zip(ea, eb)])


sin, cos, tan = _unary('sin'), _unary('cos'), _unary('tan')
asin, acos, atan = _unary('asin'), _unary('acos'), _unary('atan')
tanh, exp, log = _unary('tanh'), _unary('exp'), _unary('log')
sqrt, rsqrt = _unary('sqrt'), _unary('rsqrt')
floor, ceil, round = _unary('floor'), _unary('ceil'), _unary('round')
abs = _unary('abs')
atan2 = _binary('atan2')
bit_and, bit_or, bit_xor = _binary('bit_and'), _binary('bit_or'), _binary('bit_xor')
_min2, _max2 = _binary('min'), _binary('max')


def pow(a, b):
    if isinstance(a, Matrix) or isinstance(b, Matrix):
        return _zip2(pow, a, b)
    return ops.power(a, b)


def min(*args):
    result = args[0]
    for x in args[1:]:
        result = _min2(result, x)
    return result


def max(*args):
    result = args[0]
    for x in args[1:]:
        result = _max2(result, x)
    return result


def select(cond, a, b):
    if isinstance(cond, Matrix) or isinstance(a, Matrix) or isinstance(b, Matrix):
        n = next(m for m in (cond, a, b) if isinstance(m, Matrix))
        pick = lambda v, k: v.entries[k] if isinstance(v, Matrix) else v  # noqa: E731
        return Matrix._make(n.shape, [ops.select(pick(cond, k), pick(a, k), pick(b, k))
                                      for k in range(len(n.entries))])
    return ops.select(cond, a, b)


def cast(x, dtype):
    resolved = T.resolve(dtype)
    if resolved is None:
        raise TaichiTypeError(f'ti.cast: {dtype!r} is not a data type (ti.f32, ti.i32, float, int, ...)')
    dtype = resolved
    if isinstance(x, Matrix):
        return x.cast(dtype)
    return ops.cast(x, dtype)


def random(dtype=float):
    """Uniform in [0, 1) for floats; a random integer for integer types."""
    dtype = T.resolve(dtype)
    if ops.current_builder() is None:
        return _pyrandom.random() if dtype.is_float else _pyrandom.getrandbits(dtype.bits - 1)
    return ops.emit('random', (), dtype)


def randn(dtype=float):
    """A standard normal sample (Box-Muller from two uniforms; 1 - u keeps log away from 0)."""
    dtype = T.resolve(dtype)
    if ops.current_builder() is None:
        return _pyrandom.gauss(0.0, 1.0)
    u1, u2 = 1.0 - random(dtype), random(dtype)
    return ops.unary('sqrt', -2.0 * ops.unary('log', u1)) * ops.unary('cos', 2.0 * _pymath.pi * u2)


# ----------------------------------------------------------------------------
# ti.math: Taichi's GLSL-style helpers and small vector and matrix types

pi, e, inf, nan = _pymath.pi, _pymath.e, _pymath.inf, _pymath.nan


def clamp(x, xmin, xmax):
    return min(max(x, xmin), xmax)


def mix(x, y, a):
    """x * (1 - a) + y * a."""
    return x * (1 - a) + y * a


def step(edge, x):
    """0 where x < edge, else 1 (entry by entry)."""
    return select(x < edge, 0.0, 1.0) if not isinstance(x, Matrix) and not isinstance(edge, Matrix) else \
        _zip2(step, edge, x)


def smoothstep(edge0, edge1, x):
    t = clamp((x - edge0) / (edge1 - edge0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def fract(x):
    return x - floor(x)


def length(v):
    return v.norm()


def distance(a, b):
    return (a - b).norm()


def normalize(v):
    return v.normalized()


def dot(a, b):
    return a.dot(b)


def cross(a, b):
    return a.cross(b)


def reflect(x, n):
    """x reflected about the plane of unit normal n."""
    return x - 2.0 * n.dot(x) * n


class VectorType(tuple):
    """`ti.math.vec3` (= ti.types.vector(3, float)): a dtype for fields and ndarrays, and a
    constructor: `vec3(1, 2, 3)`, `vec3(0)` (every entry)."""

    def __call__(self, *entries):
        n = self[1]
        if len(entries) == 1 and not isinstance(entries[0], Matrix):
            entries = entries * n
        flat = [x for e in entries for x in (e.entries if isinstance(e, Matrix) else [e])]
        if len(flat) != n:
            raise TaichiTypeError(f'vec{n} takes {n} entries, got {len(flat)}')
        dtype = T.resolve(self[2])
        return Matrix._make((n,), [cast(x, dtype) if ops.is_value(x) else x for x in flat])


class MatrixType(tuple):
    """`ti.math.mat3`: a dtype, and a constructor from rows or n * m entries."""

    def __call__(self, *entries):
        n, m = self[1], self[2]
        flat = _flatten(entries)
        if len(flat) == 1:
            flat = flat * (n * m)
        if len(flat) != n * m:
            raise TaichiTypeError(f'a {n}x{m} matrix takes {n * m} entries, got {len(flat)}')
        dtype = T.resolve(self[3])
        return Matrix._make((n, m), [cast(x, dtype) if ops.is_value(x) else x for x in flat])


def _flatten(entries):
    """Scalars of nested rows (lists, tuples, matrices, numpy arrays), in order."""
    flat = []
    for e in entries:
        if isinstance(e, Matrix):
            flat += e.entries
        elif isinstance(e, (list, tuple)):
            flat += _flatten(e)
        elif getattr(e, 'ndim', 0) > 0:       # a numpy array
            flat += _flatten(e.tolist())
        else:
            flat.append(e)
    return flat


vec2, vec3, vec4 = (VectorType(('vector', n, float)) for n in (2, 3, 4))
ivec2, ivec3, ivec4 = (VectorType(('vector', n, int)) for n in (2, 3, 4))
mat2, mat3, mat4 = (MatrixType(('matrix', n, n, float)) for n in (2, 3, 4))
