"""The tape across kernels: records launches and replays their adjoints backwards.

Only (kernel, arguments) records are kept; global fields are the checkpoints.
"""
from dataclasses import dataclass
from typing import Any, Callable, Tuple

from . import runtime

recording = None   # the Tape being recorded, if any


@dataclass(frozen=True)
class Launch:
    """One recorded unit: a kernel launch, or a custom-gradient function call."""
    backward: Callable
    args: Tuple[Any, ...]
    name: str
    forward: Callable = None      # re-runs the unit (the gradient checker replays the tape)


class Tape:
    """`with ti.ad.Tape(loss):` records kernel launches, then computes d loss / d inputs.

    On entry: gradients are cleared (clear_gradients=True), `loss[None]` is set to 0
    and `loss.grad[None]` to 1. On exit: the adjoints run in reverse order."""

    def __init__(self, loss=None, clear_gradients=True, validation=False, grad_check=None):
        if validation:
            raise NotImplementedError('ti.ad.Tape(validation=...) is not available yet')
        self.loss = loss
        self.clear_gradients = clear_gradients
        self.grad_check = list(grad_check or [])
        if self.grad_check and loss is None:
            raise ValueError('ti.ad.Tape(grad_check=...) needs a loss')
        self.launches = []
        self.suspended = 0
        self.snapshot = None

    def record(self, kernel, args):
        if self.suspended or kernel.no_grad:
            return
        self.launches.append(Launch(kernel.grad, tuple(args), kernel.name, kernel))

    def record_custom(self, backward, args, name, forward=None):
        if not self.suspended:
            self.launches.append(Launch(backward, tuple(args), name, forward))

    def __enter__(self):
        global recording
        if recording is not None:
            raise RuntimeError('ti.ad.Tape cannot be nested')
        if self.loss is not None:
            _check_loss(self.loss)
            if self.clear_gradients:
                runtime.program().clear_gradients()
            self.loss[None] = 0
            self.loss.grad[None] = 1
        if self.grad_check:
            from .gradcheck import snapshot_fields
            self.snapshot = snapshot_fields()
        recording = self
        return self

    def __exit__(self, exc_type, exc, tb):
        global recording
        recording = None
        if exc_type is None:
            self.grad()
            if self.grad_check:
                from .gradcheck import check_tape
                check_tape(self)

    def replay_forward(self, keep=()):
        """Re-run the recorded launches from the state the tape started with
        (except the fields in `keep`, which the gradient checker perturbs)."""
        from .gradcheck import restore_fields
        restore_fields(self.snapshot, keep)
        self.loss[None] = 0
        for launch in self.launches:
            launch.forward(*launch.args)

    def grad(self):
        for launch in reversed(self.launches):
            launch.backward(*launch.args)


def _check_loss(loss):
    shape = getattr(loss, 'shape', None)
    if shape != ():
        raise ValueError(f'the loss of ti.ad.Tape must be a 0-D field (shape ()), got shape {shape}')
    if loss.grad is None or not loss.grad.placed:
        raise ValueError(f'the loss {loss.name} needs a gradient: declare it with needs_grad=True '
                         f'or call ti.root.lazy_grad()')
