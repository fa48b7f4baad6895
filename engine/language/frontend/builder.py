"""Frontend: Python AST of a kernel -> IR.

Compile-time Python is evaluated here (globals, closures, `ti.static`, static
loops, calls of plain Python helpers), `ti.func`s are inlined, and vectors and
matrices are scalarized into lists of IR values. Each AST node kind has a small
handler (`visit_<Node>`); anything without one is unsupported and reported with
the user's source line.

KernelBuilder is composed of one mixin per concern: scope.py (locals and names),
expressions.py, memory.py (fields and ndarrays), atomics.py, assignment.py, loops.py,
calls.py, inlining.py (ti.funcs and returns), statements.py (if, assert) and triplets.py
(sparse matrix builders).
"""
import ast

from ...core.errors import TaichiCompilationError, TaichiSyntaxError, TaichiTypeError
from ...ir.nodes import Builder, building
from .. import sparse
from .assignment import AssignmentMixin
from .atomics import AtomicMixin
from .calls import CallMixin
from .expressions import ExpressionMixin
from .inlining import InliningMixin
from .loops import LoopMixin
from .memory import MemoryMixin
from .scope import ScopeMixin
from .source import FunctionContext, describe
from .statements import StatementMixin
from .triplets import TripletMixin
from .values import holds_values


class KernelBuilder(ScopeMixin, ExpressionMixin, MemoryMixin, AtomicMixin, AssignmentMixin, TripletMixin,
                    LoopMixin, CallMixin, InliningMixin, StatementMixin, ast.NodeVisitor):
    """Turns one kernel (and the funcs it calls) into an IR block.

    The state the mixins share: `builder` (the IR being emitted), `frames` (a
    FunctionContext per function being compiled: the kernel, then the ti.funcs being
    inlined into it), `loops` (a loops.Loop per loop being compiled), and the kernel's
    `return_type` and `returns_seen`."""

    def __init__(self, kernel_source):
        self.builder = Builder()
        self.frames = []
        self.loops = []
        self.kernel_source = kernel_source
        self.return_type = None
        self.returns_seen = 0
        self.sparse_loops = {}      # struct-fors over sparse cells: {IR for: (layout node, coordinates)}

    def build(self, make_params):
        """`make_params()` -> {name: Value, Field, NdarrayArg or Python value}, called
        while building so that argument loads land in the kernel."""
        with building(self.builder):
            scope = {}
            for name, obj in make_params().items():
                # Arguments become mutable locals; template arguments stay Python.
                scope[name] = self._new_var(obj) if holds_values(obj) else obj
            self.frames.append(FunctionContext(self.kernel_source, scope))
            self._visit_body(self.kernel_source.node.body)
            if self.return_type is not None and not self.returns_seen:
                raise self.error(self.kernel_source.node, f'kernel {self.kernel_source.fn.__name__} has a '
                                                          f'return type but does not have a return statement')
            sparse.activate_writes(self.builder.root, self.sparse_loops)
        return self.builder.root

    @property
    def frame(self):
        return self.frames[-1]

    def error(self, node, message, cls=TaichiSyntaxError):
        return cls(message, self.frame.source.location(node))

    def visit(self, node):
        previous = self.builder.loc
        self.builder.loc = self.frame.source.location(node)
        try:
            method = getattr(self, 'visit_' + type(node).__name__, None)
            if method is None:
                raise self.error(node, f'{describe(node)} is not supported in kernels')
            return method(node)
        except TaichiCompilationError as exc:
            if exc.location is None:        # raised below the frontend: point at this node
                raise type(exc)(exc.message, self.frame.source.location(node)) from None
            raise
        except (TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError, KeyError) as exc:
            raise self.error(node, f'{type(exc).__name__}: {exc}', TaichiTypeError) from exc
        finally:
            self.builder.loc = previous
