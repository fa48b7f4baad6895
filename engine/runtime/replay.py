"""Native replay: run a recorded list of launches in one native loop.

A launch is (entry address of a compiled kernel, its packed argument buffer).
Recording copies the argument buffer a launch was packed into; replaying calls
every entry from native code, so no Python runs between kernels. The tape
replays its adjoints this way; `ti.capture` replays a whole forward pass.

The loop stops at the first launch that reports an error (debug-mode checks,
autodiff stack out of memory) and Python turns it into the kernel's exception.
Before each call the loop stores the launch's index in the runtime, so that the prints
of a replayed list are told apart by launch (engine/language/printing.py); they are printed after
the loop, before any error is raised.
"""
import ctypes
import functools
import struct

import numpy as np

from ..backend.cpu import jit
from . import pipeline
from ..language import printing
from ..core import program
from ..core.context import ctx
from ..core.program import current as current_program
from ..core.errors import USER_ERRORS, TaichiRuntimeError, user_frames_only
from ..language.abi import ExternalArray, Instance   # keyed by identity, kept alive
from ..language.matrix import Matrix

_REPLAY_IR = r'''
define i64 @engine_replay(i64* %fns, i64* %bufs, i64 %n, i8** %fields, i64* %rt) {
entry:
  %empty = icmp eq i64 %n, 0
  %launch = getelementptr i64, i64* %rt, i64 RT_PRINT_LAUNCH
  br i1 %empty, label %done, label %loop
loop:
  %k = phi i64 [0, %entry], [%next, %ok]
  store i64 %k, i64* %launch
  %fslot = getelementptr i64, i64* %fns, i64 %k
  %faddr = load i64, i64* %fslot
  %f = inttoptr i64 %faddr to void (i8**, i8*, i8*)*
  %bslot = getelementptr i64, i64* %bufs, i64 %k
  %baddr = load i64, i64* %bslot
  %buf = inttoptr i64 %baddr to i8*
  %rtp = bitcast i64* %rt to i8*
  call void %f(i8** %fields, i8* %buf, i8* %rtp)
  %flag = load volatile i64, i64* %rt
  %next = add i64 %k, 1
  %failed = icmp ne i64 %flag, 0
  br i1 %failed, label %stop, label %ok
ok:
  %more = icmp ult i64 %next, %n
  br i1 %more, label %loop, label %done
stop:
  ret i64 %next
done:
  ret i64 0
}
'''.replace('RT_PRINT_LAUNCH', str(program.RT_PRINT_LAUNCH))

# A put-back as a step of a replayed list: its argument buffer is (to, bytes, the values).
_RESTORE_IR = r'''
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
define void @engine_restore(ptr %fields, ptr %buf, ptr %rt) {
entry:
  %to = load ptr, ptr %buf
  %n.slot = getelementptr i64, ptr %buf, i64 1
  %n = load i64, ptr %n.slot
  %from = getelementptr i64, ptr %buf, i64 2
  call void @llvm.memcpy.p0.p0.i64(ptr %to, ptr %from, i64 %n, i1 false)
  ret void
}
'''

_RESTORE_HEADER = struct.Struct('<2Q')
_PADDING = [b'\0' * (-n % 8) for n in range(8)]
_native = {}


def _native_loop():
    if 'replay' not in _native:
        address = jit.load_object(jit.compile_ir(_REPLAY_IR), ['engine_replay'])['engine_replay']
        _native['replay'] = jit.cfunc(address, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                      ctypes.c_void_p, ctypes.c_void_p)
    return _native['replay']


def _restore_address():
    if 'restore' not in _native:
        _native['restore'] = jit.load_object(jit.compile_ir(_RESTORE_IR), ['engine_restore'])['engine_restore']
    return _native['restore']


# The `kernel` of a put-back in a LaunchList: saved values copied back over the elements
# they came from when a backward pass reaches that point, natively, between the adjoints.
RESTORE = 'restore'
_RESTORE_CALL = (RESTORE, ())      # its (kernel, args) in LaunchList.calls


