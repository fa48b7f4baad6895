"""Kernels as functions of arrays, with their gradients, for other frameworks' autodiff.

`Function(fn, inputs, outputs)` wraps `fn()`, Python that launches kernels reading the
fields and ndarrays `inputs` and writing `outputs` (a port is a field, an ndarray, or
`(field, index)`: part of one). `KernelFunction(kernel, outputs)` wraps one kernel whose
ndarray arguments are the arrays. Both offer, on numpy arrays (engine/torch.py and
engine/jax.py adapt them):

- `forward(values)` -> (outputs, Call): loads the inputs, zeroes the outputs (as a tape
  zeroes its loss), runs fn on a tape and copies the outputs out;
- `backward(call, cotangents, values)` -> the gradient of each input: seeds the outputs'
  gradients with the cotangents and runs the call's tape backwards. It may run after other
  calls overwrote the fields: engine/runtime/pending.py keeps what it needs. A call's
  second backward pass (or one after ti.init) runs the forward pass again first, and
  refuses if it does not give the same outputs;
- `second_order(values, cotangents, tangents)` -> (d/d inputs <gradients, tangents>,
  J . tangents): the derivative of the backward pass, forward over reverse (the forward
  pass runs again computing tangents, then the tape's adjoints run in forward mode).
"""
import contextlib
import functools
import hashlib
import threading

import numpy as np

from ..core import dtypes as T
from ..core.context import ctx
from ..core.errors import AutodiffError
from ..core.program import current as current_program
from ..language.abi import element_shape_of
from ..language.fields import Field, Ndarray
from . import pending
from .kernels import Kernel
from .tape import Tape


# The engine's modes (ctx) are global: calls from several threads (JAX runs callbacks on
# its own threads, possibly side by side) take turns.
_TURN = threading.RLock()


def _one_at_a_time(method):
    @functools.wraps(method)
    def serialized(*args, **kwargs):
        with _TURN:
            return method(*args, **kwargs)
    return serialized


# the most bytes of read-only state a call hashes (to check a run again of it); beyond,
# such a run is refused
FINGERPRINT_LIMIT = 64 * 2 ** 20
TOO_LARGE = 'too large to hash'


class Port:
    """An input or output: a field or ndarray, or `index` of one (numpy's indexing)."""

    def __init__(self, spec, role):
        obj, index = spec if isinstance(spec, tuple) else (spec, Ellipsis)
        if not isinstance(obj, (Field, Ndarray)):
            raise TypeError(f'an {role} must be a field, a ti.ndarray or (field, index), got {type(obj).__name__}')
        if isinstance(obj, Field):
            obj.ensure_placed()
        self.obj, self.index = obj, index
        self.name = obj.name if index is Ellipsis else f'{obj.name}[{index}]'
        self.differentiable = obj.dtype.is_float
        if self.differentiable and (obj.grad is None or isinstance(obj, Field) and not obj.grad.placed):
            raise ValueError(f'the {role} {self.name} needs a gradient: declare it with needs_grad=True')

    def values(self):
        return np.asarray(self.obj.data[self.index])

    def counts(self):
        """How many times the port names each element of its field or ndarray."""
        counts = np.zeros(self.obj.data.shape, np.uint8)
        np.add.at(counts, self.index, 1)
        return counts

    def elements(self):
        """Which elements of the field or ndarray the port names (a boolean mask)."""
        named = self.counts() > 0
        return named.reshape(tuple(self.obj.shape) + (-1,)).any(axis=-1)

    @property
    def shape(self):
        return self.values().shape

    @property
    def dtype(self):
        return np.dtype(self.obj.dtype.np)

    def load(self, array):
        array = np.asarray(array)
        if array.shape != self.shape:
            raise ValueError(f'{self.name} has shape {self.shape}, the value given has shape {array.shape}')
        if array.dtype.kind == 'f' and self.dtype.kind != 'f' or array.dtype.kind not in 'fiub':
            raise TypeError(f'{self.name} holds {self.dtype} values; the value given is {array.dtype}')
        self.obj._write(self.index, array.astype(self.dtype, copy=False))

    def grad(self):
        return np.asarray(self.obj.grad.data[self.index])

    def set_grad(self, values):
        self.obj.grad.data[self.index] = values

    def _dual_owner(self, of_grad):
        owner = self.obj.grad if of_grad else self.obj
        if getattr(owner, 'dual', None) is None:
            raise AutodiffError(f'{self.name}: a second-order gradient needs its tangent; create the ndarray '
                                f'with needs_dual=True')
        return owner.dual

    def dual(self, of_grad=False):
        return np.asarray(self._dual_owner(of_grad).data[self.index])

    def set_dual(self, values, of_grad=False):
        self._dual_owner(of_grad).data[self.index] = values

    def same(self, other):
        return self.obj is other.obj and repr(self.index) == repr(other.index)


