"""`engine.torch`: kernels and simulators as differentiable PyTorch operations.

    import engine.torch as ti_torch
    step = ti_torch.function(run, inputs=[x, w], outputs=[loss])   # fn of fields, on a tape
    square = ti_torch.kernel(square_kernel, outputs={'y': 'x'})     # a kernel of ndarrays
    layer = ti_torch.Module(run, inputs=[x, w], outputs=[loss], parameters=[w])

Tensors in, tensors out: the gradient of every input tensor that requires one comes from
the tape (engine/runtime/interop.py), and the backward pass is itself differentiable
(forward over reverse) for `torch.autograd.grad(..., create_graph=True)` and gradgradcheck.
Calls are independent: one function may be called many times in one graph, and its calls
may run backwards in any order. Tensors must be in CPU memory (the kernels run there).

`to_torch(x)` / `from_torch(x, t)` copy a field's values, as Taichi's `x.to_torch()` /
`x.from_torch(t)` (also methods of fields and ndarrays); `as_tensor(x)` shares them.
A tensor passed to a kernel's ndarray parameter is used in place, without a copy.
"""
import torch
from torch.autograd import forward_ad

from .runtime.interop import Function, KernelFunction

__all__ = ['function', 'kernel', 'Module', 'to_torch', 'from_torch', 'as_tensor']


