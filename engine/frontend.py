"""Frontend: Python AST of a kernel -> IR.

Compile-time Python is evaluated here (globals, closures, `ti.static`, static
loops, calls of plain Python helpers), `ti.func`s are inlined, and vectors and
matrices are scalarized into lists of IR values. Each AST node kind has a small
handler (`visit_<Node>`); anything without one is unsupported and reported with
the user's source line.
"""
import ast
import builtins
import inspect
import itertools
import operator
import textwrap

import numpy as np

from . import ops, printing, runtime, structs
from . import dtypes as T
from .errors import (SourceLocation, TaichiCompilationError, TaichiNameError,
                     TaichiSyntaxError, TaichiTypeError)
from .fields import Field, StructField
from .ir import Block, Builder, building
from .matrix import Matrix, swizzle
from .structs import Struct
from . import math as tmath


# ----------------------------------------------------------------------------
# Compile-time markers used by the frontend

def static(value, *more):
    if more:
        return (value,) + more
    return value


def static_assert(condition, message='static assertion failed'):
    """A compile-time assertion (the condition must be known when the kernel compiles)."""
    if ops.is_value(condition):
        raise TaichiSyntaxError('ti.static_assert needs a condition known at compile time')
    if not condition:
        raise TaichiSyntaxError(f'ti.static_assert: {message}')


def static_print(*args, **kwargs):
    """print() when the kernel compiles (once per compiled kernel)."""
    print(*args, **kwargs)


def block_local(*fields):
    """A performance hint for GPUs (shared memory); nothing to do on the CPU."""


def stop_grad(x):
    """The value of x, through which no gradient flows."""
    if isinstance(x, Matrix):
        return x.map(stop_grad)
    return ops.unary('stop_grad', x) if ops.is_value(x) else x


class NdRange:
    def __init__(self, *dims):
        self.dims = [(0, d) if not isinstance(d, (tuple, list)) else tuple(d) for d in dims]


class Grouped:
    def __init__(self, source):
        self.source = source


def ndrange(*dims):
    return NdRange(*dims)


def grouped(source):
    return Grouped(source)


class LoopConfig:
    serialize = False


def loop_config(serialize=False, **_):
    """`ti.loop_config(serialize=True)`: the next top-level loop runs serially."""
    LoopConfig.serialize = bool(serialize)


# ----------------------------------------------------------------------------
# Local variables

class Var:
    """A mutable scalar local: an alloca in the IR."""

    def __init__(self, alloca, in_parallel_loop=False):
        self.alloca = alloca
        self.in_parallel_loop = in_parallel_loop

    @property
    def dtype(self):
        return self.alloca.dtype

    def load(self):
        return ops.emit('local_load', [self.alloca], self.alloca.dtype)

    def store(self, value):
        ops.current_builder().emit('local_store', [self.alloca, ops.as_value(value, self.dtype)])


class ElementRef(Var):
    """One entry of a field or ndarray element passed to a ti.template() parameter of a
    ti.func: the func reads and writes memory, as Taichi passes it by reference."""
    in_parallel_loop = True     # not a local that the threads of a parallel loop share

    def __init__(self, target, indices, component):
        self.target, self.indices, self.component = target, indices, component

    @property
    def dtype(self):
        return self.target.dtype

    def load(self):
        return ops.emit('global_load', self.indices, self.dtype, target=self.target, component=self.component)

    def store(self, value):
        ops.current_builder().emit('global_store', self.indices + [ops.as_value(value, self.dtype)],
                                   target=self.target, component=self.component)

    def accumulate(self, kind, value):
        """`x += v` on the parameter: an atomic, as on the element itself."""
        return ops.emit('atomic', self.indices + [ops.as_value(value, self.dtype)], self.dtype,
                        target=self.target, component=self.component, kind=kind)


class MatVar:
    """A mutable vector/matrix local: one Var per entry."""

    def __init__(self, shape, vars_):
        self.shape, self.vars = shape, vars_

    def load(self):
        return Matrix._make(self.shape, [v.load() for v in self.vars])

    def store(self, value):
        if not isinstance(value, Matrix):
            value = Matrix(value) if isinstance(value, (list, tuple)) else Matrix._make(
                self.shape, [value] * len(self.vars))
        if value.shape != self.shape:
            raise TaichiTypeError(f'cannot assign a matrix of shape {value.shape} to one of shape {self.shape}')
        for v, e in zip(self.vars, value.entries):
            v.store(e)


class StructVar:
    """A mutable struct local: a Var, MatVar or StructVar per member."""

    def __init__(self, struct_type, members):
        self.struct_type, self.members = struct_type, members

    @property
    def vars(self):
        return [v for m in self.members.values() for v in (m.vars if isinstance(m, (MatVar, StructVar)) else [m])]

    def load(self):
        members = {k: m.load() for k, m in self.members.items()}
        return Struct._typed(self.struct_type, members) if self.struct_type else Struct(members)

    def store(self, value):
        if not isinstance(value, Struct) or set(value._members) != set(self.members):
            raise TaichiTypeError(f'cannot assign {structs.describe(value)} to a struct with members '
                                  f'{", ".join(self.members)}')
        for k, m in self.members.items():
            m.store(value._members[k])


class Resolved(ast.expr):
    """An AST leaf standing for what the frontend already found: a struct member's field
    (`f[i].a` compiles as `f.a[i]`) or a struct local's member variable (`p.a`)."""
    _fields = ()

    def __init__(self, obj, like):
        super().__init__()
        self.obj, self.like = obj, like
        ast.copy_location(self, like)

    @property
    def name(self):         # for messages only: unparsing costs more than resolving
        return ast.unparse(self.like)


