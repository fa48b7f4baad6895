"""`@ti.kernel`: argument handling, compilation on first use, and launch.

A kernel is compiled once per (template arguments, ndarray kinds) and program;
a launch packs scalar arguments into a preallocated buffer and calls native
code through ctypes (which releases the GIL), so the Python work per launch is
a handful of attribute reads and one `struct.pack_into`.
"""
import contextlib
import ctypes
import functools
import inspect
import itertools
import operator
import struct
import sys
import time

import numpy as np

from . import bounds, cache, codegen, forward, jit, ops, printer, printing, profiler, replay, reverse, rules, runtime, simplify, \
    structs, tape, verify
from . import dtypes as T
from .errors import USER_ERRORS, SourceLocation, TaichiSyntaxError, TaichiTypeError, user_frames_only
from .fields import Field, Ndarray
from .frontend import FunctionSource, KernelBuilder, NdarrayArg, Template
from .ir import walk

_symbol_ids = itertools.count()
compile_count = 0   # kernels compiled by LLVM in this process (tests check laziness with it)
compile_seconds = 0.0   # time spent building kernels (compiling or loading from the cache)
_loaded = {}        # cache key -> address of code already loaded in this process


class NdarrayType:
    """`ti.types.ndarray(dtype=None, ndim=None, element_dim=None)`: a numpy array's last
    `element_dim` axes (or those of a vector/matrix `dtype`) are its elements' components."""

    def __init__(self, dtype=None, ndim=None, element_dim=None, element_shape=None, **_):
        if isinstance(dtype, structs.StructType):
            raise TaichiTypeError(f'ti.types.ndarray(dtype={dtype!r}): ndarrays of structs are not '
                                  f'supported; use a struct field (S.field(shape=...)) or one ndarray per member')
        self.dtype, self.ndim = dtype, ndim
        if element_dim is None and isinstance(dtype, tuple) and dtype[0] in ('vector', 'matrix'):
            element_dim = 1 if dtype[0] == 'vector' else 2
        if element_dim is None and element_shape is not None:
            element_dim = len(element_shape)
        self.element_dim = element_dim or 0


def _element_shape(spec, value):
    """The components of one element of an ndarray argument."""
    if isinstance(value, Ndarray):
        return value.element_shape
    dims = spec.annotation.element_dim if isinstance(spec.annotation, NdarrayType) else 0
    return tuple(_as_array(value).shape[-dims:]) if dims else ()


class ArgSpec:
    def __init__(self, name, annotation):
        self.name, self.annotation = name, annotation
        if isinstance(annotation, Template) or annotation is Template:
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


