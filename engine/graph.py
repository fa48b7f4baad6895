"""`ti.graph`: Taichi's compute graphs, recorded and replayed.

A `GraphBuilder` records kernel launches whose arguments are placeholders (`ti.graph.Arg`)
or values; `compile()` freezes the list, and `Graph.run({name: value})` checks each value
against its placeholder, then launches the kernels in order from Python. Taichi compiles a
graph into one native launch sequence that `ti.aot` can also save; here each kernel compiles
at its first launch, as any kernel does, so a graph saves no launch overhead: it is there so
that programs written with graphs run, with the same checks.
"""
import difflib
import enum
import functools
import inspect
import warnings

import numpy as np

from .core import dtypes as T
from .core.errors import (USER_ERRORS, WHERE, TaichiNotImplementedError, TaichiRuntimeError, missing_attribute,
                          user_frames_only)
from .language import structs
from .language.abi import NdarrayType
from .language.fields import Ndarray
from .language.matrix import Matrix
from .runtime.kernels import BoundKernel, Kernel


def _users_frames(fn):
    """A user's mistake ends its traceback at the user's frames, as a kernel's errors do."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except USER_ERRORS as exc:
            user_frames_only(exc)
            raise
    return wrapper


class ArgKind(enum.Enum):
    """What a placeholder stands for (Taichi's names)."""
    SCALAR = 'scalar'
    NDARRAY = 'ndarray'
    MATRIX = 'matrix'
    TEXTURE = 'texture'
    RWTEXTURE = 'rw_texture'


# the keywords each kind takes besides tag and name (Taichi 1.7's)
_KEYWORDS = {ArgKind.SCALAR: {'dtype'}, ArgKind.NDARRAY: {'dtype', 'ndim', 'element_shape'},
             ArgKind.MATRIX: {'dtype'}}


class Arg:
    """`ti.graph.Arg(kind, name, dtype, ndim=...)`: a kernel argument given when the graph
    runs, by name. Taichi's positional order: tag, name, dtype, ndim, field_dim (the old name
    of ndim), element_shape (the old way to give vector elements: pass a vector dtype),
    channel_format, shape, num_channels (textures)."""

    @_users_frames
    def __init__(self, tag, name, dtype=None, ndim=None, field_dim=None, element_shape=None, channel_format=None,
                 shape=None, num_channels=None, fmt=None):
        _check_kind_and_name(tag, name)
        self.kind, self.name = tag, name
        ndim = _old_ndim(self, ndim, field_dim)
        given = {'dtype': dtype, 'ndim': ndim, 'element_shape': element_shape, 'channel_format': channel_format,
                 'shape': shape, 'num_channels': num_channels, 'fmt': fmt}
        extra = [key for key, value in given.items() if value is not None and key not in _KEYWORDS[tag]]
        if extra:
            raise TaichiRuntimeError(f'{self}: unexpected argument {extra[0]}; a {tag.name} argument takes '
                                     f'{", ".join(sorted(_KEYWORDS[tag]))}')
        if dtype is None:
            raise TaichiRuntimeError(f'{self} needs a dtype')
        self.dtype, self.element_shape, self.ndim = _element_type(self, dtype, element_shape), (), 0
        if structs.kind_of(dtype) == 'matrix':
            self.element_shape = structs.matrix_shape(dtype)
        elif element_shape is not None:
            self.element_shape = tuple(element_shape)
        if tag is ArgKind.NDARRAY:
            if not isinstance(ndim, (int, np.integer)) or ndim < 0:
                raise TaichiRuntimeError(f'{self} needs ndim, its number of (field) dimensions, got {ndim!r}')
            self.ndim = int(ndim)

    def __repr__(self):
        return f'ti.graph.Arg({self.kind}, {self.name!r})'

    def describe(self):
        """What the placeholder takes, e.g. `an ndarray(dtype=f32, element_shape=(2,), ndim=1)`."""
        dtype = T.resolve(self.dtype)
        if self.kind is ArgKind.SCALAR:
            return f'a scalar {dtype}'
        if self.kind is ArgKind.MATRIX:
            return f'a matrix {self.element_shape} of {dtype}'
        elements = f', element_shape={self.element_shape}' if self.element_shape else ''
        return f'an ndarray(dtype={dtype}{elements}, ndim={self.ndim})'

    def signature(self):
        return self.kind, T.resolve(self.dtype), self.element_shape, self.ndim

    def check(self, value):
        """A value given to Graph.run for this placeholder."""
        if self.kind is ArgKind.NDARRAY:
            _check_ndarray(self, value)
        elif self.kind is ArgKind.SCALAR:
            _check_scalar(self, value)
        else:
            _check_matrix(self, value)


def _check_kind_and_name(tag, name):
    if tag in (ArgKind.TEXTURE, ArgKind.RWTEXTURE):
        raise TaichiNotImplementedError(f'ti.graph.Arg({tag}, {name!r}) is not supported by this engine: '
                                        f'textures {WHERE}')
    if not isinstance(tag, ArgKind):
        raise TaichiRuntimeError(f'ti.graph.Arg: the kind must be one of ti.graph.ArgKind '
                                 f'({", ".join(k.name for k in ArgKind)}), got {tag!r}')
    if not isinstance(name, str):
        raise TaichiRuntimeError(f'ti.graph.Arg({tag}, ...): the name must be a string, got {name!r}')


def _old_ndim(arg, ndim, field_dim):
    if field_dim is None:
        return ndim
    if ndim is not None:
        raise TaichiRuntimeError(f'{arg}: field_dim is the old name of ndim; give one of them')
    warnings.warn('ti.graph.Arg: field_dim is deprecated, use ndim instead', DeprecationWarning, stacklevel=4)
    return field_dim


def _element_type(arg, dtype, element_shape):
    """The scalar type of the placeholder's values (unresolved: `float` follows ti.init)."""
    kind = structs.kind_of(dtype)
    wanted = {ArgKind.SCALAR: ('scalar',), ArgKind.NDARRAY: ('scalar', 'matrix'), ArgKind.MATRIX: ('matrix',)}
    if kind not in wanted[arg.kind]:
        words = {ArgKind.SCALAR: 'a scalar type (ti.f32, ti.i32, ...)', ArgKind.MATRIX: 'a vector or matrix '
                 'type (ti.math.vec3, ti.types.matrix(2, 2, ti.f32), ...)', ArgKind.NDARRAY: 'a scalar, vector or '
                 'matrix type'}
        raise TaichiRuntimeError(f'{arg}: the dtype must be {words[arg.kind]}, got {dtype!r}')
    if element_shape is not None and kind == 'matrix':
        raise TaichiRuntimeError(f'{arg}: give element_shape or a vector/matrix dtype, not both')
    if element_shape is not None:
        warnings.warn('ti.graph.Arg: element_shape is deprecated, use a vector or matrix dtype '
                      '(ti.types.vector(3, ti.f32))', DeprecationWarning, stacklevel=4)
    return dtype[-1] if kind == 'matrix' else dtype


# --- the values of a run ------------------------------------------------------------------

def _check_ndarray(arg, value):
    if isinstance(value, Ndarray):
        dtype, elements, ndim = value.dtype, value.element_shape, len(value.shape)
    elif isinstance(value, np.ndarray):      # the engine's kernels take numpy arrays too
        dtype = T.from_numpy(value.dtype) if T.has_numpy(value.dtype) else value.dtype
        count = len(arg.element_shape)
        elements, ndim = value.shape[value.ndim - count:], value.ndim - count
    else:
        raise TaichiRuntimeError(f'Graph.run: argument {arg.name!r} must be an ndarray (ti.ndarray, or a numpy '
                                 f'array), got {type(value).__name__}')
    if dtype is not T.resolve(arg.dtype) or tuple(elements) != arg.element_shape or ndim != arg.ndim:
        shape = getattr(value, 'shape', None)
        given = f'ndarray(dtype={dtype}{f", element_shape={tuple(elements)}" if elements else ""}, ndim={ndim})'
        raise TaichiRuntimeError(f'Graph.run: argument {arg.name!r} must be {arg.describe()}, got an '
                                 f'{given} of shape {shape}')


def _check_scalar(arg, value):
    dtype = T.resolve(arg.dtype)
    numbers = (int, float, np.integer, np.floating) if dtype.is_float else (int, np.integer)
    if not isinstance(value, numbers):
        raise TaichiRuntimeError(f'Graph.run: argument {arg.name!r} must be {arg.describe()}, got '
                                 f'{value!r} ({type(value).__name__})')


def _check_matrix(arg, value):
    shape = value.to_numpy().shape if isinstance(value, Matrix) else np.shape(value)
    if tuple(shape) != arg.element_shape:
        raise TaichiRuntimeError(f'Graph.run: argument {arg.name!r} must be {arg.describe()}, got '
                                 f'{type(value).__name__} of shape {tuple(shape)}')


# --- recording ----------------------------------------------------------------------------

def _parameters(kernel):
    """The specs of the parameters a dispatch gives (a bound kernel's instance is given)."""
    if isinstance(kernel, BoundKernel):
        return kernel.kernel.specs[1:], [kernel.obj]
    if isinstance(kernel, Kernel):
        return kernel.specs, []
    raise TaichiRuntimeError(f'dispatch: {kernel!r} is not a ti.kernel')


def _check_dispatch(kernel, args):
    specs, bound = _parameters(kernel)
    fn = kernel.kernel.fn if isinstance(kernel, BoundKernel) else kernel.fn
    try:
        inspect.signature(fn).bind(*bound, *args)
    except TypeError as exc:
        raise TaichiRuntimeError(f'dispatch of kernel {kernel.name}(): {exc}') from None
    for spec, arg in zip(specs, args):
        if isinstance(arg, Arg):
            problem = _mismatch(spec, arg)
            if problem:
                raise TaichiRuntimeError(f'dispatch of kernel {kernel.name}(): parameter {spec.name!r} {problem}; '
                                         f'the placeholder {arg.name!r} is {arg.describe()}')


def _mismatch(spec, arg):
    """Why the placeholder cannot stand for the parameter (None: it can)."""
    kinds = {'ndarray': ArgKind.NDARRAY, 'scalar': ArgKind.SCALAR, 'compound': ArgKind.MATRIX}
    if spec.kind == 'template':
        return 'is a ti.template(): give it a value, not a placeholder'
    if kinds[spec.kind] is not arg.kind:
        return f'takes a {kinds[spec.kind].name} argument'
    annotation = spec.annotation
    if spec.kind == 'compound':
        if structs.kind_of(annotation) != 'matrix' or structs.matrix_shape(annotation) != arg.element_shape:
            return f'takes {structs.type_name(annotation)}'
    if spec.kind == 'ndarray' and isinstance(annotation, NdarrayType):
        return _ndarray_mismatch(annotation, arg)
    return None


def _ndarray_mismatch(annotation, arg):
    if annotation.dtype is not None:
        wanted = structs.element_dtype(annotation.dtype)
        shape = structs.matrix_shape(annotation.dtype) if structs.kind_of(annotation.dtype) == 'matrix' else ()
        if wanted is not T.resolve(arg.dtype) or shape != arg.element_shape:
            return f'takes elements of type {structs.type_name(annotation.dtype)}'
    if annotation.ndim is not None and annotation.ndim != arg.ndim:
        return f'takes ndim={annotation.ndim}'
    return None


class Sequential:
    """Launches in order; a GraphBuilder appends it (as often as it likes: mpm88_graph.py
    appends one substep 500 times). Launches dispatched after an append are in the graph too,
    as in Taichi, up to compile()."""

    def __init__(self):
        self.launches = []

    @_users_frames
    def dispatch(self, kernel, *args):
        _check_dispatch(kernel, args)
        self.launches.append((kernel, args))

    def flat(self):
        return [launch for node in self.launches
                for launch in (node.flat() if isinstance(node, Sequential) else [node])]


class GraphBuilder:
    """`ti.graph.GraphBuilder()`: dispatch kernels (or append sequentials), then compile."""

    def __init__(self):
        self._seq = Sequential()

    @_users_frames
    def dispatch(self, kernel, *args):
        self._seq.dispatch(kernel, *args)

    def create_sequential(self):
        return Sequential()

    @_users_frames
    def append(self, node):
        if not isinstance(node, Sequential):
            raise TaichiRuntimeError(f'GraphBuilder.append takes a sequential (builder.create_sequential()), '
                                     f'got {type(node).__name__}')
        self._seq.launches.append(node)

    @_users_frames
    def compile(self):
        return Graph(self._seq.flat())


class Graph:
    """A compiled graph: `run({name: value, ...})` launches its kernels in order."""

    def __init__(self, launches):
        self._launches = launches
        self.placeholders = {}
        for _, args in launches:
            for arg in args:
                if isinstance(arg, Arg):
                    self._add(arg)

    def _add(self, arg):
        known = self.placeholders.setdefault(arg.name, arg)
        if known.signature() != arg.signature():
            raise TaichiRuntimeError(f'GraphBuilder.compile: two placeholders are named {arg.name!r}: '
                                     f'{known.describe()} and {arg.describe()}')

    @_users_frames
    def run(self, args):
        if not isinstance(args, dict):
            raise TaichiRuntimeError(f'Graph.run takes a dict {{name: value}}, got {type(args).__name__}')
        self._check_names(args)
        for name, arg in self.placeholders.items():
            arg.check(args[name])
        for kernel, given in self._launches:
            kernel(*[args[a.name] if isinstance(a, Arg) else a for a in given])

    def _check_names(self, args):
        takes = ', '.join(f'{name!r} ({arg.describe()})' for name, arg in self.placeholders.items()) or 'none'
        for name in self.placeholders:
            if name not in args:
                raise TaichiRuntimeError(f'Graph.run: argument {name!r} is missing; the graph takes {takes}')
        for name in args:
            if name not in self.placeholders:
                close = difflib.get_close_matches(str(name), list(self.placeholders), n=1)
                hint = f' (did you mean {close[0]!r}?)' if close else ''
                raise TaichiRuntimeError(f'Graph.run: unknown argument {name!r}{hint}; the graph takes {takes}')


__all__ = ['Arg', 'ArgKind', 'Graph', 'GraphBuilder', 'Sequential']


def __getattr__(name):
    """A name ti.graph lacks: the engine's message, not Python's."""
    raise missing_attribute('ti.graph', name, __all__)
