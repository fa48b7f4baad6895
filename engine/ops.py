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
from llvmlite import ir as llir

from . import dtypes as T
from .errors import TaichiSyntaxError, TaichiTypeError
from .ir import Stmt, current_builder, defined_in, used_from_outside, walk


@dataclass(frozen=True)
class OpDef:
    name: str
    arity: int
    type_rule: str              # 'same', 'float', 'bool', 'int'
    lower: Callable             # (b, args, in_dtype, out_dtype) -> llvm value
    py: Optional[Callable]      # Python evaluation, or None
    partials: Optional[Callable] = None   # (args, out) -> [d out/d arg_i or None]
    # 'one_operand': d out / d arg is 0 or 1 (see `chain`).
    guard: Optional[str] = None


OPS = {}


def _def(name, arity, type_rule, lower, py=None, partials=None, guard=None):
    OPS[name] = OpDef(name, arity, type_rule, lower, py, partials, guard)


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


# NaN guards (`chain`) are needed only where a partial can be non-finite. `finite_partials`
# finds the statements whose partials cannot be: it bounds every float value from below
# and knows whether it is always finite (field values and arguments are taken as finite:
# a NaN stored in a field is the program's own NaN; values that overflow to inf are the
# program's own too), and asks per op:
_SMOOTH = frozenset({'add', 'sub', 'mul', 'neg', 'abs', 'sin', 'cos', 'tanh', 'atan', 'min', 'max',
                     'select', 'cast', 'floor', 'ceil', 'round', 'stop_grad'})     # operands finite
_AWAY_FROM_ZERO = {'sqrt': 0, 'rsqrt': 0, 'log': 0, 'truediv': 1}     # and this operand >= c > 0
_SOURCES = frozenset({'arg', 'loop_index', 'global_load', 'atomic', 'ndarray_shape', 'random'})
_INF = float('inf')


def _bound(s, bounds, cells, single):
    """(always finite, lower bound) of a float statement, from its operands' bounds (a
    local not stored yet is bounded by +inf; a bound that comes out NaN is none)."""
    finite, low = _bound_of_op(s, bounds, cells, single)
    return finite, (low if low == low else -_INF)


def _bound_of_op(s, bounds, cells, single):
    if s.op == 'const':
        v = float(s.attrs['value'])
        return (True, v) if pymath.isfinite(v) else (False, -_INF)
    if s.op in _SOURCES or not s.dtype.is_float:
        return True, -_INF
    if s.op == 'local_load':
        return cells.get(s.args[0], (True, _INF))
    ops_ = [bounds.get(a, (False, -_INF)) for a in s.args]
    fin = all(f for f, _ in ops_)
    lows = [low for _, low in ops_]
    op = s.op
    if op == 'add':
        return fin, lows[0] + lows[1]
    if op == 'mul':
        if _same_value(*s.args, single):
            return fin, max(lows[0], 0.0) ** 2
        return fin, lows[0] * lows[1] if lows[0] >= 0 and lows[1] >= 0 else -_INF
    if op in ('sub', 'neg'):
        return fin, -_INF
    if op == 'abs':
        return fin, max(lows[0], 0.0)
    if op == 'max':
        return fin, max(lows)
    if op == 'min':
        return fin, min(lows)
    if op == 'select':
        return ops_[1][0] and ops_[2][0], min(_taken_low(s.args[0], s.args[1], lows[1], single), lows[2])
    if op in ('sin', 'cos', 'tanh'):
        return fin, -1.0
    if op == 'atan':
        return fin, -2.0
    if op in ('cast', 'floor', 'ceil', 'round', 'stop_grad'):
        return fin, lows[0] - 1.0
    if op == 'sqrt':
        return fin and lows[0] >= 0, pymath.sqrt(lows[0]) if lows[0] >= 0 else -_INF
    if op in ('rsqrt', 'truediv', 'log'):
        k = _AWAY_FROM_ZERO[op]
        safe = fin and _away_from_zero(lows[k], s.dtype)
        return safe, (0.0 if op == 'rsqrt' or (op == 'truediv' and lows[0] >= 0) else -_INF)
    if op == 'exp':
        return False, 0.0
    return False, -_INF


def _away_from_zero(low, dtype):
    """x >= low keeps 1/x, 1/x^2 and x^-1.5 finite in the type (f32: low > 5.4e-20)."""
    return low > (5.5e-20 if dtype.bits == 32 else 7.5e-155)


