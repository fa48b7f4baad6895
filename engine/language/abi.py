"""The argument ABI: how a kernel's arguments are typed, keyed and laid out.

A kernel's parameters are scalars, compounds (vector, matrix, struct: one slot per
scalar), ndarrays (data pointer, shape, optional .grad, .dual and .grad.dual pointers)
and template arguments (compile-time values). `ArgLayout` places them in the launch
buffer, 8-byte slots, and binds them to IR values when the kernel is built; `key_of` is
what a compiled kernel is cached by.
"""
import inspect
import sys

import numpy as np

from ..ir import ops
from . import structs
from ..core import dtypes as T
from ..core.errors import ENGINE_DIR, SourceLocation, TaichiTypeError
from .fields import Field, Ndarray
from .frontend import NdarrayArg
from .frontend.markers import is_template_annotation


class NdarrayType:
    """`ti.types.ndarray(dtype=None, ndim=None, element_dim=None)`: a numpy array's last
    `element_dim` axes (or those of a vector/matrix `dtype`) are its elements' components."""

    def __init__(self, dtype=None, ndim=None, element_dim=None, element_shape=None, needs_grad=None, **_):
        if isinstance(dtype, structs.StructType):
            raise TaichiTypeError(f'ti.types.ndarray(dtype={dtype!r}): ndarrays of structs are not '
                                  f'supported; use a struct field (S.field(shape=...)) or one ndarray per member')
        self.dtype, self.ndim = dtype, ndim
        # False: the kernel sees no .grad of this argument, which is then a constant to its
        # gradient (nothing accumulates into its .grad); None: the array's own
        self.needs_grad = needs_grad
        if element_dim is None and isinstance(dtype, tuple) and dtype[0] in ('vector', 'matrix'):
            element_dim = 1 if dtype[0] == 'vector' else 2
        if element_dim is None and element_shape is not None:
            element_dim = len(element_shape)
        self.element_dim = element_dim or 0


def element_shape_of(spec, value):
    """The components of one element of an ndarray argument."""
    if isinstance(value, Ndarray):
        return value.element_shape
    dims = spec.annotation.element_dim if isinstance(spec.annotation, NdarrayType) else 0
    return tuple(as_array(value).shape[-dims:]) if dims else ()


class ArgSpec:
    def __init__(self, name, annotation):
        self.name, self.annotation = name, annotation
        if is_template_annotation(annotation):      # ti.template(), ti.types.sparse_matrix_builder()
            self.kind = 'template'
        elif isinstance(annotation, NdarrayType) or annotation is NdarrayType:
            self.kind = 'ndarray'
        elif structs.value_type(annotation) is not None:
            if structs.kind_of(annotation) == 'tuple':
                raise TaichiTypeError(f'kernel argument {name!r}: tuples are return types only; pass '
                                      f'a vector or a struct')
            self.kind = 'compound'      # a vector, matrix or struct: one slot per scalar
        else:
            if annotation is inspect.Parameter.empty or T.resolve(annotation) is None:
                raise TaichiTypeError(f'kernel argument {name!r} needs a type annotation '
                                      f'(ti.f32, ti.i32, ti.template(), ti.types.ndarray(), ...)')
            self.kind = 'scalar'

    @property
    def dtype(self):
        """Resolved per program: `float` means the default_fp of the current ti.init."""
        return T.resolve(self.annotation) if self.kind == 'scalar' else None


