"""Reverse-mode autodiff: the adjoint of a kernel's IR, as new IR.

The adjoint kernel first recomputes the primal values of the kernel (global
writes dropped: global fields are the checkpoints), then walks the statements
backwards, accumulating adjoints into local adjoint cells and into `.grad`
fields with atomic adds:

* every op's partial derivatives come from its entry in the op table;
* a mutable local is a memory cell: a load adds the reader's adjoint to the
  cell's adjoint, a store moves the cell's adjoint to the stored value;
* `if` reverses into an `if` on the same condition; values computed inside a
  branch are stashed in locals so that the reversed branch can read them;
* a parallel loop reverses into a parallel loop whose body recomputes and then
  reverses one iteration;
* a serial loop pushes the locals it modifies on a per-thread stack at each
  iteration; the reversed loop pops them, recomputes the iteration and
  reverses it. Stacks grow on demand, so no stack size is ever configured;
* `break` and `continue` first become guard flags (engine/autodiff/jumps.py), so that an
  iteration is a tree of `if`s; a `while` loop, or a `for` that can break, counts
  its iterations in the forward sweep and is reversed as a `for` over that count.
  Its trip count is taken as constant, as in every AD system: a condition on a
  float has no derivative.
"""
from ..core import dtypes as T, passes
from ..ir import ops
from ..core.errors import AutodiffError
from .finite import finite_partials
from .refusals import refuse
from ..language.fields import Field
from ..ir.nodes import Block, Builder, Identity, building, used_from_outside, walk
from .jumps import without_jumps

_NO_ADJOINT = frozenset({'const', 'arg', 'loop_index', 'random', 'ndarray_shape', 'alloca'})


class AdStack(Identity):
    """Identity of one serial loop's stack of carried locals."""
    kind = 'stack'


def adjoint(body, constant=False):
    """The IR of the adjoint kernel of `body` (the primal kernel's IR). `constant`: the
    kernel's results are constants (a no_grad kernel): its stores only use up the adjoints
    of the elements they overwrite."""
    return adjoint_of_jump_free(without_jumps(body), constant)


def _refuse_gradient_arrays(body):
    """An ndarray argument's .grad accessed in a differentiated kernel: refused, as Taichi
    refuses it (a no_grad kernel, whose adjoint only uses up adjoints, may access it)."""
    for s in walk(body):
        if s.op in ('global_load', 'global_store', 'atomic') and 'grad' in getattr(s.attrs['target'], 'path', ()):
            raise refuse('gradient array', s, name=s.attrs['target'].name)


def adjoint_of_jump_free(body, constant=False):
    """`adjoint` of IR whose loops do not jump (engine/autodiff/jumps.py made it so)."""
    if not constant:
        _refuse_gradient_arrays(body)
    rp = ReversePass()
    rp.constant = constant
    rp.finite = finite_partials(body) if passes.enabled('nan_guards') else frozenset()
    return rp.run(body)


