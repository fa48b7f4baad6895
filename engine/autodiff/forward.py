"""Forward-mode autodiff: one kernel that computes primal values and tangents together.

The pass copies the kernel's IR statement by statement and, next to every
float value, emits its tangent (its directional derivative along the seed):
the sum over operands of partial * tangent(operand), with the partials taken
from the same op-table entries that reverse mode uses. Mutable locals get a
tangent cell; loads from a field or an ndarray argument also load its `.dual`,
stores and atomic adds also write the tangent to `.dual`. Control flow is copied
as is (forward mode follows the primal's path), so `while`, `break` and
`continue` need nothing.

The pass applies to any kernel IR, including an adjoint kernel: running the
adjoint in forward mode gives the directional derivative of the gradient,
i.e. Hessian-vector products (forward over reverse). For that, `.grad` fields
have a `.dual` as well, and so do the `.grad`s of ndarrays created with
needs_dual=True.
"""
from ..core import passes
from ..ir import ops
from ..language.fields import Field
from ..ir.nodes import Block, Builder, building, walk
from .finite import finite_partials
from .refusals import refuse
from .reverse import AdStack


def tangent_kernel(body):
    """The IR of the forward-mode (primal + tangent) version of `body`."""
    return TangentPass().run(body)


class TangentPass:
    """`tangent` may be seeded: {value defined outside the copied block: its tangent}."""

    def __init__(self, out=None, tangent=None):
        self.out = out or Builder()
        self.copy = {}        # primal statement -> its copy (values from outside map to themselves)
        self.tangent = dict(tangent or {})   # primal statement -> tangent value (absent: zero)
        self.dual_cell = {}   # primal alloca -> tangent alloca
        self.dual_stack = {}  # autodiff stack of an adjoint kernel -> the stack of its tangents
        self.used = set()     # statements whose values later statements use
        self.parallel = 0     # depth of parallel loops around the statement being copied
        self.finite = frozenset()   # statements whose partials need no NaN guard (finite.py)
        self.reused = frozenset()   # primal statements already emitted, used as they are (`reusing`)

    def run(self, body):
        with building(self.out):
            self.copy_block(body)
        return self.out.root

    def copy_block(self, body):
        """Copy `body` with tangents into the open block of the builder."""
        self.used = {a for s in walk(body) for a in s.args}
        self.finite = finite_partials(body) if passes.enabled('nan_guards') else frozenset()
        self.block(body)

    def emit(self, op, args=(), dtype=None, **attrs):
        return self.out.emit(op, args, dtype, cls=ops.Value, **attrs)

    def copy_of(self, s):
        return self.copy.get(s, s)

    def block(self, block):
        for s in block.stmts:
            self.out.loc = s.loc
            getattr(self, 'stmt_' + s.op, self.stmt_value)(s)

    def sub_block(self, block):
        target = Block()
        with self.out.open(target):
            self.block(block)
        return target

    def reusing(self, block):
        """Emit only tangents for `block`, whose primal statements the builder has already
        run (an inlined ti.ad transform): they are used as they are, not copied once per
        direction. Straight-line blocks only: a loop or a branch must rerun with its tangents;
        but its prints and asserts ran with the primal, and do not run again per direction."""
        reused = {s for s in walk(block) if s.op in ('print', 'assert_fail')}
        if not any(s.op in ('if', 'for', 'while') for s in walk(block)):
            reused.update(block.stmts)
        self.reused = frozenset(reused)
        return self

    def clone(self, s, **attrs):
        if s in self.reused:
            self.copy[s] = s
            return s
        copy = self.emit(s.op, [self.copy_of(a) for a in s.args], s.dtype, **{**s.attrs, **attrs})
        self.copy[s] = copy
        return copy

    # --- values ----------------------------------------------------------------
    def stmt_value(self, s):
        copy = self.clone(s)
        if s.dtype is None or not s.dtype.is_float:
            return
        if s.attrs.get('nan_guard'):
            return self.tangent_of_guard(s)
        rule = ops.OPS[s.op].partials if s.op in ops.OPS else None
        if rule is None:
            return
        terms = [(a, p) for a, p in zip(s.args, ops.partials(s.op, [self.copy_of(a) for a in s.args], copy))
                 if p is not None and a in self.tangent]
        total = None
        for arg, partial in terms:
            term = ops.as_value(ops.chain(s.op, self.tangent[arg], partial, guard=s not in self.finite), s.dtype)
            total = term if total is None else total + term
        if total is not None:
            self.tangent[s] = total

    def tangent_of_guard(self, s):
        """The tangent of select(g == 0, 0, g * p) (ops.chain) is that of the product, where
        a zero g also zeroes g * dp: an untaken select arm may have a NaN tangent dp."""
        product = s.args[2]
        if product not in self.tangent:
            return
        g, p = product.args
        g_copy = self.copy_of(g)
        dg_p = ops.chain('mul', self.tangent[g], self.copy_of(p)) if g in self.tangent else 0.0
        self.tangent[s] = ops.as_value(ops.select(g_copy == 0, dg_p, self.tangent[product]), s.dtype)

    # --- locals ------------------------------------------------------------------
    def stmt_alloca(self, s):
        self.clone(s)
        if s.dtype.is_float:
            cell = self.dual_cell[s] = self.emit('alloca', (), s.dtype)
            self.emit('local_store', [cell, ops.const(0, s.dtype)])

    def stmt_local_load(self, s):
        copy = self.clone(s)
        cell = self.dual_cell.get(s.args[0])
        if cell is not None:
            self.tangent[s] = self.emit('local_load', [cell], copy.dtype)

    def stmt_local_store(self, s):
        self.clone(s)
        cell = self.dual_cell.get(s.args[0])
        if cell is not None:
            self.emit('local_store', [cell, self.tangent_or_zero(s.args[1])])

    def stmt_local_atomic(self, s):
        self.clone(s)
        cell = self.dual_cell.get(s.args[0])
        if cell is None:
            return
        if s.attrs['kind'] not in ('add', 'sub'):
            raise refuse('forward: local atomic min/max', s, kind=s.attrs['kind'])
        old = self.emit('local_atomic', [cell, self.tangent_or_zero(s.args[1])], s.dtype, kind=s.attrs['kind'])
        self.tangent_of_old_value(s, old)

    def tangent_of_old_value(self, s, old_tangent):
        """The value an atomic returns has the tangent the dual held before the atomic's
        add. The primal and the dual atomic are two operations: in a parallel loop another
        iteration can come between them, so there the pairing is refused."""
        if s not in self.used:
            return
        if self.parallel:
            raise refuse('forward: parallel old value of an atomic', s)
        self.tangent[s] = old_tangent

    def tangent_or_zero(self, value):
        tangent = self.tangent.get(value)
        return ops.const(0, value.dtype) if tangent is None else tangent

    # --- autodiff stacks (an adjoint's loops): tangents ride a mirror stack ----------
    def stmt_stack_push(self, s):
        self.clone(s)
        if s.args[0].dtype.is_float:
            stack = self.dual_stack.setdefault(s.attrs['stack'], AdStack())
            self.emit('stack_push', [self.tangent_or_zero(s.args[0])], stack=stack)

    def stmt_stack_pop(self, s):
        self.clone(s)
        if s.dtype.is_float:
            stack = self.dual_stack.setdefault(s.attrs['stack'], AdStack())
            self.tangent[s] = self.emit('stack_pop', (), s.dtype, stack=stack)

    # --- fields --------------------------------------------------------------------
    def stmt_global_load(self, s):
        copy = self.clone(s)
        dual = _dual_of(s.attrs['target'])
        if dual is not None and s.dtype.is_float:
            self.tangent[s] = self.emit('global_load', copy.args, s.dtype, target=dual,
                                        component=s.attrs['component'])

    def stmt_global_store(self, s):
        self.clone(s)
        dual = self._written_dual(s)
        if dual is not None:
            self.emit('global_store', self.copy_args(s)[:-1] + [self.tangent_or_zero(s.args[-1])],
                      None, target=dual, component=s.attrs['component'])

    def stmt_atomic(self, s):
        self.clone(s)
        dual = self._written_dual(s)
        if dual is None:
            return
        kind = s.attrs['kind']
        if kind not in ('add', 'sub'):
            raise refuse('forward: float atomic min/max', s, kind=kind)
        old = self.emit('atomic', self.copy_args(s)[:-1] + [self.tangent_or_zero(s.args[-1])], s.dtype,
                        target=dual, component=s.attrs['component'], kind=kind)
        self.tangent_of_old_value(s, old)

    def copy_args(self, s):
        return [self.copy_of(a) for a in s.args]

    def _written_dual(self, s):
        target = s.attrs['target']
        if not s.args[-1].dtype.is_float:
            return None
        dual = _dual_of(target)
        if dual is None:
            what = (f'field {target.name} has no .dual' if isinstance(target, Field) else
                    f'ndarray argument {target.name} has no .dual; pass a ti.ndarray created with '
                    f'needs_dual=True (a numpy array has none)')
            raise refuse('forward: tangent without a dual', s, what=what)
        return dual

    # --- control flow: copied, with the tangents flowing through the blocks ---------
    def stmt_if(self, s):
        self.copy[s] = self.emit('if', [self.copy_of(s.args[0])], then=self.sub_block(s.attrs['then']),
                                 **{'else': self.sub_block(s.attrs['else'])})

    def stmt_for(self, s):
        index = ops.Value('loop_index', (), s.attrs['index'].dtype)
        self.copy[s.attrs['index']] = index
        parallel = int(bool(s.attrs['parallel']))
        self.parallel += parallel
        self.copy[s] = self.emit('for', self.copy_args(s), body=self.sub_block(s.attrs['body']),
                                 index=index, parallel=s.attrs['parallel'])
        self.parallel -= parallel

    def stmt_while(self, s):
        self.copy[s] = self.emit('while', self.copy_args(s), body=self.sub_block(s.attrs['body']))


def _dual_of(target):
    """Where the tangent of a field or ndarray argument lives, or None: its values are
    then constants (a read has tangent zero; a float write is refused)."""
    if isinstance(target, Field):
        dual = target.dual
        return dual if dual is not None and dual.placed and target.dtype.is_float else None
    return target.dual_target if target.dtype.is_float else None    # an NdarrayArg
