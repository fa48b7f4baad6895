"""Global memory: reads and writes of fields, ndarrays and struct fields.

`f[i]` loads a whole element (a Matrix for a vector field, a Struct for a struct field);
`f[i][k]` with a constant k reads or writes one component only, as does `f[i].x = v`;
a run-time k writes one component through a guarded store per entry.
`v.get_scalar_field(k)[i]` is component k of `v[i]`.
The number and type of indices are checked here, their ranges at run time (codegen).
"""
import ast

import numpy as np

from ...ir import ops
from .. import structs
from ...core.program import current as current_program
from ...core import dtypes as T
from ...core.errors import TaichiCompilationError, TaichiTypeError
from ...ir.nodes import Block
from ..fields import ComponentField, Field
from ..struct_fields import StructField
from ..matrix import Matrix
from ..structs import Struct
from ..sparse_matrix import SparseMatrixBuilder
from .components import constant_component, flat_component
from .triplets import ONLY_ADDS
from .values import NdarrayArg, Resolved


def _index_value(i):
    """An index as an IR value of its own integer type: a 64-bit index must reach the
    bounds check whole (truncated to 32 bits, 2**32 + 7 would pass as 7)."""
    if ops.is_value(i):
        return i if i.dtype.bits >= 32 else ops.cast(i, T.i32)
    if isinstance(i, (int, np.integer)) and not -2 ** 31 <= int(i) < 2 ** 31:
        return ops.as_value(int(i), T.i64)
    return ops.as_value(i, T.i32)


class TaichiUnplacedError(TaichiCompilationError, RuntimeError):
    pass


