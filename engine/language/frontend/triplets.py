"""Sparse matrix builders in kernels: `A[i, j] += v` (and `-= v`) adds a triplet.

The builder (engine/language/sparse_matrix.py) is a compile-time argument, as a
ti.template() one. A triplet takes its slot with `k = ti.atomic_add(count[None], 1)` and
is written to rows[k], cols[k], values[k] when k is below the capacity: the loop then runs
serially and in order (an atomic whose result is used), and the slots past the capacity
are counted, never written, so that the launch can report them.
"""
import ast

from ...ir import ops
from ...core.errors import TaichiTypeError
from ...ir.nodes import Block
from ..matrix import Matrix
from ..sparse_matrix import SparseMatrixBuilder
from .markers import Template
from .values import MatVar, StructVar, Var

ONLY_ADDS = ('a SparseMatrixBuilder takes triplets with `A[i, j] += value` or `A[i, j] -= value` only; its '
             'entries cannot be read or assigned in a kernel (build() it, then read the SparseMatrix)')


class SparseMatrixBuilderType(Template):
    """`ti.types.sparse_matrix_builder()`: the argument is a SparseMatrixBuilder, passed at
    compile time."""


def _root_name(node):
    """The name that `A` or `self.builder` starts from, or None for any other expression."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node if isinstance(node, ast.Name) else None


class TripletMixin:
    """Triplets added to sparse matrix builders (a part of KernelBuilder)."""

    def _builder_of(self, subscript):
        """The SparseMatrixBuilder that `subscript` (`A[i, j]`) indexes, or None. Only names
        of Python objects are evaluated: they emit nothing (a local's value would be loaded)."""
        root = _root_name(subscript.value)
        if root is None or isinstance(self._lookup_var(root), (Var, MatVar, StructVar)):
            return None
        owner = self.visit(subscript.value)
        return owner if isinstance(owner, SparseMatrixBuilder) else None

    def _add_triplet(self, node, subscript, builder, value, kind):
        """`A[i, j] += value` (kind 'add') or `-= value` ('sub')."""
        if kind is None:
            raise self.error(node, ONLY_ADDS)
        i, j = self._triplet_index(node, builder, self.visit(subscript.slice))
        if isinstance(value, Matrix) or not (ops.is_value(value) or ops.is_number(value)):
            raise self.error(node, f'a sparse matrix entry is a scalar, got {type(value).__name__}', TaichiTypeError)
        value = ops.as_value(value, builder.dtype)
        slot = self._global_write(node, builder.count, None, 1, atomic='add')
        branch = self.builder.emit('if', [ops.truth(slot < builder.max_num_triplets)], then=Block(),
                                   **{'else': Block()})
        with self.builder.open(branch.attrs['then']):
            self._global_write(node, builder.rows, slot, i)
            self._global_write(node, builder.cols, slot, j)
            self._global_write(node, builder.values, slot, value if kind == 'add' else -value)

    def _triplet_index(self, node, builder, index):
        """(row, column) as i32 values: `A[i, j]`, or `A[I]` with a 2-vector I."""
        parts = index if isinstance(index, tuple) else (index,)
        flat = [e for p in parts for e in (p.entries if isinstance(p, Matrix) else [p])]
        if len(flat) != 2:
            raise self.error(node, f'SparseMatrixBuilder {builder.name} is indexed A[row, column], got '
                                   f'{len(flat)} index(es)', TaichiTypeError)
        for k in flat:
            if isinstance(k, float) or (ops.is_value(k) and k.dtype.is_float) or not (
                    ops.is_value(k) or ops.is_integer(k)):
                raise self.error(node, f'the row and column of SparseMatrixBuilder {builder.name} must be '
                                       f'integers', TaichiTypeError)
        return [ops.as_value(k, builder.rows.dtype) for k in flat]
