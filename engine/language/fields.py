"""Fields, their layout (`ti.root.dense(...).place(...)`) and ndarrays.

Every field owns one C-contiguous numpy array of shape `shape + element_shape`.
A dense layout tree only determines a field's shape: nested `dense` blocks
multiply the extent of their axes, and the logical indexing is the same
whatever the nesting, so storage stays a plain numpy array (cheap `to_numpy`,
natural interop) and kernels get raw pointers to it.
"""

import numpy as np

from ..ir import ops
from . import structs
from ..core.context import ctx
from ..core.program import current as current_program
from ..core import dtypes as T
from ..core.errors import AutodiffError, TaichiRuntimeError, TaichiSyntaxError, user_line
from . import sparse
from .matrix import Matrix
from .naming import guess_name  # noqa: F401 (placement, struct_fields, math)


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


class Field:
    """A global array of scalars, vectors or matrices with optional .grad/.dual."""
    owns_storage = True     # no other field or ndarray is its memory (engine/ir/simplify.py)
    container = None        # the layout node that place() put it under (engine/language/snodes.py)

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
        self.program = current_program()
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
        if needs_dual and self.dual is None and primal is None:
            raise TaichiRuntimeError(f'field {self.name}: needs_dual=True needs a floating-point '
                                     f'dtype, got {self.dtype} (integer fields have no tangent)')
        self._wants = {'grad': needs_grad, 'dual': needs_dual}
        self.auto_placed = False
        if shape is not None:
            self._allocate(as_shape(shape))

    # --- layout ---------------------------------------------------------------
    @property
    def placed(self):
        return self._data is not None

    @property
    def data(self):
        """The values as a numpy array (a view: writing it writes the field)."""
        if ctx.capture is not None:
            ctx.capture.refuse_python_access(self)
        if ops.current_builder() is not None:
            raise _read_while_compiling(self)
        return self._data

    @data.setter
    def data(self, values):       # `x.data -= ...` assigns the array it updated in place
        if values is not self.data:
            self._write(Ellipsis, values)

    def _write(self, index, values):
        self._write_values(index, values)
        node = sparse.container_of(self)
        if node is not None and sparse.is_sparse_node(node):
            cell = index[:len(self.shape)] if isinstance(index, tuple) else index
            node.activate_python(Ellipsis if cell is Ellipsis or Ellipsis in cell else cell)

    def _write_values(self, index, values):
        """A write from Python that activates nothing (zeros of deactivated cells, fill)."""
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
        for k, n in zip(component, self.element_shape):
            if not isinstance(k, (int, np.integer)) or not -n <= k < n:
                raise IndexError(f'{self.name}.get_scalar_field{tuple(component)}: a component index out of '
                                 f'range for elements of shape {self.element_shape}')
        return ComponentField(self, tuple(int(k) % n for k, n in zip(component, self.element_shape)))

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
        """How the IR's text names it (engine/ir/printer.py): its slot, layout and type."""
        return f'field({self.name}#{self.id}, {self.shape}, {self.element_shape}, {self.dtype})'

    def __str__(self):
        """`print(x)` shows the values, as Taichi's does; in a kernel being built (whose
        text is fixed when it compiles) the field's description."""
        return str(self.to_numpy()) if self.placed and ops.current_builder() is None else repr(self)

    # --- Python-scope access ----------------------------------------------------
    def to_numpy(self, dtype=None, keep_dims=False):
        """A copy of the values, of shape + element shape, in `dtype` (numpy's or ti.f64...)
        if given. As in Taichi, an n x 1 matrix field gives vectors unless `keep_dims=True`,
        which gives a vector field's elements as n x 1 matrices."""
        self.ensure_placed()
        array = self.data.copy() if dtype is None else self.data.astype(getattr(dtype, 'np', dtype))
        if len(self.element_shape) == 1 and keep_dims:
            return array[..., None]
        if len(self.element_shape) == 2 and self.element_shape[1] == 1 and not keep_dims:
            return array[..., 0]
        return array

    def from_numpy(self, array):
        self.ensure_placed()
        array = np.asarray(array)
        if array.shape in self._dropped_axis_shapes():
            array = array.reshape(self.data.shape)
        if array.shape != self.data.shape:
            raise ValueError(f'from_numpy: field {self.name} has shape {self.data.shape} '
                             f'(shape {self.shape}, element {self.element_shape}), '
                             f'the array has shape {array.shape}')
        if not np.can_cast(array.dtype, self.dtype.np, casting='same_kind') and array.dtype.kind != self.dtype.np.kind:
            if not (array.dtype.kind in 'iub' and self.dtype.np.kind == 'f'):
                raise ValueError(f'from_numpy: cannot convert {array.dtype} to {self.dtype} for field {self.name}')
        self._write(Ellipsis, array)

    def _dropped_axis_shapes(self):
        """The shapes to_numpy gives with or without keep_dims, which from_numpy takes back."""
        if len(self.element_shape) == 1:
            return [self.data.shape + (1,)]
        if len(self.element_shape) == 2 and self.element_shape[1] == 1:
            return [self.data.shape[:-1]]
        return []

    def fill(self, value):
        """Every element; under a sparse node, every active element (as Taichi's fill, a
        struct-for over the field; a .grad or .dual fills all, so that none keeps a stale
        value in a cell inactive now). In a kernel, a loop at the place of the call."""
        self.ensure_placed()
        if ops.current_builder() is not None:
            return sparse.fill(self, value)
        node = sparse.container_of(self) if self.role == 'primal' else None    # a gradient: every element
        active = node.active_cells() if node is not None else None
        if active is None:
            self._write(Ellipsis, value)
        else:               # every element written, the inactive ones with the zeros they hold
            values = self.data.copy()
            values[active] = value
            self._write_values(Ellipsis, values)

    # --- sparse layouts (engine/language/snodes.py, sparse.py) --------------------
    def parent(self, n=1):
        """The layout node the field was placed under (n=2: its parent, ...)."""
        node = sparse.container_of(self)
        if node is None:
            raise TaichiRuntimeError(f'field {self.name} was made with shape=, not placed in a layout; '
                                     f'parent() needs ti.root...place({self.name})')
        return node.parent(n - 1)

    @property
    def snode(self):
        return _Place(self)

    def append(self, value):
        """`x.append(v)` in a kernel: a list placed directly under ti.root.dynamic(...)."""
        return sparse.append(self._list_node('append'), [], value)

    def length(self):
        return sparse.length(self._list_node('length'), [])

    def deactivate(self):
        return sparse.deactivate(self._list_node('deactivate'), [])

    def _list_node(self, method):
        node = sparse.container_of(self)
        if node is None or node.kind != 'dynamic':
            raise TaichiSyntaxError(f'{self.name}.{method}(): {self.name} is not a list: place it under a dynamic '
                                    f'node (ti.root.dynamic(ti.i, n).place({self.name}))')
        return node

    def to_torch(self, device=None, keep_dims=False):
        """A new PyTorch tensor of the values (as to_numpy; torch is an optional extra)."""
        import torch
        result = torch.from_numpy(self.to_numpy(keep_dims=keep_dims))
        return result if device is None else result.to(device)

    def from_torch(self, tensor):
        """Set the values from a PyTorch tensor (as from_numpy)."""
        self.from_numpy(tensor.detach().cpu().numpy())

    def _key(self, index):
        self.ensure_placed()
        if index is None:
            index = ()
        elif not isinstance(index, tuple):
            index = (index,)
        if len(index) == 1 and isinstance(index[0], Matrix):
            index = tuple(int(i) for i in index[0].entries)
        if len(index) != len(self.shape):
            node = sparse.container_of(self)
            lists = ' (x[i].append, x[i].length, x[i].deactivate of a list are called in kernels)' \
                if node is not None and node.kind == 'dynamic' and len(index) == len(self.shape) - 1 else ''
            raise IndexError(f'field {self.name} has {len(self.shape)} dimensions, got index {index}{lists}')
        check_python_index(index, self.shape, f'field {self.name}')
        return index

    def __getitem__(self, index):
        key = self._key(index)
        if self.element_shape:
            return FieldElement(self, key)
        return self.data[key].item()

    def __setitem__(self, index, value):
        self._write(self._key(index), np.asarray(value) if isinstance(value, Matrix) else value)

    def copy_from(self, other):
        """The values of another field of the same shape; on a tape or in forward mode, from
        a field with a gradient or tangent, a kernel launch (as in Taichi), so that they flow
        through the copy."""
        _copy(self, other, Field)


