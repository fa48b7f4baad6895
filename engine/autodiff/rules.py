"""The global data access rules of reverse mode: enforced exactly, or made to hold.

Adjoint kernels recompute primal values from the fields (fields are the checkpoints),
so an element must hold, when a launch's adjoint runs, the value that launch read.

Inside one launch nothing can be restored between two of its accesses, so there the
rules are errors (AutodiffRuleError naming the rule, the field, the kernel and the line):
- rule 1: an element that was read is not modified (overwritten or accumulated into)
  later in the launch: in a later loop, a later iteration of a serial loop, or another
  statement of the same iteration;
- rule 2: the same after a first write (written, read, written again: `loss *= x`);
- a race: in a parallel loop, an element one iteration modifies is read or stored by
  another (the forward result, and so its gradient, depends on the schedule);
- a lost gradient: a float field (or ndarray) without a gradient written from values
  with one and read back into a differentiable result: the gradient would be zero.
They are checked in two steps. At compilation (`KernelSummary`), every pair of accesses
to a field is examined: an early error for a violation provable from the indices alone,
and the set of fields whose safety cannot be proven (`unproven`). For those, a launch on
a tape runs a checked build of the kernel (engine/backend/cpu/codegen.py, `shadow_access`) that keeps
two shadow words per element (the line of its last read; the loop, iteration and kind of
its last write) and reports the first violation exactly, whatever the indices: aliases,
data-dependent indices, iteration order. It does so at each step of a sequence of launches
the program's tapes have not seen before (`PlanNode`), or at every launch ('always').

Across launches every read-then-modify has a right answer, so it is computed, not
refused (`TapeChecker`): each access has a box of the elements it can touch (per axis:
a constant, an argument times a constant plus a constant, or the whole axis), resolved with the launch's
arguments; the tape marks what launches read, and before a launch, a no_grad launch or
a Python write modifies marked elements, it saves them (and their tangents) and the
backward pass puts them back after that launch's adjoint. A Python write or a no_grad
store over elements the tape used also ends their gradient (its value is a constant to
the tape); over elements it has not touched yet it sets an input, as in Taichi.
"""
from ..core.errors import AutodiffRuleError
from ..language.fields import Field
from ..ir.nodes import BLOCK_ATTRS, walk

READ, STORE, ADD = 'read', 'store', 'accumulate'
ACCESS_KINDS = (READ, STORE, ADD)     # as numbered by the checked build (engine/backend/cpu/codegen.py)
__all__ = ['AutodiffRuleError', 'KernelSummary', 'READ', 'STORE', 'ADD']


def access_kind(stmt):
    """READ, STORE or ADD (an update that commutes with others of its kind: `+=`, and the
    integer max that activates a sparse cell, engine/language/sparse.py), or None."""
    if stmt.op == 'global_load':
        return READ
    if stmt.op == 'global_store':
        return STORE
    if stmt.op == 'atomic' and (stmt.attrs['kind'] in ('add', 'sub') or stmt.attrs.get('activates_cell')):
        return ADD
    return STORE if stmt.op == 'atomic' else None


def target_name(target):
    return f'field {target.name}' if isinstance(target, Field) else f'ndarray {target.name}'


def has_grad(target):
    if isinstance(target, Field):
        return target.dtype.is_float and target.grad is not None and target.grad.placed
    return getattr(target, 'grad_target', None) is not None


class Access:
    """One load, store or atomic of a field or ndarray, with where it sits in the kernel."""
    __slots__ = ('stmt', 'kind', 'target', 'branches', 'unit', 'loops', 'order')

    def __init__(self, stmt, kind, branches, unit, loops, order):
        self.stmt, self.kind, self.target = stmt, kind, stmt.attrs['target']
        self.branches = branches    # (if statement id, branch) pairs it is nested in
        self.unit = unit            # the top-level parallel loop it is in, or None (serial code)
        self.loops = loops          # the serial loops (and whiles) around it inside its unit
        self.order = order          # position in program order

    @property
    def indices(self):
        return self.stmt.args if self.stmt.op == 'global_load' else self.stmt.args[:-1]


