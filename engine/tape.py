"""The tape across kernels: records launches and replays their adjoints backwards.

Only (kernel, arguments) records are kept; global fields are the checkpoints.
The backward pass runs the adjoint kernels in one native loop (engine/replay.py),
returning to Python only for custom gradients (grad_replaced) and in forward mode.
"""
import numpy as np

from . import forward, replay, rules, runtime

recording = None   # the Tape being recorded, if any


class Unit:
    """A recorded unit other than one kernel launch: a custom-gradient call, or the replay
    of a captured function (`block`)."""

    def __init__(self, backward, args, name, forward=None, block=None):
        self.backward, self.args, self.name = backward, tuple(args), name
        self.forward, self.block = forward, block


class Tape:
    """`with ti.ad.Tape(loss):` records kernel launches, then computes d loss / d inputs.

    On entry: gradients are cleared (clear_gradients=True), `loss[None]` is set to 0
    and `loss.grad[None]` to 1. On exit: the adjoints run in reverse order."""

    def __init__(self, loss=None, clear_gradients=True, validation=None, grad_check=None):
        if validation is None:
            validation = runtime.program().config.ad_validation
        self.checker = rules.LaunchChecker() if validation else None
        self.restored = []      # 0-D fields the backward pass sees at their earlier values
        self.seen_ndarrays = {}
        self.loss = loss
        self.clear_gradients = clear_gradients
        self.grad_check = list(grad_check or [])
        if self.grad_check and loss is None:
            raise ValueError('ti.ad.Tape(grad_check=...) needs a loss')
        self.native = replay.LaunchList()   # every recorded kernel launch, in order
        self.units = []      # (kernel launches recorded before it, Unit) for the other units
        self.suspended = 0
        self.snapshot = None

    def check(self, kernel, compiled, args):
        """Before a launch: the global data access rules (engine/rules.py)."""
        if self.checker is None or self.suspended or kernel.no_grad:
            return
        summary = compiled.access_summary()
        if summary.violation:
            raise summary.violation
        for field in self.checker.check(summary, args, kernel.name):
            # read by an earlier launch, written by this one: the backward pass of the
            # earlier launches sees the value from before this write (and, in forward
            # mode, its tangent from before it: Hessians need both)
            saved = [(f, f._data.copy()) for f in _with_dual(field)]
            self.record_custom(lambda saved=saved: _put_back(saved), (),
                               f'restore {field.name}', forward=lambda: None)
            self.restored.append(field)
            if replay.capturing is not None:
                replay.capturing.replayable = False

    def record(self, kernel, args, compiled, launched):
        """A launch of `kernel`: primal code `compiled`, run as `launched` (whose buffer
        holds the packed arguments)."""
        if not (self.suspended or kernel.no_grad):
            self.native.add(compiled, launched.buffer, kernel, args)
            if compiled.layout.ndarrays and self.clear_gradients:
                self._clear_ndarray_gradients(args, compiled.layout.ndarrays)

    def _clear_ndarray_gradients(self, args, ndarrays):
        """Fields' gradients are zeroed on entry; an ndarray's when the tape first sees it."""
        for k, *_ in ndarrays:
            array = args[k]
            grad = getattr(array, 'grad', None)
            if grad is not None and id(array) not in self.seen_ndarrays:
                self.seen_ndarrays[id(array)] = array
                grad.fill(0)

    def record_replay(self, recording):
        """A replay of a captured function: all its launches, as one unit."""
        if not self.suspended:
            self.units.append((len(self.native.kernels), Unit(
                _python_backward(recording), (), recording.name, recording.replay, recording)))

    def record_custom(self, backward, args, name, forward=None):
        if not self.suspended:
            self.units.append((len(self.native.kernels), Unit(backward, args, name, forward)))

    def __len__(self):
        return len(self.native.kernels) + len(self.units)

    def _in_order(self):
        """Every unit as (backward, args, forward), in recording order (the Python paths)."""
        calls, units, n = self.native.calls, self.units, 0
        for before, unit in units + [(len(calls), None)]:
            for kernel, args in calls[n:before]:
                yield kernel.grad.run, args, kernel
            n = before
            if unit is not None:
                yield unit.backward, unit.args, unit.forward

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
        for _, args, run_forward in self._in_order():
            run_forward(*args)

    def grad(self):
        final = [(f, f._data.copy()) for field in self.restored for f in _with_dual(field)]
        try:
            self._backward()
        finally:
            _put_back(final)

    def _backward(self):
        if forward.active is not None or not runtime.program().config.native_replay:
            for backward, args, _ in reversed(list(self._in_order())):
                backward(*args)
            return
        adjoints = self.native.adjoint_addresses()
        end = len(self.native.kernels)
        for start, unit in reversed(self.units):
            self._run_adjoints(adjoints, start, end)
            end = start
            if unit.block is not None:
                functions, buffers = unit.block.adjoints()
                replay.run(functions, buffers, lambda k, r=unit.block: r.calls[len(r.calls) - 1 - k][0].name)
            else:
                unit.backward(*unit.args)
        self._run_adjoints(adjoints, 0, end)

    def _run_adjoints(self, adjoints, start, end):
        """The adjoints of kernel launches start..end-1, last first, in one native loop."""
        if end - start == 1:        # one launch between custom gradients: no array needed
            adjoint = self.native.kernels[start].adjoint_compiled()
            prog = adjoint.program
            adjoint.cfunc(prog.field_table_address, int(self.native.buffer_addresses()[start]),
                          prog.runtime_address)
            if adjoint.check_errors:
                prog.check_errors(adjoint.kernel.name)
        elif end > start:
            buffers = self.native.buffer_addresses()
            replay.run(adjoints[start:end][::-1], buffers[start:end][::-1],
                       lambda k: self.native.kernels[end - 1 - k].kernel.name)


def _with_dual(field):
    dual = field.dual
    return [field] if dual is None or not dual.placed else [field, dual]


def _put_back(saved):
    for field, value in saved:
        field._data[...] = value


def _python_backward(recording):
    def backward():
        for kernel, args in reversed(recording.calls):
            kernel.grad(*args)
    return backward


def _check_loss(loss):
    shape = getattr(loss, 'shape', None)
    if shape != ():
        raise ValueError(f'the loss of ti.ad.Tape must be a 0-D field (shape ()), got shape {shape}')
    if loss.grad is None or not loss.grad.placed:
        raise ValueError(f'the loss {loss.name} needs a gradient: declare it with needs_grad=True '
                         f'or call ti.root.lazy_grad()')