class _Place:
    """`x.snode`: the field's place in the layout tree; `x.snode.parent()` is x.parent()."""

    def __init__(self, field):
        self.field = field

    def parent(self, n=1):
        return self.field.parent(n)

    shape = property(lambda self: self.field.shape)
    dtype = property(lambda self: self.field.dtype)
    container = property(lambda self: sparse.container_of(self.field))


def _copy(dst, src, kind):
    if not isinstance(src, kind) or src.data.shape != dst.data.shape:
        what = 'field' if kind is Field else 'ti.ndarray'
        raise ValueError(f'copy_from: {getattr(dst, "name", "the ndarray")} needs a {what} of its shape and element shape '
                         f'{dst.data.shape}, got {getattr(src, "data", src).__class__.__name__} of shape '
                         f'{getattr(getattr(src, "data", None), "shape", "?")}')
    # a copy of values with a derivative is a launch (the derivative flows through it); a
    # copy of constants is a write from Python, which on a tape over unused elements sets
    # the input, as `from_numpy` does
    if (ctx.tape is not None or ctx.forward is not None) and ctx.launch_copy is not None and \
            dst.dtype.is_float and _has_derivative(src):
        ctx.launch_copy(dst, src, kind is Field)
    else:
        dst._write(Ellipsis, src.data)


