"""`ti.ad`: the user's autodiff API (Tape, custom gradients, no_grad)."""
import functools

from . import runtime, tape
from .tape import Tape

__all__ = ['Tape', 'grad_replaced', 'grad_for', 'no_grad', 'clear_all_gradients']


def clear_all_gradients():
    runtime.program().clear_gradients()


def no_grad(kernel):
    """The tape skips this kernel: it contributes no gradient."""
    kernel.no_grad = True
    return kernel


class _CustomGradient:
    """A Python function whose gradient is a user function (see grad_for)."""

    def __init__(self, fn):
        self.fn = fn
        self.backward = None
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        recorder = tape.recording
        if recorder is None:
            return self.fn(*args, **kwargs)
        recorder.record_custom(functools.partial(self._grad, **kwargs), args, self.fn.__name__)
        recorder.suspended += 1           # kernels inside are one unit on the tape
        try:
            return self.fn(*args, **kwargs)
        finally:
            recorder.suspended -= 1

    def _grad(self, *args, **kwargs):
        if self.backward is None:
            raise RuntimeError(f'{self.fn.__name__} is grad_replaced but has no ti.ad.grad_for function')
        self.backward(*args, **kwargs)


def grad_replaced(fn):
    """Record `fn` on the tape as one unit whose gradient is given by `grad_for`."""
    return _CustomGradient(fn)


def grad_for(primal):
    """`@ti.ad.grad_for(forward)`: the function that computes forward's gradient."""
    if not isinstance(primal, _CustomGradient):
        raise TypeError('ti.ad.grad_for needs a function decorated with ti.ad.grad_replaced')

    def register(backward):
        primal.backward = backward
        return backward
    return register
