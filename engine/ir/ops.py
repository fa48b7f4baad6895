"""The op table: one entry per scalar primitive.

Each entry holds the op's type rule, its LLVM lowering, its Python evaluation
(for constant folding and Python-scope math) and its derivative rule. A
derivative rule returns the partial derivatives d(out)/d(arg_i), built from
the op's operands and result with ordinary arithmetic on IR values; reverse
mode multiplies them by the adjoint, forward mode by the tangents, so one rule
serves both. `None` means the operand carries no gradient.
"""
import builtins
import math as pymath
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ..core import dtypes as T
from ..core.errors import TaichiSyntaxError, TaichiTypeError
from .nodes import Stmt, current_builder


@dataclass(frozen=True)
class OpDef:
    name: str
    arity: int
    type_rule: str              # 'same', 'float', 'bool', 'int'
    py: Optional[Callable]      # Python evaluation, or None
    partials: Optional[Callable] = None   # (args, out) -> [d out/d arg_i or None]
    # 'one_operand': d out / d arg is 0 or 1 (see `chain`).
    guard: Optional[str] = None


OPS = {}


def _def(name, arity, type_rule, py=None, partials=None, guard=None):
    OPS[name] = OpDef(name, arity, type_rule, py, partials, guard)


def partials(op, args, out):
    """The op's partial derivatives at (args, out), emitted as IR. They are exempt from
    debug mode's NaN/Inf check: a partial may be infinite where its adjoint or tangent
    is 0 (sqrt at 0, log of an untaken select arm); `chain` guards the product."""
    block = current_builder().block.stmts
    start = len(block)
    result = OPS[op].partials(args, out)
    for stmt in block[start:]:
        stmt.attrs['partial'] = True
    return result


def chain(op, g, partial, guard=True):
    """g * partial: the term an operand receives from an adjoint or a tangent g.

    No path that does not reach the output may turn a gradient into NaN. An untaken
    `ti.select` arm may hold sqrt(-1) or 1/0, whose partials are NaN or infinite, and
    IEEE gives 0 * inf = NaN; so a zero g gives a zero term (the 0 subgradient of
    `v.norm()` at v = 0 rests on this too). The guard is a select marked `nan_guard`:
    the passes that differentiate this IR again (Hessians, forces differentiated by the
    tape) take its derivative as that of g * partial, since a g that is 0 here can still
    vary. Ops that pass g to one operand only ('one_operand': select, min, max) give
    the other exactly 0, even when g is infinite. A constant partial needs no guard."""
    if is_number(partial):
        return g * partial
    if OPS[op].guard == 'one_operand':
        return select(partial == 0, 0.0, g)
    if not guard:           # the partial is finite (finite_partials): g * partial is 0 for g = 0
        return g * partial
    guarded = select(g == 0, 0.0, g * partial)
    guarded.attrs['nan_guard'] = True
    return guarded


# ----------------------------------------------------------------------------
# IR values with Python operators