class NdarrayArg:
    """An ndarray kernel argument: a pointer and a run-time shape in the argument buffer."""

    def __init__(self, index, name, dtype, ndim, element_shape, offset, grad_offset=None):
        self.index, self.name, self.dtype = index, name, dtype
        self.ndim, self.element_shape = ndim, tuple(element_shape)
        self.pointer_offset, self.shape_offset = offset, offset + 8
        # The gradient array (if the argument has one) shares the shape slots.
        self.grad_target = None
        if grad_offset is not None:
            self.grad_target = NdarrayArg(index, name + '.grad', dtype, ndim, element_shape, offset)
            self.grad_target.pointer_offset = grad_offset

    @property
    def shape(self):
        return tuple(ops.emit('ndarray_shape', (), T.i32, target=self, axis=a) for a in range(self.ndim))

    def __repr__(self):
        return f'ndarray:{self.name}'

    def ir_text(self):
        """How the IR's text names it (engine/printer.py): its slots in the argument buffer."""
        return (f'ndarray({self.name}, @{self.pointer_offset}, shape@{self.shape_offset}, {self.ndim}, '
                f'{self.element_shape}, {self.dtype})')


class _FuncReturn(Exception):
    pass


_BUILTINS = {
    'range': range, 'len': len, 'int': None, 'float': None, 'abs': tmath.abs,
    'min': tmath.min, 'max': tmath.max, 'enumerate': enumerate, 'zip': zip,
    'isinstance': isinstance, 'list': list, 'tuple': tuple, 'bool': None, 'pow': tmath.pow,
    'True': True, 'False': False, 'None': None, 'print': printing.kernel_print, 'reversed': reversed,
    'sum': sum, 'type': type, 'round': tmath.round,
    'any': lambda x: x.any() if isinstance(x, Matrix) else any(x),      # Taichi's any(v) of a vector
    'all': lambda x: x.all() if isinstance(x, Matrix) else all(x),
}


def _py_cast(dtype_getter, pytype):
    def cast(x=0):
        if isinstance(x, Matrix):
            return x.cast(dtype_getter())
        if ops.is_value(x):
            return ops.cast(x, dtype_getter())
        return pytype(x)
    cast.python_type = pytype      # `ti.cast(x, float)` in a kernel: the name means the type
    return cast


_BUILTINS['int'] = _py_cast(lambda: T.defaults.ip, int)
_BUILTINS['float'] = _py_cast(lambda: T.defaults.fp, float)
_BUILTINS['bool'] = lambda x: ops.truth(x) if ops.is_value(x) else bool(x)


# ----------------------------------------------------------------------------

class FunctionSource:
    """Parsed source of a kernel or ti.func, with its file and line offset."""

    def __init__(self, fn):
        self.fn = fn
        self.filename = inspect.getsourcefile(fn) or '<unknown>'
        try:
            lines, self.first_line = inspect.getsourcelines(fn)
        except (OSError, TypeError) as exc:
            raise TaichiSyntaxError(f'the source of {fn.__name__} is not available ({exc}): kernels '
                                    f'and ti.funcs must be defined in a file') from None
        source = textwrap.dedent(''.join(lines))
        self.indent = len(lines[0]) - len(lines[0].lstrip())
        tree = ast.parse(source)
        self.node = tree.body[0]
        self.globals = fn.__globals__
        self.closure = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:
                    pass

    def location(self, node):
        lineno = self.first_line + getattr(node, 'lineno', 1) - 1
        col = getattr(node, 'col_offset', 0) + self.indent
        end = getattr(node, 'end_col_offset', None)
        end = end + self.indent if end is not None and getattr(node, 'end_lineno', None) == getattr(node, 'lineno', None) else None
        return SourceLocation(self.filename, lineno, col, end, self.fn.__name__)


def _index_value(i):
    """An index as an IR value of its own integer type: a 64-bit index must reach the
    bounds check whole (truncated to 32 bits, 2**32 + 7 would pass as 7)."""
    if ops.is_value(i):
        return i if i.dtype.bits >= 32 else ops.cast(i, T.i32)
    if isinstance(i, (int, np.integer)) and not -2 ** 31 <= int(i) < 2 ** 31:
        return ops.as_value(int(i), T.i64)
    return ops.as_value(i, T.i32)


_MAX_FUNC_DEPTH = 64        # ti.func calls are inlined; deeper chains would exhaust Python's stack


