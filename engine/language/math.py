"""Math functions of the kernel language (`ti.sin`, `ti.min`, ...).

Each works on Python numbers (evaluated at once), on IR values (emits the op)
and on matrices (entry by entry).
"""
import math as _pymath
import random as _pyrandom

import numpy as np

from . import fields, placement
from ..ir import ops
from ..core import dtypes as T
from ..core.errors import TaichiTypeError, missing_attribute
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
def _rounding(name):
    """floor, ceil and round: `ti.floor(x, ti.i32)` also casts the result to the dtype."""
    unary = _unary(name)

    def fn(x, dtype=None):
        result = unary(x)
        if dtype is None:
            return result
        if T.resolve(dtype) is None:
            raise TaichiTypeError(f'{name}(x, dtype): {dtype!r} is not a data type (ti.i32, ti.f32, ...)')
        return cast(result, dtype)
    fn.__name__, fn.__doc__ = name, unary.__doc__ + ' With a dtype, the result is cast to it.'
    return fn


floor, ceil, round = _rounding('floor'), _rounding('ceil'), _rounding('round')
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


# `ti.f32(x)` casts, in Python and in kernels: the language gives data types their call.
T.DataType.__call__ = lambda dtype, value: cast(value, dtype)


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
    """x * (1.0 - a) + y * a: a float, also for integer operands, as Taichi's."""
    return x * (1.0 - a) + y * a


def step(edge, x):
    """1.0 where x >= edge, else 0.0 (entry by entry; 0.0 for NaN, as Taichi's `x >= edge`)."""
    if isinstance(x, Matrix) or isinstance(edge, Matrix):
        return _zip2(step, edge, x)
    return select(x >= edge, 1.0, 0.0)


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
    """v / |v| (Taichi's; Matrix.normalized multiplies by the inverse norm)."""
    return v / v.norm()


def dot(a, b):
    return a.dot(b)


def cross(a, b):
    return a.cross(b)


def reflect(x, n):
    """x reflected about the plane of unit normal n."""
    return x - 2.0 * n.dot(x) * n


class _FieldsOfType:
    """`vec3.field(shape=4)`, `mat2.ndarray(shape)`: fields and ndarrays of the type."""

    def field(self, shape=None, name=None, **options):
        name = name or fields.guess_name()
        if self[0] == 'vector':
            return placement.vector_field(self[1], self[2], shape, name, **options)
        return placement.matrix_field(self[1], self[2], self[3], shape, name, **options)

    def ndarray(self, shape, needs_grad=False, needs_dual=False):
        return fields.ndarray(self, shape, needs_grad, needs_dual)


class VectorType(_FieldsOfType, tuple):
    """`ti.math.vec3` (= ti.types.vector(3, float)): a dtype for fields and ndarrays, and a
    constructor: `vec3(1, 2, 3)`, `vec3(0)` (every entry), `vec3([1, 2, 3])`, `vec3(v2, 3)`."""

    def __call__(self, *entries):
        n = self[1]
        flat = _flatten([list(e) if isinstance(e, np.ndarray) else e for e in entries])    # vec2((W, H)) too
        if len(entries) == 1 and len(flat) == 1:
            flat = flat * n
        if len(flat) != n:
            raise TaichiTypeError(f'vec{n} takes {n} entries, got {len(flat)}')
        return Matrix._make((n,), _typed_entries(flat, self[2]))


class MatrixType(_FieldsOfType, tuple):
    """`ti.math.mat3`: a dtype, and a constructor from rows (vectors or lists), a list of
    rows, or n * m entries."""

    def __call__(self, *entries):
        n, m = self[1], self[2]
        flat = _flatten(entries)
        if len(flat) == 1:
            flat = flat * (n * m)
        if len(flat) != n * m:
            raise TaichiTypeError(f'a {n}x{m} matrix takes {n * m} entries, got {len(flat)}')
        return Matrix._make((n, m), _typed_entries(flat, self[3]))


def _typed_entries(entries, dtype):
    """Entries of a vector or matrix type: values are cast to its dtype; Python numbers
    take its kind (`vec3(1, 2, 3)` holds floats) and stay exact numbers, which fold."""
    dtype = T.resolve(dtype)
    number = float if dtype.is_float else lambda x: ops.convert_number(x, dtype)
    return [cast(x, dtype) if ops.is_value(x) else
            number(x) if isinstance(x, (int, float, np.number)) and not isinstance(x, bool) else x
            for x in entries]


def _flatten(items):
    return [x for e in items for x in (e.entries if isinstance(e, Matrix) else
                                       _flatten(e) if isinstance(e, (list, tuple)) else [e])]


