"""Repeated values and reads of a kernel's IR, merged into one statement each.

A stencil reads one element several times, each read with index arithmetic of its own
(wave's `2 * p[t-1, i, j] - p[t-2, i, j] + a * (... - 4 * p[t-1, i, j])`). LLVM merges
those reads in the primal kernel, but in the adjoint each read becomes a read-modify-write
of the gradient, and LLVM cannot merge those: it cannot prove that the other gradient
writes between them do not alias. Merged here, before differentiation, one read of the
element gets one adjoint add.

What is merged is exact:
- pure ops (the op table but `random`, constants, kernel arguments, ndarray shapes) with
  the same operands and attributes, where the first dominates the second (it comes earlier
  in the same block or in an enclosing one);
- a `local_load` and the value last stored to its local, or an earlier load of it, where
  no store between them may have changed the local (a store anywhere in a nested block
  counts: loops repeat); `ti.func` arguments reach the body through such locals;
- a `global_load` and an earlier one of the same target, component and indices in the same
  block, with no write in between that may touch the target. Writes to a field touch that
  field only (fields own their storage); a write to an ndarray argument may touch anything
  (another ndarray, or a field through its `.data`), and so may a field's write an ndarray.
  Reads in nested blocks never merge with reads outside: a loop may write between
  iterations. Another thread writing the element between the two reads is a data race
  in the user's program, whose result Taichi does not define either.
"""
from . import ops
from .fields import Field
from .ir import walk

_PURE_SOURCES = frozenset({'const', 'arg', 'ndarray_shape'})
_WRITES = frozenset({'global_store', 'atomic'})
_LOCAL_WRITES = frozenset({'local_store', 'local_atomic'})


def merge_common(body):
    """Merges repeated values of `body` in place; returns it."""
    _Merger().block(body, {}, {})
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
    return written is read or not isinstance(written, Field) or not isinstance(read, Field)


class _Merger:
    def __init__(self):
        self.same = {}          # merged statement -> the statement it is merged into

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
            if not self.merged(stmt, pure, loads, local):
                kept.append(stmt)
        block.stmts[:] = kept

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
        elif _is_pure(stmt) or stmt.op == 'global_load':
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
