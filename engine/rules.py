"""The global data access rules of reverse mode, checked instead of trusted.

Adjoint kernels recompute primal values from the fields (fields are the
checkpoints), so a field element must hold, when the backward pass runs, the
value the forward pass read:
- rule 1: an element that was read is not overwritten or accumulated into later;
- rule 2: after its first write, an element is only accumulated into (`+=`) or
  overwritten without being read; the adjoint of a plain store uses up the element's
  adjoint, so an overwrite gives the gradient of the last write (as in Taichi).
Fields that steer control flow or indexing (the EWMA example) fall under rule 1
like any other read.

Two checks:
- in one kernel, at the adjoint's compilation (`kernel_violation`): a read or
  write followed, in program order, by a write of provably the same element
  (the same index values: loop indices, arguments, constants);
- across the launches of a tape, at run time (`LaunchChecker`): every access's
  first index is resolved with the launch's arguments to a range of slots (time
  steps, usually); a write of slots an earlier launch read (rule 1) is an error. One pattern has a right answer and is handled: a 0-D
  field read by one launch and accumulated into by a later one is saved before
  the accumulation and restored for the backward pass of the earlier launches.
"""
import numpy as np

from .errors import TaichiCompilationError
from .fields import Field
from .ir import BLOCK_ATTRS, walk

READ, STORE, ADD = 'read', 'store', 'accumulate'


class AutodiffRuleError(TaichiCompilationError):
    """A global data access rule is broken: the gradient would be wrong."""


def _kind(stmt):
    if stmt.op == 'global_load':
        return READ
    if stmt.op == 'global_store':
        return STORE
    if stmt.op == 'atomic' and stmt.attrs['kind'] in ('add', 'sub'):
        return ADD
    return STORE if stmt.op == 'atomic' else None


def field_accesses(body):
    """(stmt, kind, branches) of every access to a field, in program order; `branches`:
    the (if statement, branch) pairs it is nested in."""
    out = []

    def visit(block, branches):
        for s in block.stmts:
            kind = _kind(s)
            if kind and isinstance(s.attrs.get('target'), Field):
                out.append((s, kind, branches))
            for name in BLOCK_ATTRS.get(s.op, ()):
                visit(s.attrs[name], branches + ((id(s), name),) if s.op == 'if' else branches)
    visit(body, ())
    return out


def _exclusive(a, b):
    """Accesses in different branches of one `if` never both run."""
    taken = dict(a)
    return any(taken.get(stmt, name) != name for stmt, name in b)


def single_assignments(body):
    """Locals stored exactly once (kernel arguments, `a = anchor[s]`): a load of one is
    the stored value."""
    stores, changed = {}, set()
    for s in walk(body):
        if s.op == 'local_store':
            changed.add(s.args[0]) if s.args[0] in stores else stores.__setitem__(s.args[0], s.args[1])
        elif s.op == 'local_atomic':
            changed.add(s.args[0])
    return {cell: value for cell, value in stores.items() if cell not in changed}


def resolve(stmt, assigned):
    while stmt.op == 'local_load' and stmt.args[0] in assigned:
        stmt = assigned[stmt.args[0]]
    return stmt


def _index_key(stmt, assigned):
    """Statements with equal keys hold equal values wherever both are evaluated."""
    stmt = resolve(stmt, assigned)
    return ('const', stmt.attrs['value']) if stmt.op == 'const' else ('stmt', id(stmt))


def _element(stmt, ndim, assigned):
    return (stmt.attrs['target'].id, stmt.attrs['component'],
            tuple(_index_key(a, assigned) for a in stmt.args[:ndim]))


def _where(stmt):
    return f'line {stmt.loc.lineno}' if stmt.loc else 'somewhere'


def kernel_violation(body):
    """The first rule broken inside one kernel (an AutodiffRuleError), or None."""
    seen = {}       # element -> [(kind, stmt)] in program order
    assigned = single_assignments(body)
    for stmt, kind, branches in field_accesses(body):
        field = stmt.attrs['target']
        element = _element(stmt, len(field.shape), assigned)
        earlier = [(k, s) for k, s, b in seen.setdefault(element, []) if not _exclusive(b, branches)]
        if kind == STORE:
            write = next((s for k, s in earlier if k != READ), None)
            read = next((s for k, s in earlier if k == READ), None)
            if write is not None and read is not None:      # e.g. `loss[None] *= x` after `+=`
                return _error(2, stmt, f'field {field.name} is written at {_where(write)}, read, and '
                              f'written again here from what was read; after the first write an '
                              f'element may only be accumulated into (`+=`) or overwritten '
                              f'without reading it')
        if kind != READ:
            read = next((s for k, s in earlier if k == READ), None)
            if read is not None:
                return _error(1, stmt, f'field {field.name} is read at {_where(read)} and then '
                              f'{"overwritten" if kind == STORE else "accumulated into"} here; the '
                              f'backward pass would read the new value. Write the result to another '
                              f'field (or another time step) instead')
        seen[element].append((kind, stmt, branches))
    return None


def _error(rule, stmt, message):
    return AutodiffRuleError(f'global data access rule {rule} is broken: {message}', stmt.loc)