class FunctionContext:
    """One function being inlined: its source and its stack of local scopes."""

    def __init__(self, source, scope):
        self.source = source
        self.scopes = [scope]
        self.return_value = None
        self.has_returned = False
        # A func that returns inside run-time control flow keeps its result in locals and
        # a flag: `returned` (the flag's alloca), `returns` (returns emitted so far) and
        # `guarded` (how many of them the code being emitted is known to come after).
        self.returned = None
        self.result = None            # (shape or None, [alloca per entry])
        self.returns = self.guarded = 0
        self.return_annotation = None
        # ti.template() parameters bound to a value computed at run time, not to a variable:
        # Taichi cannot assign to them (they are no l-values), nor can we
        self.expression_params = set()

    def is_expression_param(self, name):
        holder = next((scope for scope in reversed(self.scopes) if name in scope), None)
        return holder is self.scopes[0] and name in self.expression_params

    def lookup(self, name):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in self.source.closure:
            return self.source.closure[name]
        if name in self.source.globals:
            return self.source.globals[name]
        if name in _BUILTINS:
            return _BUILTINS[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise KeyError(name)


class Loop:
    """A loop being compiled: static (unrolled) or run-time, parallel or serial."""

    def __init__(self, kind):
        self.kind = kind  # 'static', 'serial' or 'parallel'


class KernelBuilder(ast.NodeVisitor):
    """Turns one kernel (and the funcs it calls) into an IR block."""

    def __init__(self, kernel_source, is_kernel=True):
        self.builder = Builder()
        self.frames = []
        self.loops = []
        self.kernel_source = kernel_source
        self.return_type = None
        self.returns_seen = 0

    # --- entry points -----------------------------------------------------------
    def build(self, make_params):
        """`make_params()` -> {name: Value, Field, NdarrayArg or Python value}, called
        while building so that argument loads land in the kernel."""
        with building(self.builder):
            scope = {}
            for name, obj in make_params().items():
                # Arguments become mutable locals; template arguments stay Python.
                scope[name] = self._new_var(obj) if _holds_values(obj) else obj
            self.frames.append(FunctionContext(self.kernel_source, scope))
            self._visit_body(self.kernel_source.node.body)
            if self.return_type is not None and not self.returns_seen:
                raise self.error(self.kernel_source.node, f'kernel {self.kernel_source.fn.__name__} has a '
                                                          f'return type but does not have a return statement')
        return self.builder.root

    def _bind_param(self, obj):
        if ops.is_value(obj) or isinstance(obj, (Matrix, Struct)) or (ops.is_number(obj) and not isinstance(obj, bool)):
            return self._new_var(obj)
        return obj

    # --- helpers -------------------------------------------------------------------
    @property
    def frame(self):
        return self.frames[-1]

    def error(self, node, message, cls=TaichiSyntaxError):
        return cls(message, self.frame.source.location(node))

    def _new_var(self, value, dtype=None):
        if isinstance(value, Struct):
            types = value._type.members if value._type else {}
            return StructVar(value._type, {k: self._new_var(v, structs.element_dtype(types.get(k)))
                                           for k, v in value._members.items()})
        if isinstance(value, Matrix):
            return MatVar(value.shape, [self._new_var(e, dtype) for e in value.entries])
        dtype = dtype or ops.dtype_of(value)
        alloca = self.builder.emit('alloca', (), dtype)
        var = Var(alloca, self._in_parallel_loop())
        var.store(value)
        return var

    def _load(self, obj):
        if isinstance(obj, (Var, MatVar, StructVar)):
            return obj.load()
        return obj

    def visit(self, node):
        previous = self.builder.loc
        self.builder.loc = self.frame.source.location(node)
        try:
            method = getattr(self, 'visit_' + type(node).__name__, None)
            if method is None:
                raise self.error(node, f'{_describe(node)} is not supported in kernels')
            return method(node)
        except TaichiCompilationError as exc:
            if exc.location is None:        # raised below the frontend: point at this node
                raise type(exc)(exc.message, self.frame.source.location(node)) from None
            raise
        except (TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError, KeyError) as exc:
            raise self.error(node, f'{type(exc).__name__}: {exc}', TaichiTypeError) from exc
        finally:
            self.builder.loc = previous

    def _visit_body(self, stmts):
        frame = self.frame
        entry = frame.guarded
        for k, stmt in enumerate(stmts):
            if frame.has_returned:
                raise self.error(stmt, 'statements after `return` are not supported in a ti.func')
            if frame.returns > frame.guarded:       # a return above may have run
                self._after_return(stmts[k:])
                break
            self.visit(stmt)
        frame.guarded = entry

    def _after_return(self, rest):
        """The statements after a point where a ti.func may have returned: in a run-time
        loop of the func, `if returned: break` before them; elsewhere, inside
        `if not returned:`."""
        frame = self.frame
        frame.guarded = frame.returns
        flag = ops.emit('local_load', [frame.returned], T.i32)
        if self._in_func_loop():
            branch = self.builder.emit('if', [ops.truth(flag)], then=Block(), **{'else': Block()})
            with self.builder.open(branch.attrs['then']):
                self.builder.emit('break')
            self._visit_body(rest)
            return
        branch = self.builder.emit('if', [ops.unary('logical_not', ops.truth(flag))],
                                   then=Block(), **{'else': Block()})
        with self.builder.open(branch.attrs['then']):
            self._visit_body(rest)

    def _in_func_loop(self):
        """Whether the innermost loop is a run-time loop of the func being inlined."""
        inner = self.loops[self.frame.loop_depth:]
        return bool(inner) and inner[-1].kind != 'static'

    def _in_scope(self, stmts, bindings=None):
        self.frame.scopes.append(dict(bindings or {}))
        try:
            self._visit_body(stmts)
        finally:
            self.frame.scopes.pop()

    # --- expressions ----------------------------------------------------------------
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
        if isinstance(var, StructVar) and var.struct_type is not None:
            method = var.struct_type.methods.get(node.attr)
            if isinstance(method, Func):        # bound to the local itself: it may update it
                return BoundFunc(method, var)
        value = self.visit(node.value)
        if isinstance(value, Matrix):
            _component_of(node.attr, node, self, value.shape)     # `.w` of a 3-vector: say so
        return getattr(value, node.attr)

    def visit_Resolved(self, node):
        return self._load(node.obj)

    def _member_node(self, node):
        """`f[i].a` on a struct field as `f.a[i]`, and `p.a` on a struct local as the member's
        variable, as Resolved nodes: reads, writes and atomics of members then take the paths
        of fields and locals. Any other node is returned as it is."""
        if not isinstance(node, ast.Attribute):
            return node
        owner = self._member_node(node.value)
        if isinstance(owner, ast.Subscript) and isinstance(owner.value, (ast.Name, ast.Attribute, Resolved)):
            base = self.visit(owner.value)
            if isinstance(base, StructField):
                member = Resolved(self._member(node, base.members, f'struct field {base.name}'), node)
                return ast.copy_location(ast.Subscript(value=member, slice=owner.slice, ctx=node.ctx), node)
        elif isinstance(owner, (ast.Name, Resolved)):
            var = self._lookup_var(owner)
            if isinstance(var, StructVar) and _is_member_name(var, node.attr):
                name = owner.name if isinstance(owner, Resolved) else owner.id
                return Resolved(self._member(node, var.members, f'struct {name}'), node)
        if owner is node.value:
            return node
        return ast.copy_location(ast.Attribute(value=owner, attr=node.attr, ctx=node.ctx), node)

    def _member(self, node, members, what):
        if node.attr not in members:
            raise self.error(node, f"{what} has no member {node.attr!r} (members: {', '.join(members)})",
                             TaichiTypeError)
        return members[node.attr]

    def visit_Tuple(self, node):
        return tuple(self.visit(e) for e in node.elts)

    def visit_List(self, node):
        return [self.visit(e) for e in node.elts]

    def visit_BinOp(self, node):
        left, right = self.visit(node.left), self.visit(node.right)
        fold = _INT_BINOPS.get(type(node.op))
        if fold and ops.is_integer(left) and ops.is_integer(right):
            return ops.fold_ints(fold, int(left), int(right))     # as the kernel computes it
        if isinstance(node.op, ast.Mod) and isinstance(left, str) and printing.has_values(right):
            return printing.percent_format(left, right)      # "x[%d] = %f" % (i, v): a Text
        op = _BINOPS.get(type(node.op))
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
                value = _COMPARE[type(op)](left, right)
            else:
                self._no_struct_operands(node, left, right)
                value = _COMPARE[type(op)](left, right)
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

    def visit_Subscript(self, node):
        element = self._vector_element(node.value)
        index = self.visit(node.slice) if element is not None else None
        if element is not None and _constant_component(index, element[0].element_shape):
            # v[i][k] with a constant k loads one component: reading v[i][0] and writing
            # v[i][1] touches different elements (engine/rules.py)
            field, element_index = element
            comps = index if isinstance(index, tuple) else (index,)
            return ops.emit('global_load', self._indices(node, field, self.visit(element_index)), field.dtype,
                            target=field, component=_flat_component(self, node, field.element_shape, comps))
        value = self.visit(node.value)
        if element is None:
            index = self.visit(node.slice)
        if isinstance(value, (Field, NdarrayArg)):
            return self._global_load(node, value, index)
        if isinstance(value, StructField):
            return self._struct_load(node, value, index)
        if isinstance(value, Matrix):
            if isinstance(index, tuple) and any(isinstance(i, Matrix) for i in index):
                raise self.error(node, 'a matrix cannot be indexed by a vector')
            return value[index]
        if ops.is_value(index):
            raise self.error(node, f'a {type(value).__name__} cannot be indexed by a run-time value')
        return value[index]

    def visit_Slice(self, node):
        return slice(*(self.visit(x) if x is not None else None for x in (node.lower, node.upper, node.step)))

    def visit_Call(self, node):
        fn = self.visit(node.func)
        kind = getattr(fn, '_atomic_kind', None)
        if kind is not None:
            if len(node.args) != 2:
                raise self.error(node, f'atomic_{kind} takes two arguments')
            return self.atomic(node, kind, node.args[0], self.visit(node.args[1]))
        if isinstance(fn, (Func, BoundFunc)):
            return self._call_func(node, fn)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.visit(a.value))
            else:
                args.append(self.visit(a))
        kwargs = {kw.arg: self.visit(kw.value) for kw in node.keywords}
        if _is_str_format(fn) and printing.has_values(args + list(kwargs.values())):
            return printing.str_format(fn.__self__, args, kwargs)     # as an f-string would
        if fn is str and len(args) == 1 and not kwargs and printing.has_values(args[0]):
            return printing.formatted(args[0], '')      # str(v): a Text, for print and assert
        if getattr(fn, '_kernel_transform', False):      # ti.ad.grad / jvp / vjp of a ti.func
            return fn.apply(self, node, args, kwargs)
        if getattr(fn, '_is_kernel', False):
            raise self.error(node, 'calling a kernel from a kernel is not supported; use a ti.func')
        return fn(*args, **kwargs)

    def _call_func(self, node, fn):
        """A ti.func call: an argument of a ti.template() parameter that names a local (or a
        field element) is passed as that variable, by reference; the others by value."""
        func, args = (fn.func, [fn.obj]) if isinstance(fn, BoundFunc) else (fn, [])
        params = list(func.signature.parameters.values())
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.visit(a.value))
                continue
            param = params[len(args)] if len(args) < len(params) else None
            args.append(self._argument(a, param))
        named = func.signature.parameters
        kwargs = {kw.arg: self._argument(kw.value, named.get(kw.arg)) for kw in node.keywords}
        return self.inline(node, func, args, kwargs)

    def _argument(self, node, param):
        template = param is not None and param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD,
                                                        param.KEYWORD_ONLY) and \
            _is_template_annotation(param.annotation)
        reference = self._reference(node) if template else None
        return self.visit(node) if reference is None else reference

    def _reference(self, node):
        """What a ti.template() argument names that can be assigned: a local, an entry of a
        local vector (`v[0]`, `v.x`), a field or ndarray element or one of its components;
        None for anything else (passed as its value)."""
        node = self._member_node(node)
        if isinstance(node, (ast.Name, Resolved)):
            var = self._lookup_var(node)
            return var if isinstance(var, (Var, MatVar, StructVar)) else None
        if isinstance(node, ast.Attribute):
            owner = self._reference(node.value) if _component_of(node.attr) is not None else None
            if isinstance(owner, MatVar) and len(owner.shape) == 1:
                return owner.vars[_component_of(node.attr, node, self, owner.shape)]
            return None
        if not isinstance(node, ast.Subscript):
            return None
        owner = self._reference(node.value)
        if isinstance(owner, MatVar):
            index = self.visit(node.slice)
            if not _constant_component(index, owner.shape):
                return None
            return owner.vars[_flat_component(self, node, owner.shape, index)]
        if owner is not None or not isinstance(node.value, (ast.Name, ast.Attribute, Resolved)):
            return None
        return self._element_reference(node)

    def _element_reference(self, node):
        """`f[i]` of a field or ndarray as a variable whose reads and writes go to memory."""
        target = self.visit(node.value)
        if not isinstance(target, (Field, NdarrayArg)):
            return None
        indices = self._indices(node, target, self.visit(node.slice))
        if not target.element_shape:
            return ElementRef(target, indices, 0)
        count = int(np.prod(target.element_shape))
        return MatVar(target.element_shape, [ElementRef(target, indices, c) for c in range(count)])

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
            for item in _static_iterable(self, gen.iter, iterable):
                inner = dict(bindings)
                _bind_target(self, gen.target, item, inner)
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

    # --- global memory ------------------------------------------------------------
    def _indices(self, node, target, index):
        if isinstance(target, Field):
            if not target.placed:
                _raise_unplaced(self, node, target)
            if target.program is not runtime.program():
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

    def atomic(self, node, kind, target_node, value):
        """`ti.atomic_add(f[i], v)` and friends: the first argument must be a global element."""
        target_node = self._member_node(target_node)
        var = self._local_target(target_node)
        if var is not None:             # a local, or an entry of one: Taichi allows it
            return self._accumulate(node, var, kind, value)
        if isinstance(target_node, ast.Attribute) and _component_of(target_node.attr) is not None:
            element = self._vector_element(target_node.value)
            if element is not None:     # ti.atomic_add(f[i].x, v): one component
                return self._store_component(node, element[0], self.visit(element[1]),
                                             _component_of(target_node.attr), value, atomic=kind)
        if not isinstance(target_node, ast.Subscript):
            raise self.error(node, f'atomic_{kind} needs a variable or a field or ndarray element as its '
                                   f'first argument')
        element = self._vector_element(target_node.value)
        if element is not None:          # ti.atomic_add(u[i][k], v): one component
            return self._store_component(node, element[0], self.visit(element[1]),
                                         self.visit(target_node.slice), value, atomic=kind)
        target = self.visit(target_node.value)
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
        if isinstance(node, ast.Attribute) and _component_of(node.attr) is not None:
            owner = self._local_target(self._member_node(node.value))
            if isinstance(owner, MatVar):
                return owner.vars[_component_of(node.attr, node, self, owner.shape)]
            return None
        if isinstance(node, ast.Subscript):
            owner = self._local_target(self._member_node(node.value))
            if isinstance(owner, MatVar):
                index = self.visit(node.slice)
                comps = index if isinstance(index, tuple) else (index,)
                if len(comps) == 1 and len(owner.shape) == 2:           # a row of a matrix
                    m = owner.shape[1]
                    return MatVar((m,), owner.vars[comps[0] * m:(comps[0] + 1) * m])
                return owner.vars[_flat_component(self, node, owner.shape, comps)]
        return None

    # --- statements -------------------------------------------------------------
    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant):
            return  # a docstring
        self.visit(node.value)

    def visit_Pass(self, node):
        pass

    def visit_Assign(self, node):
        value = self.visit(node.value)
        is_static = _is_static_call(self, node.value)
        for target in node.targets:
            self._assign(target, value, is_static)

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
            items = value.entries if isinstance(value, Matrix) else list(value)
            if len(items) != len(target.elts):
                raise self.error(target, f'cannot unpack {len(items)} values into {len(target.elts)} names')
            for t, v in zip(target.elts, items):
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
            owner = self._lookup_var(target.value)
            comp = _component_of(target.attr, target, self, getattr(owner, 'shape', None))
            if isinstance(owner, MatVar) and comp is not None:
                return owner.vars[comp].store(value)
            element = self._vector_element(target.value)
            if element is not None and comp is not None:        # f[i].x = v: one component
                return self._store_component(target, element[0], self.visit(element[1]), comp, value)
            raise self.error(target, f'cannot assign to attribute {target.attr}')
        raise self.error(target, f'cannot assign to {_describe(target)}')

    def _in_parallel_loop(self):
        return any(loop.kind == 'parallel' for loop in self.loops)

    def _shared(self, var):
        """A kernel-scope local seen from inside a parallel loop: all threads share it."""
        return isinstance(var, Var) and not var.in_parallel_loop and self._in_parallel_loop()

    def _lookup_var(self, node):
        if isinstance(node, Resolved):
            return node.obj
        if isinstance(node, ast.Name):
            try:
                return self.frame.lookup(node.id)
            except KeyError:
                raise self.error(node, f"name '{node.id}' is not defined", TaichiNameError) from None
        return None

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
            name = target.id if isinstance(target, ast.Name) else target.name
            raise self.error(target, f'`{name}` is defined outside this parallel loop, so all '
                                     f'threads share it: update it with `{name} += ...` '
                                     f'(an atomic add) or use a field')
        var.store(value)

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
        if isinstance(owner, (list, dict)) and not ops.is_value(index):
            owner[index] = value
            return
        if isinstance(owner_node, ast.Name):
            self._not_an_expression_param(target, owner_node.id)
        raise self.error(target, f'cannot assign to an element of {type(owner).__name__}')

    def _not_an_expression_param(self, target, name):
        if self.frame.is_expression_param(name):
            raise self.error(target, f'`{name}` is a ti.template() parameter bound to an expression, not '
                                     f'to a variable, an entry of a local vector at a constant index or a '
                                     f'field element: it cannot be assigned to (pass one of those to change '
                                     f'it by reference, or copy it into a new local)')

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
        flat = _flat_component(self, node, target.element_shape, comp)
        v = ops.as_value(value, target.dtype)
        if atomic:
            return ops.emit('atomic', idx + [v], target.dtype, target=target, component=flat, kind=atomic)
        self.builder.emit('global_store', idx + [v], target=target, component=flat)

    def _store_matvar(self, node, var, index, value):
        idx = index if isinstance(index, tuple) else (index,)
        if any(ops.is_value(i) for i in idx):
            flat_rt = 0
            for i, n in zip(idx, var.shape):
                if ops.is_value(i):
                    ops.check_component(i, n)
                flat_rt = flat_rt * n + i
            for k, v in enumerate(var.vars):
                v.store(ops.select(flat_rt == k, value, v.load()))
            return
        if len(idx) == 1 and len(var.shape) == 2:
            row = idx[0]
            m = var.shape[1]
            MatVar((m,), var.vars[row * m:(row + 1) * m]).store(value)
            return
        flat = _flat_component(self, node, var.shape, idx)
        var.vars[flat].store(value)

    def visit_AugAssign(self, node):
        op = _BINOPS[type(node.op)]
        target = self._member_node(node.target)
        value = self.visit(node.value)
        if isinstance(target, (ast.Name, Resolved)) and isinstance(node.op, (ast.Add, ast.Sub)):
            var = self._lookup_var(target)
            if self._needs_atomic(var):         # shared by threads, or memory (an ElementRef)
                self._accumulate(node, var, 'add' if isinstance(node.op, ast.Add) else 'sub', value)
                return
        if isinstance(target, ast.Subscript):
            owner_node = self._member_node(target.value)
            owner = self._lookup_var(owner_node) if isinstance(owner_node, (ast.Name, Resolved)) else None
            if not isinstance(owner, MatVar):
                kind = {ast.Add: 'add', ast.Sub: 'sub'}.get(type(node.op))
                element = self._vector_element(target.value) if kind else None
                if element is not None:         # u[i][k] += v: one component, nothing read
                    self._store_component(node, element[0], self.visit(element[1]),
                                          self.visit(target.slice), value, atomic=kind)
                    return
                base = self.visit(target.value)
                if isinstance(base, (Field, NdarrayArg)) and kind:
                    self._global_write(node, base, self.visit(target.slice), value, atomic=kind)
                    return
        current = self.visit(_as_load(target))
        self._no_struct_operands(node, current, value)
        result = op(current, value)
        if result is NotImplemented:
            raise self.error(node, 'unsupported operands for augmented assignment', TaichiTypeError)
        self._assign(target, result)

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
        var.store(_COMBINE[kind](old, value))
        return old

    def visit_If(self, node):
        cond = self.visit(node.test)
        if isinstance(cond, Matrix):
            raise self.error(node.test, 'the condition of an `if` must be a scalar')
        if not ops.is_value(cond):
            self._in_scope(node.body if cond else node.orelse)
            return
        then_block, else_block = Block(), Block()
        self.builder.emit('if', [ops.truth(cond)], then=then_block, **{'else': else_block})
        with self.builder.open(then_block):
            self._in_scope(node.body)
        with self.builder.open(else_block):
            self._in_scope(node.orelse)

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
        if _is_static_call(self, iter_node):
            iterable = self.visit(iter_node)
            return self._static_for(node, _static_iterable(self, iter_node, iterable))
        iterable = self.visit(iter_node)
        if isinstance(iterable, range):
            return self._range_for(node, iterable.start, iterable.stop, iterable.step)
        if isinstance(iterable, RuntimeRange):
            return self._range_for(node, iterable.start, iterable.stop, iterable.step)
        if isinstance(iterable, Grouped):
            return self._ndrange_for(node, _dims_of(self, node, iterable.source), grouped=True)
        if isinstance(iterable, NdRange):
            return self._ndrange_for(node, iterable.dims, grouped=False)
        if isinstance(iterable, (Field, StructField, NdarrayArg)):     # a struct-for
            return self._ndrange_for(node, _dims_of(self, node, iterable), grouped=False)
        if isinstance(iterable, (list, tuple, Matrix)):
            return self._static_for(node, list(iterable))
        raise self.error(iter_node, f'cannot loop over {type(iterable).__name__} in a kernel')

    def _static_for(self, node, items):
        self.loops.append(Loop('static'))
        try:
            for item in items:
                bindings = {}
                _bind_target(self, node.target, item, bindings)
                self._in_scope(node.body, bindings)
        finally:
            self.loops.pop()

    def _is_top_level(self):
        return self.builder.block is self.builder.root and len(self.frames) >= 1 and \
            all(loop.kind == 'static' for loop in self.loops)

    def _open_loop(self, begin, end):
        """Emit a `for` over [begin, end) with an i32 index; return (index, body)."""
        parallel = self._is_top_level() and not LoopConfig.serialize
        LoopConfig.serialize = False
        begin, end = ops.as_value(begin, T.i32), ops.as_value(end, T.i32)
        body = Block()
        index = ops.Value('loop_index', (), T.i32)
        self.builder.emit('for', [begin, end], body=body, index=index, parallel=parallel)
        return index, body, Loop('parallel' if parallel else 'serial')

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
                self._in_scope(node.body, {node.target.id: value})
        finally:
            self.loops.pop()

    def _ndrange_for(self, node, dims, grouped):
        begins = [d[0] for d in dims]
        sizes = [d[1] - d[0] for d in dims]
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
                self._in_scope(node.body, bindings)
        finally:
            self.loops.pop()

    def visit_Return(self, node):
        value = self.visit(node.value) if node.value is not None else None
        if len(self.frames) > 1 and self.frame.returned is not None:
            return self._early_return(node, value)
        if len(self.frames) > 1:
            frame = self.frame
            if self.builder.block is not frame.body_block or any(
                    loop.kind != 'static' for loop in self.loops[frame.loop_depth:]):
                raise self.error(node, '`return` inside run-time control flow of a ti.func is not '
                                       'supported: assign to a variable and return it at the end')
            frame.return_value = value
            frame.has_returned = True
            return
        if any(loop.kind != 'static' for loop in self.loops):
            raise self.error(node, '`return` inside a loop is not supported in kernels')
        if self.return_type is None:
            if value is None:
                self.builder.emit('return', [])
                return
            raise self.error(node, 'this kernel returns a value but has no return type annotation',
                             TaichiTypeError)
        try:
            scalars = structs.split(self.return_type, value)
        except TypeError as exc:
            raise self.error(node, f'this kernel returns {structs.type_name(self.return_type)}: {exc}',
                             TaichiTypeError) from None
        slots = structs.slot_types(self.return_type)
        self.returns_seen += 1
        self.builder.emit('return', [ops.as_value(x, t) for x, t in zip(scalars, slots)])

    def _early_return(self, node, value):
        """`return value` in a func that returns inside run-time control flow: store the
        result and the flag; leave the func's loop, if in one."""
        frame = self.frame
        value = self._load(value)
        entries, shape = structs.leaves(value), structs.tree(value)
        if frame.result is None:
            annotated = T.resolve(frame.return_annotation) if frame.return_annotation else None
            cells = [ops.Value('alloca', (), annotated or ops.dtype_of(e), self.builder.loc)
                     for e in entries]
            home = frame.body_block.stmts
            at = next(k for k, stmt in enumerate(home) if stmt is frame.returned) + 1
            home[at:at] = cells
            frame.result = (shape, cells)
        expected, cells = frame.result
        if shape != expected or len(cells) != len(entries):
            raise self.error(node, f'the returns of this ti.func have different shapes '
                                   f'({expected} and {shape})', TaichiTypeError)
        for cell, entry in zip(cells, entries):
            if ops.dtype_of(entry, cell).is_float and not cell.dtype.is_float:
                raise self.error(node, f'this ti.func returns an integer ({cell.dtype}) earlier and a '
                                       f'float here: annotate its return type (-> ti.f32 or ti.f64)',
                                 TaichiTypeError)
            self.builder.emit('local_store', [cell, ops.as_value(entry, cell.dtype)])
        self.builder.emit('local_store', [frame.returned, ops.const(1, T.i32)])
        frame.returns += 1
        if self._in_func_loop():
            self.builder.emit('break')

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
        if not runtime.program().config.debug:
            return                  # not compiled: the condition is not even evaluated
        self.builder.block.stmts.extend(block.stmts)
        failed = self.builder.emit('if', [ops.unary('logical_not', ops.truth(cond))],
                                   then=Block(), **{'else': Block()})
        with self.builder.open(failed.attrs['then']):       # the message is computed on failure only
            message = self.visit(node.msg) if node.msg is not None else \
                f'assertion failed: {ast.unparse(node.test)}'
            fmt, values = printing.compose(printing.pieces_of(message))
            if len(values) > runtime.RT_ERROR_WORDS:
                raise self.error(node.msg, f'an assert message shows at most {runtime.RT_ERROR_WORDS} '
                                           f'run-time values, this one {len(values)}')
            self.builder.emit('assert_fail', values, format=fmt)

    # --- ti.func inlining -------------------------------------------------------------
    def inline(self, node, func, args, kwargs):
        source = func.source
        params = list(func.signature.parameters.values())
        try:
            bound = func.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise self.error(node, f'{func.fn.__name__}(): {exc}', TaichiTypeError) from None
        bound.apply_defaults()
        scope = {}
        for p in params:
            value = bound.arguments[p.name]
            if _is_template_annotation(p.annotation):
                scope[p.name] = value           # a variable stays itself: passed by reference
            else:
                scope[p.name] = self._bind_param(value)
        if len(self.frames) > _MAX_FUNC_DEPTH:
            chain = [f.source.fn.__name__ for f in self.frames[-4:]] + [func.fn.__name__]
            calls_itself = any(f.source.fn is func.fn for f in self.frames)
            raise self.error(node, f'ti.func calls nest more than {_MAX_FUNC_DEPTH} deep (... '
                                   + ' -> '.join(chain) + '): ' +
                             ('a ti.func that calls itself needs a ti.static condition that ends the '
                              'recursion at compile time' if calls_itself else
                              'the compiler inlines every call; flatten the chain'))
        frame = FunctionContext(source, scope)
        frame.expression_params = {p.name for p in params if _is_template_annotation(p.annotation)
                                   and _holds_values(scope[p.name])}
        frame.body_block = self.builder.block
        frame.loop_depth = len(self.loops)
        if _returns_in_control_flow(source.node):
            frame.returned = self.builder.emit('alloca', (), T.i32)
            self.builder.emit('local_store', [frame.returned, ops.const(0, T.i32)])
            annotation = func.signature.return_annotation
            frame.return_annotation = None if annotation is inspect.Signature.empty else annotation
        self.frames.append(frame)
        try:
            self._visit_body(source.node.body)
            annotation = func.signature.return_annotation
            if annotation not in (inspect.Signature.empty, None) and not (frame.has_returned or frame.returns):
                raise self.error(source.node, f'ti.func {func.fn.__name__} has a return type but does not '
                                              f'have a return statement')
        finally:
            self.frames.pop()
        if frame.result is not None:
            shape, cells = frame.result
            return structs.rebuild(shape, iter([ops.emit('local_load', [cell], cell.dtype) for cell in cells]))
        return frame.return_value