class LaunchList:
    """Launches recorded for native replay: the compiled kernels and copies of their arguments."""

    def __init__(self):
        self.kernels = []          # CompiledKernel of each launch (primal; gives the adjoint too)
        self.calls = []            # (Kernel, args) of each launch, for the Python paths
        self.offsets = []          # where its argument bytes start in self.arguments
        self.arguments = bytearray()
        self.restored_bytes = 0    # of self.arguments: the values put-backs hold
        self.restores = {}         # launch index of a put-back -> its tape_rules.Save
        self._frozen = None
        self._adjoints = None

    def add(self, compiled, packed, kernel, args):
        """Record a launch of `compiled` whose arguments were packed into buffer `packed`."""
        self.kernels.append(compiled)
        self.calls.append((kernel, args))
        self.offsets.append(len(self.arguments))
        self.arguments += packed.raw

    def add_restore(self, address, save):
        """A put-back of the bytes at `address` as they are now: the elements of a
        tape_rules.Save. Its argument bytes are (address, bytes, the values)."""
        self.restores[len(self.kernels)] = save     # (existing objects: no work for the garbage collector)
        self.kernels.append(RESTORE)
        self.calls.append(_RESTORE_CALL)
        self.offsets.append(len(self.arguments))
        self.arguments += _RESTORE_HEADER.pack(address, save.nbytes)
        self.arguments += ctypes.string_at(address, save.nbytes)
        self.arguments += save.padding
        self.restored_bytes += save.nbytes

    def restored_by_name(self):
        """{name of a field: bytes its put-backs hold}."""
        by_name = {}
        for save in self.restores.values():
            by_name[save.obj.name] = by_name.get(save.obj.name, 0) + save.nbytes
        return by_name

    def put_back(self, k):
        """Launch k, a put-back, on the Python paths (forward mode, native replay off)."""
        view = self.restores[k].obj._data[self.restores[k].view]
        view[...] = np.frombuffer(self.arguments, view.dtype, view.size, self.offsets[k] + 16).reshape(view.shape)

    def adjoint_addresses(self):
        """Each launch's adjoint entry point, computed once per kernel and again only after a
        gradient has been placed (adjoints are then rebuilt)."""
        epoch = current_program().grad_epoch
        if self._adjoints is None or self._adjoints[0] != epoch:
            by_kernel = {}
            for compiled in self.kernels:
                if compiled not in by_kernel:
                    by_kernel[compiled] = _restore_address() if compiled is RESTORE \
                        else pipeline.adjoint_of(compiled).address
            self._adjoints = (epoch, np.array([by_kernel[c] for c in self.kernels], dtype=np.uint64))
        return self._adjoints[1]

    def buffer_addresses(self):
        """Each launch's argument address in one array of the bytes (kept alive by self)."""
        if self._frozen is None or len(self._frozen[0]) != len(self.arguments):
            data = np.frombuffer(bytes(self.arguments), dtype=np.uint8)
            self._frozen = (data, np.array(self.offsets, dtype=np.uint64) + np.uint64(data.ctypes.data))
        return self._frozen[1]


def run(functions, buffers, kernel_of, prog=None):
    """Call functions[k](fields, buffers[k], runtime) for k = 0, 1, ... in one native loop.
    `kernel_of(k)` is the CompiledKernel of launch k, which reports an error it records."""
    if len(functions) == 0:
        return
    prog = prog or current_program()
    if prog.config.kernel_profiler:         # each launch through its timed entry point
        return _run_profiled(len(functions), buffers, kernel_of, prog)
    functions = np.ascontiguousarray(functions, dtype=np.uint64)
    buffers = np.ascontiguousarray(buffers, dtype=np.uint64)
    failed = _native_loop()(functions.ctypes.data, buffers.ctypes.data, len(functions),
                            prog.field_table_address, prog.runtime_address)
    printing.drain(prog, kernel_of)
    if failed:
        kernel_of(failed - 1).report_errors()


def _run_profiled(n, buffers, kernel_of, prog):
    """`run` one launch at a time from Python, so that the profiler times each."""
    words = prog.runtime_buffer
    for k in range(n):
        kernel = kernel_of(k)
        kernel.cfunc(prog.field_table_address, int(buffers[k]), prog.runtime_address)
        if words[program.RT_ERROR_FLAG] != 0:
            kernel.report_errors()


# --- capture: a forward pass recorded once, replayed natively --------------------------
class CaptureError(TaichiRuntimeError):
    """A function cannot be captured: what its kernels do could depend on Python-side values."""