# --- across launches -----------------------------------------------------------------
class _FirstIndex:
    """How an access's first index depends on the launch: a constant ('const', value), a
    kernel argument plus a constant ('arg', argument position, shift), or anything else
    ('all': every slot)."""

    def __init__(self, stmt, arg_positions, assigned):
        self.kind, self.value, self.shift = 'all', 0, 0
        index = resolve(stmt.args[0], assigned) if stmt.args else None
        while index is not None and index.op in ('add', 'sub'):
            step = resolve(index.args[1], assigned)
            if step.op != 'const':
                break
            self.shift += step.attrs['value'] * (1 if index.op == 'add' else -1)
            index = resolve(index.args[0], assigned)
        if index is None:
            self.kind = 'const'                        # a 0-D field: its single slot
        elif index.op == 'const':
            self.kind = 'const'
            self.value, self.shift = index.attrs['value'] + self.shift, 0
        elif index.op == 'arg' and index.attrs['offset'] in arg_positions:
            self.kind, self.value = 'arg', arg_positions[index.attrs['offset']]

    def slots(self, args, size):
        if self.kind == 'all':
            return slice(0, size)
        at = int(self.value if self.kind == 'const' else args[self.value]) + int(self.shift)
        return slice(at, at + 1) if 0 <= at < size else slice(0, 0)


class KernelSummary:
    """What the checks need of one compiled kernel: its first in-kernel violation (or None)
    and its accesses grouped per (field, kind, first index)."""

    def __init__(self, body, layout):
        self.violation = kernel_violation(body)
        positions = {offset: k for k, offset in layout.offsets.items()}
        assigned = single_assignments(body)
        groups = {}
        for stmt, kind, _ in field_accesses(body):
            first = _FirstIndex(stmt, positions, assigned)
            key = (stmt.attrs['target'], kind, first.kind, first.value, first.shift)
            groups.setdefault(key, (stmt.attrs['target'], kind, first, stmt))
        self.accesses = list(groups.values())
        self.reads = {f: stmt for f, kind, _, stmt in reversed(self.accesses) if kind == READ}
        self.writes = {f: stmt for f, kind, _, stmt in reversed(self.accesses) if kind != READ}
        fields = list(self.reads) + list(self.writes)
        self.program = fields[0].program if fields else None
        self._flow = (None, None)

    def gradient_flow(self):
        """(writes a field with a gradient, names of the fields with one it reads, float
        fields without one it writes), recomputed when a gradient has been placed since."""
        epoch = self.program.grad_epoch if self.program is not None else 0
        if self._flow[0] != epoch:
            sources = ', '.join(f.name for f in self.reads if _has_grad(f))
            self._flow = (epoch, (any(_has_grad(f) for f in self.writes), sources,
                                  [f for f in self.writes if f.dtype.is_float and not _has_grad(f)]))
        return self._flow[1]


class LaunchChecker:
    """Per field: which slots earlier launches of the tape read."""

    def __init__(self):
        self.read = {}      # field -> bool array of slots
        self.cut = {}       # float field without a gradient -> (kernel, fields) that wrote it from fields with one

    def _slots(self, table, field):
        marks = table.get(field)
        if marks is None:
            marks = table[field] = np.zeros(field.shape[0] if field.shape else 1, dtype=bool)
        return marks

    def check(self, summary, args, kernel_name):
        """Before a launch: the 0-D fields to save (read earlier, written now); raises on a
        violation; then marks this launch's accesses."""
        self._check_gradient_flow(summary, kernel_name)
        saves = []
        for field, kind, first, stmt in summary.accesses:
            if kind == READ:
                continue
            size = field.shape[0] if field.shape else 1
            slots = first.slots(args, size)
            if self._slots(self.read, field)[slots].any():
                if not field.shape and kind == ADD:
                    saves.append(field)
                    continue
                raise _error(1, stmt, f'kernel {kernel_name} {"overwrites" if kind == STORE else "accumulates into"} '
                             f'field {field.name} where an earlier kernel on the tape read it; the '
                             f'backward pass would read the new value. Keep every version (e.g. index '
                             f'the field by time step)')
        for field, kind, first, stmt in summary.accesses:
            if kind == READ:
                size = field.shape[0] if field.shape else 1
                self._slots(self.read, field)[first.slots(args, size)] = True
        return saves

    def _check_gradient_flow(self, summary, kernel_name):
        """A field without a gradient between fields with one cuts the gradient: an error
        (the gradient would be silently zero), unless the reader's outputs have none either."""
        differentiable, sources, plain_writes = summary.gradient_flow()
        if self.cut and differentiable:
            self._check_cut(summary, kernel_name)
        if sources:
            for field in plain_writes:
                self.cut[field] = (kernel_name, sources)

    def _check_cut(self, summary, kernel_name):
        for field, stmt in summary.reads.items():
            if field in self.cut:
                writer, sources = self.cut[field]
                raise AutodiffRuleError(
                    f'the gradient would be lost: kernel {writer} writes field {field.name} from '
                    f'{sources}, which have gradients, and kernel {kernel_name} reads it here, but '
                    f'{field.name} has no gradient. Declare it with needs_grad=True (or place '
                    f'{field.name}.grad); if it is meant as a constant, compute it before the tape '
                    f'or in a ti.ad.no_grad kernel', stmt.loc)


def _has_grad(field):
    return field.grad is not None and field.grad.placed