_PURE = frozenset({'const', 'arg', 'loop_index', 'local_load', 'ndarray_shape'})


def _pure(block):
    """Whether statements only compute values: no memory access, no control flow."""
    return all(s.op in _PURE or (s.op in ops.OPS and s.op != 'random') for s in block.stmts)


def _returns_in_control_flow(function_node):
    """Whether a function returns from inside an `if`, a loop or a `with`."""
    def visit(node, nested):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(child, ast.Return) and nested:
                return True
            inner = nested or isinstance(child, (ast.If, ast.For, ast.While, ast.With, ast.Try))
            if visit(child, inner):
                return True
        return False
    return visit(function_node, False)


def tmath_and(a, b):
    if not ops.is_value(a) and not ops.is_value(b):
        return a and b
    return ops.binary('logical_and', a, b)


class RuntimeRange:
    """`range(...)` with run-time bounds."""

    def __init__(self, *args):
        if len(args) == 1:
            args = (0, args[0])
        self.start, self.stop = args[0], args[1]
        self.step = args[2] if len(args) > 2 else 1


def _range(*args):
    if any(ops.is_value(a) for a in args):
        return RuntimeRange(*args)
    return builtins.range(*args)


_BUILTINS['range'] = _range


def _is_one(x):
    return not ops.is_value(x) and x == 1