vec2, vec3, vec4 = (VectorType(('vector', n, float)) for n in (2, 3, 4))
ivec2, ivec3, ivec4 = (VectorType(('vector', n, int)) for n in (2, 3, 4))
mat2, mat3, mat4 = (MatrixType(('matrix', n, n, float)) for n in (2, 3, 4))


# ----------------------------------------------------------------------------
# The rest of Taichi's ti.math, composed of the primitives above (so differentiable)

uvec2, uvec3, uvec4 = (VectorType(('vector', n, T.u32)) for n in (2, 3, 4))


def _entrywise(fn):
    def apply(x):
        return x.map(apply) if isinstance(x, Matrix) else fn(x)
    apply.__name__, apply.__doc__ = fn.__name__, fn.__doc__
    return apply


@_entrywise
def degrees(x):
    """Radians to degrees."""
    return x * (180.0 / _pymath.pi)


@_entrywise
def radians(x):
    """Degrees to radians."""
    return x * (_pymath.pi / 180.0)


@_entrywise
def log2(x):
    return log(x) / _pymath.log(2.0)


@_entrywise
def sign(x):
    """1.0, -1.0 or 0.0 (also for NaN), as a float."""
    return select(x > 0, 1.0, select(x < 0, -1.0, 0.0))


def _as_float(x):
    return cast(x, T.defaults.fp) if ops.is_value(x) and not x.dtype.is_float else x


@_entrywise
def isnan(x):
    """1 where x is NaN, else 0 (an i32)."""
    x = _as_float(x)
    return ops.binary('ne', x, x) if ops.is_value(x) else int(x != x)


@_entrywise
def isinf(x):
    """1 where x is +inf or -inf, else 0 (an i32)."""
    x = _as_float(x)
    return ops.binary('eq', abs(x), inf) if ops.is_value(x) else int(_pymath.isinf(x))


def mod(x, y):
    """x - y * floor(x / y): the result takes y's sign (GLSL's mod)."""
    return x - y * floor(x / y)


def eye(n):
    return Matrix.identity(float, n)


def determinant(m):
    return m.determinant()


def inverse(m):
    return m.inverse()


def refract(x, n, eta):
    """The refracted direction of unit x at unit normal n (ratio of indices eta); zero
    on total internal reflection. sqrt's argument is clamped so that the branch not
    taken keeps a finite derivative."""
    d = n.dot(x)
    k = 1.0 - eta * eta * (1.0 - d * d)
    bent = eta * x - (eta * d + sqrt(max(k, 0.0))) * n
    return select(k >= 0.0, bent, 0.0 * x)


def vdir(ang):
    """The unit 2D vector at angle `ang`."""
    return vec2(cos(ang), sin(ang))


def rotation2d(ang):
    """The 2x2 counter-clockwise rotation by `ang`."""
    c, s = cos(ang), sin(ang)
    return mat2([[c, -s], [s, c]])


def _axis_rotation(axis, ang):
    """The 3x3 rotation by `ang` about unit axis 0, 1 or 2 (x, y, z)."""
    c, s = cos(ang), sin(ang)
    i, j = (axis + 1) % 3, (axis + 2) % 3
    rows = [[1.0 if r == q else 0.0 for q in range(3)] for r in range(3)]
    rows[i][i], rows[i][j], rows[j][i], rows[j][j] = c, -s, s, c
    return Matrix._make((3, 3), [x for row in rows for x in row])


def _homogeneous(R, t=(0.0, 0.0, 0.0)):
    """A 4x4 transform: the 3x3 block R and translation t."""
    rows = [[R[r, 0], R[r, 1], R[r, 2], t[r]] for r in range(3)] + [[0.0, 0.0, 0.0, 1.0]]
    return mat4(rows)


def rot_yaw_pitch_roll(yaw, pitch, roll):
    """Taichi's 4x4 rotation of Euler angles: the transpose of
    Ry(yaw) @ Rx(pitch) @ Rz(roll), as Taichi computes it."""
    R = _axis_rotation(1, yaw) @ _axis_rotation(0, pitch) @ _axis_rotation(2, roll)
    return _homogeneous(R.transpose())


def rotation3d(ang_x, ang_y, ang_z):
    """Taichi's 4x4 rotation of angles about x, y and z: rot_yaw_pitch_roll(ang_z,
    ang_x, ang_y), as Taichi defines it."""
    return rot_yaw_pitch_roll(ang_z, ang_x, ang_y)


def rot_by_axis(axis, ang):
    """Taichi's 4x4 rotation about `axis` (normalized here): the transpose of Rodrigues'
    rotation by `ang`, as Taichi computes it."""
    a = axis.normalized()
    K = Matrix._make((3, 3), [0.0, -a[2], a[1], a[2], 0.0, -a[0], -a[1], a[0], 0.0])
    R = Matrix.identity(float, 3) + sin(ang) * K + (1.0 - cos(ang)) * (K @ K)
    return _homogeneous(R.transpose())


