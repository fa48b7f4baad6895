"""Loops: `for` over ranges, ndranges, grouped indices and fields (struct-fors), `while`,
`break` and `continue`, and static (unrolled) loops.

The outermost run-time loop of a kernel runs in parallel unless
`ti.loop_config(serialize=True)` precedes it or it has one iteration (`for _ in
range(1):`); inner loops are serial. An ndrange is one
flat loop whose index is split into coordinates.
"""
import ast
import contextlib
import itertools

from ...ir import ops
from ...core import dtypes as T
from .. import math as tmath
from ...core.errors import TaichiCompilationError
from .. import sparse
from ..fields import ComponentField, Field
from ..snodes import SNode
from ..struct_fields import StructField
from ...ir.nodes import Block
from ..matrix import Matrix
from .markers import Grouped, LoopConfig, NdRange, static
from .source import describe
from .values import NdarrayArg, RuntimeRange


class Loop:
    """A loop being compiled: static (unrolled) or run-time, parallel or serial."""

    def __init__(self, kind, stmt=None):
        self.kind = kind  # 'static', 'serial' or 'parallel'
        self.stmt = stmt  # the IR `for` of a run-time loop
        self.body = None  # the block its statements go to (scope.py: assigned first in an iteration)
        self.reads = set()    # ids of the kernel-scope Vars an iteration has read so far