def _constant_component(comp, shape):
    """`comp` names one entry of an element of `shape` with compile-time integers."""
    comps = comp if isinstance(comp, tuple) else (comp,)
    return len(comps) == len(shape) and all(
        isinstance(c, (int, np.integer)) and not isinstance(c, bool) and 0 <= c < n for c, n in zip(comps, shape))


def _flat_component(kb, node, shape, comp):
    comp = comp if isinstance(comp, tuple) else (comp,)
    if any(ops.is_value(c) for c in comp):
        raise kb.error(node, 'writing a matrix component needs constant indices')
    if len(comp) != len(shape):
        raise kb.error(node, f'component index {comp} does not match element shape {shape}')
    flat = 0
    for c, n in zip(comp, shape):
        if not -n <= c < n:         # past the element: it would touch the next one
            raise kb.error(node, f'component index {comp} is out of range for an element of shape {shape}',
                           TaichiTypeError)
        flat = flat * n + c % n
    return flat


def _component_of(attr, node=None, kb=None, shape=None):
    """The entry that a one-letter swizzle (`.x`..`.w`, `.r`..`.a`, `.s`..`.q`) names (None for
    another attribute); with `shape`, an error naming the line when the vector has no such entry."""
    picks = swizzle(attr)
    if picks is None or len(picks) != 1:
        return None
    k = picks[0]
    if shape is not None and len(shape) == 1 and k >= shape[0]:
        raise kb.error(node, f'.{attr} needs a vector of at least {k + 1} entries; this one has {shape[0]}',
                       TaichiTypeError)
    return k