def _has_derivative(obj):
    """Whether obj is differentiable: it has a gradient (forward mode gives every field a
    tangent, so .dual says nothing)."""
    return obj.grad is not None and (not isinstance(obj.grad, Field) or obj.grad.placed)


def check_python_index(index, shape, what):
    """An element index from Python scope: each integer within [0, n), as in kernels, whose
    index checks raise IndexError for a negative index too (it is not wrapped as numpy
    wraps it, so `x[-1]` means the same in both scopes)."""
    for i, n in zip(index, shape):
        if isinstance(i, (int, np.integer)) and not 0 <= i < n:
            hint = ' (negative indices are not wrapped from the end, in Python scope as in kernels: ' \
                   f'write {n + i} for {i})' if -n <= i < 0 else ''
            raise IndexError(f'index {tuple(index) if len(index) > 1 else index[0]} is out of range for '
                             f'{what} of shape {tuple(shape)}{hint}')


class FieldElement(Matrix):
    """A vector or matrix element read from Python scope (`v = x[i]`): a copy, except that
    setting one of its entries (`x[i][0] = 1.0`, `x[None][d] -= lr * g`, as DiffTaichi's
    programs update parameters) also writes that entry to the field, as Taichi does."""

    def __init__(self, field, key):
        super().__init__(field.data[key])
        self._field, self._key = field, key

    def __setitem__(self, index, value):
        super().__setitem__(index, value)
        if isinstance(index, slice) or (isinstance(index, tuple) and any(isinstance(i, slice) for i in index)):
            self._field._write(self._key, np.asarray(self.entries).reshape(self.shape))    # `x[i][1, :] = v`
            return
        entry = np.unravel_index(self._flat_index(index), self.shape)
        self._field._write(self._key + tuple(int(i) for i in entry), value)


def _read_while_compiling(field):
    """A field's values touched from Python while a kernel is being compiled: a plain
    Python function (not a @ti.func) called in the kernel runs once, at compile time, so
    it would bake in the values of that moment (Taichi reads them at run time)."""
    return TaichiSyntaxError(f'field {field.name} is accessed from Python code while a kernel is compiled, '
                             f'at {user_line()}: a plain Python function called in a kernel runs once, '
                             f'when the kernel compiles, and would use the values of that moment; make it '
                             f'a @ti.func (or pass the values as kernel arguments)')


