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

Order-free, kept as they are: atomics into elements one iteration owns (the same
loop-index coordinates at the same axes for every atomic into the field), integer
atomics whose result is not used (integer addition, and min/max, commute exactly),
adjoint adds marked `exclusive`.
Run *serially* (in order, on the calling thread): a loop with an atomic whose result it
uses (`slot = ti.atomic_add(count[None], 1)`), a float atomic into an ndarray or a
kernel-scope local (`total += x[i]`), or a buffered field that the loop also reads or
stores (buffers would hide the adds from those reads).
"""
import os

from ...autodiff import rules
from ...ir.nodes import walk
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

    def __init__(self, kind, targets=None):
        self.kind, self.targets = kind, targets or {}


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
    outside = set(_kernel_scope_locals(loop))
    for s in walk(loop.attrs['body']):
        if s.op == 'atomic' and s in used:
            return Plan('serial')
        if s.op == 'local_atomic' and s.args[0] in outside and (s in used or s.dtype.is_float):
            return Plan('serial')
    by_target = {}
    for acc in accesses:
        by_target.setdefault(acc.target, []).append(acc)
    targets = {}
    for target, group in by_target.items():
        atomics = [a for a in group if a.stmt.op == 'atomic' and not a.stmt.attrs.get('exclusive')]
        if not atomics or not target.dtype.is_float or _owned(atomics, assigned):
            continue
        combines = {BUFFERED_KINDS.get(a.stmt.attrs['kind']) for a in atomics}
        others = [a for a in group if a.stmt.op != 'atomic']
        if not isinstance(target, Field) or None in combines or len(combines) > 1 or others:
            return Plan('serial')
        targets[target] = combines.pop()
    return Plan('buffered', targets) if targets else FREE


def _owned(atomics, assigned):
    """Every atomic into the field touches an element that its iteration alone touches."""
    signatures = [rules.owner_signature(a, assigned) for a in atomics]
    first = signatures[0]
    return all(s == first for s in signatures) and rules.covers({c for c, _ in first.values()})


def _kernel_scope_locals(loop):
    """Locals the loop uses but does not declare."""
    declared = {s for s in walk(loop.attrs['body']) if s.op == 'alloca'}
    return [s.args[0] for s in walk(loop.attrs['body'])
            if s.op in ('local_atomic', 'local_load', 'local_store') and s.args[0] not in declared]