def _is_str_format(fn):
    return isinstance(getattr(fn, '__self__', None), str) and getattr(fn, '__name__', None) == 'format'


def _as_load(target):
    if isinstance(target, Resolved):
        return target
    node = type(target)(**{f: getattr(target, f) for f in target._fields})
    node.ctx = ast.Load()
    ast.copy_location(node, target)
    return node


def _raise_unplaced(kb, node, field):
    raise kb.error(node, f'field {field.name} is used before it was placed: give it a shape= or '
                         f'place it with ti.root.dense(...).place({field.name})', TaichiUnplacedError)


class TaichiUnplacedError(TaichiCompilationError, RuntimeError):
    pass


def _dims_of(kb, node, source):
    if isinstance(source, NdRange):
        return source.dims
    if isinstance(source, (Field, StructField)):
        if not source.placed:
            _raise_unplaced(kb, node, source)
        return [(0, n) for n in source.shape]
    if isinstance(source, NdarrayArg):
        return [(0, n) for n in source.shape]
    raise kb.error(node, f'ti.grouped takes a field or an ndrange, got {type(source).__name__}')


def _is_static_call(kb, node):
    if not isinstance(node, ast.Call):
        return False
    try:
        fn = kb.visit(node.func) if isinstance(node.func, (ast.Name, ast.Attribute)) else None
    except TaichiCompilationError:
        return False
    return fn is static


