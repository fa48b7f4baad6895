"""`engine.jax`: kernels and simulators as differentiable JAX functions.

    import engine.jax as ti_jax
    f = ti_jax.function(run, inputs=[x, w], outputs=[loss])    # fn of fields, on a tape
    g = ti_jax.kernel(square_kernel, outputs={'y': 'x'})       # a kernel of ndarrays

The result is a `jax.custom_vjp` function whose forward and backward passes call the
engine through `jax.pure_callback`: it works under `jax.jit`, `jax.grad`, `jax.vjp` and
`jax.vmap` (one call per batch entry), and its backward pass is itself differentiable
(forward over reverse), so reverse-over-reverse second derivatives work. Forward mode
(`jax.jvp`) of a custom_vjp function is not something JAX offers.

A forward call keeps its tape for its backward pass under a token (the newest 64 calls
keep theirs); a backward pass whose tape is gone or spent runs the forward pass again from
its inputs, and refuses if that gives other outputs or the state it reads changed.
"""
import collections
import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np

from .runtime.interop import Function, KernelFunction

__all__ = ['function', 'kernel']

KEPT_CALLS = 64
KEPT_SPENT = 4096


def function(fn, inputs, outputs, name=None):
    """`fn()` launches kernels that read the fields or ndarrays `inputs` (each may be
    `(field, index)`) and write `outputs`; the result takes one array per input and
    returns the outputs (one array, or a tuple)."""
    wrapped = Function(fn, inputs, outputs, name)
    shapes = [(p.shape, p.dtype) for p in wrapped.outputs]
    return _wrap(wrapped, lambda *values: shapes, static=())


def kernel(kernel_, outputs, dtypes=None, name=None):
    """A kernel whose ndarray parameters named in `outputs` are its results (name -> shape,
    or an input parameter's name to take its shape and dtype); it is called with the other
    parameters: arrays for the ndarrays, Python values for the rest (static under jit)."""
    wrapped = KernelFunction(kernel_, outputs, dtypes, name)
    arrays = wrapped.array_positions()
    static = tuple(k for k in range(len(wrapped.parameters)) if k not in arrays)

    def shapes(*values):
        bound = wrapped.bind([_placeholder(v) for v in values])
        return [(p.shape, p.dtype) for p in bound.outputs]
    return _wrap(wrapped, shapes, static)


def _placeholder(value):
    """A small stand-in of a traced array (its shape and dtype), to find output shapes."""
    if hasattr(value, 'shape') and hasattr(value, 'dtype'):
        return np.zeros(value.shape, np.dtype(value.dtype))
    return value


class _Calls:
    """Forward calls awaiting their backward pass, by token (the newest KEPT_CALLS), and
    spent ones (their outputs and the fingerprint of the state they read, to check a run
    again: the newest KEPT_SPENT)."""

    def __init__(self):
        self.calls = collections.OrderedDict()
        self.spent = collections.OrderedDict()
        self.tokens = itertools.count(1)

    def put(self, call):
        token = next(self.tokens)
        self.calls[token] = call
        while len(self.calls) > KEPT_CALLS:
            self._spend(*self.calls.popitem(last=False))
        return token

    def _spend(self, token, call):
        if not call.consumed:
            with call.own_state():
                call.take_fingerprint()
            call.consume()
        self.spent[token] = call
        while len(self.spent) > KEPT_SPENT:
            self.spent.popitem(last=False)

    def take(self, token):
        """The call of a token (spent, once its backward pass ran: a second one runs it again)."""
        token = int(token)
        call = self.calls.pop(token, None) or self.spent.get(token)
        if call is None:
            raise RuntimeError(f'engine.jax: the forward call of this backward pass is older than the last '
                               f'{KEPT_SPENT} calls and its record is gone; compute the gradient again')
        self.spent[token] = call
        return call


_CALLS = _Calls()


def _wrap(wrapped, output_shapes, static):
    """The custom_vjp function; `static`: positions of values that are not arrays."""
    def specs(values):
        return [_spec(shape, dtype) for shape, dtype in output_shapes(*values)]

    @functools.partial(jax.custom_vjp, nondiff_argnums=static)
    def run(*values):
        fixed, arrays = _split(values, static)
        out_specs = specs(values)

        def callback(*arrays):
            outputs, _ = wrapped.forward(_merge(fixed, arrays, static), differentiable=False)
            return _cast_all(outputs, out_specs)
        return _single(jax.pure_callback(callback, out_specs, *arrays, vmap_method='sequential'))

    def run_forward(*values):
        fixed, arrays = _split(values, static)
        results = _recorded(wrapped, static, fixed, specs(values))(*arrays)
        return _single(results[:-1]), (results[-1], arrays)

    def run_backward(*args):
        fixed, (token, arrays), cotangents = args[:len(static)], args[-2], args[-1]
        cotangents = cotangents if isinstance(cotangents, tuple) else (cotangents,)
        return _vjp(wrapped, static, fixed)(token, tuple(arrays), tuple(cotangents))

    run.defvjp(run_forward, run_backward)
    return run