def field_accesses(body):
    """Every access to a field or ndarray, in program order."""
    out = []

    def visit(block, branches, unit, loops, top):
        for s in block.stmts:
            kind = access_kind(s)
            if kind and 'target' in s.attrs:
                out.append(Access(s, kind, branches, unit, loops, len(out)))
            if s.op == 'for' and top and s.attrs['parallel']:
                visit(s.attrs['body'], branches, s, loops, False)
            elif s.op in ('for', 'while'):
                visit(s.attrs['body'], branches, unit, loops + (s,), False)
            elif s.op == 'if':
                for name in BLOCK_ATTRS['if']:
                    visit(s.attrs[name], branches + ((id(s), name),), unit, loops, top)
    visit(body, (), None, (), True)
    return out


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


def split_shift(stmt, assigned):
    """(base statement, constant) with stmt == base + constant; base None for a constant."""
    stmt, shift = resolve(stmt, assigned), 0
    while stmt.op in ('add', 'sub'):
        step = resolve(stmt.args[1], assigned)
        if step.op != 'const':
            break
        shift += step.attrs['value'] * (1 if stmt.op == 'add' else -1)
        stmt = resolve(stmt.args[0], assigned)
    if stmt.op == 'const':
        return None, stmt.attrs['value'] + shift
    return stmt, shift


def _exclusive(a, b):
    """Accesses in different branches of one `if` never both run (in one pass over it)."""
    taken = dict(a.branches)
    return any(taken.get(stmt, name) != name for stmt, name in b.branches)


def _same_element(a, b, assigned):
    """Provably the same element: equal index values wherever both run."""
    if a.target is not b.target or a.stmt.attrs['component'] != b.stmt.attrs['component']:
        return False
    for x, y in zip(a.indices, b.indices):
        (bx, sx), (by, sy) = split_shift(x, assigned), split_shift(y, assigned)
        if bx is not by or sx != sy:
            return False
    return True


def different_elements(a, b, assigned, same_pass=True):
    """Provably different elements: at some axis a different constant added to one base,
    a base evaluated once for both (`same_pass`: one iteration of their loop) or a kernel
    argument or constant (the same in the whole launch)."""
    if a.stmt.attrs['component'] != b.stmt.attrs['component']:
        return True
    for x, y in zip(a.indices, b.indices):
        (bx, sx), (by, sy) = split_shift(x, assigned), split_shift(y, assigned)
        if bx is by and sx != sy and (same_pass or bx is None or bx.op == 'arg'):
            return True
    return False


# --- compile time: one kernel ---------------------------------------------------------
def _error(rule, stmt, message):
    return AutodiffRuleError(f'global data access rule {rule} is broken: {message}', stmt.loc)


def _where(stmt):
    return f'line {stmt.loc.lineno}' if stmt.loc else 'an earlier line'


def kernel_violation(accesses, assigned):
    """The first violation provable from the indices alone (an early error), or None: a
    read or write followed, in one pass over the code, by a write of the same element."""
    seen = {}
    for acc in accesses:
        key = (id(acc.target), acc.stmt.attrs['component'])
        earlier = [e for e in seen.get(key, ()) if not _exclusive(e, acc) and _same_element(e, acc, assigned)
                   and e.unit is acc.unit and _encloses(e.loops, acc.loops)]
        seen.setdefault(key, []).append(acc)
        if acc.kind == READ:
            continue
        read = next((e for e in earlier if e.kind == READ), None)
        if read is None:
            continue
        wrote = any(e.kind != READ and e.order < read.order for e in earlier)
        return _error(2 if wrote else 1, acc.stmt, rule_message(
            2 if wrote else 1, acc.target, read.stmt.loc and read.stmt.loc.lineno, acc.kind))
    return None


def _encloses(outer, inner):
    """The loops `outer` are the outermost of the loops `inner`."""
    return len(outer) <= len(inner) and all(a is b for a, b in zip(outer, inner))


def rule_message(rule, target, read_line, kind):
    if getattr(target, 'activity_of', None) is not None:
        return _activity_message(target)
    what = 'overwritten' if kind == STORE else 'accumulated into'
    where = f'at line {read_line}' if read_line else 'earlier'
    if rule == 2:
        return (f'{target_name(target)} is written, read {where} and {what} again here; after its '
                f'first write an element may only be accumulated into (`+=`) or overwritten '
                f'without reading it')
    return (f'{target_name(target)} is read {where} and then {what} here; the backward pass '
            f'would read the new value. Write the result to another field (or another time '
            f'step) instead')


