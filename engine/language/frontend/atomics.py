"""Atomics: `ti.atomic_*` and the `+=` that threads share.

An atomic applies to a field or ndarray element (or one of its components), or to a
local: atomically where the threads of a parallel loop share the local or it is memory
(an ElementRef), as a plain update elsewhere. Each returns the old value.
"""
import ast

from ...ir import ops
from ...core.errors import TaichiTypeError
from ..fields import ComponentField, Field
from ..struct_fields import StructField
from ..matrix import Matrix
from .components import component_of, flat_component
from .operators import COMBINE
from .values import ElementRef, MatVar, NdarrayArg, Resolved, StructVar, Var


class AtomicMixin:
    """Atomic updates of memory and of locals (a part of KernelBuilder)."""

    def atomic(self, node, kind, target_node, value):
        """`ti.atomic_add(f[i], v)` and friends: the first argument must be a global element."""
        target_node = self._member_node(target_node)
        var = self._local_target(target_node)
        if var is not None:             # a local, or an entry of one: Taichi allows it
            return self._accumulate(node, var, kind, value)
        if isinstance(target_node, ast.Attribute) and component_of(target_node.attr) is not None:
            element = self._vector_element(target_node.value)
            if element is not None:     # ti.atomic_add(f[i].x, v): one component
                return self._store_component(node, element[0], self.visit(element[1]),
                                             component_of(target_node.attr), value, atomic=kind)
        if not isinstance(target_node, ast.Subscript):
            raise self.error(node, f'atomic_{kind} needs a variable or a field or ndarray element as its '
                                   f'first argument')
        element = self._vector_element(target_node.value)
        if element is not None:          # ti.atomic_add(u[i][k], v): one component
            return self._store_component(node, element[0], self.visit(element[1]),
                                         self.visit(target_node.slice), value, atomic=kind)
        target = self.visit(target_node.value)
        if isinstance(target, ComponentField):
            return self._store_component(node, target.parent, self.visit(target_node.slice), target.component,
                                         value, atomic=kind)
        if isinstance(target, StructField):
            raise self.error(node, f'atomic_{kind} of a whole struct is not supported: apply it to its '
                                   f'members ({target.name}[i].{target.keys[0]}, ...)', TaichiTypeError)
        if not isinstance(target, (Field, NdarrayArg)):
            raise self.error(node, f'atomic_{kind} needs a variable or a field or ndarray element as its '
                                   f'first argument')
        return self._global_write(node, target, self.visit(target_node.slice), value, atomic=kind)

    def _local_target(self, node):
        """The local variable (Var or MatVar) that an atomic's target names: `a`, `v[k]` or
        `v.x` of a local vector; None when it names no local."""
        if isinstance(node, (ast.Name, Resolved)):
            var = self._lookup_var(node)
            if isinstance(var, StructVar):
                raise self.error(node, 'an atomic operation on a whole struct is not supported: apply it '
                                       'to its members', TaichiTypeError)
            return var if isinstance(var, (Var, MatVar)) else None
        if isinstance(node, ast.Attribute) and component_of(node.attr) is not None:
            owner = self._local_target(self._member_node(node.value))
            if isinstance(owner, MatVar):
                return owner.vars[component_of(node.attr, node, self, owner.shape)]
            return None
        if isinstance(node, ast.Subscript):
            owner = self._local_target(self._member_node(node.value))
            if isinstance(owner, MatVar):
                index = self.visit(node.slice)
                comps = index if isinstance(index, tuple) else (index,)
                if len(comps) == 1 and len(owner.shape) == 2:           # a row of a matrix
                    m = owner.shape[1]
                    return MatVar((m,), owner.vars[comps[0] * m:(comps[0] + 1) * m])
                return owner.vars[flat_component(self, node, owner.shape, comps)]
        return None

    def _needs_atomic(self, var):
        if isinstance(var, MatVar):
            return any(map(self._needs_atomic, var.vars))
        return isinstance(var, ElementRef) or self._shared(var)

    def _accumulate(self, node, var, kind, value):
        """`var = var <kind> value` for a local (entry by entry for a vector): atomic where
        threads share it or it is memory. Returns the old value, as ti.atomic_* does."""
        if isinstance(var, MatVar):
            entries = value.entries if isinstance(value, Matrix) else [value] * len(var.vars)
            if len(entries) != len(var.vars):
                raise self.error(node, f'cannot apply atomic_{kind} of a matrix of shape {value.shape} '
                                       f'to a variable of shape {var.shape}', TaichiTypeError)
            old = [self._accumulate(node, v, kind, e) for v, e in zip(var.vars, entries)]
            return Matrix._make(var.shape, old)
        if isinstance(value, Matrix):
            raise self.error(node, f'cannot apply atomic_{kind} of a matrix to a scalar', TaichiTypeError)
        value = ops.as_value(value, var.dtype)
        if isinstance(var, ElementRef):
            return var.accumulate(kind, value)
        if self._shared(var):
            return ops.emit('local_atomic', [var.alloca, value], var.dtype, kind=kind)
        old = var.load()
        var.store(COMBINE[kind](old, value))
        return old