class ReversePass:
    def __init__(self):
        self.out = Builder()
        self.scopes = [{}]            # primal statement -> its recomputed copy, per open block
        self.stash = {}               # primal statement -> local holding its value
        self.cells = {}               # primal alloca -> its one copy, seen from every block
        self.adj = {}                 # primal statement -> adjoint cell (an alloca)
        self.home = []                # allocas to put first in the kernel or parallel body
        self.kernel_home = self.home
        self.if_depth = 0
        self.in_parallel = False
        self.owned = {}               # fields owned per iteration by the enclosing parallel loop: span
        self.serial_scope = set()     # primal statements copied outside parallel loops
        self.stacks = {}              # primal serial loop -> (AdStack, carried allocas)
        self.trips = {}               # primal loop with a run-time exit -> local counting its iterations
        self.stale = set()            # kernel-scope locals a parallel loop accumulated into
        self.snapshots = {}           # loop -> [(outer local, key of its value at loop start)]
        self.constant = False         # no adjoint flows (a no_grad kernel's stores)
        self.finite = frozenset()     # statements whose partials need no NaN guard (finite.py)

    def run(self, body):
        with building(self.out):
            self.forward(body, push=True)
            self.reverse(body)
        self.out.root.stmts[0:0] = self.home
        return self.out.root

    # --- emission helpers ------------------------------------------------------
    def emit(self, op, args=(), dtype=None, **attrs):
        self.out.loc = self._loc
        return self.out.emit(op, args, dtype, cls=ops.Value, **attrs)

    _loc = None

    def new_alloca(self, dtype):
        stmt = ops.Value('alloca', (), dtype)
        self.home.append(stmt)
        return stmt

    def error(self, stmt, message):
        return AutodiffError(message, stmt.loc)

    def primal(self, stmt):
        for scope in reversed(self.scopes):
            if stmt in scope:
                value = scope[stmt]
                if isinstance(value, _Unavailable):
                    raise refuse('old value of an atomic', stmt)
                return value
        if stmt in self.cells:
            return self.cells[stmt]
        if stmt in self.stash:
            return self.emit('local_load', [self.stash[stmt]], stmt.dtype)
        raise self.error(stmt, f'internal autodiff error: no primal value for {stmt.op}')

    def bind(self, stmt, copy):
        self.scopes[-1][stmt] = copy
        if not self.in_parallel:
            self.serial_scope.add(stmt)
        if self.if_depth and stmt.op != 'alloca' and stmt.dtype is not None:
            cell = self.stash.get(stmt)
            if cell is None:
                cell = self.stash[stmt] = self.new_alloca(stmt.dtype)
            self.out.emit('local_store', [cell, copy])

    def open(self, block):
        return _Scoped(self, block)

    # --- forward recomputation -----------------------------------------------------
    def forward(self, block, push):
        for s in block.stmts:
            self._loc = s.loc
            self.forward_stmt(s, push)

    def forward_stmt(self, s, push):
        op = s.op
        if op in ('for', 'while'):
            self.snapshot(s)
            if s.attrs.get('parallel'):     # recomputed inside its adjoint loop, not here
                self.stale.update(t.args[0] for t in walk(s.attrs['body']) if t.op == 'local_atomic')
            else:
                self.forward_loop(s, push)
            return
        if op == 'random':
            raise refuse('random numbers', s)
        if op == 'if':
            then_b, else_b = Block(), Block()
            self.emit('if', [self.primal(s.args[0])], then=then_b, **{'else': else_b})
            self.if_depth += 1
            for target, source in ((then_b, s.attrs['then']), (else_b, s.attrs['else'])):
                with self.open(target):
                    self.forward(source, push)
            self.if_depth -= 1
            return
        if op == 'local_atomic':
            self.stale.add(s.args[0])
            return
        if op == 'local_load' and s.args[0] in self.stale:
            raise refuse('local read after a parallel accumulation', s)
        if op in ('global_store', 'return', 'print', 'assert_fail'):
            return              # prints and asserts run in the primal launch only, as Taichi's
        if op == 'alloca':
            # One cell per local, hoisted: a local declared in a branch is also used by the
            # reversed branch, and by loops replayed there (their pops and restores).
            if s not in self.cells:
                self.cells[s] = self.new_alloca(s.dtype)
            self.bind(s, self.cells[s])
            return
        if op == 'atomic':
            if s.dtype.is_float and s.attrs['kind'] in ('min', 'max'):
                raise refuse('float atomic min/max', s, kind=s.attrs['kind'], field=s.attrs['target'].name)
            self.scopes[-1][s] = _Unavailable(s)
            return
        attrs = dict(s.attrs)
        copy = self.emit(op, [self.primal(a) for a in s.args], s.dtype, **attrs)
        self.bind(s, copy)

    def snapshot(self, loop):
        """Remember the outer locals a loop uses, as they are when the loop starts.

        The loop is recomputed during the reverse sweep, after later statements
        may have overwritten those locals; `restore` puts these values back."""
        keys = []
        for cell in outer_locals(loop):
            key = ops.Value('snapshot', (), cell.dtype)
            self.bind(key, self.emit('local_load', [self.primal(cell)], cell.dtype))
            keys.append((cell, key))
        self.snapshots[loop] = keys

    def restore(self, loop):
        for cell, key in self.snapshots.get(loop, ()):
            self.emit('local_store', [self.primal(cell), self.primal(key)])

    def forward_loop(self, s, push):
        carried = carried_locals(s)
        stack = self.stacks.setdefault(s, (AdStack(), carried))[0]
        trips = None
        if push and (s.op == 'while' or 'exit' in s.attrs):
            trips = self.trips[s] = self.new_alloca(T.i32)
            self.emit('local_store', [trips, ops.const(0, T.i32)])
        body = Block()
        if s.op == 'while':
            self.emit('while', (), body=body)
        else:
            index = ops.Value('loop_index', (), T.i32)
            self.emit('for', [self.primal(a) for a in s.args], body=body, index=index, parallel=False)
        with self.open(body):
            if s.op == 'for':
                self.scopes[-1][s.attrs['index']] = index
            if push:
                for a in carried:
                    value = self.emit('local_load', [self.primal(a)], a.dtype)
                    self.emit('stack_push', [value], stack=stack)
                if trips is not None:
                    self.emit('local_store', [trips, self.emit('local_load', [trips], T.i32) + 1])
            self.forward(s.attrs['body'], push=False)       # with the exit test, if any

    # --- reverse sweep ------------------------------------------------------------
    def reverse(self, block):
        start = len(self.out.block.stmts)
        zeroed_before = set(self.adj)
        for s in reversed(block.stmts):
            self._loc = s.loc
            self.reverse_stmt(s)
        # Adjoint cells of values defined in this block start at zero here.
        zeros = []
        for s in block.stmts:
            if s in self.adj and s not in zeroed_before:
                cell = self.adj[s]
                zeros.append(ops.Value('local_store', [cell, _zero_const(zeros, cell.dtype)]))
        self.out.block.stmts[start:start] = zeros

    def reverse_stmt(self, s):
        op = s.op
        handler = getattr(self, 'reverse_' + op, None)
        if handler is not None:
            return handler(s)
        if op in _NO_ADJOINT or s.dtype is None or not s.dtype.is_float or s not in self.adj:
            return
        rule = ops.OPS[op].partials
        if rule is None:
            return
        g = self.load_adj(s)
        if s.attrs.get('nan_guard'):        # differentiated as the product it guards (ops.chain)
            return self.accumulate(s.args[2], g)
        partials = ops.partials(op, [self.primal(a) for a in s.args], self.primal(s))
        for arg, partial in zip(s.args, partials):
            if partial is not None and arg.dtype.is_float:
                self.accumulate(arg, ops.chain(op, g, partial, guard=s not in self.finite))

    def reverse_for(self, s):
        if s.attrs['parallel']:
            return self.reverse_parallel_loop(s)
        self.reverse_serial_loop(s)

    def reverse_while(self, s):
        self.reverse_serial_loop(s)

    def reverse_serial_loop(self, s):
        stack, carried = self.stacks[s]
        begin, end = (self.primal(a) for a in s.args) if s.op == 'for' else (ops.const(0, T.i32), None)
        if s in self.trips:         # the iterations that ran: [begin, begin + trips)
            end = begin + self.emit('local_load', [self.trips[s]], T.i32)
        self.restore(s)
        body = Block()
        k = ops.Value('loop_index', (), T.i32)
        self.emit('for', [begin, end], body=body, index=k, parallel=False)
        # Replayed iterations all run to their end: the exit test is left out.
        iteration = Block([t for t in s.attrs['body'].stmts if t is not s.attrs.get('exit')])
        with self.open(body):
            if s.op == 'for':
                self.scopes[-1][s.attrs['index']] = begin + end - 1 - k
            for a in reversed(carried):
                value = self.emit('stack_pop', (), a.dtype, stack=stack)
                self.emit('local_store', [self.primal(a), value])
            self.forward(iteration, push=True)
            self.reverse(iteration)
        self.restore(s)     # the state before the loop, for recomputations further back

    def reverse_parallel_loop(self, s):
        begin, end = (self.primal(a) for a in s.args)
        self.restore(s)
        body = Block()
        index = ops.Value('loop_index', (), T.i32)
        self.emit('for', [begin, end], body=body, index=index, parallel=True)
        saved_home, saved_if = self.home, self.if_depth
        self.home, self.if_depth, self.in_parallel = [], 0, True
        self.owned = _owned_fields(s) if passes.enabled('owned_adjoints') else {}
        with self.open(body):
            self.scopes[-1][s.attrs['index']] = index
            self.forward(s.attrs['body'], push=True)
            self.reverse(s.attrs['body'])
        body.stmts[0:0] = self.home
        self.home, self.if_depth, self.in_parallel = saved_home, saved_if, False
        self.owned = {}

    def reverse_if(self, s):
        then_b, else_b = Block(), Block()
        self.emit('if', [self.primal(s.args[0])], then=then_b, **{'else': else_b})
        for target, source in ((then_b, s.attrs['then']), (else_b, s.attrs['else'])):
            with self.open(target):
                self.reverse(source)

    def reverse_local_load(self, s):
        if s in self.adj and s.dtype.is_float:
            self.accumulate(s.args[0], self.load_adj(s))

    # A store or atomic reversed before any read of its local still needs the local's
    # adjoint cell: in a serial loop, reads earlier in the body (reversed later) carry
    # adjoints to the stores of the previous iteration through it.
    def reverse_local_store(self, s):
        cell, value = s.args
        if cell.dtype.is_float:
            self.adj_cell(cell)
            self.accumulate(value, self.load_adj(cell))
            self.emit('local_store', [self.adj[cell], _zero(cell.dtype)])

    def reverse_local_atomic(self, s):
        cell, value = s.args
        if cell.dtype.is_float:
            if s.attrs['kind'] not in ('add', 'sub'):
                raise refuse('shared float atomic min/max', s, kind=s.attrs['kind'])
            self.adj_cell(cell)
            g = self.load_adj(cell)
            self.accumulate(value, g if s.attrs['kind'] == 'add' else -g)

    def reverse_global_load(self, s):
        grad = _grad_of(s.attrs['target'])
        if grad is None or s not in self.adj:
            return
        indices = [self.primal(a) for a in s.args]
        # iterations of a parallel loop that own their elements add without atomics
        self.emit('atomic', indices + [self.load_adj(s)], s.dtype, target=grad,
                  component=s.attrs['component'], kind='add', **self.ownership(s.attrs['target']))

    def ownership(self, target):
        """The attributes of an adjoint's add into target's gradient (_owned_fields)."""
        span = self.owned.get(target)
        return {} if span is None else {'exclusive': True} if span == 0 else {'near': span}

    def reverse_global_store(self, s):
        # The stored value replaced the element: what was written there before (earlier in
        # this kernel or by an earlier launch) no longer reaches the loss, so the element's
        # adjoint is used up here. That makes a later overwrite give the gradient of the
        # last write, as in Taichi.
        self._reverse_write(s, 1, consume=True)

    def reverse_atomic(self, s):
        kind = s.attrs['kind']
        if kind in ('add', 'sub'):
            self._reverse_write(s, 1 if kind == 'add' else -1)

    def _reverse_write(self, s, sign, consume=False):
        value = s.args[-1]
        grad = _grad_of(s.attrs['target'])
        if grad is None or not value.dtype.is_float:
            return
        indices = [self.primal(a) for a in s.args[:-1]]
        where = dict(target=grad, component=s.attrs['component'])
        g = self.emit('global_load', indices, value.dtype, **where)
        self.accumulate(value, g if sign > 0 else -g)
        if consume:
            self.emit('global_store', indices + [_zero(value.dtype)], None, **where)
            kept = getattr(s.attrs['target'], 'kept_adjoints', None)     # ti.ad.keep_adjoints
            if kept is not None:
                self.emit('atomic', indices + [g], value.dtype, target=kept, kind='add',
                          component=s.attrs['component'], **self.ownership(s.attrs['target']))

    def reverse_return(self, s):
        pass

    # --- adjoint cells ------------------------------------------------------------
    def adj_cell(self, stmt):
        cell = self.adj.get(stmt)
        if cell is None:
            cell = self.adj[stmt] = ops.Value('alloca', (), stmt.dtype)
            # Cells of kernel-scope values are shared by all iterations of a parallel loop.
            shared = self.in_parallel and stmt in self.serial_scope
            (self.kernel_home if shared else self.home).append(cell)
        return cell

    def load_adj(self, stmt):
        return self.emit('local_load', [self.adj[stmt]], stmt.dtype)

    def accumulate(self, stmt, delta):
        """adjoint(stmt) += delta; atomically when threads share the cell."""
        if self.constant or stmt.op in _NO_ADJOINT - {'alloca'} or not stmt.dtype.is_float:
            return
        cell = self.adj_cell(stmt)
        delta = ops.as_value(delta, stmt.dtype)
        if self.in_parallel and stmt in self.serial_scope:
            self.emit('local_atomic', [cell, delta], stmt.dtype, kind='add')
        else:
            self.emit('local_store', [cell, self.emit('local_load', [cell], stmt.dtype) + delta])


