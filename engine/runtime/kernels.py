"""`@ti.kernel`: a kernel's arguments checked, its compiled code found or built, launched.

A kernel is compiled (engine/runtime/pipeline.py) once per (template arguments, ndarray kinds)
and program; a launch (engine/backend/launch.py) is recorded by a tape, or by ti.capture, when
one is in effect (engine/core/context.py).
"""
import functools
import inspect

import numpy as np

from ..core import dtypes as T
from ..ir import ops
from . import pipeline, results
from ..language import structs
from ..language.abi import (ArgSpec, ExternalArray, NdarrayType, adopt_arrays, as_array, call_error, element_shape_of,
                            key_of, refuse_lost_gradients)
from ..autodiff.rules import READ
from ..core.context import ctx
from ..core.errors import USER_ERRORS, SourceLocation, TaichiTypeError, user_frames_only
from ..language.fields import Field, Ndarray, zero_tangent
from ..language.frontend import FunctionSource, Template
from ..language.frontend.triplets import SparseMatrixBuilderType
from ..language.sparse_matrix import SparseMatrixBuilder
from ..core.program import current as current_program


class Kernel:
    _is_kernel = True

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = self.name = fn.__name__
        self.__doc__ = fn.__doc__
        self.signature = inspect.signature(fn)
        annotations = [p.annotation for p in self.signature.parameters.values()]
        if annotations and annotations[0] is inspect.Parameter.empty and _is_method(fn):
            annotations[0] = Template()         # `self`: the instance, as a template argument
        self.specs = [ArgSpec(p, a) for p, a in zip(self.signature.parameters, annotations)]
        self.keyed = [k for k, s in enumerate(self.specs) if s.kind in ('template', 'ndarray')]
        self.ndarray_positions = [k for k, s in enumerate(self.specs) if s.kind == 'ndarray']
        self.builder_positions = [k for k, a in enumerate(annotations) if _is_builder_type(a)]
        self._source = None
        self._cache = {}
        self._generation = -1
        # the one build of a kernel without template, ndarray or builder parameters: a call
        # outside tapes, forward mode, captures and watches launches it directly (__call__)
        self._plain = None
        self._plain_kind = not (self.keyed or self.builder_positions)
        self.grad = AdjointKernel(self)
        self.no_grad = False

    @property
    def source(self):
        if self._source is None:
            self._source = FunctionSource(self.fn)
        return self._source

    @property
    def return_type(self):
        """A DataType (resolved per program, as argument types are), a compound type, or None."""
        ret = self.signature.return_annotation
        if ret is inspect.Signature.empty or ret is None:
            return None
        dtype = structs.value_type(ret) or T.resolve(ret)
        if dtype is None:
            raise TaichiTypeError(f'kernel {self.name}: the return type {ret!r} is not a scalar, vector, '
                                  f'matrix, struct or tuple type')
        return dtype

    def __get__(self, obj, owner=None):
        """A kernel defined in a class, taken from an instance: bound to it."""
        return self if obj is None else BoundKernel(self, obj)

    def location(self):
        return SourceLocation(self.source.filename, self.source.first_line, 0, None, self.name)

    # --- launch ----------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        plain = self._plain
        try:
            if (plain is not None and not kwargs and len(args) == len(self.specs) and plain.program is ctx.program
                    and ctx.tape is None and ctx.forward is None and ctx.capture is None and ctx.watch is None):
                return plain.launch(args)
            return self._launch(args, kwargs)
        except USER_ERRORS as exc:       # the traceback ends at the caller's frames
            user_frames_only(exc)
            raise

    def _launch(self, args, kwargs):
        """A launch in full: arguments bound, arrays adopted, tapes, forward mode, captures."""
        if kwargs or len(args) != len(self.specs):     # keywords, defaults, or an error
            args = self._bind(args, kwargs)
        given = args
        if self.ndarray_positions:          # tensors passed as ndarrays: views of their memory
            args = adopt_arrays(args, self.ndarray_positions)
        compiled = self.compiled(args)
        if ctx.watch is not None:       # wrapped functions' calls (engine/runtime/pending.py)
            ctx.watch.before_launch(compiled, args)
        # a no_grad launch in forward mode runs without tangents, and its results are
        # constants (tangent 0), as they are to a tape: both modes differentiate one function
        constant = ctx.forward is not None and (self.no_grad or ctx.no_grad_depth > 0)
        launched = compiled if ctx.forward is None or constant else pipeline.tangents_of(compiled)
        recorder = ctx.tape
        differentiating = recorder is not None or ctx.forward is not None
        if differentiating:     # return values of earlier launches as arguments; forward mode's param
            results.before_launch(self, compiled, args)
        shadowed = recorder.check(self, compiled, args) if recorder is not None else None
        if shadowed and launched is compiled:      # checks the rules inside this launch
            launched = pipeline.checked_of(compiled, shadowed)
            result = pipeline.launch_checked(compiled, args, shadowed)
        else:
            result = launched.launch(args)
        if self.builder_positions and ctx.capture is None:     # bad triplets: said at once
            for k in self.builder_positions:
                args[k].check_triplets(self.name)
        if args is not given:
            mark_written(compiled, args)
        if constant:
            zero_written_tangents(compiled, args)
        if recorder is not None:
            recorder.record(self, args, compiled, launched)
        if ctx.capture is not None:
            ctx.capture.add(self, args, compiled, launched)
        if differentiating and result is not None:
            result = results.returned(self, compiled, args, result)
        return result

    def compiled(self, args):
        """The native code for these arguments, compiled on first use."""
        prog = current_program()
        if self._generation != prog.generation:
            self._cache.clear()
            self._generation = prog.generation
        key = tuple(key_of(self.specs[k], args[k]) for k in self.keyed) if self.keyed else ()
        compiled = self._cache.get(key)
        if compiled is None:
            self._check_args(args)
            compiled = self._cache[key] = pipeline.compile_kernel(self, args, prog)
            if self._plain_kind:
                self._plain = compiled
        return compiled

    def _bind(self, args, kwargs):
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise call_error(self, str(exc)) from None
        bound.apply_defaults()
        return tuple(bound.arguments[s.name] for s in self.specs)

    def _check_args(self, args):
        if len(args) != len(self.specs):
            raise call_error(self, f'kernel {self.name}() takes {len(self.specs)} argument(s), '
                                    f'{len(args)} given')
        for k, (spec, value) in enumerate(zip(self.specs, args)):
            if spec.kind == 'scalar' and not ops.is_number(value):
                raise call_error(self, f'argument {spec.name!r} of kernel {self.name}() must be a '
                                        f'{spec.dtype} scalar, got {type(value).__name__}')
            if spec.kind == 'ndarray' and not isinstance(value, (np.ndarray, Ndarray, ExternalArray)):
                hint = ' (a field is read directly by name, or as a ti.template() argument)' \
                    if isinstance(value, Field) else ''
                raise call_error(self, f'argument {spec.name!r} of kernel {self.name}() must be an '
                                        f'ndarray (numpy or ti.ndarray), got {type(value).__name__}{hint}')
            if k in self.builder_positions and not isinstance(value, SparseMatrixBuilder):
                raise call_error(self, f'argument {spec.name!r} of kernel {self.name}() must be a '
                                        f'ti.linalg.SparseMatrixBuilder, got {type(value).__name__}')
            if spec.kind == 'compound':
                try:
                    structs.split(spec.annotation, value)
                except TypeError as exc:
                    raise call_error(self, f'argument {spec.name!r} of kernel {self.name}(): {exc}') from None
            if spec.kind == 'ndarray' and not T.has_numpy(as_array(value).dtype):
                raise call_error(self, f'argument {spec.name!r} of kernel {self.name}(): ndarrays of '
                                        f'dtype {as_array(value).dtype} are not supported')
            if spec.kind == 'ndarray' and isinstance(spec.annotation, NdarrayType):
                self._check_ndarray(spec, value)

    def _check_ndarray(self, spec, value):
        """An ndarray argument against its annotation: the element type is not converted
        (the kernel writes the caller's memory), and the dimensions must match."""
        annotation, array = spec.annotation, as_array(value)
        where = f'argument {spec.name!r} of kernel {self.name}()'
        wanted = structs.element_dtype(annotation.dtype) if annotation.dtype is not None else None
        given = T.from_numpy(array.dtype)
        if wanted is not None and wanted is not given:
            raise call_error(self, f'{where}: required element type {wanted}, but the array has element type '
                                    f'{given} (numpy {array.dtype}); convert it, e.g. with {_conversion(value, wanted)}')
        element_shape = element_shape_of(spec, value)
        if structs.kind_of(annotation.dtype) == 'matrix' and element_shape != structs.matrix_shape(annotation.dtype):
            raise call_error(self, f'{where}: elements of shape {structs.matrix_shape(annotation.dtype)} are '
                                    f'required, the array has {element_shape} (array shape {array.shape})')
        ndim = array.ndim - len(element_shape)
        if annotation.ndim is not None and ndim != annotation.ndim:
            raise call_error(self, f'{where}: argument mismatch: ndim={annotation.ndim} is required, the '
                                    f'array has {ndim} (array shape {array.shape})')