def _taken_low(cond, arm, low, single):
    """The lower bound of the arm a select takes when `cond` holds: `select(m > c, m, 1.0)`
    keeps m above c (the guard of a division by a scale)."""
    if cond.op in ('gt', 'ge') and _same_value(cond.args[0], arm, single) and cond.args[1].op == 'const':
        return max(low, float(cond.args[1].attrs['value']))
    if cond.op in ('lt', 'le') and _same_value(cond.args[1], arm, single) and cond.args[0].op == 'const':
        return max(low, float(cond.args[0].attrs['value']))
    return low


def _same_value(a, b, single):
    """Two operands that hold one value: one statement, loads of a local stored once
    (`m = abs(x)`), or the two loads of `x[i] * x[i]`."""
    a, b = single.get(a, a), single.get(b, b)
    if a is b:
        return True
    return (a.op == b.op == 'global_load' and a.attrs['target'] is b.attrs['target']
            and a.attrs['component'] == b.attrs['component'] and len(a.args) == len(b.args)
            and all(x is y for x, y in zip(a.args, b.args)))


def _outside_bounds(body, depth=64):
    """Bounds of the values `body` uses but does not define (the arguments of an inlined
    `ti.ad` transform): an expression of sources and constants is bounded as inside; a
    local's value or anything deeper than `depth` is unknown."""
    inside = defined_in(body)
    memo = {}

    def bound(s, depth):
        if s not in memo:
            if s.dtype is None or s.op == 'local_load' or depth == 0:
                memo[s] = (False, -_INF)
            else:
                args = {a: bound(a, depth - 1) for a in s.args if a not in inside}
                memo[s] = _bound(s, args, {}, {})
        return memo[s]
    return {a: bound(a, depth) for a in used_from_outside(body)}