def _observed_write(owner, array, index, values):
    """Every write from Python to a field or ndarray: a recording tape sees it (engine/runtime/tape.py);
    in forward mode the written elements' tangents are set too."""
    def assign():
        if index is Ellipsis:
            fill_array(array, values)
        else:
            array[index] = values
        if ctx.forward is not None:
            _forward_write(owner, index)
    if ctx.watch is not None:       # wrapped functions' calls (engine/runtime/pending.py)
        ctx.watch.before_python_write(owner, index)
    if (ctx.tape is not None or ctx.forward is not None) and ctx.check_written_value is not None:
        ctx.check_written_value(owner, values)
    return assign() if ctx.tape is None else ctx.tape.python_write(owner, index, assign)


def fill_array(array, values):
    """array[...] = values: numpy broadcasts a (3,) vector into an (n, 3) array three floats
    at a time (70 ms for 3M floats); written once, then copied in doubling blocks, it is a
    few memcpys."""
    pattern = np.asarray(values, dtype=array.dtype)
    if (pattern.size <= 1 or pattern.size >= array.size or not array.flags.c_contiguous
            or array.shape[array.ndim - pattern.ndim:] != pattern.shape):
        array[...] = values
        return
    flat = array.reshape(-1)
    flat[:pattern.size] = pattern.reshape(-1)
    done = pattern.size
    while done < flat.size:
        n = min(done, flat.size - done)
        flat[done:done + n] = flat[:n]
        done += n


def _forward_write(owner, index):
    """A write from Python in forward mode: the value written is a constant, so the tangent
    of the written elements is zero (ti.ad.FwdMode gives its param's untouched elements
    their seed back: engine/runtime/ad.py); a kept old tangent would be silently wrong."""
    if getattr(owner, 'role', 'primal') == 'dual':
        return          # the user sets tangents
    if ctx.custom_backward is not None and getattr(owner, 'role', 'primal') == 'grad':
        raise AutodiffError(f'the grad_for function of {ctx.custom_backward} writes {owner.name} from Python, '
                            f'which a Hessian-vector product (ti.ad.hvp, hessian) cannot differentiate: the '
                            f'value written carries no tangent. Write the custom gradient in a kernel')
    hook = getattr(ctx.forward, 'python_write', None)
    if hook is not None:
        hook(owner, index)
    else:
        zero_tangent(owner, index)


def zero_tangent(owner, index):
    """owner.dual[index] = 0, for a field or ndarray that has a tangent."""
    dual = getattr(owner, 'dual', None)
    if dual is None or getattr(owner, 'role', 'primal') == 'dual':
        return
    array = dual._data if isinstance(dual, Field) else dual.data
    if array is not None:
        array[index] = 0


def as_shape(shape):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


class ComponentField:
    """`v.get_scalar_field(k)`: one component of a vector or matrix field, for Taichi's
    struct-of-arrays layouts (`place(v.get_scalar_field(0))`, ...). The field keeps one
    array: placing a component places the whole field, once; the other components must be
    placed with the same shape."""

    def __init__(self, parent, component):
        self.parent, self.component = parent, tuple(component)
        self.element_shape = ()

    def place(self, shape):
        if not self.parent.placed:
            self.parent._allocate(shape)
        elif self.parent.shape != shape:
            raise TaichiRuntimeError(f'components of {self.parent.name} placed with different shapes: '
                                     f'{self.parent.shape} and {shape}')

    # a scalar field of its own in Python scope: x.get_scalar_field(0)[None] = 1.0
    name = property(lambda self: f'{self.parent.name}.get_scalar_field{self.component}')
    shape = property(lambda self: self.parent.shape)
    dtype = property(lambda self: self.parent.dtype)
    placed = property(lambda self: self.parent.placed)

    @property
    def grad(self):
        grad = self.parent.grad
        return None if grad is None else ComponentField(grad, self.component)

    def _entries(self, index):
        """The parent's array index of this component at element `index` (Ellipsis: all)."""
        return (Ellipsis,) + self.component if index is Ellipsis else self.parent._key(index) + self.component

    def __getitem__(self, index):
        return self.parent.data[self._entries(index)].item()

    def __setitem__(self, index, value):
        self.parent._write(self._entries(index), value)

    def to_numpy(self, dtype=None):
        values = self.parent.data[self._entries(Ellipsis)]
        return values.copy() if dtype is None else values.astype(getattr(dtype, 'np', dtype))

    def from_numpy(self, array):
        self.parent.ensure_placed()
        self.parent._write(self._entries(Ellipsis), np.asarray(array))

    def fill(self, value):
        self.parent.ensure_placed()
        if ops.current_builder() is not None:
            flat = 0
            for k, n in zip(self.component, self.parent.element_shape):
                flat = flat * n + k
            return sparse.fill(self.parent, value, component=flat)
        self.parent._write(self._entries(Ellipsis), value)