def race_message(target, kind):
    if getattr(target, 'activity_of', None) is not None:
        return _activity_message(target)
    return (f'{target_name(target)} has an element that one iteration of this parallel loop '
            f'{"reads" if kind == READ else "writes"} and another iteration writes; the result '
            f'depends on the order the threads run in, and so would its gradient. Give each '
            f'iteration its own elements, accumulate with `+=`, or serialize the loop '
            f'(ti.loop_config(serialize=True))')


def _activity_message(target):
    """A sparse node's activity (engine/language/snodes.py) read and changed in one kernel:
    a struct-for over the node that (de)activates its cells, whose backward pass would visit
    the cells as they are after the kernel."""
    return (f'this kernel changes which cells of {target.activity_of!r} are active (a write that '
            f'activates one, ti.activate, ti.deactivate) where it also reads their activity (a '
            f'struct-for over the node, ti.is_active): the backward pass would visit the cells '
            f'active after the kernel, not those the forward pass visited. Change the activity in '
            f'a kernel of its own (deactivate with node.deactivate_all() from Python, or mark the '
            f'cells in a field and deactivate them in a range loop of another kernel), or write to '
            f'another field')


def coordinate(stmt, index, assigned, invariant=None):
    """How an index derives from a parallel loop's index (ndrange's `//` and `%`
    decomposition), as a nested tuple, or None. The divisors are constants, or with
    `invariant` (a predicate) also values the loop does not change (the extents of an
    ndrange over a box read at run time): the same divisor decomposes the index uniquely."""
    stmt = resolve(stmt, assigned)
    if stmt is index:
        return ('i',)
    if stmt.op in ('mod', 'floordiv'):
        divisor = resolve(stmt.args[1], assigned)
        key = divisor.attrs['value'] if divisor.op == 'const' else \
            ('value', id(divisor)) if invariant is not None and invariant(divisor) else None
        inner = None if key is None else coordinate(stmt.args[0], index, assigned, invariant)
        if inner is not None:
            return (stmt.op, key, inner)
    if stmt.op == 'cast' and _widening(stmt):
        return coordinate(stmt.args[0], index, assigned, invariant)
    return None


def _widening(cast):
    """An integer cast that keeps every value distinct (`ti.cast(i, ti.u8)` wraps: i and
    i + 256 would share an element)."""
    source, result = cast.args[0].dtype, cast.dtype
    return (source is not None and result is not None and not source.is_float and not result.is_float
            and result.bits >= source.bits)


def owner_signature(acc, assigned):
    """{axis: (coordinate, shift)} of the loop-index coordinates in an access's indices."""
    index = acc.unit.attrs['index']
    sig = {}
    for axis, x in enumerate(acc.indices):
        base, shift = split_shift(x, assigned)
        coord = coordinate(base, index, assigned) if base is not None else None
        if coord is not None:
            sig[axis] = (coord, shift)
    return sig


def covers(coords, expr=('i',)):
    """The coordinates determine the loop index: two iterations touch different elements."""
    if expr in coords:
        return True
    return any(c[0] == 'mod' and c[2] == expr and covers(coords, ('floordiv', c[1], expr)) for c in coords)


def _iterations_disjoint(accesses, assigned):
    """No element is touched by two iterations of a parallel loop in a conflicting way:
    only reads, only accumulations, or every access owned by its iteration (the same
    loop-index coordinates at the same axes)."""
    kinds = {a.kind for a in accesses}
    if kinds <= {READ} or kinds <= {ADD}:
        return True
    signatures = [owner_signature(a, assigned) for a in accesses]
    first = signatures[0]
    return all(s == first for s in signatures) and covers({c for c, _ in first.values()})


def unproven_targets(accesses, assigned):
    """Fields and ndarrays whose accesses the compiler cannot prove rule-abiding: launches
    on a tape check them element by element."""
    by_target = {}
    for acc in accesses:
        by_target.setdefault(acc.target, []).append(acc)
    unproven = []
    for target, group in by_target.items():
        kinds = {a.kind for a in group}
        if kinds <= {READ} or kinds <= {ADD}:
            continue
        if reads_apart_from_writes(group, assigned):
            group = [a for a in group if a.kind != READ]     # only writes can meet writes
            if {a.kind for a in group} <= {ADD}:
                continue
        units = {}
        for a in group:
            if a.unit is not None and not single_iteration(a.unit):
                units.setdefault(a.unit, []).append(a)
        if not all(_iterations_disjoint(g, assigned) for g in units.values()) or _read_then_modified(group, assigned):
            unproven.append(target)
    return unproven


