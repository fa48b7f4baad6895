"""Simple statements: expression statements, `pass`, `if` and `assert`.

An `if` with a compile-time condition compiles one branch; an assert with a run-time
condition is compiled in debug mode only (as in Taichi). print() is a call (source.py's
builtins: printing.kernel_print).
"""
import ast

from ...ir import ops
from .. import printing
from ...core.program import RT_ERROR_WORDS, current as current_program
from ...ir.nodes import Block
from ..matrix import Matrix


class StatementMixin:
    """Simple statements (a part of KernelBuilder)."""

    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant):
            return  # a docstring
        self.visit(node.value)

    def visit_Pass(self, node):
        pass

    def visit_If(self, node):
        cond = self.visit(node.test)
        if isinstance(cond, Matrix):
            raise self.error(node.test, 'the condition of an `if` must be a scalar')
        if not ops.is_value(cond):
            returns = self.frame.returns
            self._in_scope(node.body if cond else node.orelse)
            if self.frame.returns > returns and self._at_func_top():
                self.frame.returned_at_compile_time = True    # Taichi compiles nothing after it
            return
        then_block, else_block = Block(), Block()
        self.builder.emit('if', [ops.truth(cond)], then=then_block, **{'else': else_block})
        with self.builder.open(then_block):
            self._in_scope(node.body)
        with self.builder.open(else_block):
            self._in_scope(node.orelse)

    def visit_Assert(self, node):
        """Checked at compile time when the condition is known then; else, in debug mode
        only (as Taichi does), at run time: a failure stops the launch and raises
        TaichiAssertionError with the message (printing.assertion_error)."""
        block, cond = self._detached(lambda: self.visit(node.test))
        if isinstance(cond, Matrix):
            raise self.error(node.test, 'the condition of an assert must be a scalar (use all(...) or any(...))')
        if not ops.is_value(cond):
            if not cond:
                message = self.visit(node.msg) if node.msg is not None else None
                raise self.error(node, 'assertion is false at compile time' +
                                 (f': {message}' if isinstance(message, str) else ''))
            return
        if not current_program().config.debug:
            return                  # not compiled: the condition is not even evaluated
        self.builder.block.stmts.extend(block.stmts)
        failed = self.builder.emit('if', [ops.unary('logical_not', ops.truth(cond))],
                                   then=Block(), **{'else': Block()})
        with self.builder.open(failed.attrs['then']):       # the message is computed on failure only
            message = self.visit(node.msg) if node.msg is not None else \
                f'assertion failed: {ast.unparse(node.test)}'
            fmt, values = printing.compose(printing.pieces_of(message))
            if len(values) > RT_ERROR_WORDS:
                raise self.error(node.msg, f'an assert message shows at most {RT_ERROR_WORDS} '
                                           f'run-time values, this one {len(values)}')
            self.builder.emit('assert_fail', values, format=fmt)