class _Unavailable:
    def __init__(self, stmt):
        self.stmt = stmt


class _Scoped:
    def __init__(self, rp, block):
        self.rp, self.block = rp, block

    def __enter__(self):
        self.rp.scopes.append({})
        self._open = self.rp.out.open(self.block)
        self._open.__enter__()

    def __exit__(self, *exc):
        self._open.__exit__(*exc)
        self.rp.scopes.pop()


def _zero(dtype):
    return ops.const(-0.0 if dtype.is_float else 0, dtype)


def _zero_const(sink, dtype):
    # Adjoints start at -0.0, the identity of float addition (-0.0 + x == x for every x,
    # +0.0 + -0.0 is not): LLVM may then drop the first add into every adjoint cell.
    stmt = ops.Value('const', (), dtype, value=-0.0 if dtype.is_float else 0)
    if sink is not None:
        sink.append(stmt)
    return stmt


def _owned_fields(loop):
    """{field: span} for the fields whose elements the iterations of a parallel loop touch
    only near their own index, so that the adjoint's adds into their gradients need no
    atomics (span 0), or need them only near the ends of a thread's chunk.

    Proof obligation: a field is owned with span s when there is one axis k such that every
    access to it in the loop (load, store or atomic, at any depth) has the loop index plus
    a constant at axis k, the constants spanning s (`p[t, i - 1]`, `p[t, i]`, `p[t, i + 1]`:
    s = 2). Iterations i and i' then touch a common element only if |i - i'| <= s. The
    thread pool runs each chunk [lo, hi) of a loop on one thread, in order, so iteration i
    shares no element with another thread's iterations when lo + s <= i < hi - s; there
    codegen adds without atomics (codegen.emit_body_twice). `x[i, j]` together with `x[j, i]`
    has the index at different axes and keeps its atomics everywhere (tests run that
    program and the shifted one on 2 threads)."""
    index, offsets, tuples = loop.attrs['index'], {}, {}
    for s in walk(loop.attrs['body']):
        if s.op in ('global_load', 'global_store', 'atomic'):
            indices = s.args if s.op == 'global_load' else s.args[:-1]
            found = {k: c for k, c in ((k, _offset_from(a, index)) for k, a in enumerate(indices)) if c is not None}
            target = s.attrs['target']
            tuples.setdefault(target, set()).add(tuple(indices))
            if target not in offsets:
                offsets[target] = {k: {c} for k, c in found.items()}
            else:
                offsets[target] = {k: cs | {found[k]} for k, cs in offsets[target].items() if k in found}
    owned = {target: min(max(cs) - min(cs) for cs in axes.values()) for target, axes in offsets.items() if axes}
    # a struct-for over a 2D or 3D field: every access at the one index tuple (i, j) that
    # the loop index decomposes into, so iterations never share an element
    owned.update({target: 0 for target, seen in tuples.items()
                  if target not in owned and len(seen) == 1 and _determines(next(iter(seen)), index)})
    return owned