def _recorded(wrapped, static, fixed, out_specs):
    """arrays -> (outputs..., token): the forward pass on a tape kept under the token.
    A custom_vjp function of its own, so that the forward pass of a backward pass can be
    differentiated (reverse over reverse)."""
    out_specs = out_specs + [_spec((), np.int64)]

    def host(*arrays):
        outputs, call = wrapped.forward(_merge(fixed, arrays, static))
        return _cast_all(list(outputs) + [_CALLS.put(call)], out_specs)

    @jax.custom_vjp
    def recorded(*arrays):
        return tuple(jax.pure_callback(host, out_specs, *arrays, vmap_method='sequential'))

    def recorded_forward(*arrays):
        results = recorded(*arrays)
        return results, (results[-1], arrays)

    def recorded_backward(residuals, cotangents):
        token, arrays = residuals
        return _vjp(wrapped, static, fixed)(token, tuple(arrays), tuple(cotangents[:-1]))

    recorded.defvjp(recorded_forward, recorded_backward)
    return recorded


def _vjp(wrapped, static, fixed):
    """(token, input arrays, cotangents) -> the gradient of each array, as a custom_vjp
    function whose own backward pass is the second-order gradient."""
    def host_values(arrays):
        return _merge(fixed, arrays, static)

    def arrays_only(values):
        return [v for k, v in enumerate(values) if k not in static]

    @jax.custom_vjp
    def vjp(token, arrays, cotangents):
        grad_specs = [_spec_of(a) for a in arrays]

        def callback(token, arrays, cotangents):
            call = _CALLS.take(token)
            values = host_values(arrays)
            grads = wrapped.backward(call, list(cotangents), values)    # runs it again if spent
            return _cast_all(arrays_only(grads), grad_specs)
        return tuple(jax.pure_callback(callback, grad_specs, token, arrays, cotangents, vmap_method='sequential'))

    def vjp_forward(token, arrays, cotangents):
        return vjp(token, arrays, cotangents), (arrays, cotangents)

    def vjp_backward(residuals, tangents):
        arrays, cotangents = residuals
        specs = ([_spec_of(a) for a in arrays], [_spec_of(c) for c in cotangents])

        def callback(arrays, cotangents, tangents):
            grad_tangents, output_tangents = wrapped.second_order(
                host_values(arrays), list(cotangents), _merge([None] * len(static), tangents, static))
            return _cast_all(arrays_only(grad_tangents), specs[0]), _cast_all(output_tangents, specs[1])
        to_arrays, to_cotangents = jax.pure_callback(callback, specs, arrays, cotangents, tuple(tangents),
                                                     vmap_method='sequential')
        return None, tuple(to_arrays), tuple(to_cotangents)

    vjp.defvjp(vjp_forward, vjp_backward)
    return vjp


def _spec(shape, dtype):
    return jax.ShapeDtypeStruct(tuple(shape), jax.dtypes.canonicalize_dtype(np.dtype(dtype)))


def _spec_of(value):
    return _spec(jnp.shape(value), value.dtype)


def _cast_all(arrays, specs):
    """Host results as JAX expects them: its dtypes (float32 unless x64 is on), zeros for None."""
    return [np.zeros(s.shape, s.dtype) if a is None else np.asarray(a, dtype=s.dtype).reshape(s.shape)
            for a, s in zip(arrays, specs)]


def _split(values, static):
    fixed = tuple(v for k, v in enumerate(values) if k in static)
    return fixed, tuple(v for k, v in enumerate(values) if k not in static)


def _merge(fixed, arrays, static):
    """The values in parameter order, from the static ones and the arrays."""
    fixed, arrays = list(fixed), list(arrays)
    return [fixed.pop(0) if k in static else arrays.pop(0) for k in range(len(fixed) + len(arrays))]


def _single(results):
    results = tuple(results)
    return results[0] if len(results) == 1 else results