def _static_iterable(kb, node, iterable):
    if isinstance(iterable, NdRange):
        return [tuple(c) for c in itertools.product(*(range(b, e) for b, e in iterable.dims))]
    if isinstance(iterable, Grouped):
        dims = _dims_of(kb, node, iterable.source)
        return [Matrix._make((len(dims),), list(c)) for c in itertools.product(*(range(b, e) for b, e in dims))]
    if isinstance(iterable, RuntimeRange):
        raise kb.error(node, 'ti.static(range(...)) needs compile-time bounds')
    if isinstance(iterable, Matrix):
        return list(iterable.entries) if iterable.ndim == 1 else list(iterable)
    return list(iterable)


def _bind_target(kb, target, item, bindings):
    if isinstance(target, ast.Name):
        bindings[target.id] = item
    elif isinstance(target, (ast.Tuple, ast.List)):
        items = item.entries if isinstance(item, Matrix) else list(item)
        if len(items) != len(target.elts):
            raise kb.error(target, f'cannot unpack {len(items)} values into {len(target.elts)} names')
        for t, v in zip(target.elts, items):
            _bind_target(kb, t, v, bindings)
    else:
        raise kb.error(target, f'cannot bind a loop variable to {_describe(target)}')


def _is_template_annotation(annotation):
    return isinstance(annotation, Template) or annotation is Template


