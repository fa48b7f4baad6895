"""Calls in kernels: ti.funcs, atomics, str.format, ti.ad transforms and plain Python.

A ti.func's ti.template() parameters take what their argument names by reference (a
local, an entry of a local vector, a field or ndarray element); inlining.py inlines it.
Other callables run at compile time on the values of their arguments.
"""
import ast

import numpy as np

from .. import printing, sparse
from ..fields import Field
from ..struct_fields import StructField
from .components import component_of, constant_component, flat_component
from .markers import BoundFunc, Func, is_template_annotation
from .values import ElementRef, MatVar, NdarrayArg, Resolved, StructVar, Var


LIST_METHODS = {'append': sparse.append, 'length': sparse.length, 'deactivate': sparse.deactivate}


class CallMixin:
    """Calls (a part of KernelBuilder)."""

    def visit_Call(self, node):
        listed = self._list_call(node)
        if listed is not None:
            return listed[0]
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

    def _list_call(self, node):
        """`x[i].append(v)`, `x[i].length()`, `x[i].deactivate()` on a field placed under a
        dynamic node: the list at the parent's cell i (a 1-tuple of the result; else None)."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in LIST_METHODS and
                isinstance(func.value, ast.Subscript) and isinstance(func.value.value, (ast.Name, ast.Attribute))):
            return None
        base = self.visit(func.value.value)
        layout = sparse.container_of(base) if isinstance(base, (Field, StructField)) else None
        if layout is None or layout.kind != 'dynamic':
            return None
        args = [self.visit(a) for a in node.args]
        return (LIST_METHODS[func.attr](layout, self.visit(func.value.slice), *args),)

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
            is_template_annotation(param.annotation)
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
            owner = self._reference(node.value) if component_of(node.attr) is not None else None
            if isinstance(owner, MatVar) and len(owner.shape) == 1:
                return owner.vars[component_of(node.attr, node, self, owner.shape)]
            return None
        if not isinstance(node, ast.Subscript):
            return None
        owner = self._reference(node.value)
        if isinstance(owner, MatVar):
            index = self.visit(node.slice)
            if not constant_component(index, owner.shape):
                return None
            return owner.vars[flat_component(self, node, owner.shape, index)]
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


def _is_str_format(fn):
    return isinstance(getattr(fn, '__self__', None), str) and getattr(fn, '__name__', None) == 'format'
