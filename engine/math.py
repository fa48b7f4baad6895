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
