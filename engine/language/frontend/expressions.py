"""Expressions: names, attributes, operators, conditionals, comprehensions, f-strings.

Compile-time operands are computed in Python (integers as the kernel would: see
ops.fold_ints); run-time ones emit IR. `and`/`or` and `a if c else b` evaluate a side
that touches memory only when it decides the result, as Python does.
"""
import ast

from ...ir import ops
from .. import printing
from ...core import dtypes as T
from .. import math as tmath
from ...core.errors import TaichiNameError, TaichiTypeError
from ...ir.nodes import Block
from ..matrix import Matrix
from ..structs import Struct
from .components import component_of
from .markers import BoundFunc, Func
from .operators import BINOPS, COMPARE, INT_BINOPS
from .values import MatVar, Resolved, StructVar


class ExpressionMixin:
    """Expressions (a part of KernelBuilder)."""

    def visit_Constant(self, node):
        return node.value

    def visit_Name(self, node):
        try:
            obj = self.frame.lookup(node.id)
        except KeyError:
            raise self.error(node, f"name '{node.id}' is not defined", TaichiNameError) from None
        return self._load(obj)

    def visit_Attribute(self, node):
        resolved = self._member_node(node)
        if resolved is not node:
            return self.visit(resolved)
        var = self._lookup_var(node.value) if isinstance(node.value, (ast.Name, Resolved)) else None
        fill = self._fill_method(node.value, var) if node.attr == 'fill' else None
        if fill is not None:
            return fill
        if isinstance(var, StructVar) and var.struct_type is not None:
            method = var.struct_type.methods.get(node.attr)
            if isinstance(method, Func):        # bound to the local itself: it may update it
                return BoundFunc(method, var)
        value = self.visit(node.value)
        if isinstance(value, Matrix):
            component_of(node.attr, node, self, value.shape)     # `.w` of a 3-vector: say so
        return getattr(value, node.attr)

    def _fill_method(self, owner_node, var):
        """`m.fill(v)` on a local vector or matrix, or on a field element: it writes them (the
        method of a loaded value would fill a copy). None for any other owner."""
        if isinstance(var, MatVar):
            return lambda value: self._store_var(owner_node, var, value)
        element = self._vector_element(owner_node)
        if element is None:
            return None
        target, index_node = element
        return lambda value: self._global_write(owner_node, target, self.visit(index_node), value)

    def visit_Resolved(self, node):
        return self._load(node.obj)

    def visit_Tuple(self, node):
        return tuple(self.visit(e) for e in node.elts)

    def visit_List(self, node):
        return [self.visit(e) for e in node.elts]

    def visit_BinOp(self, node):
        left, right = self.visit(node.left), self.visit(node.right)
        fold = INT_BINOPS.get(type(node.op))
        if fold and ops.is_integer(left) and ops.is_integer(right):
            return ops.fold_ints(fold, int(left), int(right))     # as the kernel computes it
        if isinstance(node.op, ast.Mod) and isinstance(left, str) and printing.has_values(right):
            return printing.percent_format(left, right)      # "x[%d] = %f" % (i, v): a Text
        op = BINOPS.get(type(node.op))
        self._no_struct_operands(node, left, right)
        result = op(left, right)
        if result is NotImplemented:
            raise self.error(node, f'unsupported operands for {type(node.op).__name__}', TaichiTypeError)
        return result

    def _no_struct_operands(self, node, *operands):
        if any(isinstance(x, Struct) for x in operands):
            raise self.error(node, 'structs have no arithmetic or comparisons: use their members',
                             TaichiTypeError)

    def visit_UnaryOp(self, node):
        operand = self.visit(node.operand)
        self._no_struct_operands(node, operand)
        if isinstance(node.op, ast.Not):
            if isinstance(operand, Matrix):
                return operand.map(lambda e: ops.unary('logical_not', ops.truth(e)) if ops.is_value(e) else int(not e))
            return ops.unary('logical_not', ops.truth(operand)) if ops.is_value(operand) else not operand
        return {ast.USub: lambda x: -x, ast.UAdd: lambda x: +x, ast.Invert: lambda x: ~x}[type(node.op)](operand)

    def visit_BoolOp(self, node):
        name = 'logical_and' if isinstance(node.op, ast.And) else 'logical_or'
        result = self.visit(node.values[0])
        for value_node in node.values[1:]:
            if not ops.is_value(result):            # compile-time: short-circuit like Python
                if (name == 'logical_and') != bool(result):
                    return result
                result = self.visit(value_node)
                continue
            result = self._short_circuit(name, result, value_node)
        return result

    def _short_circuit(self, name, left, right_node):
        """`left and right` / `left or right` with a run-time `left`: when evaluating `right`
        touches memory, it runs only when it decides the result, as in Python, so
        `i > 0 and p[i - 1] > 0` never reads p[-1]. The result is 0 or 1, as Taichi's
        logical operators give."""
        block, right = self._detached(lambda: self._truth_i32(right_node))
        if _pure(block):
            self.builder.block.stmts.extend(block.stmts)
            return ops.binary(name, left, right)
        cell = self.builder.emit('alloca', (), T.i32)
        left = ops.cast(ops.truth(left), T.i32)
        self.builder.emit('local_store', [cell, left])
        decides = left if name == 'logical_and' else ops.unary('logical_not', left)
        branch = self.builder.emit('if', [decides], then=block, **{'else': Block()})
        with self.builder.open(branch.attrs['then']):
            self.builder.emit('local_store', [cell, right])
        return ops.emit('local_load', [cell], T.i32)

    def _truth_i32(self, node):
        value = self.visit(node)
        if isinstance(value, Matrix):
            raise self.error(node, '`and` and `or` need scalar operands')
        return ops.cast(ops.truth(value), T.i32) if ops.is_value(value) else ops.const(int(bool(value)), T.i32)

    def _detached(self, visit):
        """(the statements `visit()` emits, kept out of the current block; its result)."""
        block = Block()
        with self.builder.open(block):
            result = visit()
        return block, result

    def visit_Compare(self, node):
        left = self.visit(node.left)
        result = None
        for op, right_node in zip(node.ops, node.comparators):
            right = self.visit(right_node)
            if type(op) in (ast.Is, ast.IsNot, ast.In, ast.NotIn):
                if ops.is_value(left) or ops.is_value(right):
                    raise self.error(node, f'`{type(op).__name__}` needs compile-time operands')
                value = COMPARE[type(op)](left, right)
            else:
                self._no_struct_operands(node, left, right)
                value = COMPARE[type(op)](left, right)
            result = value if result is None else tmath_and(result, value)
            left = right
        return result

    def visit_IfExp(self, node):
        cond = self.visit(node.test)
        if not ops.is_value(cond) and not isinstance(cond, Matrix):
            return self.visit(node.body) if cond else self.visit(node.orelse)
        if isinstance(cond, Matrix):            # elementwise, as ti.select
            return tmath.select(cond, self.visit(node.body), self.visit(node.orelse))
        return self._conditional(node, cond)

    def _conditional(self, node, cond):
        """`a if c else b` evaluates only the side taken, as Python (and Taichi) do: a
        guarded read such as `p[i - 1] if i > 0 else 0.0` never touches p[-1], in the
        primal or in the adjoint. Sides that only compute (no memory access) become a
        select, which is cheaper and differentiates the same."""
        (then_block, a), (else_block, b) = (self._detached(lambda e=e: self._load(self.visit(e)))
                                            for e in (node.body, node.orelse))
        if isinstance(a, Struct) or isinstance(b, Struct):
            raise self.error(node, 'a conditional expression cannot choose between structs at run time: '
                                   'assign the struct in an `if` statement', TaichiTypeError)
        if _pure(then_block) and _pure(else_block):
            self.builder.block.stmts.extend(then_block.stmts + else_block.stmts)
            return tmath.select(cond, a, b)
        shapes = {x.shape for x in (a, b) if isinstance(x, Matrix)}
        if len(shapes) > 1:
            raise self.error(node, f'the two sides of a conditional expression have different '
                                   f'shapes {sorted(shapes)}', TaichiTypeError)
        shape = shapes.pop() if shapes else None
        size = max(len(x.entries) if isinstance(x, Matrix) else 1 for x in (a, b))
        entries = [x.entries if isinstance(x, Matrix) else [x] * size for x in (a, b)]
        cells = [self.builder.emit('alloca', (), T.promote(ops.dtype_of(x, y), ops.dtype_of(y, x)))
                 for x, y in zip(*entries)]
        self.builder.emit('if', [ops.truth(cond)], then=then_block, **{'else': else_block})
        for block, values in zip((then_block, else_block), entries):
            with self.builder.open(block):
                for cell, value in zip(cells, values):
                    self.builder.emit('local_store', [cell, ops.as_value(value, cell.dtype)])
        loaded = [ops.emit('local_load', [cell], cell.dtype) for cell in cells]
        return loaded[0] if shape is None else Matrix._make(shape, loaded)

    def visit_Slice(self, node):
        return slice(*(self.visit(x) if x is not None else None for x in (node.lower, node.upper, node.step)))

    def visit_ListComp(self, node):
        return self._comprehension(node, list)

    def visit_GeneratorExp(self, node):
        return self._comprehension(node, list)

    def _comprehension(self, node, kind):
        results = []

        def expand(generators, bindings):
            if not generators:
                self.frame.scopes.append(bindings)
                try:
                    results.append(self.visit(node.elt))
                finally:
                    self.frame.scopes.pop()
                return
            gen = generators[0]
            self.frame.scopes.append(bindings)
            try:
                iterable = self.visit(gen.iter)
            finally:
                self.frame.scopes.pop()
            for item in self._static_iterable(gen.iter, iterable):
                inner = dict(bindings)
                self._bind_target(gen.target, item, inner)
                self.frame.scopes.append(inner)
                try:
                    keep = all(self.visit(c) for c in gen.ifs)
                finally:
                    self.frame.scopes.pop()
                if keep:
                    expand(generators[1:], inner)

        expand(node.generators, {})
        return kind(results)

    def visit_JoinedStr(self, node):
        """An f-string: a str when every value is known at compile time, else a
        printing.Text, which print and assert messages show with the launch's values."""
        return printing.joined([self._formatted(part) for part in node.values])

    def _formatted(self, part):
        if not isinstance(part, ast.FormattedValue):
            return part.value
        spec = self.visit(part.format_spec) if part.format_spec is not None else ''
        if not isinstance(spec, str):
            raise self.error(part, 'the format spec of an f-string in a kernel must be known at compile time')
        return printing.formatted(self._load(self.visit(part.value)), spec, part.conversion)


_PURE = frozenset({'const', 'arg', 'loop_index', 'local_load', 'ndarray_shape'})


def _pure(block):
    """Whether statements only compute values: no memory access, no control flow."""
    return all(s.op in _PURE or (s.op in ops.OPS and s.op != 'random') for s in block.stmts)


def tmath_and(a, b):
    if isinstance(a, Matrix) or isinstance(b, Matrix):      # `lo <= v <= hi`: entry by entry (0 or 1 each)
        return a & b
    if not ops.is_value(a) and not ops.is_value(b):
        return a and b
    return ops.binary('logical_and', a, b)
