"""The interpreter's scalar arithmetic (engine/backend/interpret.py): each IR op as a Python
function with native code's results, and codegen's random-number streams.

Where Python's arithmetic differs from native code, these follow the native code: IEEE
results instead of exceptions (1/0, log(0), sqrt(-1)), modulo and floor division as
codegen lowers them, min/max with a NaN operand losing, f32 results rounded after every
op, integers wrapping at their width.
"""
import ctypes
import functools
import math
import operator

import numpy as np

from ..ir import ops
from ..core import dtypes as T
from ..core import program as rt

# ----------------------------------------------------------------------------
# Scalars: Python floats (f32 values rounded to f32) and ints (wrapped to their width)

def _f32(x):
    return float(np.float32(x))


def _wrapper(dtype):
    mask = (1 << dtype.bits) - 1
    if not dtype.signed:
        return lambda v: v & mask
    half = 1 << (dtype.bits - 1)
    return lambda v: ((v + half) & mask) - half


WRAP = {t: _wrapper(t) for t in T.ALL if t.is_int}


def rounding(dtype):
    """The function that brings a result to `dtype`, or None when nothing is to be done."""
    if dtype.is_float:
        return _f32 if dtype.bits == 32 else None
    return WRAP[dtype]


def _ieee(py, numpy_fn):
    """`py`, but with IEEE results (inf, nan) where Python raises, as native code gives."""
    def f(*args):
        try:
            return py(*args)
        except (ArithmeticError, ValueError):
            with np.errstate(all='ignore'):
                return float(numpy_fn(*args))
    return f


_div = _ieee(lambda x, y: x / y, np.true_divide)
_sqrt = _ieee(math.sqrt, np.sqrt)


def _floor(x):      # C's floor: keeps -0.0, passes inf and nan through
    return float(math.floor(x)) or math.copysign(0.0, x) if math.isfinite(x) else x


def _ceil(x):
    return float(math.ceil(x)) or math.copysign(0.0, x) if math.isfinite(x) else x


def _round(x):      # llvm.round: half away from zero (ops.py's py rounds 0.49999999999999994 up)
    if not math.isfinite(x):
        return x
    t = float(math.trunc(x))
    if abs(x - t) >= 0.5:
        t += math.copysign(1.0, x)
    return math.copysign(t, x)


# codegen's min/max (ops._minmax): a NaN operand loses, as in the atomicrmw fmin/fmax of
# parallel loops; Python's min differs for NaN and -0.0
_min, _max = ops.py_min, ops.py_max


def same(x):
    return x


# Float ops whose Python evaluation in ops.py differs from codegen's; `r` rounds to the type.
_FLOAT_RULES = {
    'truediv': lambda r: _div,
    'floordiv': lambda r: lambda x, y: _floor(r(_div(x, y))),
    'mod': lambda r: lambda x, y: r(x - r(_floor(r(_div(x, y))) * y)),
    'min': lambda r: _min,
    'max': lambda r: _max,
    'floor': lambda r: _floor,
    'ceil': lambda r: _ceil,
    'round': lambda r: _round,
    'rsqrt': lambda r: lambda x: _div(1.0, r(_sqrt(x))),
}
# Math functions: ops.py's py (libm, as native code calls), with IEEE results where it raises.
_NUMPY = {'sin': np.sin, 'cos': np.cos, 'tan': np.tan, 'asin': np.arcsin, 'acos': np.arccos,
          'atan': np.arctan, 'tanh': np.tanh, 'exp': np.exp, 'log': np.log, 'sqrt': np.sqrt,
          'atan2': np.arctan2, 'pow': np.power}
_PY = {'pow': math.pow}         # x ** y gives complex numbers for a negative x


def _libm_f32():
    """libm's float functions (sinf, ...), which f32 kernels call: rounding the double
    result instead differs from them by an ulp now and then."""
    try:
        libm = ctypes.CDLL(None)        # the process's libm, as the JIT links it
    except OSError:
        return {}
    fns = {}
    for op in ('sin', 'cos', 'tan', 'asin', 'acos', 'atan', 'tanh', 'exp', 'log', 'pow', 'atan2'):
        fn = getattr(libm, op + 'f', None)
        if fn is not None:
            fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float] * ops.OPS[op].arity
            fns[op] = fn
    return fns