class MemoryMixin:
    """Field, ndarray and struct field access (a part of KernelBuilder)."""

    def visit_Subscript(self, node):
        element = self._vector_element(node.value)
        index = self.visit(node.slice) if element is not None else None
        if element is not None and constant_component(index, element[0].element_shape):
            # v[i][k] with a constant k loads one component: reading v[i][0] and writing
            # v[i][1] touches different elements (engine/autodiff/rules.py)
            field, element_index = element
            comps = index if isinstance(index, tuple) else (index,)
            return ops.emit('global_load', self._indices(node, field, self.visit(element_index)), field.dtype,
                            target=field, component=flat_component(self, node, field.element_shape, comps))
        value = self.visit(node.value)
        if element is None:
            index = self.visit(node.slice)
        if isinstance(value, (Field, NdarrayArg)):
            return self._global_load(node, value, index)
        if isinstance(value, StructField):
            return self._struct_load(node, value, index)
        if isinstance(value, ComponentField):      # v.get_scalar_field(k)[i]: component k of v[i]
            flat = flat_component(self, node, value.parent.element_shape, value.component)
            return ops.emit('global_load', self._indices(node, value.parent, index), value.dtype,
                            target=value.parent, component=flat)
        if isinstance(value, SparseMatrixBuilder):
            raise self.error(node, ONLY_ADDS)
        if isinstance(value, Matrix):
            if isinstance(index, tuple) and any(isinstance(i, Matrix) for i in index):
                raise self.error(node, 'a matrix cannot be indexed by a vector')
            return value[index]
        if ops.is_value(index):
            raise self.error(node, f'a {type(value).__name__} cannot be indexed by a run-time value')
        return value[index]

    def _indices(self, node, target, index):
        if isinstance(target, Field):
            if not target.placed:
                self._raise_unplaced(node, target)
            if target.program is not current_program():
                raise self.error(node, f'field {target.name} belongs to an earlier ti.init(); every '
                                       f'ti.init() starts a new program, so create the field again')
            ndim = len(target.shape)
        else:
            ndim = target.ndim
        if index is None:
            index = ()
        elif not isinstance(index, tuple):
            index = (index,)
        flat = []
        for i in index:
            if isinstance(i, Matrix):
                flat.extend(i.entries)
            else:
                flat.append(i)
        if len(flat) != ndim:
            name = target.name
            raise self.error(node, f'{name} has {ndim} dimension(s) but is indexed with {len(flat)} index(es)',
                             TaichiTypeError)
        out = []
        for i in flat:
            if isinstance(i, float) or (ops.is_value(i) and i.dtype.is_float):
                raise self.error(node, f'index of {target.name} must be an integer', TaichiTypeError)
            out.append(_index_value(i))
        return out

    def _raise_unplaced(self, node, field):
        raise self.error(node, f'field {field.name} is used before it was placed: give it a shape= or '
                             f'place it with ti.root.dense(...).place({field.name})', TaichiUnplacedError)

    def _global_load(self, node, target, index):
        idx = self._indices(node, target, index)
        n = int(np.prod(target.element_shape)) if target.element_shape else 0
        if n == 0:
            return ops.emit('global_load', idx, target.dtype, target=target, component=0)
        entries = [ops.emit('global_load', idx, target.dtype, target=target, component=c) for c in range(n)]
        return Matrix._make(target.element_shape, entries)

    def _struct_load(self, node, field, index):
        members = {k: self._struct_load(node, m, index) if isinstance(m, StructField) else
                   self._global_load(node, m, index) for k, m in field.members.items()}
        return Struct._typed(field.struct_type, members)

    def _struct_store(self, node, field, index, value):
        """`f[i] = S(...)`: every member is written."""
        try:
            value = structs.cast(field.struct_type, value)
        except TypeError as exc:
            raise self.error(node, f'cannot store into struct field {field.name}: {exc}', TaichiTypeError) from None
        for k, m in field.members.items():
            if isinstance(m, StructField):
                self._struct_store(node, m, index, value._members[k])
            else:
                self._global_write(node, m, index, value._members[k])

    def _global_write(self, node, target, index, value, atomic=None):
        idx = self._indices(node, target, index)
        n = int(np.prod(target.element_shape)) if target.element_shape else 0
        if n == 0:
            if isinstance(value, Matrix):
                raise self.error(node, f'cannot store a matrix into scalar field {target.name}', TaichiTypeError)
            values = [value]
        else:
            if isinstance(value, (list, tuple)):
                value = Matrix(value)
            if not isinstance(value, Matrix):
                value = Matrix._make(target.element_shape, [value] * n)
            if value.shape != target.element_shape:
                raise self.error(node, f'cannot store shape {value.shape} into {target.name} '
                                 f'with elements of shape {target.element_shape}', TaichiTypeError)
            values = value.entries
        results = []
        for c, v in enumerate(values):
            v = ops.as_value(v, target.dtype)
            if atomic is None:
                self.builder.emit('global_store', idx + [v], target=target, component=c)
            else:
                results.append(ops.emit('atomic', idx + [v], target.dtype, target=target,
                                        component=c, kind=atomic))
        if atomic is not None:
            return results[0] if n == 0 else Matrix._make(target.element_shape, results)

    def _vector_element(self, node):
        """(field, index node) when `node` is `f[i]` of a vector or matrix field or ndarray;
        the element is not loaded (a write to one component reads nothing)."""
        node = self._member_node(node)
        if not isinstance(node, ast.Subscript) or not isinstance(node.value, (ast.Name, ast.Attribute, Resolved)):
            return None
        base = self.visit(node.value)
        if isinstance(base, (Field, NdarrayArg)) and base.element_shape:
            return base, node.slice
        return None

    def _store_component(self, node, target, index, comp, value, atomic=None):
        idx = self._indices(node, target, index)
        comps = comp if isinstance(comp, tuple) else (comp,)
        if any(ops.is_value(c) for c in comps):
            return self._store_dynamic_component(node, target, idx, comps, value, atomic)
        flat = flat_component(self, node, target.element_shape, comp)
        v = ops.as_value(value, target.dtype)
        if atomic:
            return ops.emit('atomic', idx + [v], target.dtype, target=target, component=flat, kind=atomic)
        self.builder.emit('global_store', idx + [v], target=target, component=flat)

    def _store_dynamic_component(self, node, target, idx, comps, value, atomic):
        """`f[i][k] = v` (or `+=`) with a run-time k: one guarded store per entry, so that only
        entry k is written and nothing is read, as with a constant k. An atomic gives the
        old value of the entry it updated."""
        flat = self._dynamic_flat(node, target.element_shape, comps)
        v = ops.as_value(value, target.dtype)
        old = self._new_var(ops.as_value(0, target.dtype)) if atomic else None
        for k in range(int(np.prod(target.element_shape))):
            branch = self.builder.emit('if', [ops.truth(flat == k)], then=Block(), **{'else': Block()})
            with self.builder.open(branch.attrs['then']):
                if atomic is None:
                    self.builder.emit('global_store', idx + [v], target=target, component=k)
                else:
                    old.store(ops.emit('atomic', idx + [v], target.dtype, target=target, component=k,
                                       kind=atomic))
        return old.load() if atomic else None

    def _dynamic_flat(self, node, shape, comps):
        """The flat entry that run-time (and constant) component indices name, each checked
        to lie in its axis when the kernel runs."""
        if len(comps) != len(shape):
            raise self.error(node, f'component index {comps} does not match element shape {shape}',
                             TaichiTypeError)
        flat = 0
        for c, n in zip(comps, shape):
            if ops.is_value(c):
                ops.check_component(c, n)
            elif -n <= c < n:
                c %= n                  # a negative constant counts from the end, as in flat_component
            else:
                raise self.error(node, f'component index {c} is out of range for an axis of {n}',
                                 TaichiTypeError)
            flat = flat * n + c
        return flat