def _scalar_format(dtype):
    code = {('f', 32): 'f4x', ('f', 64): 'd'}.get(('f', dtype.bits)) if dtype.is_float else None
    if code:
        return code
    letters = {8: 'b', 16: 'h', 32: 'i', 64: 'q'}
    letter = letters[dtype.bits] if dtype.signed else letters[dtype.bits].upper()
    return letter + 'x' * (8 - dtype.bits // 8)


def _as_array(value):
    return value.data if isinstance(value, Ndarray) else value


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
        self._source = None
        self._cache = {}
        self._generation = -1
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
        try:
            if kwargs or len(args) != len(self.specs):     # keywords, defaults, or an error
                args = self._bind(args, kwargs)
            compiled = self.compiled(args)
            launched = compiled if forward.active is None else compiled.with_tangents()
            recorder = tape.recording
            shadowed = recorder.check(self, compiled, args) if recorder is not None else None
            if shadowed and launched is compiled:      # checks the rules inside this launch
                launched = compiled.checked_build(shadowed)
                result = compiled.launch_checked(args, shadowed)
            else:
                result = launched.launch(args)
            if recorder is not None:
                recorder.record(self, args, compiled, launched)
            if replay.capturing is not None:
                replay.capturing.add(self, args, compiled, launched)
            return result
        except USER_ERRORS as exc:       # the traceback ends at the caller's frames
            user_frames_only(exc)
            raise

    def compiled(self, args):
        """The native code for these arguments, compiled on first use."""
        prog = runtime.program()
        if self._generation != prog.generation:
            self._cache.clear()
            self._generation = prog.generation
        key = tuple(_key_of(self.specs[k], args[k]) for k in self.keyed) if self.keyed else ()
        compiled = self._cache.get(key)
        if compiled is None:
            self._check_args(args)
            compiled = self._cache[key] = self.compile(args, prog)
        return compiled

    def _bind(self, args, kwargs):
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise _call_error(self, str(exc)) from None
        bound.apply_defaults()
        return tuple(bound.arguments[s.name] for s in self.specs)

    def _check_args(self, args):
        if len(args) != len(self.specs):
            raise _call_error(self, f'kernel {self.name}() takes {len(self.specs)} argument(s), '
                                    f'{len(args)} given')
        for spec, value in zip(self.specs, args):
            if spec.kind == 'scalar' and not ops.is_number(value):
                raise _call_error(self, f'argument {spec.name!r} of kernel {self.name}() must be a '
                                        f'{spec.dtype} scalar, got {type(value).__name__}')
            if spec.kind == 'ndarray' and not isinstance(value, (np.ndarray, Ndarray)):
                hint = ' (a field is read directly by name, or as a ti.template() argument)' \
                    if isinstance(value, Field) else ''
                raise _call_error(self, f'argument {spec.name!r} of kernel {self.name}() must be an '
                                        f'ndarray (numpy or ti.ndarray), got {type(value).__name__}{hint}')
            if spec.kind == 'compound':
                try:
                    structs.split(spec.annotation, value)
                except TypeError as exc:
                    raise _call_error(self, f'argument {spec.name!r} of kernel {self.name}(): {exc}') from None
            if spec.kind == 'ndarray' and not T.has_numpy(_as_array(value).dtype):
                raise _call_error(self, f'argument {spec.name!r} of kernel {self.name}(): ndarrays of '
                                        f'dtype {_as_array(value).dtype} are not supported')
            if spec.kind == 'ndarray' and isinstance(spec.annotation, NdarrayType):
                self._check_ndarray(spec, value)

    def _check_ndarray(self, spec, value):
        """An ndarray argument against its annotation: the element type is not converted
        (the kernel writes the caller's memory), and the dimensions must match."""
        annotation, array = spec.annotation, _as_array(value)
        where = f'argument {spec.name!r} of kernel {self.name}()'
        wanted = structs.element_dtype(annotation.dtype) if annotation.dtype is not None else None
        given = T.from_numpy(array.dtype)
        if wanted is not None and wanted is not given:
            raise _call_error(self, f'{where}: required element type {wanted}, but the array has element type '
                                    f'{given} (numpy {array.dtype}); convert it, e.g. with .astype(np.{wanted.np})')
        element_shape = _element_shape(spec, value)
        if structs.kind_of(annotation.dtype) == 'matrix' and element_shape != structs.matrix_shape(annotation.dtype):
            raise _call_error(self, f'{where}: elements of shape {structs.matrix_shape(annotation.dtype)} are '
                                    f'required, the array has {element_shape} (array shape {array.shape})')
        ndim = array.ndim - len(element_shape)
        if annotation.ndim is not None and ndim != annotation.ndim:
            raise _call_error(self, f'{where}: argument mismatch: ndim={annotation.ndim} is required, the '
                                    f'array has {ndim} (array shape {array.shape})')

    # --- compilation -------------------------------------------------------------
    def compile(self, args, prog):
        layout = ArgLayout(self.specs, args, self.return_type)
        builder = KernelBuilder(self.source)
        builder.return_type = self.return_type
        with too_deep_for_the_compiler(self.name):
            body = builder.build(layout.bind_params)
        # The interpreter, a second oracle, runs the IR as built; so does debug mode, whose
        # checks name the line of each statement (a merged one has its first line).
        verify.check(body, f'of {self.name} as built')
        if not (prog.config.interpret or prog.config.debug):
            body = simplify.simplify(body)
        return build_native(self, body, layout, prog)


@contextlib.contextmanager
def too_deep_for_the_compiler(name):
    """The compiler walks expressions and ti.func calls recursively: one nested more deeply
    than Python's recursion limit allows is a clear error, not a RecursionError from inside."""
    try:
        yield
    except RecursionError:
        raise TaichiSyntaxError(f'kernel {name} nests too deeply to compile (Python\'s recursion limit, '
                                f'{sys.getrecursionlimit()}, was reached): split long expressions into '
                                f'several statements') from None


def build_native(kernel, body, layout, prog, suffix='', shadow=()):
    """IR -> loaded native code, wrapped for launching (from the disk cache when there)."""
    with too_deep_for_the_compiler(kernel.name + suffix):
        return _build_native(kernel, body, layout, prog, suffix, shadow)


def _build_native(kernel, body, layout, prog, suffix, shadow):
    global compile_seconds
    start = time.perf_counter()
    verify.check(body, f'of {kernel.name}{suffix}', always=prog.config.debug)
    if prog.config.print_ir:        # ti.init(print_ir=True)
        print(f'kernel {kernel.name}{suffix}:\n{printer.text(body, indent=1)}')
    if prog.config.interpret:       # ti.init(interpret=True): no native code, no disk cache
        from .interpret import InterpretedKernel
        return profiler.instrument(InterpretedKernel(kernel, layout, prog, body), suffix)
    address = _load_or_compile(f'{kernel.name}{suffix}', body, layout, prog, shadow)
    compile_seconds += time.perf_counter() - start
    return profiler.instrument(CompiledKernel(kernel, address, layout, prog, body,
                                              kernel.name + _DERIVED.get(suffix, '')), suffix)


# how errors name the kernels derived from a user's kernel
_DERIVED = {'_grad': ' (its adjoint)', '_nograd': ' (its adjoint)', '_fwd': ' (its forward-mode tangent)'}


def _load_or_compile(name, body, layout, prog, shadow=()):
    """The entry address of the kernel's native code. With a cache key, the symbol names
    derive from the key, so an entry compiled by another process loads unchanged."""
    global compile_count
    config = prog.config
    # a checked build's shadow slots are part of its code (codegen.shadow_access)
    kind = name + ''.join(f'|f{t.id}' if isinstance(t, Field) else f'|a{t.index}' for t in shadow)
    kind += '' if config.check_bounds else '|unchecked'
    key = None if config.debug or not config.offline_cache else cache.key(kind, body, layout.ret_offset)
    if key is not None and key in _loaded:
        return _loaded[key]
    symbol = f'{name}_{key[:24]}' if key else f'{name}_{next(_symbol_ids)}'
    entry = codegen.KernelModule.main_symbol_of(symbol)
    obj = cache.load(config.cache_dir, key) if key else None
    if obj is None:
        llvm_ir, entry = codegen.generate(symbol, body, layout.ret_offset, config.debug, prog, shadow,
                                          config.check_bounds)
        obj = jit.compile_ir(llvm_ir)
        compile_count += 1
        if key:
            cache.store(config.cache_dir, key, obj)
    address = jit.load_object(obj, [entry])[entry]
    if key:
        _loaded[key] = address
    return address


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


class _Instance:
    """A data_oriented object as part of a cache key: compared by identity (and kept alive,
    so its id is not reused while the key exists)."""
    __slots__ = ('obj',)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _Instance) and other.obj is self.obj


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
        adjoint = primal.adjoint_compiled()
        if forward.active is not None:      # forward over reverse: Hessian-vector products
            adjoint = adjoint.with_tangents()
        adjoint.launch(args)


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
                fmt += _scalar_format(spec.dtype)
                self.scalar_positions.append(k)
                offset += 8
            elif spec.kind == 'compound':
                slots = structs.slot_types(spec.annotation)
                self.compound[k] = (offset, slots)
                fmt += ''.join(map(_scalar_format, slots))
                offset += 8 * len(slots)
            elif spec.kind == 'ndarray':
                array = _as_array(value)
                dtype = T.from_numpy(array.dtype)
                element_shape = _element_shape(spec, value)
                ndim = array.ndim - len(element_shape)
                has_grad = getattr(value, 'grad', None) is not None
                grad_offset = offset + 8 * (1 + ndim) if has_grad else None
                self.ndarray_params[k] = NdarrayArg(k, spec.name, dtype, ndim, element_shape,
                                                    offset, grad_offset)
                self.ndarrays.append((k, offset, ndim, grad_offset))
                size = 8 * (1 + ndim + has_grad)
                fmt += 'x' * size                  # filled by _pack_ndarrays
                offset += size
        self.scalar_format = fmt
        self.ret_offset = offset
        self.return_type = return_type
        self.return_slots = structs.slot_types(return_type) if return_type is not None else []
        self.size = offset + 8 * max(1, len(self.return_slots))
        self._converters = {k: [float if t.is_float else int for t in slots]
                            for k, (_, slots) in self.compound.items()}

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


