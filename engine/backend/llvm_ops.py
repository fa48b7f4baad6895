"""Each op of the op table (engine/ir/ops.py) lowered to LLVM IR: `LOWER[op](b, args,
in_dtype, out_dtype)` with b an llvmlite IRBuilder. Shared by every LLVM backend.

Where C leaves a result undefined, the lowering defines it (integer division by zero,
INT_MIN / -1, shifts by the width or more, float -> int out of range, min/max with a
NaN), and the interpreter (engine/backend/interpret_scalars.py) follows the same rules.
"""
from llvmlite import ir as llir


def llvm_type(dtype):
    """The LLVM type of a scalar data type."""
    if dtype.is_float:
        return llir.FloatType() if dtype.bits == 32 else llir.DoubleType()
    return llir.IntType(dtype.bits)


def _intrinsic(b, name, ty, args):
    full = f'llvm.{name}.{"f32" if isinstance(ty, llir.FloatType) else "f64"}'
    fn = b.module.globals.get(full)
    if fn is None:
        fn = llir.Function(b.module, llir.FunctionType(ty, [ty] * len(args)), name=full)
    return b.call(fn, args)


def _math(name):
    return lambda b, a, ti, to: _intrinsic(b, name, llvm_type(to), a)


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
        return _intrinsic(b, 'floor', llvm_type(to), [b.fdiv(x, y)])
    if not to.signed:
        return b.udiv(x, _safe_divisor(b, y))
    minus_one = b.icmp_signed('==', y, llir.Constant(y.type, -1))
    y = _safe_divisor(b, y, signed=True)
    q, r = b.sdiv(x, y), b.srem(x, y)
    q = b.sub(q, b.zext(_remainder_sign_differs(b, r, y), llvm_type(to)))
    return b.select(minus_one, b.neg(x), q)          # x // -1 is -x, wrapping at INT_MIN


def _lower_mod(b, a, ti, to):
    x, y = a
    if to.is_float:
        q = _intrinsic(b, 'floor', llvm_type(to), [b.fdiv(x, y)])
        return b.fsub(x, b.fmul(q, y))
    if not to.signed:
        return b.urem(x, _safe_divisor(b, y))
    y = _safe_divisor(b, y, signed=True)             # x % -1 is 0, as x % 1
    r = b.srem(x, y)
    return b.select(_remainder_sign_differs(b, r, y), b.add(r, y), r)


def _lower_pow(b, a, ti, to):
    if to.is_float:
        return _intrinsic(b, 'pow', llvm_type(to), a)
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
        return b.zext(bit, llvm_type(to))
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


def _lower_abs(b, a, ti, to):
    if to.is_float:
        return _intrinsic(b, 'fabs', llvm_type(to), a)
    if not to.signed:
        return a[0]
    neg = b.icmp_signed('<', a[0], llir.Constant(llvm_type(to), 0))
    return b.select(neg, b.neg(a[0]), a[0])


def _lower_neg(b, a, ti, to):
    return b.fneg(a[0]) if to.is_float else b.neg(a[0])


def _lower_rsqrt(b, a, ti, to):
    return b.fdiv(llir.Constant(llvm_type(to), 1.0), _intrinsic(b, 'sqrt', llvm_type(to), a))


def _logical(fn):
    def lower(b, a, ti, to):
        bits = [b.icmp_signed('!=', x, llir.Constant(x.type, 0)) for x in a]
        return b.zext(fn(b, *bits), llvm_type(to))
    return lower


def lower_cast(b, x, src, dst):
    if src is dst:
        return x
    if src.is_float and dst.is_float:
        return b.fpext(x, llvm_type(dst)) if dst.bits > src.bits else b.fptrunc(x, llvm_type(dst))
    if src.is_float:
        return float_to_int(b, x, dst)
    if dst.is_float:
        return b.sitofp(x, llvm_type(dst)) if src.signed else b.uitofp(x, llvm_type(dst))
    if dst.bits > src.bits:
        return b.sext(x, llvm_type(dst)) if src.signed else b.zext(x, llvm_type(dst))
    if dst.bits < src.bits:
        return b.trunc(x, llvm_type(dst))
    return x


def float_to_int(b, x, dst):
    """Truncation toward zero, saturated at the type's limits, NaN -> 0 (C leaves NaN and
    values out of range undefined: an index cast from a NaN could be anything)."""
    kind = 'fptosi' if dst.signed else 'fptoui'
    full = f'llvm.{kind}.sat.i{dst.bits}.{"f32" if isinstance(x.type, llir.FloatType) else "f64"}'
    fn = b.module.globals.get(full)
    if fn is None:
        fn = llir.Function(b.module, llir.FunctionType(llvm_type(dst), [x.type]), name=full)
    return b.call(fn, [x])


def _shift_amount(b, amount, to):
    """A shift by the type's width or more is undefined in C and LLVM: the amount is taken
    modulo the width, as x86 does (x << 33 is x << 1 for 32 bits)."""
    return b.and_(amount, llir.Constant(amount.type, to.bits - 1))


def _bits(fn):
    return lambda b, a, ti, to: fn(b, *a)


LOWER = {
    'add': _arith('fadd', 'add'), 'sub': _arith('fsub', 'sub'), 'mul': _arith('fmul', 'mul'),
    'truediv': _arith('fdiv', 'sdiv', 'udiv'), 'floordiv': _lower_floordiv, 'mod': _lower_mod,
    'pow': _lower_pow, 'min': _minmax('min'), 'max': _minmax('max'), 'atan2': _math('atan2'),
    **{name: _cmp(name) for name in _FCMP},
    'logical_and': _logical(lambda b, x, y: b.and_(x, y)), 'logical_or': _logical(lambda b, x, y: b.or_(x, y)),
    'logical_not': _logical(lambda b, x: b.not_(x)),
    'bit_and': _bits(lambda b, x, y: b.and_(x, y)), 'bit_or': _bits(lambda b, x, y: b.or_(x, y)),
    'bit_xor': _bits(lambda b, x, y: b.xor(x, y)),
    'shl': lambda b, a, ti, to: b.shl(a[0], _shift_amount(b, a[1], to)),
    'shr': lambda b, a, ti, to: (b.ashr if to.signed else b.lshr)(a[0], _shift_amount(b, a[1], to)),
    'bit_not': _bits(lambda b, x: b.not_(x)),
    'popcnt': _bits(lambda b, x: b.ctpop(x)),
    'clz': _bits(lambda b, x: b.ctlz(x, llir.Constant(llir.IntType(1), 0))),     # defined at 0: the width
    'neg': _lower_neg, 'abs': _lower_abs, 'rsqrt': _lower_rsqrt,
    **{name: _math(name) for name in ('sin', 'cos', 'tan', 'asin', 'acos', 'atan', 'tanh', 'exp', 'log',
                                      'sqrt', 'floor', 'ceil', 'round')},
    'cast': lambda b, a, ti, to: lower_cast(b, a[0], ti, to),
    'select': lambda b, a, ti, to: b.select(b.icmp_signed('!=', a[0], llir.Constant(a[0].type, 0)), a[1], a[2]),
    'stop_grad': lambda b, a, ti, to: a[0],
}