class Value(Stmt):
    """A value-producing statement; Python operators on it emit IR."""
    __slots__ = ()
    __array_priority__ = 1000

    def __add__(self, o): return binary('add', self, o)
    def __radd__(self, o): return binary('add', o, self)
    def __sub__(self, o): return binary('sub', self, o)
    def __rsub__(self, o): return binary('sub', o, self)
    def __mul__(self, o): return binary('mul', self, o)
    def __rmul__(self, o): return binary('mul', o, self)
    def __truediv__(self, o): return binary('truediv', self, o)
    def __rtruediv__(self, o): return binary('truediv', o, self)
    def __floordiv__(self, o): return binary('floordiv', self, o)
    def __rfloordiv__(self, o): return binary('floordiv', o, self)
    def __mod__(self, o): return binary('mod', self, o)
    def __rmod__(self, o): return binary('mod', o, self)
    def __pow__(self, o): return power(self, o)
    def __rpow__(self, o): return power(o, self)
    def __and__(self, o): return binary('bit_and', self, o)
    def __rand__(self, o): return binary('bit_and', o, self)
    def __or__(self, o): return binary('bit_or', self, o)
    def __ror__(self, o): return binary('bit_or', o, self)
    def __xor__(self, o): return binary('bit_xor', self, o)
    def __rxor__(self, o): return binary('bit_xor', o, self)
    def __lshift__(self, o): return binary('shl', self, o)
    def __rlshift__(self, o): return binary('shl', o, self)
    def __rshift__(self, o): return binary('shr', self, o)
    def __rrshift__(self, o): return binary('shr', o, self)
    def __lt__(self, o): return binary('lt', self, o)
    def __le__(self, o): return binary('le', self, o)
    def __gt__(self, o): return binary('gt', self, o)
    def __ge__(self, o): return binary('ge', self, o)
    def __eq__(self, o): return binary('eq', self, o)
    def __ne__(self, o): return binary('ne', self, o)
    def __neg__(self): return unary('neg', self)
    def __pos__(self): return self
    def __abs__(self): return unary('abs', self)
    def __invert__(self): return unary('bit_not', self)
    __hash__ = Stmt.__hash__

    def __bool__(self):
        raise TaichiSyntaxError(
            'a value computed at run time cannot be used where Python needs a '
            'compile-time bool; use an `if` statement in the kernel or ti.select')

    def __index__(self):
        raise TaichiSyntaxError('a value computed at run time cannot be used as a Python index')


def is_value(x):
    return isinstance(x, Stmt)


def is_number(x):
    return isinstance(x, (int, float, bool, np.integer, np.floating, np.bool_))


def emit(op, args, dtype, **attrs):
    builder = current_builder()
    if builder is None:
        raise TaichiSyntaxError(f'`{op}` on kernel values outside of a kernel')
    return builder.emit(op, args, dtype, cls=Value, **attrs)


def const(value, dtype):
    if dtype.is_float:
        value = float(value)
    else:
        value = int(value)
    return emit('const', (), dtype, value=value)


def convert_number(x, dtype):
    """A Python number cast to `dtype` as a kernel casts a value: integers wrap around,
    floats saturate into an integer type (NaN gives 0), and f32 rounds."""
    if dtype.is_float:
        with np.errstate(over='ignore'):
            return float(np.float32(x)) if dtype.bits == 32 else float(x)
    if isinstance(x, (float, np.floating)):
        if pymath.isnan(x):
            return 0
        low, high = _int_range(dtype)
        return int(max(low, min(high, x))) if pymath.isfinite(x) else (high if x > 0 else low)
    low, _ = _int_range(dtype)
    return (int(x) - low) % 2 ** dtype.bits + low


def _int_range(dtype):
    if dtype.signed:
        return -2 ** (dtype.bits - 1), 2 ** (dtype.bits - 1) - 1
    return 0, 2 ** dtype.bits - 1


def dtype_of(x, partner=None):
    """The type of a value; a literal adapts to a typed partner (Taichi's rule)."""
    if is_value(x):
        return x.dtype
    own = T.python_scalar_type(x)
    if partner is not None and is_value(partner):
        if partner.dtype.is_float:
            return partner.dtype
        return T.defaults.fp if own.is_float else partner.dtype
    return own


def as_value(x, dtype):
    """Turn x into an IR value of exactly `dtype`."""
    if is_value(x):
        return cast(x, dtype) if x.dtype is not dtype else x
    if not is_number(x):
        raise TaichiTypeError(f'expected a number or a kernel value, got {type(x).__name__}')
    return const(x, dtype)


def cast(x, dtype):
    if not is_value(x):
        if not is_number(x):
            raise TaichiTypeError(f'cannot cast {type(x).__name__} to {dtype}')
        value = convert_number(x, dtype)
        # in a kernel the result is typed: `a = ti.cast(0, ti.u8)` declares a u8 local
        return value if current_builder() is None else const(value, dtype)
    if x.dtype is dtype:
        return x
    return emit('cast', [x], dtype)


# ----------------------------------------------------------------------------
# Building ops with Taichi's type rules

