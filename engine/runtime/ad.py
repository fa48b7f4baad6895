"""`ti.ad`: the user's autodiff API.

Reverse mode across kernels (Tape, custom gradients, no_grad), forward mode
(FwdMode), second order (hvp, hessian), transforms of Python functions made of
kernels (value_and_grad, jacobian) and of ti.funcs inside kernels (grad, jvp, vjp).
"""
import functools

import numpy as np

from . import copies, replay  # noqa: F401  (copies installs ctx.launch_copy)
from ..core.context import ctx
from ..core.program import current as current_program
from ..language.fields import Field, Ndarray, zero_tangent
from .kernels import Kernel
from .tape import Tape
from .finite_diff import GradientCheckError, restore_fields, snapshot_fields
from .gradcheck import check_gradients, keep_adjoints, rollout_report
from ..core.errors import AutodiffError, missing_attribute
from ..autodiff.rules import AutodiffRuleError
from ..autodiff.transforms import grad, jvp, vjp

__all__ = ['Tape', 'grad_replaced', 'grad_for', 'no_grad', 'clear_all_gradients', 'FwdMode',
           'hvp', 'hessian', 'value_and_grad', 'jacobian', 'grad', 'jvp', 'vjp',
           'check_gradients', 'GradientCheckError', 'rollout_report', 'keep_adjoints', 'AutodiffError',
           'AutodiffRuleError']


def clear_all_gradients():
    """Zero every field's .grad. Inside a ti.ad.Tape block it keeps the tape's seed
    (loss.grad = 1): the backward pass at exit starts from it."""
    current_program().clear_gradients()
    if ctx.tape is not None:
        ctx.tape.reseed()


def no_grad(fn):
    """The tape leaves this kernel, or the kernels a Python function launches, out of the
    backward pass: they contribute no gradient (their results are constants to the tape)."""
    if isinstance(fn, Kernel):
        fn.no_grad = True
        return fn

    @functools.wraps(fn)
    def without_gradient(*args, **kwargs):
        ctx.no_grad_depth += 1
        try:
            return fn(*args, **kwargs)
        finally:
            ctx.no_grad_depth -= 1
    without_gradient.grad = _adds_no_gradient     # `f.grad(*args)`, as Taichi gives it
    return without_gradient


def _adds_no_gradient(*args, **kwargs):
    """The .grad of a no_grad Python function: it contributes no gradient, so nothing to add."""


class NotGradReplacedError(TypeError, RuntimeError):
    """ti.ad.grad_for of a function not decorated with ti.ad.grad_replaced: a TypeError, and a
    RuntimeError as in Taichi."""


class _CustomGradient:
    """A Python function whose gradient is a user function (see grad_for)."""

    def __init__(self, fn):
        self.fn = fn
        self.backward = None
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        if ctx.capture is not None:
            raise replay.CaptureError(f'{ctx.capture.name}: the grad_replaced function '
                                      f'{self.fn.__name__} cannot be captured (its gradient is Python)')
        if ctx.forward is not None and ctx.tape is None:
            raise AutodiffError(f'ti.ad.FwdMode cannot differentiate the grad_replaced function '
                                f'{self.fn.__name__}: its gradient is replaced for reverse mode only, so '
                                f'a tangent of its kernels would disagree with it (JAX refuses jvp of a '
                                f'custom_vjp function too); differentiate it with ti.ad.Tape')
        recorder = ctx.tape
        if recorder is None or ctx.no_grad_depth:     # inside no_grad: no gradient to replace
            return self.fn(*args, **kwargs)
        recorder.record_custom(functools.partial(self._grad, **kwargs), args, self.fn.__name__,
                               functools.partial(self.fn, **kwargs))
        recorder.suspended += 1           # kernels inside are one unit on the tape
        try:
            return self.fn(*args, **kwargs)
        finally:
            recorder.suspended -= 1

    def __get__(self, obj, owner=None):
        """A method (of a data_oriented class): bound to the instance, which the tape records
        as its first argument and passes to the grad_for function."""
        return self if obj is None else _BoundCustomGradient(self, obj)

    def grad(self, *args, **kwargs):
        """`f.grad(*args)`: runs the grad_for function, as the tape does at f's unit (the
        caller seeds the output gradients first, as for kernel.grad)."""
        return self._grad(*args, **kwargs)

    def _grad(self, *args, **kwargs):
        if self.backward is None:
            raise RuntimeError(f'{self.fn.__name__} is grad_replaced but has no ti.ad.grad_for function')
        if ctx.forward is None:
            return self.backward(*args, **kwargs)
        ctx.custom_backward = self.fn.__name__      # forward over reverse: writes are checked
        try:
            self.backward(*args, **kwargs)
        finally:
            ctx.custom_backward = None