def finite_partials(body):
    """The statements of `body` whose partials are finite wherever they are evaluated, so
    that their chain terms need no NaN guard: a smooth op of finite operands, or sqrt,
    rsqrt, log or a division whose (divisor) operand is bounded away from zero
    (`rsqrt(max(x * x + y * y, 0.5))`, `1 / (w + 1.0)` with w >= 0). Locals take the
    bounds of everything stored into them (a bound still moving after a few passes, as a
    loop counter's, is dropped)."""
    statements = [s for s in walk(body) if s.dtype is not None and s.op != 'alloca']
    stores = [s for s in walk(body) if s.op in ('local_store', 'local_atomic') and s.args[0].dtype.is_float]
    stored = {}
    for st in stores:
        stored.setdefault(st.args[0], []).append(st)
    # two loads of a local stored once, next to each other in an expression, read the value
    # that one store wrote (`m = abs(x)`: `select(m > c, m, 1.0)`)
    single = {s: stored[s.args[0]][0].args[1] for s in statements if s.op == 'local_load'
              and len(stored.get(s.args[0], ())) == 1 and stored[s.args[0]][0].op == 'local_store'}
    cells = {}
    outside = _outside_bounds(body)
    outside.update((s.attrs['index'], (True, -_INF)) for s in walk(body) if s.op == 'for')     # sources
    for rounds in range(len(stores) + 8):
        bounds = dict(outside)
        for s in statements:
            bounds[s] = _bound(s, bounds, cells, single)
        updated = {}
        for st in stores:
            cell, value = st.args[0], st.args[1]
            fin, low = bounds.get(value, (False, -_INF))
            if st.op == 'local_atomic':
                low = -_INF
            old = updated.get(cell, (True, _INF))
            updated[cell] = (old[0] and fin, min(old[1], low))
        if rounds >= 4:         # widen: bounds still moving are dropped
            updated = {c: (v[0], v[1] if v[1] >= cells.get(c, v)[1] else -_INF) for c, v in updated.items()}
        if updated == cells:
            break
        cells = updated
    else:
        return set()            # not settled: guard everything
    finite = {s for s, (f, _) in bounds.items() if f}

    def clear(s):
        if s.op in _SMOOTH:
            return all(a in finite for a in s.args if a.dtype.is_float)
        if s.op in _AWAY_FROM_ZERO:
            k = _AWAY_FROM_ZERO[s.op]
            low = bounds.get(s.args[k], (False, -_INF))[1]
            return all(a in finite for a in s.args) and _away_from_zero(low, s.dtype)
        return False
    return {s for s in statements if s.dtype.is_float and clear(s)}


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
    import numpy as np
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
    values."""
    t = T.defaults.ip
    low, high = -2 ** (t.bits - 1), 2 ** (t.bits - 1) - 1
    if not (low <= a <= high and low <= b <= high):
        t, low, high = T.i64, -2 ** 63, 2 ** 63 - 1
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
    """x ** n with a small integer literal n is unrolled into multiplications."""
    if not is_value(a) and not is_value(b):
        return a ** b
    if is_value(a) and isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 4:
        if b == 0:
            return const(1, a.dtype)
        result = a
        for _ in range(b - 1):
            result = binary('mul', result, a)
        return result
    if is_value(a) and isinstance(b, int) and -4 <= b < 0:
        t = a.dtype if a.dtype.is_float else T.defaults.fp
        return binary('truediv', 1.0 if t.is_float else 1, power(as_value(a, t), -b))
    return binary('pow', a, b)


# ----------------------------------------------------------------------------
# Lowering helpers

def _intrinsic(b, name, ty, args):
    full = f'llvm.{name}.{"f32" if isinstance(ty, llir.FloatType) else "f64"}'
    fn = b.module.globals.get(full)
    if fn is None:
        fn = llir.Function(b.module, llir.FunctionType(ty, [ty] * len(args)), name=full)
    return b.call(fn, args)


def _math(name):
    return lambda b, a, ti, to: _intrinsic(b, name, to.llvm, a)


def _arith(fop, sop, uop=None):
    def lower(b, a, ti, to):
        if to.is_float:
            return getattr(b, fop)(*a)
        return getattr(b, sop if to.signed else (uop or sop))(*a)
    return lower


def _safe_divisor(b, d, signed=False):
    """Integer division must not trap the process: by zero it divides by 1 instead; signed,
    by -1 it divides by 1 too (INT_MIN / -1 traps), and the caller negates the quotient."""
    trap = b.icmp_signed('==', d, llir.Constant(d.type, 0))
    if signed:
        trap = b.or_(trap, b.icmp_signed('==', d, llir.Constant(d.type, -1)))
    return b.select(trap, llir.Constant(d.type, 1), d)


def _remainder_sign_differs(b, r, y):
    """C's truncating remainder needs Python's floor correction when r != 0 and sign(r) != sign(y)."""
    zero = llir.Constant(r.type, 0)
    return b.and_(b.icmp_signed('!=', r, zero),
                  b.icmp_signed('!=', b.icmp_signed('<', r, zero), b.icmp_signed('<', y, zero)))


def _lower_floordiv(b, a, ti, to):
    x, y = a
    if to.is_float:
        return _intrinsic(b, 'floor', to.llvm, [b.fdiv(x, y)])
    if not to.signed:
        return b.udiv(x, _safe_divisor(b, y))
    minus_one = b.icmp_signed('==', y, llir.Constant(y.type, -1))
    y = _safe_divisor(b, y, signed=True)
    q, r = b.sdiv(x, y), b.srem(x, y)
    q = b.sub(q, b.zext(_remainder_sign_differs(b, r, y), to.llvm))
    return b.select(minus_one, b.neg(x), q)          # x // -1 is -x, wrapping at INT_MIN


def _lower_mod(b, a, ti, to):
    x, y = a
    if to.is_float:
        q = _intrinsic(b, 'floor', to.llvm, [b.fdiv(x, y)])
        return b.fsub(x, b.fmul(q, y))
    if not to.signed:
        return b.urem(x, _safe_divisor(b, y))
    y = _safe_divisor(b, y, signed=True)             # x % -1 is 0, as x % 1
    r = b.srem(x, y)
    return b.select(_remainder_sign_differs(b, r, y), b.add(r, y), r)


def _lower_pow(b, a, ti, to):
    if to.is_float:
        return _intrinsic(b, 'pow', to.llvm, a)
    f64 = llir.DoubleType()
    conv = b.sitofp if to.signed else b.uitofp
    r = _intrinsic(b, 'pow', f64, [conv(a[0], f64), conv(a[1], f64)])
    return float_to_int(b, r, to)


_FCMP = {'lt': '<', 'le': '<=', 'gt': '>', 'ge': '>=', 'eq': '==', 'ne': '!='}


def _cmp(name):
    def lower(b, a, ti, to):
        if ti.is_float:
            bit = (b.fcmp_unordered if name == 'ne' else b.fcmp_ordered)(_FCMP[name], *a)
        elif ti.signed:
            bit = b.icmp_signed(_FCMP[name], *a)
        else:
            bit = b.icmp_unsigned(_FCMP[name], *a)
        return b.zext(bit, to.llvm)
    return lower


def _minmax(name):
    """min keeps x where x < y, max where not; a NaN operand loses to a number (C's
    fmin/fmax, LLVM's minnum/maxnum: Taichi's rule), and ties keep min's y, max's x."""
    def lower(b, a, ti, to):
        x, y = a
        if to.is_float:
            loser = y if name == 'min' else x       # the operand a NaN makes lose
            less = b.or_(b.fcmp_ordered('<', x, y), b.fcmp_unordered('uno', loser, loser))
        else:
            less = (b.icmp_signed if to.signed else b.icmp_unsigned)('<', x, y)
        return b.select(less, x, y) if name == 'min' else b.select(less, y, x)
    return lower


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


def _lower_abs(b, a, ti, to):
    if to.is_float:
        return _intrinsic(b, 'fabs', to.llvm, a)
    if not to.signed:
        return a[0]
    neg = b.icmp_signed('<', a[0], llir.Constant(to.llvm, 0))
    return b.select(neg, b.neg(a[0]), a[0])


def _lower_neg(b, a, ti, to):
    return b.fneg(a[0]) if to.is_float else b.neg(a[0])


def _lower_rsqrt(b, a, ti, to):
    return b.fdiv(llir.Constant(to.llvm, 1.0), _intrinsic(b, 'sqrt', to.llvm, a))


def _logical(fn):
    def lower(b, a, ti, to):
        bits = [b.icmp_signed('!=', x, llir.Constant(x.type, 0)) for x in a]
        return b.zext(fn(b, *bits), to.llvm)
    return lower


def lower_cast(b, x, src, dst):
    if src is dst:
        return x
    if src.is_float and dst.is_float:
        return b.fpext(x, dst.llvm) if dst.bits > src.bits else b.fptrunc(x, dst.llvm)
    if src.is_float:
        return float_to_int(b, x, dst)
    if dst.is_float:
        return b.sitofp(x, dst.llvm) if src.signed else b.uitofp(x, dst.llvm)
    if dst.bits > src.bits:
        return b.sext(x, dst.llvm) if src.signed else b.zext(x, dst.llvm)
    if dst.bits < src.bits:
        return b.trunc(x, dst.llvm)
    return x


def float_to_int(b, x, dst):
    """Truncation toward zero, saturated at the type's limits, NaN -> 0 (C leaves NaN and
    values out of range undefined: an index cast from a NaN could be anything)."""
    kind = 'fptosi' if dst.signed else 'fptoui'
    full = f'llvm.{kind}.sat.i{dst.bits}.{"f32" if isinstance(x.type, llir.FloatType) else "f64"}'
    fn = b.module.globals.get(full)
    if fn is None:
        fn = llir.Function(b.module, llir.FunctionType(dst.llvm, [x.type]), name=full)
    return b.call(fn, [x])


def _shift_amount(b, amount, to):
    """A shift by the type's width or more is undefined in C and LLVM: the amount is taken
    modulo the width, as x86 does (x << 33 is x << 1 for 32 bits)."""
    return b.and_(amount, llir.Constant(amount.type, to.bits - 1))


def _py_floordiv(a, b):
    return a // b


def _py_cmp(fn):
    return lambda a, b: int(fn(a, b))


def _sign(x):
    return select(x > 0, 1.0, select(x < 0, -1.0, 0.0))


# ----------------------------------------------------------------------------
# The table. Partials are written with the same arithmetic users write.

_def('add', 2, 'same', _arith('fadd', 'add'), lambda a, b: a + b,
     lambda a, out: [1.0, 1.0])
_def('sub', 2, 'same', _arith('fsub', 'sub'), lambda a, b: a - b,
     lambda a, out: [1.0, -1.0])
_def('mul', 2, 'same', _arith('fmul', 'mul'), lambda a, b: a * b,
     lambda a, out: [a[1], a[0]])
_def('truediv', 2, 'float', _arith('fdiv', 'sdiv', 'udiv'), lambda a, b: a / b,
     lambda a, out: [1.0 / a[1], -out / a[1]])
_def('floordiv', 2, 'same', _lower_floordiv, _py_floordiv, lambda a, out: [None, None])
_def('mod', 2, 'same', _lower_mod, lambda a, b: a % b,
     lambda a, out: [1.0, -unary('floor', a[0] / a[1])])
_def('pow', 2, 'same', _lower_pow, lambda a, b: a ** b,
     lambda a, out: [a[1] * power(a[0], a[1] - 1),
                     select(a[0] > 0, out * unary('log', a[0]), 0.0)])
# the gradient goes to the operand returned: never to a NaN that lost
_def('min', 2, 'same', _minmax('min'), py_min, _min_partials, guard='one_operand')
_def('max', 2, 'same', _minmax('max'), py_max, _max_partials, guard='one_operand')
_def('atan2', 2, 'float', _math('atan2'), pymath.atan2,
     lambda a, out: [a[1] / (a[0] * a[0] + a[1] * a[1]), -a[0] / (a[0] * a[0] + a[1] * a[1])])
for _name, _fn in (('lt', lambda a, b: a < b), ('le', lambda a, b: a <= b),
                   ('gt', lambda a, b: a > b), ('ge', lambda a, b: a >= b),
                   ('eq', lambda a, b: a == b), ('ne', lambda a, b: a != b)):
    _def(_name, 2, 'bool', _cmp(_name), _py_cmp(_fn))
_def('logical_and', 2, 'bool', _logical(lambda b, x, y: b.and_(x, y)), lambda a, b: int(bool(a and b)))
_def('logical_or', 2, 'bool', _logical(lambda b, x, y: b.or_(x, y)), lambda a, b: int(bool(a or b)))
_def('logical_not', 1, 'bool', _logical(lambda b, x: b.not_(x)), lambda a: int(not a))
_def('bit_and', 2, 'int', lambda b, a, ti, to: b.and_(*a), lambda a, b: a & b)
_def('bit_or', 2, 'int', lambda b, a, ti, to: b.or_(*a), lambda a, b: a | b)
_def('bit_xor', 2, 'int', lambda b, a, ti, to: b.xor(*a), lambda a, b: a ^ b)
_def('shl', 2, 'int', lambda b, a, ti, to: b.shl(a[0], _shift_amount(b, a[1], to)), lambda a, b: a << b)
_def('shr', 2, 'int', lambda b, a, ti, to: (b.ashr if to.signed else b.lshr)(a[0], _shift_amount(b, a[1], to)),
     lambda a, b: a >> b)
_def('bit_not', 1, 'int', lambda b, a, ti, to: b.not_(a[0]), lambda a: ~a)

_def('neg', 1, 'same', _lower_neg, lambda a: -a, lambda a, out: [-1.0])
_def('abs', 1, 'same', _lower_abs, builtins.abs, lambda a, out: [_sign(a[0])])
_def('sin', 1, 'float', _math('sin'), pymath.sin, lambda a, out: [unary('cos', a[0])])
_def('cos', 1, 'float', _math('cos'), pymath.cos, lambda a, out: [-unary('sin', a[0])])
_def('tan', 1, 'float', _math('tan'), pymath.tan, lambda a, out: [1.0 + out * out])
_def('asin', 1, 'float', _math('asin'), pymath.asin,
     lambda a, out: [unary('rsqrt', 1.0 - a[0] * a[0])])
_def('acos', 1, 'float', _math('acos'), pymath.acos,
     lambda a, out: [-unary('rsqrt', 1.0 - a[0] * a[0])])
_def('atan', 1, 'float', _math('atan'), pymath.atan, lambda a, out: [1.0 / (1.0 + a[0] * a[0])])
_def('tanh', 1, 'float', _math('tanh'), pymath.tanh, lambda a, out: [1.0 - out * out])
_def('exp', 1, 'float', _math('exp'), pymath.exp, lambda a, out: [out])
_def('log', 1, 'float', _math('log'), pymath.log, lambda a, out: [1.0 / a[0]])
_def('sqrt', 1, 'float', _math('sqrt'), pymath.sqrt, lambda a, out: [0.5 / out])
_def('rsqrt', 1, 'float', _lower_rsqrt, lambda a: 1.0 / pymath.sqrt(a),
     lambda a, out: [-0.5 * out / a[0]])
_def('floor', 1, 'float', _math('floor'), lambda a: float(pymath.floor(a)), lambda a, out: [None])
_def('ceil', 1, 'float', _math('ceil'), lambda a: float(pymath.ceil(a)), lambda a, out: [None])
_def('round', 1, 'float', _math('round'), lambda a: float(pymath.floor(a + 0.5)) if a >= 0 else -float(pymath.floor(-a + 0.5)),
     lambda a, out: [None])

# select(cond, a, b) and cast are built by `select` and `cast` above; integer
# results of a cast carry no gradient, which the autodiff passes see from the type.
_def('cast', 1, 'same', lambda b, a, ti, to: lower_cast(b, a[0], ti, to), None,
     lambda a, out: [1.0])
_def('select', 3, 'same', lambda b, a, ti, to: b.select(b.icmp_signed('!=', a[0], llir.Constant(a[0].type, 0)), a[1], a[2]),
     lambda c, a, b: a if c else b,
     lambda a, out: [None, select(a[0], 1.0, 0.0), select(a[0], 0.0, 1.0)], guard='one_operand')


# ti.stop_grad(x): the value passes, its gradient does not.
_def('stop_grad', 1, 'same', lambda b, a, ti, to: a[0], lambda a: a, lambda a, out: [None])
