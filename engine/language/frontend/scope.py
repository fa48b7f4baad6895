"""Scopes and variables: local variables and what names and struct members resolve to.

A function's locals live in the scopes of its FunctionContext (`self.frame`); a
statement list runs in a new scope. Assigned values become variables (Var, MatVar,
StructVar); `p.a` of a struct local and `f[i].a` of a struct field resolve to the
member's variable or field.
"""
import ast

from ...ir import ops
from .. import structs
from ...core.errors import TaichiNameError, TaichiSyntaxError, TaichiTypeError
from ..struct_fields import StructField
from ..matrix import Matrix
from ..structs import Struct
from .values import MatVar, Resolved, StructVar, Var


class ScopeMixin:
    """Locals, scopes and name lookup (a part of KernelBuilder)."""

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
        if isinstance(obj, (Var, MatVar)):
            self._note_read(obj)
        if isinstance(obj, (Var, MatVar, StructVar)):
            return obj.load()
        return obj

    def _lookup_var(self, node):
        if isinstance(node, Resolved):
            return node.obj
        if isinstance(node, ast.Name):
            try:
                return self.frame.lookup(node.id)
            except KeyError:
                raise self.error(node, f"name '{node.id}' is not defined", TaichiNameError) from None
        return None

    def _in_parallel_loop(self):
        return any(loop.kind == 'parallel' for loop in self.loops)

    def _note_read(self, var):
        """A kernel-scope local read in a parallel loop: it can no longer become the
        iteration's own (assignment.py); one that did is not read after the loop."""
        where = getattr(var, 'private_in_loop_at', None)
        if where is not None:
            raise TaichiSyntaxError(f'this local is assigned in every iteration of the parallel loop at {where}, '
                                    f'so its value after the loop is that of whichever iteration ran last; '
                                    f'keep the value you need in a field, or run that loop serially')
        if self._in_parallel_loop():
            loop = next(l for l in reversed(self.loops) if l.kind == 'parallel')
            loop.reads.update(id(v) for v in (var.vars if isinstance(var, MatVar) else [var]))

    def _shared(self, var):
        """A kernel-scope local seen from inside a parallel loop: all threads share it."""
        return isinstance(var, Var) and not var.in_parallel_loop and self._in_parallel_loop()

    def _visit_body(self, stmts):
        frame = self.frame
        entry = frame.guarded
        for k, stmt in enumerate(stmts):
            if frame.returned_at_compile_time:
                break
            if frame.has_returned:
                raise self.error(stmt, 'statements after `return` are not supported in a ti.func')
            if frame.returns > frame.guarded:       # a return above may have run
                self._after_return(stmts[k:])
                break
            self.visit(stmt)
        frame.guarded = entry

    def _in_scope(self, stmts, bindings=None):
        self.frame.scopes.append(dict(bindings or {}))
        try:
            self._visit_body(stmts)
        finally:
            self.frame.scopes.pop()

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


def _is_member_name(var, attr):
    """Whether `p.attr` on a struct local names a member (or a misspelt one), not a method or
    an attribute of struct values (`keys`, `to_dict`, ...)."""
    methods = var.struct_type.methods if var.struct_type else {}
    return attr in var.members or not (attr in methods or hasattr(Struct, attr))