class _BoundCustomGradient(functools.partial):
    """A grad_replaced method taken from an instance: the instance is its first argument,
    of the call and of .grad."""

    def grad(self, *args, **kwargs):
        return self.func.grad(*self.args, *args, **kwargs)


def grad_replaced(fn):
    """Record `fn` on the tape as one unit whose gradient is given by `grad_for`."""
    return _CustomGradient(fn)


def grad_for(primal):
    """`@ti.ad.grad_for(forward)`: the function that computes forward's gradient."""
    if isinstance(primal, Kernel):
        raise NotGradReplacedError(
            f'ti.ad.grad_for({primal.name}): {primal.name} is a kernel, whose gradient is '
            f'{primal.name}.grad; to replace it, launch the kernel from a Python function '
            f'decorated with ti.ad.grad_replaced and give that function to grad_for')
    if not isinstance(primal, _CustomGradient):
        raise NotGradReplacedError(f'ti.ad.grad_for needs a function decorated with ti.ad.grad_replaced, got '
                                   f'{getattr(primal, "__name__", type(primal).__name__)}')

    def register(backward):
        primal.backward = backward
        return backward
    return register


# ----------------------------------------------------------------------------
# Forward mode

class FwdMode:
    """`with ti.ad.FwdMode(loss=y, param=x, seed=[...]):` kernels launched inside compute
    primal values and tangents together; afterwards `y.dual` holds the Jacobian-vector
    product dy/dx . seed. `loss` may be a field of any shape.

    Every placed float field gets a .dual on entry (a tangent written to a field without
    one would be lost); clear_gradients=True zeroes them all before the seed is set.

    `param` may also be a float ti.ndarray created with needs_dual=True. Ndarrays are not
    known to the program: their duals are the user's (zero them with `a.dual.fill(0)`, as
    their values), except the param's: clear_gradients=True zeroes its .grad.dual, where
    forward over reverse (ti.ad.hvp) accumulates. An ndarray without a .dual is a constant
    to forward mode: reading it has tangent zero, writing floats to it is refused."""

    def __init__(self, loss, param, seed=None, clear_gradients=True):
        self.loss, self.param, self.seed, self.clear = loss, param, seed, clear_gradients
        self.used = None        # the param's elements a launch inside the block accessed

    def __enter__(self):
        if ctx.forward is not None:
            raise RuntimeError('ti.ad.FwdMode cannot be nested')
        prog = current_program()
        if not _has_tangent(self.param):
            raise TypeError(f'ti.ad.FwdMode: param must be a float field or a ti.ndarray created with '
                            f'needs_dual=True (integer fields have no tangent), got {_describe(self.param)}')
        prog.allocate_duals()
        if self.clear:
            prog.clear_duals()
            if isinstance(self.param, Ndarray) and self.param.grad is not None:
                self.param.grad.dual.data.fill(0)     # as the seed: not a write a tape sees
        size = self.param.data.size
        seed = np.ones(1) if self.seed is None and size == 1 else self.seed
        if seed is None:
            raise ValueError(f'ti.ad.FwdMode needs a seed for {self.param.name}, which has {size} entries')
        seed = np.asarray(seed, dtype=np.float64)
        if seed.size != size:
            raise ValueError(f'ti.ad.FwdMode: the seed has {seed.size} entries, {self.param.name} has {size}')
        self.seed_values = seed.reshape(self.param.data.shape)
        self.param.dual.data[...] = self.seed_values
        self.used = np.zeros(self.param.shape, dtype=bool)
        ctx.forward = self
        return self

    def __exit__(self, *exc):
        ctx.forward = None
        # the seed is the block's: zeroed as Taichi zeroes it, so a later kernel launched
        # outside the block (or a FwdMode with clear_gradients=False) starts from no tangent
        self.param.dual.data[...] = 0

    def launching(self, compiled, args):
        """Before a launch in the block: marks the param's elements it accesses."""
        for obj, _, box, _ in compiled.access_summary().accesses:
            if obj is self.param if isinstance(obj, Field) else _same_array(args[obj.index], self.param):
                self.used[box.index(args, self.used.shape)] = True

    def python_write(self, owner, index):
        """A write from Python inside the block (engine/language/fields.py): its value is a
        constant, so the tangent of the written elements becomes zero. The param's elements
        no launch in the block has used yet are inputs being set, as on a tape (see
        docs/forward_mode.md): their tangent is the seed again."""
        if owner is not self.param:
            zero_tangent(owner, index)
            return
        element = (1,) * len(self.param.element_shape)
        untouched = ~self.used.reshape(self.used.shape + element)
        tangent = np.where(untouched, self.seed_values, 0)
        self.param.dual.data[index] = tangent[index]


