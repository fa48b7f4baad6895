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

from .runtime.interop import Function, KernelFunction

__all__ = ['function', 'kernel', 'Module', 'to_torch', 'from_torch', 'as_tensor']


class Wrapped:
    """A Function or KernelFunction called with tensors (and other values)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__name__ = wrapped.name

    def __call__(self, *values):
        tracked = torch.is_grad_enabled() and any(
            isinstance(v, torch.Tensor) and v.requires_grad for v in values)
        if not tracked:
            outputs, _ = self.wrapped.forward([_numpy(v) for v in values], differentiable=False)
            result = tuple(_tensor(o, values) for o in outputs)
        else:
            result = _Forward.apply(self.wrapped, *values)
        return result[0] if len(result) == 1 else result


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
        values, rest = [], iter(tensors)
        by_slot = dict(zip(self.slots, self.params))
        for k in range(len(self.op.wrapped.inputs)):
            values.append(by_slot[k] if k in by_slot else next(rest))
        return self.op(*values)


class _Forward(torch.autograd.Function):
    """The forward pass; its backward is _Backward, so that it can be differentiated."""

    @staticmethod
    def forward(ctx, wrapped, *values):
        outputs, call = wrapped.forward([_numpy(v) for v in values])
        ctx.wrapped, ctx.call = wrapped, call
        ctx.save_for_backward(*[v for v in values if isinstance(v, torch.Tensor)])
        ctx.others = [None if isinstance(v, torch.Tensor) else v for v in values]
        results = tuple(_tensor(o, values) for o in outputs)
        ctx.mark_non_differentiable(*[r for r in results if not r.is_floating_point()])
        return results

    @staticmethod
    def backward(ctx, *cotangents):
        values = _values(ctx)
        grads = _Backward.apply(ctx.wrapped, ctx.call, len(values), *values, *cotangents)
        return (None,) + tuple(grads)


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
    @torch.autograd.function.once_differentiable
    def backward(ctx, *tangents):
        args = _values(ctx)
        values, cotangents = args[:ctx.count], args[ctx.count:]
        grad_tangents, output_tangents = ctx.wrapped.second_order(
            [_numpy(v) for v in values], [_numpy(c) for c in cotangents], [_numpy(t) for t in tangents])
        to_values = [None if g is None else _like(g, v) for g, v in zip(grad_tangents, values)]
        to_cotangents = [None if t is None else _like(t, c) for t, c in zip(output_tangents, cotangents)]
        return (None, None, None) + tuple(to_values) + tuple(to_cotangents)


def _values(ctx):
    saved = iter(ctx.saved_tensors)
    return [next(saved) if v is None else v for v in ctx.others]


def _numpy(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return value


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
    """A tensor sharing a field's (or ndarray's) memory: writes to either show in both."""
    return torch.from_numpy(obj.data)