def _determines(indices, index):
    """Whether `indices` give back the loop index: they hold its digits in a mixed radix,
    `(index // d) % m` for d = 1, m1, m1 * m2, ..., and the last `index // D` (each
    digit may be shifted by a constant), as a struct-for's indices do."""
    digits = {d for d in (_digit(v, index) for v in indices) if d is not None}
    place = 1
    while (place, None) not in digits:
        radix = next((m for d, m in digits if d == place and m is not None and m > 1), None)    # % 1 is no digit
        if radix is None:
            return False
        place *= radix
    return True


def _digit(value, index, depth=0):
    """(d, m) when `value` is `(index // d) % m` (m None: `index // d`) plus a constant."""
    if value is index:
        return 1, None
    if depth > 8 or value.dtype is None or not value.dtype.is_int or len(value.args) != 2:
        return None
    a, c = value.args
    if c.op != 'const' or not isinstance(c.attrs['value'], int) or c.attrs['value'] <= 0:
        if value.op == 'add' and a.op == 'const':        # c + (digit)
            return _digit(c, index, depth + 1)
        return None
    inner = _digit(a, index, depth + 1)
    if inner is None:
        return None
    d, m = inner
    if value.op in ('add', 'sub'):
        return inner
    if m is not None:
        return None
    n = c.attrs['value']
    return {'floordiv': (d * n, None), 'mod': (d, n)}.get(value.op)


def _offset_from(value, index):
    """c when `value` is `index + c` (or `index - c`, `c + index`) for a constant c."""
    if value is index:
        return 0
    if value.op in ('add', 'sub') and value.dtype is not None and value.dtype.is_int:
        a, b = value.args
        if a is index and b.op == 'const':
            return int(b.attrs['value']) * (1 if value.op == 'add' else -1)
        if b is index and a.op == 'const' and value.op == 'add':
            return int(a.attrs['value'])
    return None


def _grad_of(target):
    if isinstance(target, Field):
        grad = target.grad
        return grad if grad is not None and grad.placed and target.dtype.is_float else None
    return getattr(target, 'grad_target', None)


def outer_locals(loop):
    """Locals defined outside a loop that its body reads or writes, in a stable order."""
    return [c for c in used_from_outside(loop.attrs['body']) if c.op == 'alloca']


def carried_locals(loop):
    """Locals defined outside a serial loop and stored inside it, in a stable order."""
    outside = set(used_from_outside(loop.attrs['body']))
    stored = (s.args[0] for s in walk(loop.attrs['body']) if s.op in ('local_store', 'local_atomic'))
    return [c for c in dict.fromkeys(stored) if c in outside]