class Call:
    """One forward run of a function: its tape, the elements it touched, what it saved of
    them before later writes (pending.Watch calls keep), its outputs and inputs."""

    def __init__(self, function, values):
        self.function, self.name, self.values = function, function.name, values
        self.footprint = pending.Footprint()
        self.saved, self.kept = [], set()
        self.tape, self.outputs, self.consumed = None, None, False
        self.output_tangents = None         # forward mode in the same run (Function.forward)
        self.fingerprint = None
        self.generation = current_program().generation

    def keep(self, target, key):
        """Before a write over `key` of `target`, one of the keys this call touched: a copy."""
        if (id(target.data), key) not in self.kept:
            self.kept.add((id(target.data), key))
            index = pending.key_index(key)
            self.saved.append((target, index, target.data[index].copy()))

    @contextlib.contextmanager
    def own_state(self):
        """The elements overwritten since this call ran, back in place for its backward pass;
        the newer values are put back afterwards."""
        newer = [(target, index, target.data[index].copy()) for target, index, _ in self.saved]
        for target, index, values in reversed(self.saved):     # the oldest copy wins
            target.data[index] = values
        try:
            yield
        finally:
            for target, index, values in newer:
                target.data[index] = values

    def live(self):
        return not self.consumed and self.generation == current_program().generation

    def release(self):
        """No longer pending: what runs from now on (its own backward pass, which may run
        kernels that write its fields: checkpointing) is not kept for it."""
        if ctx.watch is not None:
            ctx.watch.forget(id(self))

    def consume(self):
        """Its one backward pass done: the tape and the copies go; its outputs and the
        fingerprint of the state it read stay, to check a run again."""
        self.consumed = True
        self.saved, self.tape, self.footprint = [], None, None
        self.release()

    def take_fingerprint(self):
        """A hash of the elements it read and never wrote (as they were at its forward
        pass: call it with them in place), TOO_LARGE when they are too large to hash on
        every backward pass."""
        if self.fingerprint is not None or self.footprint is None:
            return
        elements = pending.read_only(self.footprint)
        if sum(target.data[pending.key_index(key)].nbytes for target, key in elements) > FINGERPRINT_LIMIT:
            self.fingerprint = TOO_LARGE
            return
        digest = hashlib.blake2b(digest_size=16)
        for target, key in elements:
            digest.update(f'{target.name}{key}'.encode())
            digest.update(np.ascontiguousarray(target.data[pending.key_index(key)]).tobytes())
        self.fingerprint = digest.hexdigest()


