"""What the frontend holds while it compiles: variables and other compile-time values.

Locals are Var (a scalar alloca), MatVar (one Var per entry) and StructVar (one per
member); an ElementRef is a field or ndarray element passed by reference to a ti.func.
NdarrayArg is an ndarray kernel argument, RuntimeRange a `range()` with run-time bounds,
and Resolved an AST leaf standing for what the builder already found.
"""
import ast

from ...ir import ops
from .. import structs
from ...core import dtypes as T
from ...core.errors import TaichiTypeError
from ..matrix import Matrix
from ..structs import Struct


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


class ElementShape(tuple):
    """An ndarray argument's element shape: a tuple, and, called as Taichi's kernels do
    (`qf.element_shape() == [2]`), the list Taichi gives."""

    def __call__(self):
        return list(self)


class NdarrayArg:
    """An ndarray kernel argument: a pointer and a run-time shape in the argument buffer.

    Its .grad and .dual arrays (where the argument has them) are targets too, `grad_target`
    and `dual_target`, and the gradient's dual is `grad_target.dual_target` (forward over
    reverse): they share the shape slots, each with a pointer slot of its own. `path` names
    the array from the argument: (), ('grad',), ('dual',) or ('grad', 'dual')."""

    def __init__(self, index, name, dtype, ndim, element_shape, offset, path=()):
        self.index, self.name, self.dtype = index, name, dtype
        self.ndim, self.element_shape = ndim, ElementShape(element_shape)
        self.pointer_offset, self.shape_offset = offset, offset + 8
        self.path = path
        self.grad_target = self.dual_target = None

    def add(self, role, pointer_offset):
        """Its `role` ('grad' or 'dual') array, whose pointer is at `pointer_offset`."""
        other = NdarrayArg(self.index, f'{self.name}.{role}', self.dtype, self.ndim, self.element_shape,
                           pointer_offset, self.path + (role,))
        other.shape_offset = self.shape_offset      # the argument's shape slots
        setattr(self, role + '_target', other)
        return other

    @property
    def shape(self):
        return tuple(ops.emit('ndarray_shape', (), T.i32, target=self, axis=a) for a in range(self.ndim))

    @property
    def grad(self):
        """`x.grad` in a kernel: the gradient array of the ti.ndarray passed as x."""
        return self._companion('grad', 'needs_grad')

    @property
    def dual(self):
        return self._companion('dual', 'needs_dual')

    def _companion(self, role, flag):
        other = getattr(self, role + '_target')
        if other is None:
            raise TaichiTypeError(f'{self.name}.{role}: the array passed as {self.name} has no .{role} '
                                  f'(pass a ti.ndarray created with {flag}=True)')
        return other

    def __repr__(self):
        return f'ndarray:{self.name}'

    def ir_text(self):
        """How the IR's text names it (engine/ir/printer.py): its slots in the argument buffer."""
        return (f'ndarray({self.name}, @{self.pointer_offset}, shape@{self.shape_offset}, {self.ndim}, '
                f'{self.element_shape}, {self.dtype})')


class RuntimeRange:
    """`range(...)` with run-time bounds."""

    def __init__(self, *args):
        if len(args) == 1:
            args = (0, args[0])
        self.start, self.stop = args[0], args[1]
        self.step = args[2] if len(args) > 2 else 1


def holds_values(obj):
    """Whether a kernel argument holds run-time values (a template argument holds none)."""
    if isinstance(obj, (Matrix, Struct)):
        return any(map(ops.is_value, structs.leaves(obj)))
    return ops.is_value(obj)