class BoundKernel:
    """`obj.method` for a kernel defined in a class (`@ti.data_oriented`): the instance is
    its first argument, a template argument, so each instance gets code of its own."""

    def __init__(self, kernel, obj):
        self.kernel, self.obj = kernel, obj
        self.__name__ = kernel.name

    def __call__(self, *args, **kwargs):
        return self.kernel(self.obj, *args, **kwargs)

    @property
    def grad(self):
        return functools.partial(self.kernel.grad, self.obj)

    def __getattr__(self, name):        # the kernel's own attributes (name, fn, ...)
        return getattr(self.kernel, name)


def _is_builder_type(annotation):
    """`ti.types.sparse_matrix_builder()` (or the class itself)."""
    return isinstance(annotation, SparseMatrixBuilderType) or annotation is SparseMatrixBuilderType


def _is_method(fn):
    """Whether fn is defined in a class body (its qualified name is Class.name)."""
    parts = fn.__qualname__.split('.')
    return len(parts) > 1 and parts[-2] != '<locals>'


def data_oriented(cls):
    """`@ti.data_oriented`: its kernels bind to instances (Kernel.__get__), ti.funcs too
    (Func.__get__); as a template argument an instance is keyed by identity, so two equal
    instances holding different fields never share compiled code."""
    cls._ti_data_oriented = True
    return cls