def reads_apart_from_writes(group, assigned):
    """Every read and every write of the field differ, at one axis, by a different
    constant added to the same kernel argument (or are different constants): a rollout
    reading `x[t, j]` for any j and writing `x[t + 1, i]` never writes what it reads."""
    def apart(r, w):
        for x, y in zip(r.indices, w.indices):
            (bx, sx), (by, sy) = split_shift(x, assigned), split_shift(y, assigned)
            if bx is by and sx != sy and (bx is None or bx.op == 'arg'):
                return True
        return False
    reads = [a for a in group if a.kind == READ]
    return all(apart(r, w) for r in reads for w in group if w.kind != READ)


def single_iteration(loop):
    """A parallel loop of at most one iteration (`for _ in range(1)`: serial code)."""
    begin, end = loop.args
    return begin.op == 'const' and end.op == 'const' and end.attrs['value'] - begin.attrs['value'] <= 1


def _read_then_modified(group, assigned):
    """Some element may be read and then modified within one iteration or serial code."""
    reads = [a for a in group if a.kind == READ]
    for m in group:
        if m.kind == READ:
            continue
        for r in reads:
            if {id(loop) for loop in r.loops} & {id(loop) for loop in m.loops}:
                return True         # a later iteration of a loop around both
            if r.order < m.order and not different_elements(r, m, assigned, same_pass=r.unit is m.unit):
                return True
    return False


def cut_targets(accesses, body):
    """{float field or ndarray without a gradient: its first write of a value computed
    from one with a gradient}, and the names of those with one read."""
    sources = {id(a.stmt): a.target.name for a in accesses if a.kind == READ and has_grad(a.target)}
    if not sources:
        return {}, []
    tainted = taint(body, lambda s: id(s) in sources)
    cut = {}
    for a in accesses:
        if a.kind != READ and not has_grad(a.target) and a.target.dtype.is_float and a.stmt.args[-1] in tainted:
            cut.setdefault(a.target, a)
    return cut, sorted(set(sources.values()))


def lost_gradient(accesses, body):
    """A float field or ndarray without a gradient written from differentiable values and
    read back, later in the kernel, into a differentiable result: the gradient through it
    would be zero. Returns an AutodiffRuleError or None."""
    cut, names = cut_targets(accesses, body)
    if not cut:
        return None
    readers = {id(a.stmt): a for a in accesses if a.kind == READ and a.target in cut
               and a.order > cut[a.target].order}
    carried = taint(body, lambda s: id(s) in readers)
    for a in accesses:
        if a.kind != READ and has_grad(a.target) and a.stmt.args[-1] in carried:
            target = next(r.target for r in readers.values())
            return AutodiffRuleError(
                f'the gradient would be lost: {target_name(target)} is written at '
                f'{_where(cut[target].stmt)} from {", ".join(names)}, which have gradients, and '
                f'read back into {target_name(a.target)} here, but {target.name} has no gradient. '
                f'Declare it with needs_grad=True; if it is meant as a constant, wrap the value '
                f'in ti.stop_grad', a.stmt.loc)
    return None


def taint(body, is_source):
    """Float values computed from a source (through arithmetic and locals)."""
    tainted, cells = set(), set()
    for _ in range(3):          # loops carry taint to earlier statements: iterate
        for s in walk(body):
            if s.op == 'local_store':
                if s.args[1] in tainted:
                    cells.add(s.args[0])
            elif s.op == 'local_load':
                if s.args[0] in cells:
                    tainted.add(s)
            elif s.op == 'local_atomic':
                if s.args[1] in tainted:
                    cells.add(s.args[0])
            elif s.dtype is not None and s.dtype.is_float and s.op != 'stop_grad' and (
                    is_source(s) or any(a in tainted for a in s.args)):
                tainted.add(s)
    return tainted