def _same_array(value, array):
    return value is array or getattr(value, 'data', value) is array.data


def _has_tangent(param):
    if isinstance(param, Ndarray):
        return param.dual is not None
    return isinstance(param, Field) and param.dtype.is_float


def _describe(obj):
    if isinstance(obj, Field):
        return f'field {obj.name} of dtype {obj.dtype}'
    if isinstance(obj, Ndarray):
        return f'a ti.ndarray of dtype {obj.dtype} without a .dual'
    return type(obj).__name__


def hvp(forward_fn, loss, param, vector):
    """Hessian-vector product d^2 loss / d param^2 . vector (forward over reverse).

    `forward_fn()` launches the kernels that compute `loss` from `param`; it is run once,
    recorded on a tape whose adjoints then run in forward mode."""
    with FwdMode(loss=loss, param=param, seed=vector):
        with Tape(loss):
            forward_fn()
    return param.grad.dual.to_numpy().astype(np.float64)


def hessian(forward_fn, loss, param):
    """The dense Hessian of `loss` w.r.t. the entries of `param` (param.data.size squared
    entries, one Hessian-vector product a column): for small fields. Every column starts
    from the fields as they were at the call (forward_fn may accumulate into them)."""
    size = param.data.size
    columns = []
    rerun = from_the_start(forward_fn)
    for j in range(size):
        e = np.zeros(size)
        e[j] = 1
        columns.append(hvp(rerun, loss, param, e).reshape(-1))
    return np.stack(columns, axis=1)


def from_the_start(fn):
    """fn, run each time from the values every field had now."""
    snapshot = snapshot_fields()

    def rerun():
        restore_fields(snapshot)
        fn()
    return rerun


# ----------------------------------------------------------------------------
# Transforms of Python functions made of kernels

def _load_inputs(inputs, values):
    if not values:
        return
    if len(values) != len(inputs):
        raise ValueError(f'expected {len(inputs)} input values, got {len(values)}')
    for field, value in zip(inputs, values):
        field.from_numpy(np.asarray(value, dtype=field.data.dtype).reshape(field.data.shape))


def value_and_grad(fn, inputs, output):
    """A function computing (value of `output`, [d output / d input for each input]).

    `fn()` reads the `inputs` fields and writes the 0-D field `output` through kernels;
    the returned callable optionally takes new values for the inputs first."""
    def value_and_gradient(*values):
        _load_inputs(inputs, values)
        with Tape(output):
            fn()
        grads = [f.grad.to_numpy() for f in inputs]
        return float(output[None]), [g.item() if g.ndim == 0 else g for g in grads]
    return value_and_gradient


def jacobian(fn, inputs, outputs, mode='forward'):
    """The Jacobian d outputs / d inputs of `fn` (which reads `inputs` and writes `outputs`
    through kernels), as a (total output entries) x (total input entries) array.

    mode='forward' runs fn once per input entry under FwdMode; mode='reverse' once per
    output entry on a tape. Each run starts from the fields as they were at the call."""
    inputs, outputs = list(inputs), list(outputs)
    fn = from_the_start(fn)
    n_in = sum(f.data.size for f in inputs)
    n_out = sum(f.data.size for f in outputs)
    J = np.zeros((n_out, n_in))
    if mode == 'forward':
        col = 0
        for field in inputs:
            for j in range(field.data.size):
                seed = np.zeros(field.data.size)
                seed[j] = 1
                with FwdMode(loss=outputs[0], param=field, seed=seed):
                    fn()
                    J[:, col] = np.concatenate([o.dual.data.reshape(-1) for o in outputs])
                col += 1
        return J
    if mode != 'reverse':
        raise ValueError(f"jacobian mode must be 'forward' or 'reverse', got {mode!r}")
    row = 0
    for field in outputs:
        for i in range(field.data.size):
            current_program().clear_gradients()
            for array in inputs + outputs:          # ndarrays' gradients too (a Tape would
                array.grad.data.fill(0)             # zero the seed of an ndarray output)
            field.grad.data.reshape(-1)[i] = 1
            with Tape(loss=None, clear_gradients=False):
                fn()
            J[row] = np.concatenate([f.grad.data.reshape(-1) for f in inputs])
            row += 1
    return J


def __getattr__(name):
    """A name ti.ad lacks (one of Taichi's, or a typo): the engine's message, not Python's."""
    raise missing_attribute('ti.ad', name, globals())