class AdjointKernel:
    """`kernel.grad(*args)`: accumulates the adjoints of the kernel's inputs into `.grad`.

    Compiled on first use from the primal kernel's IR."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __call__(self, *args, **kwargs):
        try:
            kernel = self.kernel
            if kwargs or len(args) != len(kernel.specs):
                args = kernel._bind(args, kwargs)
            if kernel.ndarray_positions:
                args = adopt_arrays(args, kernel.ndarray_positions)
                refuse_lost_gradients(kernel.name, args)
            primal = kernel.compiled(args)
            if primal.program.config.ad_validation and primal.access_summary().violation:
                raise primal.access_summary().violation
            self._launch(primal, args)
        except USER_ERRORS as exc:
            user_frames_only(exc)
            raise

    def run(self, *args):
        """The adjoint launch without the rule check (a tape checked at recording, if asked)."""
        self._launch(self.kernel.compiled(args), args)

    @staticmethod
    def _launch(primal, args):
        adjoint = pipeline.adjoint_of(primal)
        if ctx.forward is not None:      # forward over reverse: Hessian-vector products
            adjoint = pipeline.tangents_of(adjoint)
        adjoint.launch(args)


def _conversion(value, dtype):
    if isinstance(value, ExternalArray):
        return f'.to(torch.{np.dtype(dtype.np).name})'
    return f'.astype(np.{np.dtype(dtype.np).name})'


def zero_written_tangents(compiled, args):
    """The tangents of what a launch wrote become 0 (a no_grad launch in forward mode)."""
    for obj, kind, box, _ in compiled.access_summary().accesses:
        if kind != READ:
            owner = obj if isinstance(obj, Field) else args[obj.index]
            zero_tangent(owner, box.index(args, tuple(owner.shape)))


def mark_written(compiled, args):
    """Tell the tensors a launch wrote (ExternalArray arguments) that their values changed."""
    for obj, kind, _, _ in compiled.access_summary().accesses:
        value = args[obj.index] if kind != READ and not isinstance(obj, Field) else None
        if isinstance(value, ExternalArray):
            value.written()


def kernel(fn):
    return Kernel(fn)