class Template:
    """`ti.template()`: the argument is passed at compile time."""


def template():
    return Template()


class Func:
    """`@ti.func`: inlined into the kernels that call it."""

    def __init__(self, fn):
        self.fn = fn
        self.signature = inspect.signature(fn)
        self._source = None

    @property
    def source(self):
        if self._source is None:
            self._source = FunctionSource(self.fn)
        return self._source

    def __call__(self, *args, **kwargs):
        raise TaichiSyntaxError(f'ti.func {self.fn.__name__} can only be called from a kernel or another ti.func')

    def __get__(self, obj, owner=None):
        return self if obj is None else BoundFunc(self, obj)


class BoundFunc:
    """A ti.func method of an object (a data_oriented class, a @ti.dataclass struct): the
    object is its first argument."""

    def __init__(self, func, obj):
        self.func, self.obj = func, obj

    def __call__(self, *args, **kwargs):
        self.func(*args, **kwargs)          # raises: called from Python


def func(fn):
    return Func(fn)


def _is_member_name(var, attr):
    """Whether `p.attr` on a struct local names a member (or a misspelt one), not a method or
    an attribute of struct values (`keys`, `to_dict`, ...)."""
    methods = var.struct_type.methods if var.struct_type else {}
    return attr in var.members or not (attr in methods or hasattr(Struct, attr))


def _holds_values(obj):
    """Whether a kernel argument holds run-time values (a template argument holds none)."""
    if isinstance(obj, (Matrix, Struct)):
        return any(map(ops.is_value, structs.leaves(obj)))
    return ops.is_value(obj)


def _describe(node):
    names = {
        'Try': '`try` statement', 'TryStar': '`try` statement', 'With': '`with` statement',
        'AsyncWith': '`async with` statement', 'Lambda': 'lambda expression',
        'ClassDef': 'class definition', 'FunctionDef': 'nested function definition',
        'AsyncFunctionDef': 'nested function definition', 'Yield': '`yield`',
        'YieldFrom': '`yield from`', 'Await': '`await`', 'Global': '`global` statement',
        'Nonlocal': '`nonlocal` statement', 'SetComp': 'set comprehension',
        'DictComp': 'dict comprehension', 'Set': 'set display', 'Dict': 'dict display',
        'Delete': '`del` statement', 'Import': '`import` statement',
        'ImportFrom': '`import` statement', 'Raise': '`raise` statement', 'Match': '`match` statement',
        'NamedExpr': 'assignment expression (:=)', 'Starred': 'starred expression',
    }
    return names.get(type(node).__name__, f'`{type(node).__name__}`')


def _binop_table():
    return {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
            ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
            ast.Pow: tmath.pow, ast.MatMult: operator.matmul, ast.BitAnd: operator.and_,
            ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift,
            ast.RShift: operator.rshift}


_BINOPS = _binop_table()
_INT_BINOPS = {ast.Add: 'add', ast.Sub: 'sub', ast.Mult: 'mul', ast.FloorDiv: 'floordiv', ast.Mod: 'mod',
               ast.Pow: 'pow', ast.BitAnd: 'bit_and', ast.BitOr: 'bit_or', ast.BitXor: 'bit_xor',
               ast.LShift: 'shl', ast.RShift: 'shr'}
_COMBINE = {'add': operator.add, 'sub': operator.sub, 'min': tmath.min, 'max': tmath.max,
            'and': operator.and_, 'or': operator.or_, 'xor': operator.xor}
_COMPARE = {ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
            ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
            ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
            ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


def _atomic(kind):
    def atomic(target, value):
        raise TaichiSyntaxError(f'ti.atomic_{kind} can only be used inside kernels')
    atomic._atomic_kind = kind
    atomic.__name__ = f'atomic_{kind}'
    return atomic


atomic_add, atomic_sub = _atomic('add'), _atomic('sub')
atomic_min, atomic_max = _atomic('min'), _atomic('max')
atomic_and, atomic_or, atomic_xor = _atomic('and'), _atomic('or'), _atomic('xor')