_LIBM_F32 = _libm_f32()
# The same as ops.py's py lambdas for f64, as C functions: the most frequent ops run faster.
_F64_OPERATORS = {'add': operator.add, 'sub': operator.sub, 'mul': operator.mul, 'neg': operator.neg}
_EXACT_FLOAT = frozenset({'select', 'stop_grad', 'min', 'max', 'abs', 'neg', 'floor', 'ceil', 'round'})


def _trunc_div(a, b):   # sdiv/udiv: C division truncates toward zero
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _float_to_int(x, dtype):
    """ops.float_to_int: truncation toward zero, saturated at the type's limits, NaN -> 0."""
    if math.isnan(x):
        return 0
    low, high = (-(1 << (dtype.bits - 1)), (1 << (dtype.bits - 1)) - 1) if dtype.signed else (0, (1 << dtype.bits) - 1)
    if x <= low:
        return low
    if x >= high:
        return high
    return int(x)


_INT_RULES = {
    'popcnt': lambda to: lambda a: bin(a & ((1 << to.bits) - 1)).count('1'),
    'clz': lambda to: lambda a: to.bits - (a & ((1 << to.bits) - 1)).bit_length(),
    'floordiv': lambda to: lambda a, b: a // b if b else a,     # codegen divides by 1 instead of 0
    'mod': lambda to: lambda a, b: a % b if b else 0,
    'truediv': lambda to: _trunc_div,
    'pow': lambda to: lambda a, b: _float_to_int(_ieee(math.pow, np.power)(float(a), float(b)), to),
    'shl': lambda to: lambda a, b: a << (b & (to.bits - 1)),       # ops._shift_amount
    'shr': lambda to: lambda a, b: a >> (b & (to.bits - 1)),
    'min': lambda to: _min,
    'max': lambda to: _max,
}


@functools.lru_cache(maxsize=None)
def scalar_fn(name, ti, to):
    """The Python function computing op `name` on operands of type ti, giving type to."""
    opdef = ops.OPS[name]
    if ti is T.f64 and name in _F64_OPERATORS:
        return _F64_OPERATORS[name]
    if ti.is_float:
        rule = _FLOAT_RULES.get(name)
        if rule:
            fn = rule(rounding(ti) or same)
        elif ti.bits == 32 and name in _LIBM_F32:
            fn = _LIBM_F32[name]
        elif name in _NUMPY:
            fn = _ieee(_PY.get(name, opdef.py), _NUMPY[name])
        else:
            fn = opdef.py
        exact = name in _EXACT_FLOAT or opdef.type_rule == 'bool'
    else:
        rule = _INT_RULES.get(name)
        fn = rule(to) if rule else opdef.py
        exact = name in ('select', 'stop_grad', 'min', 'max') or opdef.type_rule == 'bool'
    fix = None if exact else rounding(to)
    if fix is None:
        return fn
    if opdef.arity == 1:
        return lambda x: fix(fn(x))
    return lambda x, y: fix(fn(x, y))


@functools.lru_cache(maxsize=None)
def cast_fn(src, dst):
    """lower_cast: fpext/fptrunc, fptosi/fptoui, sitofp/uitofp, sext/zext/trunc."""
    if src is dst:
        return same
    if dst.is_float:
        return _f32 if dst.bits == 32 else float
    if src.is_float:
        return lambda x: _float_to_int(x, dst)
    return WRAP[dst]


# ----------------------------------------------------------------------------
# Random numbers: codegen's splitmix64 streams, bit for bit

M64 = (1 << 64) - 1
GOLDEN, _MIX1, _MIX2 = rt.RNG_GOLDEN, rt.RNG_MIX1, rt.RNG_MIX2


def mix64(z):
    z = ((z ^ (z >> 30)) * _MIX1) & M64
    z = ((z ^ (z >> 27)) * _MIX2) & M64
    return z ^ (z >> 31)


def seed(prog, salt):
    words = prog.runtime_buffer
    state = (int(words[rt.RT_RNG_SEED]) * _MIX1 + int(words[rt.RT_RNG_COUNTER]) * GOLDEN) & M64
    return [mix64(state ^ ((salt * _MIX2) & M64))]
