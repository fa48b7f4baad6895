"""The kernel language's markers and small API objects.

`ti.static`, `ti.static_assert`, `ti.static_print`, `ti.ndrange`, `ti.grouped`,
`ti.loop_config`, `ti.template()`, `@ti.func`, `ti.stop_grad`, `ti.block_local` and the
`ti.atomic_*` functions: what a kernel names, and what the builder recognizes when it
evaluates those names (a marker does its work at compile time, or none at all).
"""
import functools
import inspect
import itertools

from ...ir import ops
from ...core.errors import TaichiSyntaxError
from ..matrix import Matrix
from .source import FunctionSource


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

    def __iter__(self):
        """In Python scope, the index tuples in row-major order, as Taichi's ndrange gives."""
        return itertools.product(*(range(begin, end) for begin, end in self.dims))


class Grouped:
    def __init__(self, source):
        self.source = source

    def __iter__(self):
        """In Python scope, `ti.grouped(ti.ndrange(...))` gives each index as a vector."""
        if not isinstance(self.source, NdRange):
            raise TypeError('ti.grouped(...) iterates in Python scope only over a ti.ndrange')
        return (Matrix._make((len(index),), list(index)) for index in self.source)


def ndrange(*dims):
    return NdRange(*dims)


def grouped(source):
    return Grouped(source)


class LoopConfig:
    serialize = False


def loop_config(serialize=False, **_):
    """`ti.loop_config(serialize=True)`: the next top-level loop runs serially."""
    LoopConfig.serialize = bool(serialize)


class Template:
    """`ti.template()`: the argument is passed at compile time."""


def template():
    return Template()


def is_template_annotation(annotation):
    """ti.template() (or ti.template), and its kinds (ti.types.sparse_matrix_builder())."""
    return isinstance(annotation, Template) or isinstance(annotation, type) and issubclass(annotation, Template)


class Func:
    """`@ti.func`: inlined into the kernels that call it. `real`: a `@ti.real_func`, which
    Taichi compiles as a function of its own; inlined here too, which gives the same results
    (its arguments are values) except that it cannot call itself (inlining.py says so)."""

    def __init__(self, fn, real=False):
        self.fn = fn
        self.signature = inspect.signature(fn)
        self.real = real

    @functools.cached_property
    def source(self):
        """The func's parsed source (parsed when a kernel first calls it)."""
        return FunctionSource(self.fn)

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


def real_func(fn):
    return Func(fn, real=True)


def _atomic(kind):
    def atomic(target, value):
        raise TaichiSyntaxError(f'ti.atomic_{kind} can only be used inside kernels')
    atomic._atomic_kind = kind
    atomic.__name__ = f'atomic_{kind}'
    return atomic


atomic_add, atomic_sub = _atomic('add'), _atomic('sub')
atomic_min, atomic_max = _atomic('min'), _atomic('max')
atomic_and, atomic_or, atomic_xor = _atomic('and'), _atomic('or'), _atomic('xor')
