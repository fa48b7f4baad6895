"""Assignments: `=`, annotated and augmented assignments to names, unpacked tuples, entries
of local vectors, fields, ndarrays and struct members.

A kernel-scope local assigned inside a parallel loop is an error (all threads share it),
except `+=`/`-=`, which become atomics (atomics.py).
"""
import ast

from ...ir import ops
from ...core import dtypes as T
from ...core.errors import TaichiTypeError
from ..fields import ComponentField, Field
from ..struct_fields import StructField
from ..matrix import Matrix, swizzle
from ..structs import Struct
from ..sparse_matrix import SparseMatrixBuilder
from .components import component_of, flat_component
from .operators import BINOPS
from .source import describe
from .triplets import ONLY_ADDS
from .values import MatVar, NdarrayArg, Resolved, StructVar, Var


class AssignmentMixin:
    """Assignment statements (a part of KernelBuilder)."""

    def visit_Assign(self, node):
        value = self.visit(node.value)
        is_static = self._is_static_call(node.value)
        for target in node.targets:
            self._assign(target, value, is_static)

    def visit_NamedExpr(self, node):
        """`(k := expr)`: assigns k as `k = expr` would, and gives its value."""
        self._assign(node.target, self.visit(node.value), self._is_static_call(node.value))
        return self.visit(ast.copy_location(ast.Name(id=node.target.id, ctx=ast.Load()), node.target))

    def visit_AnnAssign(self, node):
        dtype = T.resolve(self.visit(node.annotation))
        value = self.visit(node.value) if node.value is not None else 0
        if not isinstance(node.target, ast.Name):
            return self._assign(node.target, value, False)
        if isinstance(value, Matrix):
            self.frame.scopes[-1][node.target.id] = self._new_var(value, dtype)
        else:
            self.frame.scopes[-1][node.target.id] = self._new_var(ops.cast(value, dtype) if ops.is_value(value) else value, dtype)

    def _assign(self, target, value, is_static=False):
        if isinstance(target, ast.Name):
            return self._assign_name(target, value, is_static)
        if isinstance(target, (ast.Tuple, ast.List)):
            for t, v in self._unpack(target, value):
                self._assign(t, v, is_static)
            return
        if isinstance(target, ast.Subscript):
            return self._assign_subscript(target, value)
        if isinstance(target, Resolved):                # a member of a struct local
            return self._store_var(target, target.obj, value)
        if isinstance(target, ast.Attribute):
            resolved = self._member_node(target)
            if resolved is not target:
                return self._assign(resolved, value, is_static)
            if self._swizzle_write(target, target, value):       # u.x = v, f[i].xy = w
                return
            raise self.error(target, f'cannot assign to attribute {target.attr}')
        raise self.error(target, f'cannot assign to {describe(target)}')

    def _unpack(self, target, value):
        """(name node, item) pairs of a tuple target: `a, b = v`, `for i, (j, k) in ...`."""
        items = value.entries if isinstance(value, Matrix) else list(value)
        if len(items) != len(target.elts):
            raise self.error(target, f'cannot unpack {len(items)} values into {len(target.elts)} names')
        return zip(target.elts, items)

    def _assign_name(self, target, value, is_static):
        name = target.id
        for scope in reversed(self.frame.scopes):
            if name in scope and isinstance(scope[name], (Var, MatVar, StructVar)):
                return self._store_var(target, scope[name], value)
        self._not_an_expression_param(target, name)
        scope = self.frame.scopes[-1]
        if is_static or not (ops.is_value(value) or isinstance(value, (Matrix, Struct)) or
                             (ops.is_number(value) and not isinstance(value, bool))):
            scope[name] = value
        else:
            scope[name] = self._new_var(value)

    def _store_var(self, target, var, value):
        if self._shared(var) or isinstance(var, (MatVar, StructVar)) and any(map(self._shared, var.vars)):
            if self._iteration_copy(target, var, value):
                return
            name = target.id if isinstance(target, ast.Name) else target.name
            raise self.error(target, f'`{name}` is defined outside this parallel loop, so all '
                                     f'threads share it: update it with `{name} += ...` '
                                     f'(an atomic add), use a field, or run the loop serially '
                                     f'(`ti.loop_config(serialize=True)` before it)')
        var.store(value)
        var.private_in_loop_at = None      # assigned after the loop that made it per-iteration: defined again

    def _iteration_copy(self, target, var, value):
        """A kernel-scope local that a parallel loop assigns, unconditionally, before any read in
        the iteration (`r = x[0]` before the loop, `r = ...` first thing in its body) is each
        iteration's own, as in Taichi, where the threads' writes never meet a read: the name
        gets a new local in the loop's scope. Reading the outer one after the loop is refused
        (scope.py _note_read): Taichi leaves it to the last thread."""
        loop = next(l for l in reversed(self.loops) if l.kind == 'parallel')
        entries = var.vars if isinstance(var, MatVar) else [var]
        if not isinstance(target, ast.Name) or isinstance(var, StructVar) or self.builder.block is not loop.body \
                or any(id(v) in loop.reads for v in entries):
            return False
        private = self._fresh_like(var)
        private.store(value)            # the outer local's type and shape: its casts and its checks
        self.frame.scopes[-1][target.id] = private
        var.private_in_loop_at = self.frame.source.location(target)
        return True

    def _fresh_like(self, var):
        """A new local of the type and shape of `var` (a Var or MatVar), in this parallel loop."""
        if isinstance(var, MatVar):
            return MatVar(var.shape, [self._fresh_like(v) for v in var.vars])
        return Var(self.builder.emit('alloca', (), var.dtype), in_parallel_loop=True)

    def _assign_subscript(self, target, value):
        owner_node = self._member_node(target.value)
        index = self.visit(target.slice)
        owner_var = self._lookup_var(owner_node) if isinstance(owner_node, (ast.Name, Resolved)) else None
        if isinstance(owner_var, MatVar):
            return self._store_matvar(target, owner_var, index, value)
        element = self._vector_element(owner_node)
        if element is not None:         # f[i][k] = v on a vector field: write one component
            return self._store_component(target, element[0], self.visit(element[1]), index, value)
        owner = self.visit(owner_node)
        if isinstance(owner, (Field, NdarrayArg)):
            return self._global_write(target, owner, index, value)
        if isinstance(owner, StructField):
            return self._struct_store(target, owner, index, value)
        if isinstance(owner, ComponentField):
            return self._store_component(target, owner.parent, index, owner.component, value)
        if isinstance(owner, (list, dict)) and not ops.is_value(index):
            owner[index] = value
            return
        if isinstance(owner, SparseMatrixBuilder):
            raise self.error(target, ONLY_ADDS)
        if isinstance(owner_node, ast.Name):
            self._not_an_expression_param(target, owner_node.id)
        raise self.error(target, f'cannot assign to an element of {type(owner).__name__}')

    def _not_an_expression_param(self, target, name):
        if self.frame.is_expression_param(name):
            raise self.error(target, f'`{name}` is a ti.template() parameter bound to an expression, not '
                                     f'to a variable, an entry of a local vector at a constant index or a '
                                     f'field element: it cannot be assigned to (pass one of those to change '
                                     f'it by reference, or copy it into a new local)')

    def _accumulate_entry(self, node, target, var, kind, value):
        """`acc[k] += v` on a vector defined outside this parallel loop: an atomic add into
        entry k (a constant index; a run-time one would pick the entry per thread)."""
        index = self.visit(target.slice)
        idx = index if isinstance(index, tuple) else (index,)
        if any(ops.is_value(i) for i in idx):
            raise self.error(node, 'an entry of a vector defined outside this parallel loop is updated at '
                                   'a run-time index: all threads share the vector, and only a constant '
                                   'index can be accumulated atomically (use a field, or ti.static indices)')
        self._accumulate(node, var.vars[flat_component(self, node, var.shape, idx)], kind, value)

    def _store_matvar(self, node, var, index, value):
        if any(map(self._shared, var.vars)):
            raise self.error(node, 'this vector is defined outside this parallel loop, so all threads share '
                                   'it: update its entries with `+=` (an atomic add) or use a field')
        idx = index if isinstance(index, tuple) else (index,)
        if any(isinstance(i, slice) for i in idx):      # `m[:, 0] = col`: entry by entry
            shape, positions = Matrix._make(var.shape, [0] * len(var.vars)).slice_positions(idx)
            values = value.entries if isinstance(value, Matrix) else [value] * len(positions)
            if len(values) != len(positions):
                raise self.error(node, f'cannot assign {len(values)} values to a slice of {len(positions)} entries',
                                 TaichiTypeError)
            for p, v in zip(positions, values):
                self._store_matvar(node, var, p, v)
            return
        if len(idx) == 1 and len(var.shape) == 2:       # a row of a matrix
            return self._store_row(node, var, idx[0], value)
        if any(ops.is_value(i) for i in idx):           # each entry keeps its value unless named
            flat_rt = self._dynamic_flat(node, var.shape, idx)
            for k, v in enumerate(var.vars):
                v.store(ops.select(flat_rt == k, value, v.load()))
            return
        flat = flat_component(self, node, var.shape, idx)
        var.vars[flat].store(value)

    def _store_row(self, node, var, row, value):
        """`m[i] = v` on a local matrix: row i, also at a run-time i (selects per entry)."""
        n, m = var.shape
        if not ops.is_value(row):
            return MatVar((m,), var.vars[row * m:(row + 1) * m]).store(value)
        entries = value.entries if isinstance(value, Matrix) else [value] * m
        if len(entries) != m:
            raise self.error(node, f'cannot assign {len(entries)} entries to a row of {m}', TaichiTypeError)
        ops.check_component(row, n)
        for k, v in enumerate(var.vars):
            v.store(ops.select(row == k // m, entries[k % m], v.load()))

    def visit_AugAssign(self, node):
        op = BINOPS[type(node.op)]
        target = self._member_node(node.target)
        value = self.visit(node.value)
        if isinstance(target, (ast.Name, Resolved)) and isinstance(node.op, (ast.Add, ast.Sub)):
            var = self._lookup_var(target)
            if self._needs_atomic(var):         # shared by threads, or memory (an ElementRef)
                self._accumulate(node, var, 'add' if isinstance(node.op, ast.Add) else 'sub', value)
                return
        if isinstance(target, ast.Subscript):
            kind = {ast.Add: 'add', ast.Sub: 'sub'}.get(type(node.op))
            builder = self._builder_of(target)
            if builder is not None:         # A[i, j] += v on a sparse matrix builder: a triplet
                return self._add_triplet(node, target, builder, value, kind)
            owner_node = self._member_node(target.value)
            owner = self._lookup_var(owner_node) if isinstance(owner_node, (ast.Name, Resolved)) else None
            if isinstance(owner, MatVar) and kind and any(map(self._shared, owner.vars)):
                return self._accumulate_entry(node, target, owner, kind, value)
            if not isinstance(owner, MatVar):
                kind = {ast.Add: 'add', ast.Sub: 'sub'}.get(type(node.op))
                element = self._vector_element(target.value) if kind else None
                if element is not None:         # u[i][k] += v: one component, nothing read
                    self._store_component(node, element[0], self.visit(element[1]),
                                          self.visit(target.slice), value, atomic=kind)
                    return
                base = self.visit(target.value)
                if isinstance(base, ComponentField) and kind:
                    self._store_component(node, base.parent, self.visit(target.slice), base.component,
                                          value, atomic=kind)
                    return
                if isinstance(base, (Field, NdarrayArg)) and kind:
                    self._global_write(node, base, self.visit(target.slice), value, atomic=kind)
                    return
        kind = {ast.Add: 'add', ast.Sub: 'sub'}.get(type(node.op))
        if kind and isinstance(target, ast.Attribute) and self._swizzle_write(node, target, value, kind):
            return          # f[i].y += v: as f[i][1] += v, one component accumulated, nothing read
        current = self.visit(_as_load(target))
        self._no_struct_operands(node, current, value)
        result = op(current, value)
        if result is NotImplemented:
            raise self.error(node, 'unsupported operands for augmented assignment', TaichiTypeError)
        self._assign(target, result)

    def _swizzle_write(self, node, target, value, atomic=None):
        """`u.y = v`, `u.xy = w` on a local vector or a vector field/ndarray element (`f[i].y`),
        or with `atomic` ('add', 'sub') `f[i].y += v`, `f[i].xz -= w`: the same writes as the
        constant subscripts `u[1]`, `f[i][1]` (an accumulation reads nothing). False when
        `target` is no swizzle of a vector."""
        picks = swizzle(target.attr)
        if picks is None:
            return False
        owner = self._lookup_var(target.value)
        element = None if isinstance(owner, MatVar) else self._vector_element(target.value)
        if not isinstance(owner, MatVar) and element is None:
            return False
        shape = owner.shape if isinstance(owner, MatVar) else element[0].element_shape
        for k in picks:     # an error naming the line when the vector has no such entry
            component_of(target.attr[picks.index(k)], target, self, shape)
        if len(picks) == 1:
            values = [value]
        elif isinstance(value, Matrix):
            if len(value.entries) != len(picks):
                raise self.error(node, f'cannot assign a value of shape {value.shape} to .{target.attr} '
                                       f'({len(picks)} entries)', TaichiTypeError)
            values = list(value.entries)
        elif atomic and (ops.is_value(value) or ops.is_number(value)):
            values = [value] * len(picks)       # u.xy += 1.0, as u.xy + 1.0 broadcasts
        else:
            raise self.error(node, f'.{target.attr} needs a vector of {len(picks)} entries', TaichiTypeError)
        if len(set(picks)) != len(picks):
            raise self.error(node, f'cannot assign to .{target.attr}: it names an entry twice', TaichiTypeError)
        if isinstance(owner, MatVar):
            for k, v in zip(picks, values):
                if atomic:
                    self._accumulate(node, owner.vars[k], atomic, v)
                else:
                    owner.vars[k].store(v)
            return True
        index = self.visit(element[1])
        for k, v in zip(picks, values):
            self._store_component(node, element[0], index, k, v, atomic=atomic)
        return True


def _as_load(target):
    if isinstance(target, Resolved):
        return target
    node = type(target)(**{f: getattr(target, f) for f in target._fields})
    node.ctx = ast.Load()
    ast.copy_location(node, target)
    return node