class LoopMixin:
    """Loops (a part of KernelBuilder): `self.loops` is the stack of the loops being compiled."""

    def visit_While(self, node):
        if node.orelse:
            raise self.error(node, '`while ... else` is not supported in kernels')
        body = Block()
        self.builder.emit('while', [], body=body)
        self.loops.append(Loop('serial'))
        try:
            with self.builder.open(body):
                cond = self.visit(node.test)
                if ops.is_value(cond):
                    stop = Block()
                    self.builder.emit('if', [ops.unary('logical_not', ops.truth(cond))],
                                      then=stop, **{'else': Block()})
                    with self.builder.open(stop):
                        self.builder.emit('break')
                elif not cond:
                    self.builder.emit('break')
                self._in_scope(node.body)
        finally:
            self.loops.pop()

    def visit_Break(self, node):
        self._loop_jump(node, 'break')

    def visit_Continue(self, node):
        self._loop_jump(node, 'continue')

    def _loop_jump(self, node, kind):
        if not self.loops:
            raise self.error(node, f'`{kind}` outside a loop')
        loop = self.loops[-1]
        if loop.kind == 'static':
            raise self.error(node, f'`{kind}` is not supported in a ti.static loop')
        if loop.kind == 'parallel' and kind == 'break':
            raise self.error(node, '`break` is not supported in the outermost (parallel) loop of a '
                                   'kernel; use it in an inner serial loop or ti.loop_config(serialize=True)')
        self.builder.emit(kind)

    def visit_For(self, node):
        if node.orelse:
            raise self.error(node, '`for ... else` is not supported in kernels')
        iter_node = node.iter
        if self._is_static_call(iter_node):
            iterable = self.visit(iter_node)
            return self._static_for(node, self._static_iterable(iter_node, iterable))
        iterable = self.visit(iter_node)
        if isinstance(iterable, range):
            return self._range_for(node, iterable.start, iterable.stop, iterable.step)
        if isinstance(iterable, RuntimeRange):
            return self._range_for(node, iterable.start, iterable.stop, iterable.step)
        if isinstance(iterable, Grouped):
            return self._ndrange_for(node, self._dims_of(node, iterable.source), grouped=True,
                                     guard=_layout_node(iterable.source))
        if isinstance(iterable, NdRange):
            return self._ndrange_for(node, iterable.dims, grouped=False)
        if isinstance(iterable, (Field, StructField, NdarrayArg, ComponentField, SNode)):     # a struct-for
            return self._ndrange_for(node, self._dims_of(node, iterable), grouped=False, guard=_layout_node(iterable))
        if isinstance(iterable, (list, tuple, Matrix)):
            return self._static_for(node, list(iterable))
        raise self.error(iter_node, f'cannot loop over {type(iterable).__name__} in a kernel')

    def _static_for(self, node, items):
        self.loops.append(Loop('static'))
        try:
            for item in items:
                bindings = {}
                self._bind_target(node.target, item, bindings)
                self._in_scope(node.body, bindings)
        finally:
            self.loops.pop()

    def _is_top_level(self):
        return self.builder.block is self.builder.root and len(self.frames) >= 1 and \
            all(loop.kind == 'static' for loop in self.loops)

    def _open_loop(self, begin, end):
        """Emit a `for` over [begin, end) with an i32 index; return (index, body)."""
        # one iteration runs alone either way: serial, so that the kernel-scope locals it
        # updates stay locals (`for _ in range(1):`, Taichi's idiom for a serial loop nest)
        parallel = self._is_top_level() and not LoopConfig.serialize and not _at_most_one(begin, end) and \
            not any(frame.real for frame in self.frames)        # a real function's loops are serial
        LoopConfig.serialize = False
        begin, end = ops.as_value(begin, T.i32), ops.as_value(end, T.i32)
        body = Block()
        index = ops.Value('loop_index', (), T.i32)
        stmt = self.builder.emit('for', [begin, end], body=body, index=index, parallel=parallel)
        return index, body, Loop('parallel' if parallel else 'serial', stmt)

    def _range_for(self, node, start, stop, step):
        if ops.is_value(step):
            raise self.error(node.iter, 'the step of a range() must be a compile-time constant')
        if step == 0:
            raise self.error(node.iter, 'range() step must not be zero')
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, 'a range() loop binds one name')
        if step == 1:
            count_begin, count_end = start, stop
        else:
            count_begin, count_end = 0, (stop - start + (step - (1 if step > 0 else -1))) // step
            count_end = tmath.max(count_end, 0)
        index, body, loop = self._open_loop(count_begin, count_end)
        self.loops.append(loop)
        try:
            with self.builder.open(body):
                value = index if step == 1 else start + index * step
                loop.body = body
                self._in_scope(node.body, {node.target.id: value})
        finally:
            self.loops.pop()

    def _ndrange_for(self, node, dims, grouped, guard=None):
        """A loop over a box; `guard`: a layout node with sparse cells, whose active cells
        only the loop visits (the box is the node's; engine/language/sparse.py)."""
        begins = [d[0] for d in dims]
        # an axis whose end is not after its begin runs no iteration (as in Python, and as in
        # Taichi since 1.0.1): the product of two negative sizes must not be positive
        sizes = [max(d[1] - d[0], 0) if isinstance(d[1] - d[0], int) else ops.binary('max', d[1] - d[0], 0)
                 for d in dims]
        total = 1
        for s in sizes:
            total = total * s
        index, body, loop = self._open_loop(0, total)
        self.loops.append(loop)
        try:
            with self.builder.open(body):
                coords, rest = [], index
                for axis in reversed(range(len(sizes))):
                    if axis == 0:
                        coords.append(rest)
                    else:
                        coords.append(rest % sizes[axis] if not _is_one(sizes[axis]) else 0)
                        rest = rest // sizes[axis]
                coords = [c + b if not (isinstance(b, int) and b == 0) else c
                          for c, b in zip(reversed(coords), begins)]
                coords = [ops.as_value(c, T.i32) for c in coords]
                with self._active_cells(loop, guard, coords):
                    self._bind_ndrange(node, coords, grouped)
        finally:
            self.loops.pop()

    def _active_cells(self, loop, guard, coords):
        """Open the block that runs for active cells only (the whole body where `guard` is None)."""
        if guard is None:
            return contextlib.nullcontext()
        self.sparse_loops[loop.stmt] = (guard, coords)
        active = Block()
        self.builder.emit('if', [ops.truth(sparse.cell_active(guard, coords))], then=active, **{'else': Block()})
        return self.builder.open(active)

    def _bind_ndrange(self, node, coords, grouped):
        bindings = {}
        if grouped:
            if not isinstance(node.target, ast.Name):
                raise self.error(node.target, 'ti.grouped binds one name')
            bindings[node.target.id] = Matrix._make((len(coords),), coords)
        else:
            names = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
            if len(names) != len(coords):
                raise self.error(node.target, f'this loop has {len(coords)} indices, '
                                              f'but binds {len(names)} name(s)')
            for t, c in zip(names, coords):
                bindings[t.id] = c
        self.loops[-1].body = self.builder.block
        self._in_scope(node.body, bindings)

    def _dims_of(self, node, source):
        if isinstance(source, NdRange):
            return source.dims
        if isinstance(source, (Field, StructField, ComponentField)):
            if not source.placed:
                self._raise_unplaced(node, source)
            return [(0, n) for n in source.shape]
        if isinstance(source, (NdarrayArg, SNode)):
            return [(0, n) for n in source.shape]
        raise self.error(node, f'ti.grouped takes a field or an ndrange, got {type(source).__name__}')

    def _is_static_call(self, node):
        if not isinstance(node, ast.Call):
            return False
        try:
            fn = self.visit(node.func) if isinstance(node.func, (ast.Name, ast.Attribute)) else None
        except TaichiCompilationError:
            return False
        return fn is static

    def _static_iterable(self, node, iterable):
        if isinstance(iterable, NdRange):
            return [tuple(c) for c in itertools.product(*(range(b, e) for b, e in iterable.dims))]
        if isinstance(iterable, Grouped):
            dims = self._dims_of(node, iterable.source)
            return [Matrix._make((len(dims),), list(c)) for c in itertools.product(*(range(b, e) for b, e in dims))]
        if isinstance(iterable, RuntimeRange):
            raise self.error(node, 'ti.static(range(...)) needs compile-time bounds')
        if isinstance(iterable, Matrix):
            return list(iterable.entries) if iterable.ndim == 1 else list(iterable)
        return list(iterable)

    def _bind_target(self, target, item, bindings):
        if isinstance(target, ast.Name):
            bindings[target.id] = item
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t, v in self._unpack(target, item):
                self._bind_target(t, v, bindings)
        else:
            raise self.error(target, f'cannot bind a loop variable to {describe(target)}')


def _layout_node(source):
    """The layout node whose cells a struct-for over `source` visits, where some may be
    inactive; None where all exist."""
    if isinstance(source, StructField):
        source = source.leaves()[0]
    if isinstance(source, ComponentField):
        source = source.parent
    node = source if isinstance(source, SNode) else sparse.container_of(source) if isinstance(source, Field) else None
    return node if sparse.is_sparse_node(node) else None


def _at_most_one(begin, end):
    """Whether [begin, end) is known at compile time to hold at most one index."""
    return not ops.is_value(begin) and not ops.is_value(end) and end - begin <= 1


def _is_one(x):
    return not ops.is_value(x) and x == 1