def _operand_type(name, ta, tb):
    op = OPS[name]
    t = T.promote(ta, tb)
    if op.type_rule == 'float' and not t.is_float:
        return T.defaults.fp
    if op.type_rule == 'int' and t.is_float:
        raise TaichiTypeError(f'`{name}` needs integer operands, got {ta} and {tb}')
    return t


_FOLDING_FAILS = (ValueError, OverflowError, ZeroDivisionError)


def binary(name, a, b):
    if not is_value(a) and not is_value(b):
        if is_integer(a) and is_integer(b) and name in _INT_FOLDS:
            return fold_ints(name, int(a), int(b))
        try:
            return OPS[name].py(a, b)
        except _FOLDING_FAILS:      # log(-1), exp(1000), 1 / 0: left to run time (NaN, inf)
            t = T.promote(T.python_scalar_type(a), T.python_scalar_type(b))
            return binary(name, const(a, t), b)
    if not (is_value(a) or is_number(a)) or not (is_value(b) or is_number(b)):
        return NotImplemented
    if name in ('logical_and', 'logical_or'):
        return emit(name, [as_value(truth(a), T.i32), as_value(truth(b), T.i32)], T.i32)
    t = _operand_type(name, dtype_of(a, b), dtype_of(b, a))
    out = T.i32 if OPS[name].type_rule == 'bool' else t
    return emit(name, [as_value(a, t), as_value(b, t)], out)


def check_component(index, extent):
    """A run-time index into a vector or matrix must lie in [0, extent): the kernel raises
    IndexError otherwise (codegen and the interpreter: `check_component`)."""
    current_builder().emit('check_component', [as_value(index, T.i32)], None, extent=int(extent))


