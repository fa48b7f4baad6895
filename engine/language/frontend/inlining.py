"""ti.func inlining and returns.

A call pushes a FunctionContext whose scope binds the parameters (by value, or as the
argument itself for a ti.template() parameter). A func that returns only at its end
hands back the returned value; one that returns inside run-time control flow keeps its
result in locals and a `returned` flag, and what follows such a return is guarded by the
flag. A kernel's return writes its return slots.
"""
import ast
import inspect

from ...ir import ops
from .. import structs
from ...core import dtypes as T
from ...core.errors import TaichiTypeError
from ...ir.nodes import Block
from ..matrix import Matrix
from ..structs import Struct
from .markers import is_template_annotation
from .source import FunctionContext
from .values import holds_values


_MAX_FUNC_DEPTH = 64        # ti.func calls are inlined; deeper chains would exhaust Python's stack


class InliningMixin:
    """ti.func calls inlined, and returns (a part of KernelBuilder)."""

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
            if is_template_annotation(p.annotation):
                scope[p.name] = value           # a variable stays itself: passed by reference
            else:
                scope[p.name] = self._bind_param(_typed(p.annotation, value) if func.real else value)
        self._check_call_depth(node, func)
        frame = FunctionContext(source, scope)
        frame.real = func.real      # its loops run serially (loops.py)
        frame.expression_params = {p.name for p in params if is_template_annotation(p.annotation)
                                   and holds_values(scope[p.name])}
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
        result = frame.return_value
        if frame.result is not None:
            shape, cells = frame.result
            result = structs.rebuild(shape, iter([ops.emit('local_load', [cell], cell.dtype) for cell in cells]))
        return _typed_result(func.signature.return_annotation, result) if func.real else result

    def _check_call_depth(self, node, func):
        """Inlining cannot recurse at run time: a real function may not call itself, and
        ti.func calls may nest only so deep (a recursion that ti.static ends is fine)."""
        if func.real and any(f.source.fn is func.fn for f in self.frames):
            raise self.error(node, f'ti.real_func {func.fn.__name__} calls itself: the engine inlines functions, '
                                   f'so recursion at run time is not supported; write it as a loop')
        if len(self.frames) > _MAX_FUNC_DEPTH:
            chain = [f.source.fn.__name__ for f in self.frames[-4:]] + [func.fn.__name__]
            calls_itself = any(f.source.fn is func.fn for f in self.frames)
            raise self.error(node, f'ti.func calls nest more than {_MAX_FUNC_DEPTH} deep (... '
                                   + ' -> '.join(chain) + '): ' +
                             ('a ti.func that calls itself needs a ti.static condition that ends the '
                              'recursion at compile time' if calls_itself else
                              'the compiler inlines every call; flatten the chain'))

    def _bind_param(self, obj):
        """A parameter passed by value: a local of its own (numbers and values)."""
        if ops.is_value(obj) or isinstance(obj, (Matrix, Struct)) or (ops.is_number(obj) and not isinstance(obj, bool)):
            return self._new_var(obj)
        return obj

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
        if any(loop.kind == 'parallel' for loop in self.loops[frame.loop_depth:]):
            raise self.error(node, '`return` inside a loop of a ti.func that runs as the kernel\'s parallel loop '
                                   '(the func is called at the top level): the threads would race for the result. '
                                   'Taichi refuses it too; make it a ti.real_func, whose loops are serial, or '
                                   'assign to a variable and return after the loop')
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

    def _at_func_top(self):
        """Code of a ti.func that runs whenever the func does: not in its run-time ifs or loops."""
        return len(self.frames) > 1 and self.builder.block is self.frame.body_block and \
            all(loop.kind == 'static' for loop in self.loops[self.frame.loop_depth:])

    def _in_func_loop(self):
        """Whether the innermost loop is a run-time loop of the func being inlined."""
        inner = self.loops[self.frame.loop_depth:]
        return bool(inner) and inner[-1].kind != 'static'


def _typed(annotation, value):
    """A real function's argument converted to its parameter's type, as Taichi's typed call
    does (`u: int` given a float truncates)."""
    dtype = structs.element_dtype(annotation) if annotation is not inspect.Parameter.empty else None
    if dtype is None:
        return value
    if isinstance(value, Matrix):
        return value.map(lambda e: ops.cast(e, dtype) if ops.is_value(e) or ops.is_number(e) else e)
    return ops.cast(value, dtype) if ops.is_value(value) or ops.is_number(value) else value


def _typed_result(annotation, value):
    """A real function's result converted to its return type (`-> ti.i32` truncates, a
    tuple type converts each member)."""
    if annotation in (inspect.Signature.empty, None) or value is None or structs.kind_of(annotation) is None:
        return value
    entries, slots = structs.leaves(value), structs.slot_types(annotation)
    if len(entries) != len(slots):
        raise TaichiTypeError(f'this real function returns {len(entries)} values, its return type '
                              f'{structs.type_name(annotation)} has {len(slots)}')
    converted = [ops.cast(e, t) if ops.is_value(e) or ops.is_number(e) else e for e, t in zip(entries, slots)]
    return structs.rebuild(structs.tree(value), iter(converted))


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
