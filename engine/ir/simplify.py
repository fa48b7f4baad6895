"""Simplification of a kernel's IR before differentiation: `simplify(body) -> body`.

Every rewrite here is exact: the simplified kernel computes the same bits as the IR as
built (the interpreter and debug mode run that one), and its adjoint the same gradients.

1. `merge_common`, one walk in program order, merges a statement into one that is known
   to hold its value:
   - pure ops (the op table but `random`, constants, kernel arguments, ndarray shapes)
     with the same operands and attributes, where the first dominates the second (it
     comes earlier in the same block or in an enclosing one);
   - a `local_load` and the value last stored to its local, or an earlier load of it,
     where no store between them may have changed the local (a store anywhere in a
     nested block counts: loops repeat); `ti.func` arguments reach the body through such
     locals (store forwarding);
   - a `global_load` and an earlier one of the same target, component and indices in the
     same block, with no write in between that may touch the target. Writes to a field
     touch that field only (fields own their storage); a write to an ndarray argument may
     touch anything (another ndarray, or a field through its `.data`), and so may a
     field's write an ndarray. Reads in nested blocks never merge with reads outside: a
     loop may write between iterations. Another thread writing the element between the
     two reads is a data race in the user's program, whose result Taichi does not define;
   - an op of constants, computed in the statement's precision (`fold`), and the exact
     identities `x * 1`, `x / 1`, `x - (+0.0)`, `x + (-0.0)` (integers: `x + 0` too), a
     select of one value or on a constant condition.
   A stencil reads one element several times, each read with index arithmetic of its own
   (wave's `2 * p[t-1, i, j] - p[t-2, i, j] + a * (... - 4 * p[t-1, i, j])`). LLVM merges
   those reads in the primal kernel, but in the adjoint each read becomes a read-modify-
   write of the gradient, which LLVM cannot merge: merged here, one read of the element
   gets one adjoint add.
2. `eliminate_dead_code` removes what no effect depends on: pure statements and local
   loads whose values nothing uses, stores to locals that nothing reads, `if`s and `for`s
   left without effects. Kept always: global loads and stores (their indices are
   checked), atomics, prints, asserts, component checks, `random` (it advances the
   generator), autodiff stacks, `while` loops (one may never end), jumps and returns. Dead loads matter most in the adjoint, which recomputes
   every primal value it keeps.
"""
import math

import numpy as np

from ..core import passes
from . import ops
from .nodes import walk


def simplify(body):
    """The simplified IR of a kernel: common values merged, constants folded, dead code
    removed (in place; returns the body)."""
    return eliminate_dead_code(merge_common(body))


# ----------------------------------------------------------------------------
# Merging: forwarding, common values, folding

_PURE_SOURCES = frozenset({'const', 'arg', 'ndarray_shape'})
_WRITES = frozenset({'global_store', 'atomic'})
_LOCAL_WRITES = frozenset({'local_store', 'local_atomic'})


def merge_common(body):
    """Merges repeated values of `body` in place (and folds constants); returns it."""
    _Merger(body).block(body, {}, {})
    return body


def _is_pure(stmt):
    return stmt.op in _PURE_SOURCES or (stmt.op in ops.OPS and stmt.op != 'random')


def _attr_key(value):
    if isinstance(value, float):
        return repr(value)          # -0.0 and 0.0 differ; nan is one key
    try:
        hash(value)
        return value
    except TypeError:
        return id(value)


def _key(stmt):
    attrs = tuple(sorted((k, _attr_key(v)) for k, v in stmt.attrs.items()))
    return stmt.op, stmt.dtype, tuple(a.id for a in stmt.args), attrs


def _may_touch(written, read):
    """Whether a write to `written` may change what a read of `read` sees. Fields own their
    storage, but an ndarray argument may be any array: another ndarray, or a field's own
    memory (`field.data`)."""
    return written is read or not _owns_storage(written) or not _owns_storage(read)


def _owns_storage(target):
    return getattr(target, 'owns_storage', False)