def translate(dx, dy, dz):
    """The 4x4 translation by (dx, dy, dz)."""
    return _homogeneous(Matrix.identity(float, 3), (dx, dy, dz))


def scale(sx, sy, sz):
    """The 4x4 scaling by (sx, sy, sz)."""
    return _homogeneous(Matrix._make((3, 3), [sx, 0.0, 0.0, 0.0, sy, 0.0, 0.0, 0.0, sz]))


# complex numbers as 2D vectors (re, im)

def cmul(z, w):
    return vec2(z[0] * w[0] - z[1] * w[1], z[0] * w[1] + z[1] * w[0])


def cconj(z):
    return vec2(z[0], -z[1])


def cdiv(z, w):
    return cmul(z, cconj(w)) / w.dot(w)


def cinv(z):
    return cconj(z) / z.dot(z)


def cexp(z):
    r = exp(z[0])
    return vec2(r * cos(z[1]), r * sin(z[1]))


def clog(z):
    """The principal logarithm: (log |z|, arg z), arg in (-pi, pi]."""
    return vec2(0.5 * log(z.dot(z)), atan2(z[1], z[0]))


def cpow(z, n):
    """z ** n for a real n: the principal branch; 0 at z = 0."""
    r2 = z.dot(z)
    nonzero = r2 > 0
    a = atan2(z[1], z[0]) * n
    m = pow(select(nonzero, r2, 1.0), 0.5 * n)
    return select(nonzero, vec2(m * cos(a), m * sin(a)), vec2(0.0, 0.0))


def csqrt(z):
    """The square root with a non-negative real part; 0 at z = 0."""
    return cpow(z, 0.5)


# --- C's division and remainder, Taichi's ti.raw_div / ti.raw_mod --------------------
def _is_int(x):
    return x.dtype.is_int if ops.is_value(x) else ops.is_integer(x)


def bit_shr(x, n):
    """Logical shift right: the bits of x shifted as its unsigned reinterpretation, so
    zeros come in from the left (`>>` shifts signed integers arithmetically)."""
    if isinstance(x, Matrix) or isinstance(n, Matrix):
        return _zip2(bit_shr, x, n)
    dtype = ops.dtype_of(x)
    if dtype.is_float:
        raise TaichiTypeError(f'ti.bit_shr needs an integer, got {dtype}')
    unsigned = T.from_numpy(f'u{dtype.bits // 8}')
    return ops.cast(ops.binary('shr', ops.cast(x, unsigned), ops.cast(n, unsigned)), dtype)


def raw_div(a, b):
    """C's a / b: integers truncate toward zero (`//` floors, as Python's does); floats divide."""
    if not (_is_int(a) and _is_int(b)):
        return a / b
    q = a // b
    inexact = (a - q * b) != 0
    return q + select(inexact & ((a < 0) != (b < 0)), 1, 0) if ops.is_value(inexact) else \
        q + (1 if inexact and (a < 0) != (b < 0) else 0)


def raw_mod(a, b):
    """C's remainder: it takes a's sign (`%` takes b's, as Python's does); fmod for floats."""
    if _is_int(a) and _is_int(b):
        return a - raw_div(a, b) * b
    q = a / b
    return a - b * select(q < 0, ceil(q), floor(q))


def zero(x):
    """A zero of x's type and shape."""
    return _constant_like(x, 0)


def one(x):
    """A one of x's type and shape."""
    return _constant_like(x, 1)


def _constant_like(x, c):
    if isinstance(x, Matrix):
        return x.map(lambda e: _constant_like(e, c))
    return ops.as_value(c, x.dtype) if ops.is_value(x) else type(x)(c)


@_entrywise
def popcnt(x):
    """The number of bits set in an integer (in its own width: popcnt(-1) of an i32 is 32)."""
    return _integer_bits('popcnt', x)


@_entrywise
def clz(x):
    """The number of leading zero bits of an integer in its own width (clz(0) is the width)."""
    return _integer_bits('clz', x)


def _integer_bits(name, x):
    if (ops.is_value(x) and x.dtype.is_float) or isinstance(x, (float, np.floating)):
        raise TaichiTypeError(f'ti.math.{name} takes an integer, got a float')
    if isinstance(x, np.integer):           # from to_numpy(): counted in its own width
        bits = 8 * x.dtype.itemsize
        value = int(x) & ((1 << bits) - 1)
        return bin(value).count('1') if name == 'popcnt' else bits - value.bit_length()
    return ops.unary(name, x)


def assume_in_range(val, base, low, high):
    """A hint for Taichi's GPU shared-memory caches; the value passes unchanged."""
    return val


def __getattr__(name):
    """A name ti.math lacks (one of Taichi's, or a typo): the engine's message, not Python's."""
    raise missing_attribute('ti.math', name, globals())