def scalar_format(dtype):
    code = {('f', 32): 'f4x', ('f', 64): 'd'}.get(('f', dtype.bits)) if dtype.is_float else None
    if code:
        return code
    letters = {8: 'b', 16: 'h', 32: 'i', 64: 'q'}
    letter = letters[dtype.bits] if dtype.signed else letters[dtype.bits].upper()
    return letter + 'x' * (8 - dtype.bits // 8)


def as_array(value):
    return value.data if isinstance(value, (Ndarray, ExternalArray)) else value


def memory_key(array):
    """What makes two numpy arrays one array to the rules and the tape: the same memory,
    shape, strides and type (views of one tensor made at each launch, `a` and `a[:]`)."""
    return array.__array_interface__['data'][0], array.shape, array.strides, array.dtype.str


class ExternalArray:
    """A tensor of another library (PyTorch's, or any DLPack array in CPU memory) passed
    as an ndarray argument: a view of its memory, so that the kernel reads and writes the
    tensor itself, as Taichi does; `.grad` views the tensor's .grad (allocated, zeros, for
    a leaf tensor that requires a gradient and has none yet). A non-leaf tensor that
    requires a gradient has no .grad to write (`lost_gradient`): kernel.grad refuses it."""

    def __init__(self, tensor):
        self.tensor, self.data = tensor, _memory_of(tensor)
        self.grad, self.lost_gradient = None, False
        if getattr(tensor, 'requires_grad', False):
            if tensor.is_leaf and tensor.grad is None:
                tensor.grad = tensor.detach().clone().zero_()
            if tensor.is_leaf or tensor.retains_grad and tensor.grad is not None:
                self.grad = ExternalArray(tensor.grad)
            else:
                self.lost_gradient = True
        self.name = f'{type(tensor).__name__} of shape {tuple(self.data.shape)}'

    def fill(self, value):
        self.data[...] = value

    def written(self):
        """After a kernel wrote it: PyTorch's version counter moves, so that autograd
        refuses a backward pass that saved the old values (as an in-place op makes it)."""
        if type(self.tensor).__module__.startswith('torch'):
            import torch.autograd.graph
            torch.autograd.graph.increment_version(self.tensor)


def _memory_of(tensor):
    if hasattr(tensor, 'detach') and hasattr(tensor, 'numpy'):      # PyTorch: shares the memory
        if getattr(tensor, 'device', None) is not None and tensor.device.type != 'cpu':
            raise TaichiTypeError(f'a tensor on {tensor.device} cannot be a kernel argument here (the kernels '
                                  f'run on the CPU); move it with .cpu()')
        return tensor.detach().numpy()
    return np.from_dlpack(tensor)


def adopt_arrays(args, positions):
    """The arguments, with foreign tensors at ndarray positions replaced by ExternalArrays."""
    for k in positions:
        value = args[k]
        if type(value) is not np.ndarray and not isinstance(value, Ndarray) and hasattr(value, '__dlpack__'):
            args = args[:k] + (ExternalArray(value),) + args[k + 1:]
    return args


def refuse_lost_gradients(kernel_name, args):
    """kernel.grad with a tensor whose gradient has nowhere to go: an error, not a loss."""
    for value in args:
        if isinstance(value, ExternalArray) and value.lost_gradient:
            raise TaichiTypeError(
                f'{kernel_name}.grad: the {value.name} requires a gradient but is not a leaf, so it has no .grad '
                f'to write; pass a leaf tensor, or make the kernel a PyTorch operation with engine.torch.kernel')


class ArgLayout:
    """Where each argument lives in the launch buffer (8-byte slots)."""

    def __init__(self, specs, args, return_type):
        self.specs, self.args = specs, args
        fmt, offset = '=', 0
        self.scalar_positions, self.ndarrays = [], []
        self.ndarray_params = {}
        self.offsets = {}
        self.compound = {}      # position -> (offset, slot types) of vector, matrix and struct arguments
        for k, (spec, value) in enumerate(zip(specs, args)):
            if spec.kind == 'scalar':
                self.offsets[k] = offset
                fmt += scalar_format(spec.dtype)
                self.scalar_positions.append(k)
                offset += 8
            elif spec.kind == 'compound':
                slots = structs.slot_types(spec.annotation)
                self.compound[k] = (offset, slots)
                fmt += ''.join(map(scalar_format, slots))
                offset += 8 * len(slots)
            elif spec.kind == 'ndarray':
                size = self._place_ndarray(k, spec, value, offset)
                fmt += 'x' * size                  # filled by _pack_ndarrays
                offset += size
        self.scalar_format = fmt
        self.ret_offset = offset
        self.return_type = return_type
        self.return_slots = structs.slot_types(return_type) if return_type is not None else []
        self.size = offset + 8 * max(1, len(self.return_slots))
        self._converters = {k: [float if t.is_float else int for t in slots]
                            for k, (_, slots) in self.compound.items()}

    def _place_ndarray(self, k, spec, value, offset):
        """An ndarray argument's slots: its pointer, its shape, then a pointer for each of
        its .grad, .dual and .grad.dual that it has. Returns their size."""
        array = as_array(value)
        element_shape = element_shape_of(spec, value)
        ndim = array.ndim - len(element_shape)
        param = NdarrayArg(k, spec.name, T.from_numpy(array.dtype), ndim, element_shape, offset)
        targets, end = {(): param}, offset + 8 * (1 + ndim)
        for path in COMPANIONS:
            owner = targets.get(path[:-1])
            if owner is not None and companion(value, path, spec) is not None:
                targets[path] = owner.add(path[-1], end)
                end += 8
        self.ndarray_params[k] = param
        companions = [(t.pointer_offset, t.path) for t in targets.values() if t.path]
        self.ndarrays.append((k, offset, ndim, companions))
        return end - offset

    def bind_params(self):
        params = {}
        for k, (spec, value) in enumerate(zip(self.specs, self.args)):
            if spec.kind == 'scalar':
                params[spec.name] = ops.emit('arg', (), spec.dtype, offset=self.offsets[k])
            elif spec.kind == 'ndarray':
                params[spec.name] = self.ndarray_params[k]
            elif spec.kind == 'compound':
                offset, slots = self.compound[k]
                scalars = [ops.emit('arg', (), t, offset=offset + 8 * j) for j, t in enumerate(slots)]
                params[spec.name] = structs.join(spec.annotation, iter(scalars))
            else:
                params[spec.name] = value
        return params

    def pack_values(self, args):
        """The values a launch packs when there are compound arguments: their scalars, in
        their slots among the scalar arguments."""
        values = []
        for k, spec in enumerate(self.specs):
            if spec.kind == 'scalar':
                values.append(args[k])
            elif spec.kind == 'compound':
                scalars = structs.split(spec.annotation, args[k])
                values += [convert(x) for convert, x in zip(self._converters[k], scalars)]
        return values


# the arrays an ndarray argument may carry besides its values, each with a pointer slot
COMPANIONS = (('grad',), ('dual',), ('grad', 'dual'))
_NONE = (False, False, False)


def companion(value, path, spec=None):
    """The .grad, .dual or .grad.dual (path) of an ndarray argument, or None (also the
    .grad of an argument its annotation declares needs_grad=False)."""
    if path[:1] == ('grad',) and spec is not None and getattr(spec.annotation, 'needs_grad', None) is False:
        return None
    for role in path:
        value = getattr(value, role, None)
    return value


def key_of(spec, value):
    if spec.kind == 'ndarray':
        array = as_array(value)
        if not isinstance(array, np.ndarray):
            return ('bad', type(value))
        # whether it has a .grad, a .dual and a .grad.dual: each is a slot of the layout
        # (a numpy array has none: the common case, keyed without looking)
        has = _NONE if array is value else tuple(companion(value, path, spec) is not None for path in COMPANIONS)
        return (array.dtype.str, array.ndim, element_shape_of(spec, value), has)
    if isinstance(value, Field):
        return value
    if getattr(type(value), '_ti_data_oriented', False):
        return Instance(value)
    try:
        hash(value)
        return (type(value), value)
    except TypeError:
        return id(value)


class Instance:
    """A data_oriented object as part of a cache key: compared by identity (and kept alive,
    so its id is not reused while the key exists)."""
    __slots__ = ('obj',)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, Instance) and other.obj is self.obj


def call_error(kernel, message):
    """A TaichiTypeError pointing at the user's call of the kernel."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(ENGINE_DIR):
        frame = frame.f_back
    loc = None
    if frame is not None:
        loc = SourceLocation(frame.f_code.co_filename, frame.f_lineno, 0, None, frame.f_code.co_name)
    return TaichiTypeError(message + f' (kernel defined at {kernel.location()})', loc)