class _Merger:
    def __init__(self, body):
        self.same = {}          # merged statement -> the statement it is merged into
        # the products that NaN guards (ops.chain) hold: the passes that differentiate
        # this IR again take them apart, so they stay products
        self.kept_products = {s.args[2] for s in walk(body) if s.attrs.get('nan_guard')}

    def block(self, block, outer, outer_locals):
        pure = dict(outer)      # values of enclosing blocks dominate this one
        loads = {}              # reads of this block since the last write to their storage
        local = dict(outer_locals)      # local -> its value, while no store may change it
        kept = []
        for stmt in block.stmts:
            stmt.args = [self.same.get(a, a) for a in stmt.args]
            if stmt.blocks():
                for cell in _locals_written(stmt):
                    local.pop(cell, None)
                for inner in stmt.blocks():
                    self.block(inner, pure, local)
            new = self.rewritten(stmt)
            if new is not stmt and any(new is a for a in stmt.args):
                self.same[stmt] = new           # an identity: stmt is one of its operands
                continue
            if not self.merged(new, pure, loads, local):
                kept.append(new)
            if new is not stmt:                 # a folded constant, maybe merged too
                self.same[stmt] = self.same.get(new, new)
        block.stmts[:] = kept

    def rewritten(self, stmt):
        """stmt, an operand it equals, or the new constant it folds to."""
        folded = None if stmt in self.kept_products else fold(stmt)
        return stmt if folded is None else folded

    def merged(self, stmt, pure, loads, local):
        """Whether stmt merges into an earlier statement; if not, records what it makes known."""
        if stmt.op == 'local_load':
            known = local.get(stmt.args[0])
            if known is not None and known.dtype == stmt.dtype:
                self.same[stmt] = known
                return True
            local[stmt.args[0]] = stmt
        elif stmt.op == 'local_store':
            local[stmt.args[0]] = stmt.args[1]
        elif stmt.op == 'local_atomic':
            local.pop(stmt.args[0], None)
        elif _is_pure(stmt) or (stmt.op == 'global_load' and passes.enabled('merge_reads')):
            first = (pure if _is_pure(stmt) else loads).setdefault(_key(stmt), stmt)
            if first is not stmt:
                self.same[stmt] = first
                return True
        else:
            _forget_written(loads, stmt)
        return False


def _forget_written(loads, stmt):
    written = {s.attrs['target'] for s in [stmt, *_nested(stmt)] if s.op in _WRITES}
    for key in [k for k, load in loads.items()
                if any(_may_touch(w, load.attrs['target']) for w in written)]:
        del loads[key]


def _locals_written(stmt):
    return {s.args[0] for s in _nested(stmt) if s.op in _LOCAL_WRITES}


def _nested(stmt):
    for inner in stmt.blocks():
        yield from walk(inner)


# ----------------------------------------------------------------------------
# Folding: ops of constants in the statement's precision, and exact identities

def fold(stmt):
    """What `stmt` equals for every input: one of its operands or a new constant (None:
    nothing simpler). Constants fold in the statement's precision (f32 through
    numpy.float32, integers wrapping at their width); an operand or a result that is NaN
    or infinite, and a division by zero, are left to run time."""
    if stmt.op == 'select':
        return _fold_select(*stmt.args)
    if not stmt.args or stmt.op not in _FOLDS:
        return None
    if all(a.op == 'const' for a in stmt.args):
        value = _computed(stmt)
        return None if value is None else ops.Value('const', (), stmt.dtype, stmt.loc, value=value)
    return _identity(stmt)


def _fold_select(cond, a, b):
    if a is b:
        return a
    if cond.op == 'const':
        return a if _value_of(cond) != 0 else b
    return None


def _identity(stmt):
    """x * 1, x / 1, x - (+0.0), x + (-0.0) and, for integers, x + 0: x. Not x + 0.0 (it
    turns -0.0 into +0.0), nor x * 0 (NaN and infinities)."""
    if len(stmt.args) != 2:
        return None
    a, b = stmt.args
    zero = -0.0 if stmt.dtype.is_float else 0       # the identity of addition
    if stmt.op == 'mul':
        x = a if _is(b, 1) else b if _is(a, 1) else None
    elif stmt.op == 'truediv':
        x = a if _is(b, 1) else None
    elif stmt.op == 'sub':
        x = a if _is(b, 0.0 if stmt.dtype.is_float else 0) else None
    elif stmt.op == 'add':
        x = a if _is(b, zero) else b if _is(a, zero) else None
    else:
        return None
    return x if x is not None and x.dtype is stmt.dtype else None


def _is(value, number):
    """Whether `value` is the constant `number` (a zero with its sign)."""
    if value.op != 'const':
        return False
    v = value.attrs['value']
    return v == number and math.copysign(1.0, v) == math.copysign(1.0, number)


def _computed(stmt):
    """The value of an op of constants, or None where it is not folded. numpy's warnings
    (an f32 constant that overflows, ...) are off: the folded result says it all."""
    with np.errstate(all='ignore'):
        return _computed_quietly(stmt)