# ----------------------------------------------------------------------------
# Ndarrays: arrays passed to kernels as arguments

class Ndarray:
    """An array passed to kernels as an argument, with an optional .grad (reverse mode) and
    .dual (forward mode: the tangent a kernel launched in ti.ad.FwdMode reads and writes).
    With both, the .grad has a .dual too: forward over reverse writes the tangents of the
    gradient there (Hessian-vector products)."""
    role = 'primal'         # 'grad' or 'dual' for the .grad and .dual of another (as a Field's role)

    def __init__(self, dtype, shape, element_shape=(), needs_grad=False, needs_dual=False):
        self.dtype = T.resolve(dtype)
        if self.dtype is None:
            raise TypeError(f'not an ndarray dtype: {dtype!r} (ndarrays hold scalars, vectors or matrices)')
        for wanted, what in ((needs_grad, 'needs_grad'), (needs_dual, 'needs_dual')):
            if wanted and not self.dtype.is_float:      # Taichi's wording, so its checks match
                raise TaichiRuntimeError(f'{self.dtype} is not supported for ndarray with {what}=True: '
                                         f'{what}=True needs a floating-point dtype (integers have no '
                                         f'{"gradient" if what == "needs_grad" else "tangent"})')
        self.shape = as_shape(shape)
        self.element_shape = tuple(element_shape)
        self.name = 'ti.ndarray'
        copies = (1 + needs_grad) * (1 + needs_dual)       # with .grad, .dual and .grad.dual
        self.data = _zeros(self, self.shape, copies=copies)
        self.grad = Ndarray(dtype, shape, element_shape, needs_dual=needs_dual) if needs_grad else None
        self.dual = Ndarray(dtype, shape, element_shape) if needs_dual else None
        if self.grad is not None:
            self.grad.role = 'grad'
            if self.grad.dual is not None:
                self.grad.dual.role = 'dual'
        if self.dual is not None:
            self.dual.role = 'dual'

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
        """The values of another ndarray of the same shape (through the tape: Field.copy_from)."""
        _copy(self, other, Ndarray)

    def to_torch(self, device=None):
        """A new PyTorch tensor of the values (torch is an optional extra)."""
        import torch
        result = torch.from_numpy(self.to_numpy())
        return result if device is None else result.to(device)

    def from_torch(self, tensor):
        self.from_numpy(tensor.detach().cpu().numpy())

    def fill(self, value):
        self._write(Ellipsis, value)

    def _write(self, index, values):
        _observed_write(self, self.data, index, values)

    def _key(self, index):
        index = index if isinstance(index, tuple) else (index,)
        check_python_index(index[:len(self.shape)], self.shape, 'the ti.ndarray')
        return index

    def __getitem__(self, index):
        key = self._key(index)
        if self.element_shape and len(key) == len(self.shape) and all(isinstance(i, (int, np.integer)) for i in key):
            return FieldElement(self, key)      # `a[i][0] = v` writes the ndarray, as for a field
        item = self.data[key]
        return Matrix(item) if self.element_shape else item.item()

    def __setitem__(self, index, value):
        self._write(self._key(index), np.asarray(value) if isinstance(value, Matrix) else value)


def ndarray(dtype, shape, needs_grad=False, needs_dual=False):
    """`ti.ndarray(ti.f32, shape)`, also of a vector or matrix type (`ti.math.vec3`)."""
    if structs.kind_of(dtype) == 'matrix':
        return Ndarray(dtype[-1], shape, dtype[1:-1], needs_grad, needs_dual)
    return Ndarray(dtype, shape, (), needs_grad, needs_dual)
