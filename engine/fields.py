"""Fields, their layout (`ti.root.dense(...).place(...)`) and ndarrays.

Every field owns one C-contiguous numpy array of shape `shape + element_shape`.
A dense layout tree only determines a field's shape: nested `dense` blocks
multiply the extent of their axes, and the logical indexing is the same
whatever the nesting, so storage stays a plain numpy array (cheap `to_numpy`,
natural interop) and kernels get raw pointers to it.
"""
import ast
import linecache
import re
import sys

import numpy as np

from . import ops, replay, runtime, structs
from . import dtypes as T
from .errors import TaichiNotImplementedError, TaichiRuntimeError, user_line
from .matrix import Matrix, Vector


def _zeros(field, shape, copies=1):
    """The memory of a field (or ndarray), or an error that names it. A size the system could promise
    but not keep (Linux lends memory it does not have and kills the process when the pages
    are touched) is refused up front: `copies` arrays of this size (with its .grad and
    .dual) must fit in the memory available now."""
    if any(not isinstance(n, (int, np.integer)) or n < 0 or n >= 2 ** 31 for n in shape):
        raise ValueError(f'{field.name}: shape {shape} needs non-negative extents below 2**31 '
                         f'(kernels index with 32-bit integers)')
    elements = 1
    for n in tuple(shape) + tuple(field.element_shape):
        elements *= int(n)
    need = elements * np.dtype(field.dtype.np).itemsize
    available = available_memory()
    what = (f'field {field.name}' if isinstance(field, Field) else field.name) + f' of shape {shape}' + \
        (' with its gradient/dual' if copies > 1 else '')
    if available is not None and need * copies > available:
        raise MemoryError(f'{what} needs {_gib(need * copies)} of memory; {_gib(available)} is available')
    try:
        return np.zeros(tuple(shape) + tuple(field.element_shape), dtype=field.dtype.np)
    except MemoryError:
        raise MemoryError(f'{what} needs {_gib(need * copies)} of memory, more than the system gives') from None


def available_memory():
    """Bytes of memory and swap available now (Linux: /proc/meminfo), or None."""
    try:
        with open('/proc/meminfo') as meminfo:
            kib = {line.split(':')[0]: int(line.split()[1]) for line in meminfo if line.split()[1:2]}
    except (OSError, ValueError, IndexError):
        return None
    if 'MemAvailable' not in kib:
        return None
    return 1024 * (kib['MemAvailable'] + kib.get('SwapFree', 0))


def _gib(nbytes):
    return f'{nbytes / 2 ** 30:.3g} GiB'


def _guess_name(depth=2):
    """The variable a field is assigned to at its creation (`x = ti.field(...)`, also
    `x, y = ti.field(...), ti.field(...)` and `p = ti.field(...); q = ti.field(...)`)."""
    frame = sys._getframe(depth)
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    name = _name_at_call(frame, line)
    if name:
        return name
    match = re.match(r'\s*([A-Za-z_][\w.]*)\s*=[^=]', line)
    return match.group(1) if match else f'field@{frame.f_code.co_filename.split("/")[-1]}:{frame.f_lineno}'


