"""Same answer on any number of threads: which atomics of a parallel loop depend on the
order its iterations run in, and how codegen fixes that order (docs/performance.md,
"Same answer every run").

A float atomic add into an element that several iterations touch gives a result that
depends on which thread gets there first (float addition is not associative). A loop
with such adds is *buffered*: its iterations are cut into `chunks(n)` chunks whose bounds
depend only on the loop's length, never on the threads or the time; each chunk runs in
order on one thread and accumulates into buffers of its own (first touch stores, later
touches combine; `ti.atomic_sub` adds the negated value), and after the loop the calling
thread adds the chunks' buffers into the fields in chunk order. A loop of one chunk runs
on one thread with plain read-modify-writes. Either way the bits depend on n alone.

Order-free: atomics into elements one iteration owns (the same loop-index coordinates at
the same axes for every atomic into the field; no other iteration reads or stores them
either, or the loop would run serially), which codegen lowers to plain read-modify-writes
(`Plan.plain`: `force[i] += f` in an inner loop then stays in a register), integer
atomics whose result is not used (integer addition, and min/max, commute exactly),
adjoint adds marked `exclusive`.
Run *serially* (in order, on the calling thread): a loop with an atomic whose result it
uses (`slot = ti.atomic_add(count[None], 1)`), a float atomic into an ndarray or a
kernel-scope local (`total += x[i]`), a field it both reads and writes where an iteration
may read what another writes (`g[i] += g[i + 1]`: a race, whose answer is then the serial
one), or stores into elements other iterations may store to too (`y[perm[i]] = ...`).
"""
import os

from ...autodiff import rules
from ...ir.nodes import defined_in, walk
from ...language.fields import Field

# iterations: a shorter loop is one chunk (on one thread). $ENGINE_CHUNK_MIN, for tests: small
# chunks let generated programs of a few dozen iterations run on several threads
CHUNK_MIN = max(1, int(os.environ.get('ENGINE_CHUNK_MIN', '512')))
MAX_CHUNKS = 8      # a buffered loop's buffers: MAX_CHUNKS copies of each field at most
BUFFERED_KINDS = {'add': 'add', 'sub': 'add', 'min': 'min', 'max': 'max'}


class Plan:
    """How codegen runs one parallel loop: kind 'free', 'serial' or 'buffered'; for
    'buffered', `targets` maps each buffered field to how its buffer combines ('add',
    'min' or 'max')."""

    def __init__(self, kind, targets=None, reason=None, plain=frozenset()):
        self.kind, self.targets, self.reason = kind, targets or {}, reason
        self.plain = plain        # atomics into elements their iteration owns: no atomic instruction


FREE = Plan('free')


def plan_loops(body):
    """{parallel loop: Plan} for the kernel's parallel loops (those inside another parallel
    loop run serially in its task and never use theirs)."""
    used = {arg for s in walk(body) for arg in s.args}
    assigned = rules.single_assignments(body)
    by_loop = {}
    for acc in rules.field_accesses(body):
        if acc.unit is not None:
            by_loop.setdefault(acc.unit, []).append(acc)
    return {s: _plan(s, by_loop.get(s, []), used, assigned)
            for s in walk(body) if s.op == 'for' and s.attrs['parallel']}


def _plan(loop, accesses, used, assigned):
    if rules.single_iteration(loop):
        return FREE
    outside = set(_kernel_scope_locals(loop))
    for s in walk(loop.attrs['body']):
        if s.op == 'atomic' and s in used:
            return Plan('serial', reason='the result of an atomic is used')
        if s.op == 'local_atomic' and s.args[0] in outside and (s in used or s.dtype.is_float):
            return Plan('serial', reason='a float atomic into a kernel-scope local, or its result used')
    by_target = {}
    for acc in accesses:
        by_target.setdefault(acc.target, []).append(acc)
    inside = defined_in(loop.attrs['body']) | {loop.attrs['index']}
    owned = Ownership(loop, assigned, lambda value: value not in inside)

    def apart(a, b):        # never the same element, in any two iterations (`x[t, j]`, `x[t + 1, i]`)
        return rules.different_elements(a, b, assigned, same_pass=False)
    targets, plain = {}, set()
    for target, group in by_target.items():
        writes = [a for a in group if a.kind != rules.READ]
        reads = [a for a in group if a.kind == rules.READ]
        if any(not (apart(r, w) or owned([r, w])) for r in reads for w in writes):
            return Plan('serial', reason=f'{target.name} is read where other iterations may write')
        if not owned([a for a in writes if a.stmt.op == 'global_store']):
            return Plan('serial', reason=f'{target.name} is stored where other iterations may store')
        atomics = [a for a in group if a.stmt.op == 'atomic' and not a.stmt.attrs.get('exclusive')]
        if atomics and owned(atomics) and not any(a.stmt.attrs.get('activates_cell') for a in atomics):
            plain.update(a.stmt for a in atomics)
        if not atomics or not target.dtype.is_float or owned(atomics):
            continue
        combines = {BUFFERED_KINDS.get(a.stmt.attrs['kind']) for a in atomics}
        others = [o for o in group if o.stmt.op != 'atomic' and not all(apart(o, a) for a in atomics)]
        if not isinstance(target, Field) or None in combines or len(combines) > 1 or others:
            return Plan('serial', reason=f'order-dependent atomics into {target.name} that buffers cannot take')
        targets[target] = combines.pop()
    if targets:
        return Plan('buffered', targets, plain=frozenset(plain))
    return Plan('free', plain=frozenset(plain)) if plain else FREE


class Ownership:
    """owned(accesses): each element they touch is touched by one iteration of the loop only:
    every access has the same loop-index coordinates (rules.coordinate) at the same axes,
    plus the same shifts (constants, or values the loop does not change: `base + i` of an
    ndrange over a box read at run time), and the coordinates determine the index.
    An empty list is owned."""

    def __init__(self, loop, assigned, invariant):
        self.index, self.assigned, self.invariant = loop.attrs['index'], assigned, invariant

    def __call__(self, accesses):
        signatures = [self.signature(a) for a in accesses]
        if not signatures:
            return True
        first = signatures[0]
        return all(s == first for s in signatures) and rules.covers({c for c, _ in first.values()})

    def signature(self, acc):
        sig = {}
        for axis, x in enumerate(acc.indices):
            base, shift = self.split(x)
            coord = rules.coordinate(base, self.index, self.assigned, self.invariant)
            if coord is not None:
                sig[axis] = (coord, shift)
        return sig

    def split(self, x):
        """(base, shifts): x == base + the sum of shifts, each a constant or an invariant value."""
        x, shifts = rules.resolve(x, self.assigned), []
        while x.op in ('add', 'sub'):
            a, b = (rules.resolve(arg, self.assigned) for arg in x.args)
            if self._shift(b):
                shifts.append((x.op, self._key(b)))
                x = a
            elif x.op == 'add' and self._shift(a):
                shifts.append(('add', self._key(a)))
                x = b
            else:
                break
        return x, tuple(sorted(shifts, key=repr))

    def _shift(self, value):
        return value.op == 'const' or self.invariant(value)

    @staticmethod
    def _key(value):
        return ('const', value.attrs['value']) if value.op == 'const' else ('value', id(value))


def _kernel_scope_locals(loop):
    """Locals the loop uses but does not declare."""
    declared = {s for s in walk(loop.attrs['body']) if s.op == 'alloca'}
    return [s.args[0] for s in walk(loop.attrs['body'])
            if s.op in ('local_atomic', 'local_load', 'local_store') and s.args[0] not in declared]