def _refused(recording, field):
    return CaptureError(
        f'{recording.name}: field {field.name} is read or written from Python while ti.capture '
        f'records it; replays run only the kernels, so the Python code between them must not '
        f'touch field values (do it in a kernel, or outside the captured function)')


class Recording:
    """One captured call: its launches (for native replay) and (kernel, args) of each."""

    def __init__(self, name):
        self.name = name
        self.launches = LaunchList()
        self.calls = self.launches.calls
        self.replayable = True     # False when the tape had to add Python steps to it
        self._functions = None
        self.checked = False       # its launches were checked on a tape, one by one
        self.footprint = None      # what it reads and modifies (engine/autodiff/rules.py, TapeChecker.replay)
        self._ndarrays_with_grad = None
        self._tensors = None

    def storage_moved(self):
        """Whether a tensor its launches were packed with now has other memory (`p.data = ...`,
        `p.set_(...)`, a new or dropped `.grad`, as `zero_grad(set_to_none=True)` leaves it):
        the packed pointers would replay into the old memory."""
        if self._tensors is None:
            seen = {}
            for _, args in self.calls:
                for value in args:
                    if isinstance(value, ExternalArray) and hasattr(value.tensor, 'data_ptr'):
                        state = _tensor_state(value)
                        seen[(id(value.tensor), state)] = (value.tensor, state)
            self._tensors = list(seen.values())
        for tensor, state in self._tensors:
            if _current_state(tensor, state) != state:
                return True
        return False

    def refuse_python_access(self, field):
        """Called by every Python-scope access of a field's values while this records."""
        raise _refused(self, field)

    def add(self, kernel, args, compiled, launched):
        self._ndarrays_with_grad = None
        if compiled.unpack_return is not None:
            raise CaptureError(f'{self.name}: kernel {kernel.name} returns a value to Python; a '
                               f'captured function cannot use it (replays do not run Python)')
        self.launches.add(compiled, launched.buffer, kernel, args)

    def ndarrays_with_grad(self):
        """The ndarray arguments with a gradient that its launches use (found once: a
        recording's launches and their arguments do not change)."""
        if self._ndarrays_with_grad is None:
            found = {}
            for (kernel, args), compiled in zip(self.calls, self.launches.kernels):
                for k, _, _, companions in compiled.layout.ndarrays:
                    if any(path == ('grad',) for _, path in companions):
                        found[id(args[k])] = args[k]
            self._ndarrays_with_grad = list(found.values())
        return self._ndarrays_with_grad

    def replay(self):
        if self._functions is None:
            self._functions = np.array([c.address for c in self.launches.kernels], dtype=np.uint64)
        run(self._functions, self.launches.buffer_addresses(), lambda k: self.launches.kernels[k])

    def adjoints(self):
        """(functions, buffers) of the adjoint launches, in reverse order."""
        return self.launches.adjoint_addresses()[::-1], self.launches.buffer_addresses()[::-1]