def _computed_quietly(stmt):
    source = stmt.args[-1].dtype
    values = [_value_of(a) for a in stmt.args]
    if stmt.op == 'cast':
        return _cast(values[0], source, stmt.dtype)
    if source.is_float:
        if not all(math.isfinite(v) for v in values):
            return None
        result = _FOLDS[stmt.op](*values, is_float=True)
        if result is None or stmt.dtype.is_int:     # a comparison gives an i32
            return None if result is None else int(result)
        return float(result) if math.isfinite(result) else None
    result = _FOLDS[stmt.op](*values, is_float=False)
    return None if result is None else ops.convert_number(int(result), stmt.dtype)


def _value_of(const):
    """A constant in its type: numpy.float32 for f32, a float for f64, a wrapped integer."""
    value, dtype = const.attrs['value'], const.dtype
    if dtype.is_float:
        return np.float32(value) if dtype.bits == 32 else float(value)
    return ops.convert_number(int(value), dtype)


def _cast(value, source, target):
    if source.is_float and not math.isfinite(value):
        return None
    if source.is_int and target.is_float and abs(value) > 2 ** 53:
        return None             # through a double would round twice
    result = ops.convert_number(float(value) if source.is_float else value, target)
    return None if target.is_float and not math.isfinite(result) else result


def _nonzero_divisor(fn):
    return lambda a, b, is_float: None if b == 0 else fn(a, b, is_float)


def _integers_only(fn):
    return lambda *values, is_float: None if is_float else fn(*values)


_FOLDS = {
    'add': lambda a, b, is_float: a + b,
    'sub': lambda a, b, is_float: a - b,
    'mul': lambda a, b, is_float: a * b,
    'truediv': _nonzero_divisor(lambda a, b, is_float: a / b if is_float else None),
    'floordiv': _nonzero_divisor(lambda a, b, is_float: None if is_float else a // b),
    'mod': _nonzero_divisor(lambda a, b, is_float: None if is_float else a % b),
    'neg': lambda a, is_float: -a,
    'abs': lambda a, is_float: abs(a),
    'min': lambda a, b, is_float: ops.py_min(a, b),
    'max': lambda a, b, is_float: ops.py_max(a, b),
    'lt': lambda a, b, is_float: a < b,
    'le': lambda a, b, is_float: a <= b,
    'gt': lambda a, b, is_float: a > b,
    'ge': lambda a, b, is_float: a >= b,
    'eq': lambda a, b, is_float: a == b,
    'ne': lambda a, b, is_float: a != b,
    'logical_and': lambda a, b, is_float: a != 0 and b != 0,
    'logical_or': lambda a, b, is_float: a != 0 or b != 0,
    'logical_not': lambda a, is_float: a == 0,
    'bit_and': _integers_only(lambda a, b: a & b),
    'bit_or': _integers_only(lambda a, b: a | b),
    'bit_xor': _integers_only(lambda a, b: a ^ b),
    'bit_not': _integers_only(lambda a: ~a),
    'cast': None,           # `_cast`
}


# ----------------------------------------------------------------------------
# Dead code

# A field or ndarray read stays even when nothing uses its value: its index is checked
# (an index out of range raises, also where the value is dead).
_REMOVABLE = (frozenset(ops.OPS) - {'random'}) | {'const', 'arg', 'ndarray_shape', 'local_load',
                                                  'alloca', 'local_store', 'local_atomic', 'if', 'for'}


def eliminate_dead_code(body):
    """Removes the statements that no effect depends on (in place); returns the body."""
    live = _live(body)
    _sweep(body, live)
    return body


def _live(body):
    """The statements an effect depends on: the effects, what they use, the writes to the
    locals they read, and the `if`s and loops around them."""
    around, writes, work = {}, {}, []
    _scan(body, None, around, writes, work)
    live = set()
    while work:
        s = work.pop()
        if s in live:
            continue
        live.add(s)
        work.extend(s.args)
        if s.op in ('local_load', 'local_atomic'):
            work.extend(writes.get(s.args[0], ()))
        if around.get(s) is not None:        # (a loop index is defined by its loop)
            work.append(around[s])
        if s.op in ('for', 'while') and s.attrs.get('exit') is not None:
            work.append(s.attrs['exit'])
    return live


def _scan(block, parent, around, writes, work):
    for s in block.stmts:
        around[s] = parent
        if s.op in _LOCAL_WRITES:
            writes.setdefault(s.args[0], []).append(s)
        if s.op not in _REMOVABLE:
            work.append(s)
        for inner in s.blocks():
            _scan(inner, s, around, writes, work)


def _sweep(block, live):
    block.stmts[:] = [s for s in block.stmts if s in live]
    for s in block.stmts:
        for inner in s.blocks():
            _sweep(inner, live)