def is_integer(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def fold_ints(name, a, b):
    """Integer literals folded as the kernel would compute them: in the default integer
    type (i64 if an operand does not fit it), with its wrap-around and the defined results
    of codegen (x // 0 is x, x % 0 is 0, shifts by the amount modulo the width, pow
    through f64 saturated), so that `255 << 33` means the same with literals as with
    values. A negative power is Python's float (`2 ** -3` is 0.125)."""
    t = T.defaults.ip
    low, high = -2 ** (t.bits - 1), 2 ** (t.bits - 1) - 1
    if not (low <= a <= high and low <= b <= high):
        t, low, high = T.i64, -2 ** 63, 2 ** 63 - 1
    if name == 'pow' and b < 0:         # Python's (and Taichi's) 2 ** -3: the float 0.125
        try:
            return a ** b
        except (ZeroDivisionError, OverflowError):  # 0 ** -1: left to run time, as 0.0 ** -1 is (inf)
            return binary('pow', const(float(a), T.defaults.fp), b)
    result = _INT_FOLDS[name](a, b, t.bits)
    if name == 'pow':
        return max(low, min(high, result))
    return (result - low) % 2 ** t.bits + low


def _pow_through_f64(a, b, bits):
    try:
        value = pymath.pow(float(a), float(b))
    except (OverflowError, ValueError):          # C's pow: +-inf (0 ** -1, overflow)
        value = -pymath.inf if a < 0 and b % 2 == 1 else pymath.inf
    return int(value) if pymath.isfinite(value) else (2 ** 64 if value > 0 else -2 ** 64)


_INT_FOLDS = {
    'add': lambda a, b, bits: a + b,
    'sub': lambda a, b, bits: a - b,
    'mul': lambda a, b, bits: a * b,
    'floordiv': lambda a, b, bits: a // b if b else a,
    'mod': lambda a, b, bits: a % b if b else 0,
    'shl': lambda a, b, bits: a << (b & (bits - 1)),
    'shr': lambda a, b, bits: a >> (b & (bits - 1)),
    'pow': _pow_through_f64,
    'bit_and': lambda a, b, bits: a & b,
    'bit_or': lambda a, b, bits: a | b,
    'bit_xor': lambda a, b, bits: a ^ b,
}


def unary(name, a):
    if not is_value(a):
        try:
            return OPS[name].py(a)
        except _FOLDING_FAILS:      # see binary
            return unary(name, const(a, T.python_scalar_type(a)))
    t = a.dtype
    if OPS[name].type_rule == 'float' and not t.is_float:
        t = T.defaults.fp
    if OPS[name].type_rule == 'int' and t.is_float:
        raise TaichiTypeError(f'`{name}` needs an integer operand, got {t}')
    out = T.i32 if OPS[name].type_rule == 'bool' else t
    return emit(name, [as_value(a, t)], out)


def truth(c):
    """A condition as an i32 that is 0 or 1."""
    if not is_value(c):
        return 1 if c else 0
    if c.op in ('lt', 'le', 'gt', 'ge', 'eq', 'ne', 'logical_and', 'logical_or', 'logical_not'):
        return c
    return binary('ne', c, 0)


def select(cond, a, b):
    if not is_value(cond):
        return a if cond else b
    if not is_value(a) and not is_value(b):
        t = T.promote(dtype_of(a), dtype_of(b))
    else:
        t = T.promote(dtype_of(a, b), dtype_of(b, a))
    return emit('select', [truth(cond), as_value(a, t), as_value(b, t)], t)


def power(a, b):
    """x ** n with a small integer literal n is unrolled into multiplications. A negative
    integer literal n gives a float, as Python does; two integer values give an integer
    (debug mode reports a negative exponent there: its result is no integer)."""
    if not is_value(a) and not is_value(b):
        return a ** b
    if is_value(a) and isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 4:
        if b == 0:
            return const(1, a.dtype)
        result = a
        for _ in range(b - 1):
            result = binary('mul', result, a)
        return result
    if is_value(a) and is_integer(b) and b < 0:     # a float, as in Python: i ** -5 is 1 / i ** 5
        t = a.dtype if a.dtype.is_float else T.defaults.fp
        if b >= -4:
            return binary('truediv', 1.0, power(as_value(a, t), -b))
        return binary('pow', as_value(a, t), b)
    return binary('pow', a, b)


def py_min(x, y):
    """min on Python numbers, as kernels compute it (`_minmax`)."""
    return x if x < y or y != y else y


def py_max(x, y):
    return y if x < y or x != x else x


def _min_partials(a, out):
    takes_x = binary('logical_or', a[0] < a[1], a[1] != a[1])
    return [select(takes_x, 1.0, 0.0), select(takes_x, 0.0, 1.0)]


def _max_partials(a, out):
    takes_y = binary('logical_or', a[0] < a[1], a[0] != a[0])
    return [select(takes_y, 0.0, 1.0), select(takes_y, 1.0, 0.0)]


def _py_floordiv(a, b):
    return a // b


def _py_cmp(fn):
    return lambda a, b: int(fn(a, b))


def _sign(x):
    return select(x > 0, 1.0, select(x < 0, -1.0, 0.0))


# ----------------------------------------------------------------------------
# The table: per op its arity, type rule, Python evaluation and partials, written with
# the same arithmetic users write (engine/backend/llvm_ops.py lowers each to LLVM).

_def('add', 2, 'same', lambda a, b: a + b, lambda a, out: [1.0, 1.0])
_def('sub', 2, 'same', lambda a, b: a - b, lambda a, out: [1.0, -1.0])
_def('mul', 2, 'same', lambda a, b: a * b, lambda a, out: [a[1], a[0]])
_def('truediv', 2, 'float', lambda a, b: a / b, lambda a, out: [1.0 / a[1], -out / a[1]])
_def('floordiv', 2, 'same', _py_floordiv, lambda a, out: [None, None])
_def('mod', 2, 'same', lambda a, b: a % b, lambda a, out: [1.0, -unary('floor', a[0] / a[1])])
_def('pow', 2, 'same', lambda a, b: a ** b,
     lambda a, out: [a[1] * power(a[0], a[1] - 1),
                     select(a[0] > 0, out * unary('log', a[0]), 0.0)])
# the gradient goes to the operand returned: never to a NaN that lost
_def('min', 2, 'same', py_min, _min_partials, guard='one_operand')
_def('max', 2, 'same', py_max, _max_partials, guard='one_operand')
_def('atan2', 2, 'float', pymath.atan2,
     lambda a, out: [a[1] / (a[0] * a[0] + a[1] * a[1]), -a[0] / (a[0] * a[0] + a[1] * a[1])])
for _name, _fn in (('lt', lambda a, b: a < b), ('le', lambda a, b: a <= b),
                   ('gt', lambda a, b: a > b), ('ge', lambda a, b: a >= b),
                   ('eq', lambda a, b: a == b), ('ne', lambda a, b: a != b)):
    _def(_name, 2, 'bool', _py_cmp(_fn))
_def('logical_and', 2, 'bool', lambda a, b: int(bool(a and b)))
_def('logical_or', 2, 'bool', lambda a, b: int(bool(a or b)))
_def('logical_not', 1, 'bool', lambda a: int(not a))
_def('bit_and', 2, 'int', lambda a, b: a & b)
_def('bit_or', 2, 'int', lambda a, b: a | b)
_def('bit_xor', 2, 'int', lambda a, b: a ^ b)
_def('shl', 2, 'int', lambda a, b: a << b)
_def('shr', 2, 'int', lambda a, b: a >> b)
_def('bit_not', 1, 'int', lambda a: ~a)
# set bits and leading zero bits of a Python int taken as an i32 (the interpreter and codegen
# count in the operand's own width: engine/backend/interpret_scalars.py, llvm_ops.py)
_def('popcnt', 1, 'int', lambda a: bin(a & 0xFFFFFFFF).count('1'))
_def('clz', 1, 'int', lambda a: 32 - (a & 0xFFFFFFFF).bit_length())

_def('neg', 1, 'same', lambda a: -a, lambda a, out: [-1.0])
_def('abs', 1, 'same', builtins.abs, lambda a, out: [_sign(a[0])])
_def('sin', 1, 'float', pymath.sin, lambda a, out: [unary('cos', a[0])])
_def('cos', 1, 'float', pymath.cos, lambda a, out: [-unary('sin', a[0])])
_def('tan', 1, 'float', pymath.tan, lambda a, out: [1.0 + out * out])
_def('asin', 1, 'float', pymath.asin, lambda a, out: [unary('rsqrt', 1.0 - a[0] * a[0])])
_def('acos', 1, 'float', pymath.acos, lambda a, out: [-unary('rsqrt', 1.0 - a[0] * a[0])])
_def('atan', 1, 'float', pymath.atan, lambda a, out: [1.0 / (1.0 + a[0] * a[0])])
_def('tanh', 1, 'float', pymath.tanh, lambda a, out: [1.0 - out * out])
_def('exp', 1, 'float', pymath.exp, lambda a, out: [out])
_def('log', 1, 'float', pymath.log, lambda a, out: [1.0 / a[0]])
_def('sqrt', 1, 'float', pymath.sqrt, lambda a, out: [0.5 / out])
_def('rsqrt', 1, 'float', lambda a: 1.0 / pymath.sqrt(a), lambda a, out: [-0.5 * out / a[0]])
_def('floor', 1, 'float', lambda a: float(pymath.floor(a)), lambda a, out: [None])
_def('ceil', 1, 'float', lambda a: float(pymath.ceil(a)), lambda a, out: [None])
_def('round', 1, 'float', lambda a: float(pymath.floor(a + 0.5)) if a >= 0 else -float(pymath.floor(-a + 0.5)),
     lambda a, out: [None])

# select(cond, a, b) and cast are built by `select` and `cast` above; integer
# results of a cast carry no gradient, which the autodiff passes see from the type.
_def('cast', 1, 'same', None, lambda a, out: [1.0])
_def('select', 3, 'same', lambda c, a, b: a if c else b,
     lambda a, out: [None, select(a[0], 1.0, 0.0), select(a[0], 0.0, 1.0)], guard='one_operand')


# ti.stop_grad(x): the value passes, its gradient does not.
_def('stop_grad', 1, 'same', lambda a: a, lambda a, out: [None])