class Capture:
    """`ti.capture(fn)`: the first call `fn(*args)` runs `fn` and records its kernel launches;
    later calls with equal arguments replay them natively without running `fn`'s Python.

    Only for functions whose launches do not depend on field values: while captured, `fn`
    may not read or write fields from Python (`x[i]`, `.data`, to_numpy, from_numpy, fill),
    use a kernel's return value, or call grad_replaced functions (each is a CaptureError);
    it returns None. Under a `ti.ad.Tape` a replay is recorded like the launches it stands
    for. After a new `ti.init` the function is captured again; in forward mode it just runs."""

    def __init__(self, fn):
        self.fn = fn
        self.name = getattr(fn, '__name__', 'captured function')
        self.__name__, self.__doc__ = self.name, getattr(fn, '__doc__', None)
        self.recordings = {}

    def __get__(self, obj, owner=None):
        """A captured method (of a @ti.data_oriented class, or any class), taken from an
        instance: bound to it; each instance has recordings of its own."""
        return self if obj is None else functools.partial(self._bound_call, obj)

    def _bound_call(self, obj, *args, **kwargs):
        try:
            return self._call((obj,) + args, kwargs, bound=True)
        except USER_ERRORS as exc:
            user_frames_only(exc)
            raise

    def __call__(self, *args, **kwargs):
        try:
            return self._call(args, kwargs)
        except USER_ERRORS as exc:     # the traceback ends at the caller's frames (and fn's)
            user_frames_only(exc)
            raise

    def _key(self, args, kwargs, bound):
        parts = [Instance(args[0])] if bound else []
        for k, value in enumerate(args[1:] if bound else args):
            parts.append(_key(value, f'{self.name}: argument {k}'))
        for name in sorted(kwargs):
            parts.append((name, _key(kwargs[name], f'{self.name}: argument {name}=')))
        return current_program().generation, tuple(parts)

    def _call(self, args, kwargs=None, bound=False):
        kwargs = kwargs or {}
        if ctx.forward is not None:
            return self.fn(*args, **kwargs)
        key = self._key(args, kwargs, bound)
        recording = self.recordings.get(key)
        if recording is None or recording.storage_moved():       # (again: a tensor has new memory)
            self.recordings[key] = self._capture(args, kwargs)
            return None
        if not recording.replayable:
            return self.fn(*args, **kwargs)
        if ctx.tape is not None and not ctx.tape.record_replay(recording):
            return self.fn(*args, **kwargs)   # the tape checks and records its launches one by one
        if ctx.watch is not None:       # wrapped functions' calls (engine/runtime/pending.py)
            ctx.watch.before_replay(recording)
        recording.replay()
        return None

    def _capture(self, args, kwargs):
        if ctx.capture is not None:
            raise CaptureError(f'ti.capture: {self.name} is called while {ctx.capture.name} is captured')
        recording = ctx.capture = Recording(self.name)
        try:
            result = self.fn(*args, **kwargs)
        finally:
            ctx.capture = None
        # under a checking tape its launches were just checked one by one
        recording.checked = ctx.tape is not None and ctx.tape.checker is not None
        if result is not None:
            raise CaptureError(f'{self.name}: a captured function must return None '
                               f'(replays do not run its Python code)')
        return recording


def capture(fn):
    return Capture(fn)


def _tensor_state(external):
    """(data pointer, shape, strides, .grad's pointer or None, whether it had a .grad) of a
    tensor as a launch packed it (ExternalArray: .data views its memory)."""
    grad = external.grad.data.ctypes.data if external.grad is not None else None
    return (external.data.ctypes.data, external.data.shape, external.data.strides, grad)


def _current_state(tensor, recorded):
    if recorded[3] is not None:
        grad = tensor.grad
        grad = None if grad is None else grad.data_ptr()
    elif getattr(tensor, 'requires_grad', False) and tensor.is_leaf:
        grad = 0                    # it gained a gradient: its launches need the .grad pointers
    else:
        grad = None
    itemsize = tensor.element_size()
    return (tensor.data_ptr(), tuple(tensor.shape), tuple(s * itemsize for s in tensor.stride()), grad)


_EXACT = (int, bool, str, bytes, type(None))


def _key(value, where):
    """What a call is recognised by: numbers by their type and bits (0.0 and -0.0 differ,
    a NaN equals itself), tuples, lists and dicts by their items, vectors by their entries,
    arrays and tensors by identity (the kernels read their current values when replayed),
    any other hashable object as a dict key compares it."""
    kind = type(value)
    if kind is float:
        return float, struct.pack('<d', value)
    if kind in _EXACT:
        return kind, value
    if isinstance(value, (np.generic, complex)):
        return kind, np.asarray(value).tobytes()
    if isinstance(value, (tuple, list)):
        return kind, tuple(_key(v, where) for v in value)
    if isinstance(value, dict):
        return kind, tuple((_key(k, where), _key(v, where)) for k, v in value.items())
    if isinstance(value, Matrix):
        return Matrix, value.shape, tuple(_key(v, where) for v in value.entries)
    if isinstance(value, np.ndarray) or hasattr(value, '__dlpack__') or hasattr(value, '_ti_data_oriented'):
        return Instance(value)
    try:
        hash(value)
    except TypeError:
        raise CaptureError(
            f'{where} is a {kind.__name__}, which ti.capture cannot tell apart between calls (it is not '
            f'hashable); pass numbers, strings, tuples, lists or dicts of them, vectors, arrays, tensors, '
            f'fields or hashable objects') from None
    return kind, value