class Wrapped:
    """A Function or KernelFunction called with tensors (and other values)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__name__ = wrapped.name

    def __call__(self, *values):
        self._check_scalars(values)
        tensors = [v for v in values if isinstance(v, torch.Tensor)]
        tracked = any(forward_ad.unpack_dual(t).tangent is not None for t in tensors) or \
            torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
        if not tracked:
            outputs, _ = self.wrapped.forward([_numpy(v) for v in values], differentiable=False)
            result = tuple(_tensor(o, values) for o in outputs)
        else:
            duals = [forward_ad.unpack_dual(v).tangent if isinstance(v, torch.Tensor) else None for v in values]
            tangents = None if all(d is None for d in duals) else [_numpy(d) for d in duals]
            result = _Forward.apply(self.wrapped, tangents, *values)
        return result[0] if len(result) == 1 else result

    def _check_scalars(self, values):
        """A kernel's scalar parameter takes a number: a tensor that requires a gradient
        there would get none."""
        for spec, value in zip(getattr(self.wrapped, 'parameters', ()), values):
            if spec.kind != 'ndarray' and isinstance(value, torch.Tensor) and value.requires_grad:
                raise TypeError(f'{self.__name__}: parameter {spec.name!r} is a scalar, which gets no gradient; '
                                f'pass a number (or make it an ndarray parameter)')

    def __deepcopy__(self, memo):
        return self         # the engine's function is shared (a copied nn.Module keeps using it)


def function(fn, inputs, outputs, name=None):
    """`fn()` launches kernels that read the fields or ndarrays `inputs` (each may be
    `(field, index)`: part of a field) and write `outputs`; the result takes one tensor
    per input and returns the outputs (one tensor, or a tuple)."""
    return Wrapped(Function(fn, inputs, outputs, name))


def kernel(kernel_, outputs, dtypes=None, name=None):
    """A kernel whose ndarray parameters named in `outputs` are its results (name -> shape,
    or an input parameter's name to take its shape and dtype); it is called with the other
    parameters, tensors for the ndarrays."""
    return Wrapped(KernelFunction(kernel_, outputs, dtypes, name))


class Module(torch.nn.Module):
    """A wrapped function as a torch.nn.Module: the input fields named in `parameters`
    become its nn.Parameters (starting from the fields' values); forward() takes tensors
    for the other inputs, in order."""

    def __init__(self, fn, inputs, outputs, parameters=(), name=None):
        super().__init__()
        self.op = function(fn, inputs, outputs, name)
        ports = self.op.wrapped.inputs
        chosen = [next((k for k, p in enumerate(ports) if p.obj is f and p.index is Ellipsis), None)
                  for f in parameters]
        if None in chosen:
            raise ValueError('each of parameters must be one of the inputs (a whole field)')
        self.slots = chosen
        self.params = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.from_numpy(ports[k].values().copy())) for k in chosen])

    def forward(self, *tensors):
        count = len(self.op.wrapped.inputs) - len(self.slots)
        if len(tensors) != count:
            raise TypeError(f'{self.op.__name__}: forward() takes {count} tensor(s) (the inputs that are not '
                            f'parameters), {len(tensors)} given')
        values, rest = [], iter(tensors)
        by_slot = dict(zip(self.slots, self.params))
        for k in range(len(self.op.wrapped.inputs)):
            values.append(by_slot[k] if k in by_slot else next(rest))
        return self.op(*values)


class _Forward(torch.autograd.Function):
    """The forward pass; its backward is _Backward, so that it can be differentiated."""

    @staticmethod
    def forward(ctx, wrapped, tangents, *values):
        # forward-mode AD (torch.autograd.forward_ad): the tangents come from the same run
        outputs, call = wrapped.forward([_numpy(v) for v in values], tangents=tangents)
        ctx.wrapped, ctx.call, ctx.forward_values = wrapped, call, values
        ctx.save_for_backward(*[v for v in values if isinstance(v, torch.Tensor)])
        ctx.others = [None if isinstance(v, torch.Tensor) else v for v in values]
        results = tuple(_tensor(o, values) for o in outputs)
        ctx.mark_non_differentiable(*[r for r in results if not r.is_floating_point()])
        return results

    @staticmethod
    def backward(ctx, *cotangents):
        values = _values(ctx)
        grads = _Backward.apply(ctx.wrapped, ctx.call, len(values), *values, *cotangents)
        return (None, None) + tuple(grads)

    @staticmethod
    def jvp(ctx, _, __, *tangents):
        """Forward-mode AD (torch.autograd.forward_ad): the engine's forward mode, computed
        in the forward run (Wrapped.__call__ passed the tangents to it)."""
        values = ctx.forward_values
        return tuple(None if t is None else _tensor(t, values) for t in ctx.call.output_tangents)


class _Backward(torch.autograd.Function):
    """The backward pass as an operation: its own backward is the second-order gradient."""

    @staticmethod
    def forward(ctx, wrapped, call, count, *args):
        values, cotangents = args[:count], args[count:]
        grads = wrapped.backward(call, [_numpy(c) for c in cotangents], [_numpy(v) for v in values])
        ctx.wrapped, ctx.count = wrapped, count
        ctx.save_for_backward(*[a for a in args if isinstance(a, torch.Tensor)])
        ctx.others = [None if isinstance(a, torch.Tensor) else a for a in args]
        return tuple(None if g is None else _like(g, v) for g, v in zip(grads, values))

    @staticmethod
    def backward(ctx, *tangents):
        args = _values(ctx)
        values, cotangents = args[:ctx.count], args[ctx.count:]
        with torch.no_grad():
            grad_tangents, output_tangents = ctx.wrapped.second_order(
                [_numpy(v) for v in values], [_numpy(c) for c in cotangents], [_numpy(t) for t in tangents])
            results = [None if g is None else _like(g, v) for g, v in zip(grad_tangents, values)]
            results += [None if t is None else _like(t, c) for t, c in zip(output_tangents, cotangents)]
        return (None, None, None) + _no_higher_order(results, list(tangents) + args)


def _no_higher_order(results, inputs):
    """The second-order results, joined to what they came from by _NoHigherOrder when a
    graph is being built, so that differentiating them raises instead of giving zero."""
    sources = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    present = [r for r in results if r is not None]
    if not (torch.is_grad_enabled() and sources and present):
        return tuple(results)
    joined = iter(_NoHigherOrder.apply(len(present), *present, *sources))
    return tuple(None if r is None else next(joined) for r in results)


class _NoHigherOrder(torch.autograd.Function):
    """Passes second-order results through; differentiating them raises."""

    @staticmethod
    def forward(ctx, count, *args):
        return tuple(a.clone() for a in args[:count])

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError('engine.torch: a derivative of a second-order gradient is not supported (a third '
                           'derivative, or torch.autograd.functional.hvp, which differentiates one again with '
                           'respect to its vector); use torch.autograd.functional.vhp, the same for a Hessian')


def _values(ctx):
    saved = iter(ctx.saved_tensors)
    return [next(saved) if v is None else v for v in ctx.others]


def _numpy(value):
    if not isinstance(value, torch.Tensor):
        return value
    functorch = torch._C._functorch
    if functorch.is_functorch_wrapped_tensor(value) or functorch.is_batchedtensor(value) or \
            functorch.is_legacy_batchedtensor(value):
        raise TypeError('engine.torch operations do not support torch.func transforms (grad, vmap, jvp) nor '
                        'vectorized torch.autograd.functional (vectorize=True); use torch.autograd, '
                        'torch.autograd.forward_ad, or torch.autograd.functional without vectorize')
    if value.dtype.is_complex or value.dtype in (torch.bfloat16, torch.float16):
        raise TypeError(f'engine.torch: tensors of dtype {value.dtype} are not supported (real float32, '
                        f'float64 and integer tensors are)')
    if value.device.type != 'cpu':
        raise TypeError(f'engine.torch: a tensor on {value.device} cannot be used: the kernels run on the '
                        f'CPU; move it with .cpu()')
    return value.detach().numpy()


def _tensor(array, values):
    """A new tensor of `array`, on the device of the first tensor among `values`."""
    device = next((v.device for v in values if isinstance(v, torch.Tensor)), None)
    result = torch.from_numpy(array)
    return result if device is None else result.to(device)


def _like(array, like):
    """A gradient for `like` (a tensor, or None for a value that was not one)."""
    result = torch.from_numpy(array)
    if isinstance(like, torch.Tensor):
        result = result.to(dtype=like.dtype, device=like.device).reshape(like.shape)
    return result


def to_torch(obj, device=None):
    """A new tensor of a field's (or ndarray's) values."""
    result = torch.from_numpy(obj.to_numpy())
    return result if device is None else result.to(device)


def from_torch(obj, tensor):
    """Set a field's (or ndarray's) values from a tensor."""
    obj.from_numpy(tensor.detach().cpu().numpy())


def as_tensor(obj):
    """A tensor sharing a field's (or ndarray's) memory: writes to either show in both (a
    struct field gives a dict of them). Writes through it are not seen by pending
    backward passes (docs/interop.md): write fields through the engine between calls."""
    if hasattr(obj, 'members'):
        return {key: as_tensor(member) for key, member in obj.members.items()}
    return torch.from_numpy(obj.data)