def _name_at_call(frame, line):
    """The target of the assignment, on this one line, whose value holds the call the frame
    is making (found by the call's column)."""
    indent = len(line) - len(line.lstrip())
    try:
        module = ast.parse(line.strip())
        _, _, col, _ = list(frame.f_code.co_positions())[frame.f_lasti // 2]
    except (SyntaxError, IndexError, ValueError, AttributeError):
        return None
    if col is None:
        return None
    col -= indent

    def spans(node):
        return node.col_offset <= col < node.end_col_offset

    for statement in module.body:
        if not (isinstance(statement, ast.Assign) and spans(statement.value)):
            continue
        target, value = statement.targets[0], statement.value
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            for name, part in zip(target.elts, value.elts):
                if spans(part):
                    return ast.unparse(name)
            return None
        return ast.unparse(target)
    return None


class Field:
    """A global array of scalars, vectors or matrices with optional .grad/.dual."""
    owns_storage = True     # no other field or ndarray is its memory (engine/simplify.py)

    def __init__(self, dtype, element_shape=(), shape=None, name=None, needs_grad=False,
                 needs_dual=False, primal=None, role='primal'):
        self.dtype = T.resolve(dtype)
        if self.dtype is None:
            raise TypeError(f'not a field dtype: {dtype!r}')
        self.element_shape = tuple(element_shape)
        self.name = name or 'field'
        self.role = role
        self.primal = primal
        self.shape = None
        self._data = None
        self.program = runtime.program()
        self.program.register_field(self)
        self.grad = self.dual = None
        if primal is None and self.dtype.is_float:
            self.grad = Field(dtype, element_shape, None, self.name + '.grad', primal=self, role='grad')
        if role in ('primal', 'grad') and self.dtype.is_float:
            # A gradient has a dual too: forward mode over an adjoint kernel gives
            # Hessian-vector products in x.grad.dual.
            self.dual = Field(dtype, element_shape, None, self.name + '.dual', primal=self, role='dual')
        if needs_grad and self.grad is None and primal is None:
            raise TaichiRuntimeError(f'field {self.name}: needs_grad=True needs a floating-point '
                                     f'dtype, got {self.dtype} (integer fields have no gradient)')
        self._wants = {'grad': needs_grad, 'dual': needs_dual}
        self.auto_placed = False
        if shape is not None:
            self._allocate(_as_shape(shape))

    # --- layout ---------------------------------------------------------------
    @property
    def placed(self):
        return self._data is not None

    @property
    def data(self):
        """The values as a numpy array (a view: writing it writes the field)."""
        if replay.capturing is not None:
            replay.refuse_python_access(self)
        return self._data

    @data.setter
    def data(self, values):       # `x.data -= ...` assigns the array it updated in place
        if values is not self.data:
            self._write(Ellipsis, values)

    def _write(self, index, values):
        _observed_write(self, self.data, index, values)

    def _allocate(self, shape, by_user=True):
        if self.placed:
            if by_user and self.role == 'grad' and self.auto_placed and shape == self.shape:
                self.auto_placed = False     # needs_grad placed it already; the user's place agrees
                return
            raise TaichiRuntimeError(f'field {self.name} is placed twice')
        if self.primal is not None and self.primal.placed and self.primal.shape != shape:
            raise TaichiRuntimeError(
                f'{self.name} must have the shape of {self.primal.name}: {self.primal.shape}, got {shape}')
        roles = [r for r in ('grad', 'dual') if self._wants.get(r) and not getattr(self, r).placed]
        data = _zeros(self, shape, copies=1 + len(roles))
        self.shape = shape
        self.auto_placed = not by_user
        self._data = data
        self.program.set_field_address(self, self._data)
        if self.role == 'dual':
            self.program.dual_epoch += 1     # forward-mode kernels compiled before see new duals
        if self.role == 'grad':
            self.program.grad_epoch += 1     # adjoints compiled before must see the new gradient
        for role in ('grad', 'dual'):
            if self._wants.get(role) and not getattr(self, role).placed:
                getattr(self, role)._allocate(shape, by_user=False)

    def ensure_placed(self):
        if not self.placed:
            raise TaichiRuntimeError(
                f'field {self.name} is used before it was placed: give it a shape= or '
                f'place it with ti.root.dense(...).place({self.name})')

    # --- shape helpers --------------------------------------------------------
    def get_scalar_field(self, *component):
        """One component, for placing a vector or matrix field component by component."""
        if len(component) != len(self.element_shape):
            raise TypeError(f'{self.name}.get_scalar_field needs {len(self.element_shape)} component indices')
        return ComponentField(self, component)

    @property
    def n(self):
        return self.element_shape[0]

    @property
    def m(self):
        return self.element_shape[1] if len(self.element_shape) > 1 else 1

    @property
    def ndim(self):
        self.ensure_placed()
        return len(self.shape)

    def __repr__(self):
        return f'<{self.name}: {self.dtype} field, shape {self.shape}, element {self.element_shape}>'

    def ir_text(self):
        """How the IR's text names it (engine/printer.py): its slot, layout and type."""
        return f'field({self.name}#{self.id}, {self.shape}, {self.element_shape}, {self.dtype})'

    def __str__(self):
        """`print(x)` shows the values, as Taichi's does; in a kernel being built (whose
        text is fixed when it compiles) the field's description."""
        return str(self.to_numpy()) if self.placed and ops.current_builder() is None else repr(self)

    # --- Python-scope access ----------------------------------------------------
    def to_numpy(self, dtype=None, keep_dims=False):
        """A copy of the values, of shape + element shape, in `dtype` (numpy's or ti.f64...)
        if given; `keep_dims=True` gives a vector field's elements as n x 1 matrices."""
        self.ensure_placed()
        array = self.data.copy() if dtype is None else self.data.astype(getattr(dtype, 'np', dtype))
        return array[..., None] if keep_dims and len(self.element_shape) == 1 else array

    def from_numpy(self, array):
        self.ensure_placed()
        array = np.asarray(array)
        if array.shape != self.data.shape:
            raise ValueError(f'from_numpy: field {self.name} has shape {self.data.shape} '
                             f'(shape {self.shape}, element {self.element_shape}), '
                             f'the array has shape {array.shape}')
        if not np.can_cast(array.dtype, self.dtype.np, casting='same_kind') and array.dtype.kind != self.dtype.np.kind:
            if not (array.dtype.kind in 'iub' and self.dtype.np.kind == 'f'):
                raise ValueError(f'from_numpy: cannot convert {array.dtype} to {self.dtype} for field {self.name}')
        self._write(Ellipsis, array)

    def fill(self, value):
        self.ensure_placed()
        self._write(Ellipsis, value)

    def _key(self, index):
        self.ensure_placed()
        if index is None:
            index = ()
        elif not isinstance(index, tuple):
            index = (index,)
        if len(index) == 1 and isinstance(index[0], Matrix):
            index = tuple(int(i) for i in index[0].entries)
        if len(index) != len(self.shape):
            raise IndexError(f'field {self.name} has {len(self.shape)} dimensions, got index {index}')
        for i, n in zip(index, self.shape):
            if not -n <= i < n:
                raise IndexError(f'index {index} is out of range for field {self.name} of shape {self.shape}')
        return index

    def __getitem__(self, index):
        key = self._key(index)
        if self.element_shape:
            return FieldElement(self, key)
        return self.data[key].item()

    def __setitem__(self, index, value):
        self._write(self._key(index), np.asarray(value) if isinstance(value, Matrix) else value)

    def copy_from(self, other):
        self._write(Ellipsis, other.data)


class FieldElement(Matrix):
    """A vector or matrix element read from Python scope (`v = x[i]`): a copy, except that
    setting one of its entries (`x[i][0] = 1.0`, `x[None][d] -= lr * g`, as DiffTaichi's
    programs update parameters) also writes that entry to the field, as Taichi does."""

    def __init__(self, field, key):
        super().__init__(field.data[key])
        self._field, self._key = field, key

    def __setitem__(self, index, value):
        super().__setitem__(index, value)
        entry = np.unravel_index(self._flat_index(index), self.shape)
        self._field._write(self._key + tuple(int(i) for i in entry), value)


def _observed_write(owner, array, index, values):
    """Every write from Python to a field or ndarray: a recording tape sees it (engine/tape.py)."""
    def assign():
        array[index] = values
    observer = runtime.write_observer
    return assign() if observer is None else observer(owner, index, assign)


def _as_shape(shape):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


# ----------------------------------------------------------------------------
# Public constructors

def field(dtype, shape=None, name=None, offset=None, needs_grad=False, needs_dual=False):
    if offset is not None:
        raise TaichiRuntimeError('field offsets are not supported')
    if isinstance(dtype, structs.StructType):
        return StructField(dtype, _as_shape(shape) if shape is not None else None, name or _guess_name(),
                           needs_grad, needs_dual)
    if isinstance(dtype, tuple) and dtype and dtype[0] in ('vector', 'matrix'):   # ti.math.vec3, ...
        element = dtype[1:2] if dtype[0] == 'vector' else dtype[1:3]
        return Field(dtype[-1], element, shape, name or _guess_name(), needs_grad, needs_dual)
    return Field(dtype, (), shape, name or _guess_name(), needs_grad, needs_dual)


class Layout:
    """Taichi's layouts of vector and matrix fields: entries of an element together (AOS)
    or each entry in an array of its own (SOA). Accepted: a field here is one array of
    shape + element shape whatever the layout, and no result depends on it."""
    AOS, SOA = 'aos', 'soa'


def vector_field(n, dtype, shape=None, name=None, needs_grad=False, needs_dual=False, layout=Layout.AOS,
                 offset=None, **_):
    _check_layout(layout, offset)
    return Field(dtype, (n,), shape, name or _guess_name(), needs_grad, needs_dual)


def matrix_field(n, m, dtype, shape=None, name=None, needs_grad=False, needs_dual=False, layout=Layout.AOS,
                 offset=None, **_):
    _check_layout(layout, offset)
    return Field(dtype, (n, m), shape, name or _guess_name(), needs_grad, needs_dual)


def _check_layout(layout, offset):
    if layout not in (Layout.AOS, Layout.SOA):
        raise ValueError(f'layout must be ti.Layout.AOS or ti.Layout.SOA, got {layout!r}')
    if offset is not None:
        raise TaichiRuntimeError('field offsets are not supported')


class ComponentField:
    """`v.get_scalar_field(k)`: one component of a vector or matrix field, for Taichi's
    struct-of-arrays layouts (`place(v.get_scalar_field(0))`, ...). The field keeps one
    array: placing a component places the whole field, once; the other components must be
    placed with the same shape."""

    def __init__(self, parent, component):
        self.parent, self.component = parent, component
        self.element_shape = ()

    def place(self, shape):
        if not self.parent.placed:
            self.parent._allocate(shape)
        elif self.parent.shape != shape:
            raise TaichiRuntimeError(f'components of {self.parent.name} placed with different shapes: '
                                     f'{self.parent.shape} and {shape}')


# ----------------------------------------------------------------------------
# Layout: ti.root.dense(ti.ij, (4, 4)).dense(...).place(x, y)

class Axis:
    def __init__(self, *dims):
        self.dims = dims


def axes(*dims):
    """`ti.axes(0, 1)` is `ti.ij`."""
    return Axis(*dims)


i, j, k, l = Axis(0), Axis(1), Axis(2), Axis(3)  # noqa: E741
ij, ik, jk, ijk, ijkl = Axis(0, 1), Axis(0, 2), Axis(1, 2), Axis(0, 1, 2), Axis(0, 1, 2, 3)


class SNode:
    """A node of the layout tree; it only accumulates the extent of each axis."""

    def __init__(self, extents=None):
        self.extents = dict(extents or {})

    def dense(self, axes, shape):
        shape = _as_shape(shape)
        if len(shape) == 1 and len(axes.dims) > 1:
            shape = shape * len(axes.dims)
        if len(shape) != len(axes.dims):
            raise TaichiRuntimeError(f'dense over {len(axes.dims)} axes needs as many extents, got {shape}')
        extents = dict(self.extents)
        for axis, n in zip(axes.dims, shape):
            extents[axis] = extents.get(axis, 1) * n
        return SNode(extents)

    # Sparse SNodes track which cells are active; this engine does not, and allocating them
    # densely would make struct-fors visit inactive cells: refused rather than wrong.
    def pointer(self, axes, shape):
        raise _sparse_refusal('pointer')

    def bitmasked(self, axes, shape):
        raise _sparse_refusal('bitmasked')

    def dynamic(self, axis, shape, chunk_size=None):
        raise _sparse_refusal('dynamic')

    @property
    def shape(self):
        """Indices follow the axis order (ti.i, ti.j, ti.k, ti.l), whatever the nesting, as
        in Taichi: `dense(ti.j, n).dense(ti.i, m)` is an (m, n) field, and DiffTaichi's
        `dense(ti.l, steps).dense(ti.i, n)` an (n, steps) one, indexed `x[i, t]`."""
        return tuple(self.extents[a] for a in sorted(self.extents))

    def place(self, *fields, offset=None):
        for f in fields:
            if isinstance(f, StructField):
                self.place(*f.leaves())
                continue
            if isinstance(f, ComponentField):
                f.place(self.shape)
                continue
            if not isinstance(f, Field):
                raise TypeError(f'place() takes fields, got {type(f).__name__}')
            f._allocate(self.shape)
        return self

    def lazy_grad(self):
        """Allocate .grad for every float field placed so far."""
        for f in runtime.program().fields:
            if f.role == 'primal' and f.placed and f.grad is not None and not f.grad.placed:
                f.grad._allocate(f.shape, by_user=False)

    def lazy_dual(self):
        """Allocate .dual for every float field placed so far."""
        runtime.program().allocate_duals(roles=('primal',))


def _sparse_refusal(kind):
    return TaichiNotImplementedError(
        f'{kind}(...) at {user_line()}: sparse SNodes (pointer, bitmasked, dynamic) are not '
        f'supported by this engine, which does not track which cells are active; use dense(...) '
        f'where every cell is meant to exist (docs/taichi_programs.md, "Not there yet")')


class _Root(SNode):
    """`ti.root`: always the root of the current program."""


root = _Root()


# ----------------------------------------------------------------------------
# Ndarrays: arrays passed to kernels as arguments

class Ndarray:
    def __init__(self, dtype, shape, element_shape=(), needs_grad=False):
        self.dtype = T.resolve(dtype)
        if self.dtype is None:
            raise TypeError(f'not an ndarray dtype: {dtype!r} (ndarrays hold scalars, vectors or matrices)')
        self.shape = _as_shape(shape)
        self.element_shape = tuple(element_shape)
        self.name = 'ti.ndarray'
        self.data = _zeros(self, self.shape, copies=2 if needs_grad else 1)
        self.grad = Ndarray(dtype, shape, element_shape) if needs_grad else None

    def to_numpy(self):
        return self.data.copy()

    def __str__(self):
        return str(self.data) if ops.current_builder() is None else repr(self)

    def from_numpy(self, array):
        array = np.asarray(array)
        if array.shape != self.data.shape:
            raise ValueError(f'from_numpy: ndarray has shape {self.data.shape}, the array has shape {array.shape}')
        self._write(Ellipsis, array)

    def copy_from(self, other):
        """The values of another ndarray of the same shape."""
        self.from_numpy(other.data)

    def fill(self, value):
        self._write(Ellipsis, value)

    def _write(self, index, values):
        _observed_write(self, self.data, index, values)

    def __getitem__(self, index):
        item = self.data[index]
        return Matrix(item) if self.element_shape else item.item()

    def __setitem__(self, index, value):
        self._write(index if isinstance(index, tuple) else (index,),
                    np.asarray(value) if isinstance(value, Matrix) else value)


def ndarray(dtype, shape, needs_grad=False):
    """`ti.ndarray(ti.f32, shape)`, also of a vector or matrix type (`ti.math.vec3`)."""
    if structs.kind_of(dtype) == 'matrix':
        return Ndarray(dtype[-1], shape, dtype[1:-1], needs_grad)
    return Ndarray(dtype, shape, (), needs_grad)


# ----------------------------------------------------------------------------
# Fields of structs

class StructField:
    """A field of structs, stored as a struct of arrays: one field per member (`f.a`, a
    StructField again for a struct member), all of one shape. `f[i].a` is `f.a[i]`, in
    kernels and in Python."""

    def __init__(self, struct_type, shape, name, needs_grad=False, needs_dual=False):
        self.struct_type, self.name = struct_type, name
        self.members = {key: _member_field(t, shape, f'{name}.{key}', needs_grad, needs_dual)
                        for key, t in struct_type.members.items()}

    def __getattr__(self, name):
        members = self.__dict__.get('members')
        if members is None or name not in members:
            raise AttributeError(f"struct field {self.__dict__.get('name')} has no member {name!r}"
                                 + (f" (members: {', '.join(members)})" if members else ''))
        return members[name]

    @property
    def grad(self):
        """The members' gradients as a struct field (`s.grad.a` is `s.a.grad`); integer
        members have none and are left out. None if no member has one."""
        return self._companion('grad')

    @property
    def dual(self):
        return self._companion('dual')

    def _companion(self, role):
        views = self.__dict__.setdefault('_companions', {})     # one object per role: kernels see it as one global
        if role not in views:
            members = {key: getattr(m, role) for key, m in self.members.items()}
            members = {key: m for key, m in members.items() if m is not None}
            views[role] = StructField._of_members(self, role, members) if members else None
        return views[role]

    @classmethod
    def _of_members(cls, primal, role, members):
        view = object.__new__(cls)
        view.struct_type = structs.StructType({key: primal.struct_type.members[key] for key in members})
        view.name, view.members = f'{primal.name}.{role}', members
        return view

    @property
    def keys(self):
        return list(self.members)

    def get_member_field(self, key):
        return self.members[key]

    def leaves(self):
        """The fields of scalars, vectors and matrices that hold the members."""
        return [f for m in self.members.values() for f in (m.leaves() if isinstance(m, StructField) else [m])]

    @property
    def placed(self):
        return all(f.placed for f in self.leaves())

    @property
    def shape(self):
        return self.leaves()[0].shape

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f'<{self.name}: field of {self.struct_type!r}, shape {self.shape}>'

    def __str__(self):
        return str(self.to_numpy()) if self.placed and ops.current_builder() is None else repr(self)

    # --- Python-scope access ----------------------------------------------------
    def __getitem__(self, index):
        return _StructElement(self, index)

    def __setitem__(self, index, value):
        value = structs.cast(self.struct_type, value)
        for key, member in self.members.items():
            member[index] = getattr(value, key)

    def to_numpy(self):
        """{member: array} (nested structs give nested dicts), as Taichi gives."""
        return {key: m.to_numpy() for key, m in self.members.items()}

    def from_numpy(self, arrays):
        for key, m in self.members.items():
            m.from_numpy(arrays[key])

    def fill(self, value):
        for m in self.members.values():
            m.fill(value)

    def copy_from(self, other):
        for key, m in self.members.items():
            m.copy_from(other.members[key])


def _member_field(t, shape, name, needs_grad, needs_dual):
    if isinstance(t, structs.StructType):
        return StructField(t, shape, name, needs_grad, needs_dual)
    dtype, element = (t[-1], t[1:-1]) if structs.value_type(t) else (t, ())
    has_grad = T.resolve(dtype).is_float        # integer members have no gradient
    return Field(dtype, element, shape, name, needs_grad and has_grad, needs_dual and has_grad)


class _StructElement(structs.Struct):
    """`f[i]` in Python: the element's members, read when it is taken; assigning a member
    (`f[i].a = 1.0`) writes the field."""

    def __init__(self, field, index):
        members = {key: m[index] for key, m in field.members.items()}
        structs.Struct.__init__(self, members)
        object.__setattr__(self, '_type', field.struct_type)
        object.__setattr__(self, '_home', (field, index))

    def __setattr__(self, name, value):
        structs.Struct.__setattr__(self, name, value)
        field, index = self._home
        field.members[name][index] = getattr(self, name)


def _struct_type_field(struct_type, shape=None, name=None, needs_grad=False, needs_dual=False,
                       offset=None, **_):
    """`S.field(shape=...)` of a StructType."""
    if offset is not None:
        raise TaichiRuntimeError('field offsets are not supported')
    return StructField(struct_type, _as_shape(shape) if shape is not None else None,
                       name or _guess_name(), needs_grad, needs_dual)


def _struct_field(members, shape=None, name=None, needs_grad=False, needs_dual=False, offset=None, **_):
    """`ti.Struct.field({'a': ti.f32, 'v': ti.math.vec3}, shape=...)`."""
    if offset is not None:
        raise TaichiRuntimeError('field offsets are not supported')
    return StructField(structs.StructType(members), _as_shape(shape) if shape is not None else None,
                       name or _guess_name(), needs_grad, needs_dual)


structs.StructType.field = _struct_type_field
structs.Struct.field = staticmethod(_struct_field)

# Vector.field / Matrix.field and the ndarray counterparts build on this module.
Matrix.field = staticmethod(matrix_field)
Vector.field = staticmethod(vector_field)
Matrix.ndarray = staticmethod(lambda n, m, dtype, shape, needs_grad=False: Ndarray(dtype, shape, (n, m), needs_grad))
Vector.ndarray = staticmethod(lambda n, dtype, shape, needs_grad=False: Ndarray(dtype, shape, (n,), needs_grad))