class Function:
    """fn() (kernels reading `inputs`, writing `outputs`) as a function of arrays."""

    def __init__(self, fn, inputs, outputs, name=None):
        self.fn = fn
        self.name = name or getattr(fn, '__name__', 'function')
        self.inputs = [Port(p, 'input') for p in inputs]
        self.outputs = [Port(p, 'output') for p in outputs]
        if not self.outputs:
            raise ValueError(f'{self.name}: a wrapped function needs at least one output')
        _check_overlaps(self.name, self.inputs, 'inputs')
        _check_overlaps(self.name, self.outputs, 'outputs')
        _check_overlaps(self.name, self.inputs + self.outputs, 'an input and an output', identical_ok=True)

    @_one_at_a_time
    def forward(self, values, differentiable=True, tangents=None):
        """(copies of the outputs, the Call whose backward pass is pending; None when not
        `differentiable`: then no tape records). With the inputs' `tangents`, the same run
        computes the outputs' tangents too (call.output_tangents): a second run for them
        would start from the state this one left (a function that updates a field)."""
        if len(values) != len(self.inputs):
            raise TypeError(f'{self.name} takes {len(self.inputs)} input(s), {len(values)} given')
        call = Call(self, list(values))
        watch = pending.watch()
        if watch.recording is not None or ctx.tape is not None:
            raise RuntimeError(f'{self.name} is called while a ti.ad.Tape records (inside another wrapped '
                               f'function?); compose wrapped functions outside them instead')
        with contextlib.nullcontext() if tangents is None else _tangent_mode(self.inputs, tangents):
            watch.recording = call
            try:
                self._run(call, values, differentiable)
            finally:
                watch.recording = None
            if tangents is not None:
                call.output_tangents = [p.dual().copy() if p.differentiable else None for p in self.outputs]
        call.outputs = [p.values().copy() for p in self.outputs]
        if not differentiable:
            if not watch.calls:
                ctx.watch = None        # nothing to watch for: launches go unobserved again
            return call.outputs, None
        watch.add_pending(call)
        return call.outputs, call

    def _run(self, call, values, differentiable):
        for port, value in zip(self.inputs, values):
            port.load(value)
        if isinstance(ctx.forward, _TangentMode):
            ctx.forward.seed()      # a load in forward mode zeroed the tangent of what it wrote
        for port in self.outputs:
            if not any(port.same(i) for i in self.inputs):
                port.obj._write(port.index, 0)
        if not differentiable:
            self.fn()
            return
        call.tape = Tape(loss=None, clear_gradients=False)
        with call.tape.recording():
            for port in self.inputs:
                if port.differentiable:
                    call.tape.inputs_loaded(port.obj, port.elements())
            self.fn()

    @_one_at_a_time
    def backward(self, call, cotangents, values=None):
        """The gradient of each input (None for an integer one) given the outputs' cotangents."""
        if call.function is self and call.generation != current_program().generation:
            raise RuntimeError(f'{self.name}: ti.init ran after this call\'s forward pass, and its fields went '
                               f'with the old program; call it again')
        if not call.live() or call.function is not self:
            call = self._again(call, call.values if values is None else values)
        with call.own_state():
            call.release()
            call.take_fingerprint()
            self._zero_gradients(call)
            for port, cotangent in zip(self.outputs, cotangents):
                if port.differentiable and cotangent is not None:
                    port.set_grad(np.asarray(cotangent).astype(port.dtype, copy=False))
            call.tape.grad()
            grads = [p.grad().copy() if p.differentiable else None for p in self.inputs]
        call.consume()
        return grads

    def _zero_gradients(self, call, tangents=False):
        """The gradients this backward pass accumulates into or reads (and their tangents,
        for forward over reverse): of every element the call touched, and of the ports."""
        for target, reads, writes in call.footprint.targets.values():
            for array in (target.grad, target.grad_dual if tangents else None):
                if array is not None:
                    for key in reads.keys() + writes.keys():
                        array[pending.key_index(key)] = 0
        for port in self.inputs + self.outputs:
            if port.differentiable:
                port.set_grad(0)
                if tangents:
                    port.set_dual(0, of_grad=True)

    def _again(self, call, values):
        """A new forward run for a call whose tape is spent, checked against it: the same
        outputs, and the same state read besides the inputs."""
        with call.own_state():      # a call that never ran backwards: as it ran
            call.take_fingerprint()
        outputs, again = self.forward(values)
        again.take_fingerprint()
        for port, before, now in zip(self.outputs, call.outputs, outputs):
            tolerance = 1e-5 if port.dtype.itemsize < 8 else 1e-10
            if before.shape != now.shape or not np.allclose(before, now, rtol=tolerance, atol=tolerance):
                self._refuse_again(again, f'output {port.name} changed')
        if call.fingerprint == TOO_LARGE:
            self._refuse_again(again, f'the state it reads besides its inputs is over {FINGERPRINT_LIMIT >> 20} '
                                      f'MiB, too large to check')
        if call.fingerprint is None or call.fingerprint != again.fingerprint:
            self._refuse_again(again, 'the state it reads besides its inputs changed')
        return again

    def _refuse_again(self, again, why):
        again.consume()
        raise AutodiffError(f'{self.name}: its backward pass ran the function again (a second backward pass through '
                            f'its graph, or one after ti.init) and {why}: the gradient would not be the one of the '
                            f'first run. Call the function again instead of reusing its graph')

    @_one_at_a_time
    def jvp(self, values, tangents):
        """(the outputs, their tangents) for tangents of the inputs: forward mode, no tape."""
        with _tangent_mode(self.inputs, tangents):
            outputs, _ = self.forward(values, differentiable=False)
            return outputs, [p.dual().copy() if p.differentiable else None for p in self.outputs]

    @_one_at_a_time
    def second_order(self, values, cotangents, tangents):
        """(tangent of each input's gradient, tangent of each output) for input tangents."""
        with _tangent_mode(self.inputs, tangents):
            _, call = self.forward(values)
            with call.own_state():
                call.release()
                self._zero_gradients(call, tangents=True)
                for port, cotangent in zip(self.outputs, cotangents):
                    if port.differentiable and cotangent is not None:
                        port.set_grad(np.asarray(cotangent).astype(port.dtype, copy=False))
                call.tape.grad()
                grad_tangents = [p.dual(of_grad=True).copy() if p.differentiable else None for p in self.inputs]
                output_tangents = [p.dual().copy() if p.differentiable else None for p in self.outputs]
            call.consume()
        return grad_tangents, output_tangents


