"""Which partial derivatives are finite wherever they are evaluated, so that autodiff's
chain terms need no NaN guard (engine/ir/ops.py, `chain`): a bounds analysis of the IR.
"""
import math as pymath
from ..ir.nodes import defined_in, used_from_outside, walk


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