class CompiledKernel:
    def __init__(self, kernel, address, layout, prog, body, label=None):
        self.label = label or kernel.name     # how errors name it ("f (its adjoint)")
        self.kernel, self.layout, self.program, self.body = kernel, layout, prog, body
        self.address = address
        self.cfunc = jit.cfunc(address, None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        self.buffer = ctypes.create_string_buffer(layout.size)
        self.buffer_address = ctypes.addressof(self.buffer)
        self.pack = struct.Struct(layout.scalar_format).pack_into
        n_scalars = len(layout.scalar_positions)
        all_scalars = n_scalars == len(layout.specs)
        positions = layout.scalar_positions
        self.pick = (layout.pack_values if layout.compound else
                     None if all_scalars else
                     (lambda args: ()) if n_scalars == 0 else
                     (lambda args, g=operator.itemgetter(*positions): (g(args),)) if n_scalars == 1 else
                     operator.itemgetter(*positions))
        self.nargs = len(layout.specs)
        rt, slots = layout.return_type, layout.return_slots
        self.unpack_return = struct.Struct('=' + ''.join(map(_scalar_format, slots))).unpack_from if slots else None
        # a vector, matrix, struct or tuple is rebuilt from its slots; a scalar is the first
        self.build_return = None if isinstance(rt, T.DataType) else lambda values: structs.join(rt, iter(values))
        # run-time prints and asserts: their Formats, by the index native code records
        self.print_formats, self.assert_formats = ([s.attrs['format'] for s in printing.table(body, op)]
                                                   for op in ('print', 'assert_fail'))
        if self.print_formats:
            prog.print_buffer()
        # Native code reports errors (indices out of range, debug mode's checks, autodiff
        # stacks out of memory) and prints; a launch looks for them only where the code can
        # record one, so a kernel without them pays nothing.
        self.check_errors = (prog.config.debug or any(s.op == 'stack_push' for s in walk(body))
                             or (prog.config.check_bounds and bounds.checks_indices(body))
                             or bool(self.print_formats))
        self.adjoint = None
        self.adjoint_epoch = None
        self.tangents = None
        self.summary = None
        self._locations = None
        self.checked = None             # the build that checks the rules (engine/rules.py)
        self.constant_adjoint = None

    @property
    def locations(self):
        """The kernel's table of source lines, by which its native code reports errors."""
        if self._locations is None:
            self._locations = codegen.location_table(self.body)
        return self._locations

    def report_errors(self, ndarrays=None):
        """After a launch: what it printed, then the error it recorded, if any."""
        if self.print_formats:
            self.program.drain_prints(lambda launch: self)
        self.program.check_errors(self.label, ndarrays, self.locations, self.assert_formats)

    def access_summary(self):
        """Its field accesses, for the global data access rules (computed once)."""
        if self.summary is None:
            self.summary = rules.KernelSummary(self.body, self.layout)
        return self.summary

    def adjoint_compiled(self):
        """The adjoint kernel (same arguments), compiled on first use and again when a
        .grad has been placed since (the old one would drop its contributions)."""
        epoch = self.program.grad_epoch
        if self.adjoint is None or self.adjoint_epoch != epoch:
            body = reverse.adjoint(self.body)
            self.adjoint = build_native(self.kernel, body, self.layout, self.program, '_grad')
            self.adjoint_epoch = epoch
        return self.adjoint

    def checked_build(self, targets):
        """This kernel with shadow words for `targets`, the fields and ndarray arguments it
        may access against the rules (engine/rules.py)."""
        key = tuple(targets)
        if self.checked is None or self.checked[0] != key:
            build = build_native(self.kernel, self.body, self.layout, self.program, '_checked', shadow=key)
            build.check_errors = True
            self.checked = (key, build)
        return self.checked[1]

    def shadowed(self, args):
        """What a checked launch with these arguments keeps shadow words for: the fields and
        ndarrays not proven safe, and every ndarray argument that is passed twice (two
        parameters naming one array are one array to the rules)."""
        targets = list(self.access_summary().unproven)
        seen = {}
        for k, param in self.layout.ndarray_params.items():
            array = _as_array(args[k])
            for other_k, other in seen.items():
                if other is array or other.ctypes.data == array.ctypes.data:
                    targets += [p for p in (self.layout.ndarray_params[other_k], param) if p not in targets]
                elif np.shares_memory(other, array):
                    raise rules.AutodiffRuleError(
                        f'kernel {self.kernel.name}: ndarray arguments {self.layout.specs[other_k].name} and '
                        f'{self.layout.specs[k].name} overlap in memory without being the same array; '
                        f'the rules cannot be checked for them (pass separate arrays or the same one)')
            seen[k] = array
        return targets

    def launch_checked(self, args, targets):
        """A launch that reports the first rule broken inside it (an AutodiffRuleError);
        arguments naming one array share its shadow words."""
        tables, shadows = [], {}
        for target in targets:
            array = target._data if isinstance(target, Field) else _as_array(args[target.index])
            if id(array) not in shadows:
                shadows[id(array)] = (np.zeros(array.size, dtype=np.int32), np.zeros(array.size, dtype=np.int64))
            tables += shadows[id(array)]
        table = np.array([t.ctypes.data for t in tables], dtype=np.uint64)
        words = self.program.runtime_buffer
        words[runtime.RT_SHADOW] = table.ctypes.data
        try:
            return self.checked_build(targets).launch(args)
        finally:
            words[runtime.RT_SHADOW] = 0

    def constant_adjoint_compiled(self):
        """The backward pass of a no_grad launch: its stores end the gradient of what they
        overwrote (their values are constants to the tape), nothing flows into its inputs."""
        epoch = self.program.grad_epoch
        if self.constant_adjoint is None or self.constant_adjoint[0] != epoch:
            body = reverse.adjoint(self.body, constant=True)
            self.constant_adjoint = (epoch, build_native(self.kernel, body, self.layout, self.program,
                                                         '_nograd'))
        return self.constant_adjoint[1]

    def with_tangents(self):
        """This kernel in forward mode (primal and tangents), compiled on first use and again
        when a .dual has been allocated since (its tangents must not be dropped)."""
        epoch = self.program.dual_epoch
        if self.tangents is None or self.tangents[0] != epoch:
            body = forward.tangent_kernel(self.body)
            self.tangents = (epoch, build_native(self.kernel, body, self.layout, self.program, '_fwd'))
        return self.tangents[1]

    def launch(self, args):
        if len(args) != self.nargs:
            raise _call_error(self.kernel, f'kernel {self.kernel.name}() takes {self.nargs} '
                                           f'argument(s), {len(args)} given')
        try:
            self.pack(self.buffer, 0, *(args if self.pick is None else self.pick(args)))
        except (struct.error, TypeError, OverflowError) as exc:
            self.kernel._check_args(args)
            raise _call_error(self.kernel, f'kernel {self.kernel.name}(): {exc}') from None
        if self.layout.ndarrays:
            self._pack_ndarrays(args)
        prog = self.program
        self.cfunc(prog.field_table_address, self.buffer_address, prog.runtime_address)
        if self.check_errors:
            self.report_errors({k: (self.layout.specs[k].name, _as_array(args[k]).shape[:ndim])
                                for k, _, ndim, _ in self.layout.ndarrays})
        if self.unpack_return is not None:
            values = self.unpack_return(self.buffer, self.layout.ret_offset)
            return values[0] if self.build_return is None else self.build_return(values)

    def _pack_ndarrays(self, args):
        for k, offset, ndim, grad_offset in self.layout.ndarrays:
            array = _as_array(args[k])
            if not array.flags.c_contiguous:
                raise _call_error(self.kernel, f'ndarray argument {self.layout.specs[k].name!r} must be '
                                               f'C-contiguous (use np.ascontiguousarray)')
            struct.pack_into('=Q' + 'q' * ndim, self.buffer, offset, array.ctypes.data, *array.shape[:ndim])
            if grad_offset is not None:
                struct.pack_into('=Q', self.buffer, grad_offset, args[k].grad.data.ctypes.data)


def _key_of(spec, value):
    if spec.kind == 'ndarray':
        array = _as_array(value)
        if not isinstance(array, np.ndarray):
            return ('bad', type(value))
        return (array.dtype.str, array.ndim, _element_shape(spec, value), getattr(value, 'grad', None) is not None)
    if isinstance(value, Field):
        return value
    if getattr(type(value), '_ti_data_oriented', False):
        return _Instance(value)
    try:
        hash(value)
        return (type(value), value)
    except TypeError:
        return id(value)


def _call_error(kernel, message):
    """A TaichiTypeError pointing at the user's call of the kernel."""
    frame = sys._getframe(1)
    here = __file__
    while frame is not None and frame.f_code.co_filename == here:
        frame = frame.f_back
    loc = None
    if frame is not None:
        loc = SourceLocation(frame.f_code.co_filename, frame.f_lineno, 0, None, frame.f_code.co_name)
    return TaichiTypeError(message + f' (kernel defined at {kernel.location()})', loc)


def kernel(fn):
    return Kernel(fn)