def _check_overlaps(name, ports, what, identical_ok=False):
    """Ports that name one element twice would load it twice (inputs: which value wins?) or
    seed its gradient twice (outputs): refused. An input that is also an output (the same
    port) is allowed: the function updates it in place."""
    by_object = {}
    for port in ports:
        by_object.setdefault(id(port.obj), []).append(port)
    for group in by_object.values():
        if identical_ok:
            group = [p for k, p in enumerate(group) if not any(p.same(q) for q in group[:k])]
        if len(group) < 2 and (identical_ok or group[0].index is Ellipsis or
                               not isinstance(group[0].index, (list, np.ndarray, tuple))):
            continue
        if sum(p.counts() for p in group).max() > 1:
            names = ', '.join(p.name for p in group)
            raise ValueError(f'{name}: {what} {names} name the same elements: each element may be one input '
                             f'and one output at most')


@contextlib.contextmanager
def _tangent_mode(inputs, tangents):
    """Forward mode with the inputs' tangents set (every field's others zero)."""
    if ctx.forward is not None:
        raise RuntimeError('a second-order gradient cannot be computed inside ti.ad.FwdMode')
    prog = current_program()
    prog.allocate_duals()
    prog.clear_duals()
    mode = _TangentMode(inputs, tangents)
    mode.seed()
    ctx.forward = mode
    try:
        yield
    finally:
        ctx.forward = None


class _TangentMode:
    """ctx.forward for a jvp or a second-order gradient: the inputs' tangents. A write from
    Python in forward mode zeroes the tangent of what it writes (a constant), loading the
    inputs too, so they are set again after the loads."""

    def __init__(self, inputs, tangents):
        self.inputs, self.tangents = inputs, tangents

    def seed(self):
        for port, tangent in zip(self.inputs, self.tangents):
            if port.differentiable:
                port.set_dual(0 if tangent is None else np.asarray(tangent).astype(port.dtype, copy=False))