# --- boxes: the elements an access can touch, per launch -------------------------------
class Box:
    """Per axis: ('const', value), ('args', ((position, scale), ...), shift): a sum of kernel
    arguments times constants plus a constant, or None (the whole axis)."""

    def __init__(self, acc, arg_positions, assigned):
        self.axes = []
        for x in acc.indices:
            form = affine(x, assigned)
            if form is None or any(base.op != 'arg' or base.attrs['offset'] not in arg_positions
                                   for base, _ in form[0]):
                self.axes.append(None)
            elif not form[0]:
                self.axes.append(('const', form[1]))
            else:
                terms = tuple((arg_positions[base.attrs['offset']], scale) for base, scale in form[0])
                self.axes.append(('args', terms, form[1]))
        self.axes = tuple(self.axes)

    def index(self, args, shape):
        """A numpy index of the elements (an empty slice when a point is out of range)."""
        out = []
        for axis, n in zip(self.axes, shape):
            if axis is None:
                out.append(slice(None))
                continue
            at = int(axis[1]) if axis[0] == 'const' else \
                sum(int(args[k]) * scale for k, scale in axis[1]) + int(axis[2])
            if not -2 ** 31 <= at < 2 ** 31:    # the kernel's 32-bit arithmetic may wrap into range
                out.append(slice(None))
                continue
            out.append(at if 0 <= at < n else slice(0, 0))
        return tuple(out)


def affine(stmt, assigned):
    """(((base, scale), ...), shift) with stmt == sum of base * scale + shift for integer
    constants, the bases kernel arguments, or None. `t * 6 + k` of DiffTaichi's smoke
    indexes its pressure field: a box of one time slice instead of the whole axis."""
    stmt = resolve(stmt, assigned)
    if stmt.op == 'const':
        value = stmt.attrs['value']
        return ((), value) if isinstance(value, int) else None
    if stmt.op == 'arg':
        return None if stmt.dtype.is_float else (((stmt, 1),), 0)
    if stmt.op not in ('add', 'sub', 'mul') or stmt.dtype is None or stmt.dtype.is_float:
        return None
    left, right = (affine(a, assigned) for a in stmt.args)
    if left is None or right is None:
        return None
    if stmt.op == 'mul':
        if left[0] and right[0]:
            return None
        (terms, shift), factor = (left, right[1]) if not right[0] else (right, left[1])
        return tuple((base, scale * factor) for base, scale in terms), shift * factor
    sign = 1 if stmt.op == 'add' else -1
    scales = dict(left[0])
    for base, scale in right[0]:
        scales[base] = scales.get(base, 0) + sign * scale
    return tuple((base, scale) for base, scale in scales.items() if scale), left[1] + sign * right[1]


class KernelSummary:
    """What the rules need of one compiled kernel, computed once."""

    def __init__(self, body, layout):
        accesses = field_accesses(body)
        assigned = single_assignments(body)
        self.violation = kernel_violation(accesses, assigned) or lost_gradient(accesses, body)
        self.unproven = unproven_targets(accesses, assigned)
        positions = {offset: k for k, offset in layout.offsets.items()}
        groups = {}
        for acc in accesses:
            box = Box(acc, positions, assigned)
            groups.setdefault((acc.target, acc.kind, box.axes), (acc.target, acc.kind, box, acc.stmt))
        self.accesses = list(groups.values())
        self.reads = {t: s for t, kind, _, s in reversed(self.accesses) if kind == READ}
        self.stores_with_grad = any(kind == STORE and has_grad(t) for t, kind, _, _ in self.accesses)
        self._body, self._all = body, accesses
        fields = [t for t, *_ in self.accesses if isinstance(t, Field)]
        self.program = fields[0].program if fields else None
        self._flow = (None, None)

    def gradient_flow(self):
        """(the fields and ndarrays whose values it reads into results with a gradient,
        names of those with a gradient it reads, float ones without a gradient it writes
        from those), recomputed when a gradient has been placed since."""
        epoch = self.program.grad_epoch if self.program is not None else 0
        if self._flow[0] != epoch:
            cut, names = cut_targets(self._all, self._body)
            self._flow = (epoch, (_flowing_reads(self._all, self._body), ', '.join(names), list(cut)))
        return self._flow[1]


def _flowing_reads(accesses, body):
    """The fields and ndarrays some of whose loaded values flow into a write of a field or
    ndarray with a gradient (a field read only to steer a branch or an index does not)."""
    out = []
    for target in {a.target: None for a in accesses if a.kind == READ}:
        loads = {id(a.stmt) for a in accesses if a.kind == READ and a.target is target}
        tainted = taint(body, lambda s: id(s) in loads)
        if any(a.kind != READ and has_grad(a.target) and a.stmt.args[-1] in tainted for a in accesses):
            out.append(target)
    return out