class KernelFunction:
    """A kernel as a function: its ndarray parameters named in `outputs` are results,
    allocated per call (`outputs`: name -> shape, or the name of an input parameter whose
    shape and dtype it takes, or a function of the call's values giving the shape;
    `dtypes`: name -> dtype for results whose annotation has none). The other parameters
    are the call's values: arrays for ndarray parameters (copied: the kernel cannot change
    the caller's), anything else as the kernel takes it."""

    def __init__(self, kernel, outputs, dtypes=None, name=None):
        if not isinstance(kernel, Kernel):
            raise TypeError(f'expected a @ti.kernel, got {getattr(kernel, "__name__", type(kernel).__name__)} '
                            f'(wrap a Python function of kernels with function(fn, inputs, outputs))')
        self.kernel, self.name = kernel, name or kernel.name
        self.specs = kernel.specs
        self.output_shapes, self.dtypes = dict(outputs), dict(dtypes or {})
        self.parameters = [s for s in self.specs if s.name not in self.output_shapes]
        self._check_outputs()

    def _check_outputs(self):
        names = [s.name for s in self.specs]
        if not self.output_shapes:
            raise ValueError(f'{self.name}: name at least one ndarray parameter as an output')
        for name in list(self.output_shapes) + list(self.dtypes):
            if name not in names:
                raise ValueError(f'{self.name}: {name!r} is not a parameter of the kernel ({", ".join(names)})')
            if name not in self.output_shapes:
                raise ValueError(f'{self.name}: dtypes names {name!r}, which is not one of the outputs')
            if self.specs[names.index(name)].kind != 'ndarray':
                raise ValueError(f'{self.name}: output {name!r} must be an ndarray parameter')
            like = self.output_shapes[name]
            if isinstance(like, str) and like not in [s.name for s in self.parameters if s.kind == 'ndarray']:
                raise ValueError(f'{self.name}: output {name!r} takes the shape of {like!r}, which is not an '
                                 f'ndarray input of the kernel')
            if not (isinstance(like, (str, tuple, list)) or callable(like)):
                raise ValueError(f'{self.name}: the shape of output {name!r} must be a tuple, an input\'s name '
                                 f'or a function of the values, got {like!r}')

    def bind(self, values, duals=False):
        """A Function of one call: fresh ndarrays for the arrays of this call."""
        if len(values) != len(self.parameters):
            raise TypeError(f'{self.name} takes {len(self.parameters)} value(s) '
                            f'({", ".join(s.name for s in self.parameters)}), {len(values)} given')
        given = {s.name: v for s, v in zip(self.parameters, values)}
        args, inputs, outputs = [], [], []
        for spec in self.specs:
            if spec.name in self.output_shapes:
                array = np.zeros(self._shape(spec.name, given, values), self._dtype(spec, given))
                args.append(_ndarray_of(spec, array, duals))
                outputs.append(args[-1])
            elif spec.kind == 'ndarray':
                args.append(_ndarray_of(spec, _as_annotated(spec, given[spec.name]), duals))
                inputs.append(args[-1])
            else:
                args.append(_plain(given[spec.name]))
        kernel = self.kernel
        return Function(lambda: kernel(*args), inputs, outputs, self.name)

    def _shape(self, name, given, values):
        shape = self.output_shapes[name]
        if isinstance(shape, str):
            return np.shape(given[shape])
        return tuple(shape(*values)) if callable(shape) else tuple(shape)

    def _dtype(self, spec, given):
        if spec.name in self.dtypes:
            return T.resolve(self.dtypes[spec.name]).np
        like = self.output_shapes[spec.name]
        if isinstance(like, str):
            return np.asarray(given[like]).dtype
        dtype = getattr(spec.annotation, 'dtype', None)
        if dtype is not None:
            return T.resolve(dtype if not isinstance(dtype, tuple) else dtype[-1]).np
        floats = [np.asarray(v).dtype for s, v in given.items() if _is_float_array(v)]
        if not floats:
            raise ValueError(f'{self.name}: give the dtype of output {spec.name!r} (dtypes={{...}})')
        return floats[0]

    def array_positions(self):
        """Which of the call's values are arrays (inputs with a gradient when float)."""
        return [k for k, s in enumerate(self.parameters) if s.kind == 'ndarray']

    def forward(self, values, differentiable=True, tangents=None):
        if tangents is None:
            return self.bind(values).forward(self._arrays(values), differentiable)
        return self.bind(values, duals=True).forward(self._arrays(values), differentiable, self._arrays(tangents))

    def backward(self, call, cotangents, values=None):
        if call.live():
            grads = call.function.backward(call, cotangents)
        else:
            grads = self.bind(values).backward(call, cotangents, self._arrays(values))
        return self._per_value(grads)

    def second_order(self, values, cotangents, tangents):
        grad_tangents, output_tangents = self.bind(values, duals=True).second_order(
            self._arrays(values), cotangents, self._arrays(tangents))
        return self._per_value(grad_tangents), output_tangents

    def jvp(self, values, tangents):
        return self.bind(values, duals=True).jvp(self._arrays(values), self._arrays(tangents))

    def _arrays(self, values):
        return [values[k] for k in self.array_positions()]

    def _per_value(self, grads):
        out = [None] * len(self.parameters)
        for k, grad in zip(self.array_positions(), grads):
            out[k] = grad
        return out


def _as_annotated(spec, value):
    """An input array in the element type its parameter's annotation asks for, if any (it
    is copied anyway: a float32 array from a framework without float64 works)."""
    array = np.asarray(value)
    dtype = getattr(spec.annotation, 'dtype', None)
    if dtype is not None:
        resolved = T.resolve(dtype[-1] if isinstance(dtype, tuple) else dtype)
        if resolved is not None and array.dtype.kind == 'f' and np.dtype(resolved.np).kind == 'f':
            return array.astype(resolved.np, copy=False)
    return array


def _plain(value):
    """A kernel's scalar argument: a 0-d array (a framework's number) as a Python number."""
    return value.item() if isinstance(value, np.ndarray) and value.ndim == 0 else value


def _is_float_array(value):
    return hasattr(value, 'dtype') and np.dtype(value.dtype).kind == 'f' and np.ndim(value) > 0


def _ndarray_of(spec, array, duals):
    """A ti.ndarray holding a copy of `array` (with a gradient when float)."""
    element = element_shape_of(spec, array)
    shape = array.shape[:array.ndim - len(element)]
    dtype = T.from_numpy(array.dtype)
    extra = dict(needs_dual=True) if duals and dtype.is_float else {}
    nd = Ndarray(dtype, shape, element, needs_grad=dtype.is_float, **extra)
    nd.data[...] = array
    return nd
