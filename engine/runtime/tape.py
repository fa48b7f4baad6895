"""The tape across kernels: records launches and replays their adjoints backwards.

Only (kernel, arguments) records are kept; global fields are the checkpoints.
The backward pass runs the adjoint kernels in one native loop (engine/runtime/replay.py),
returning to Python only for custom gradients (grad_replaced) and in forward mode.
"""
import contextlib

from . import pipeline, replay, tape_rules
from ..core.context import ctx
from ..core.program import current as current_program
from ..core.errors import USER_ERRORS, user_frames_only
from ..language.fields import Field, Ndarray
from .finite_diff import check_tape, restore_fields, snapshot_fields, values_of



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
        config = current_program().config
        if validation is None:
            validation = config.ad_validation
        self.checker = tape_rules.TapeChecker(tape_rules.memo_of(current_program())) if validation else None
        # the rules inside a launch: checked at each launch, or at the first launch of each
        # kernel with each arguments (engine/autodiff/rules.py)
        self.check_every_launch = 'always' in (validation, config.ad_validation) or config.debug
        self.restored = {}      # Targets whose elements a backward pass puts back: id -> Target
        self.seen_ndarrays = {}
        self.loss = loss
        self.clear_gradients = clear_gradients
        self.grad_check = list(grad_check or [])
        if self.grad_check and loss is None:
            raise ValueError('ti.ad.Tape(grad_check=...) needs a loss')
        self.native = replay.LaunchList()   # every recorded kernel launch, in order
        self.units = []      # (kernel launches recorded before it, Unit) for the other units
        self.suspended = 0
        self.no_grad_depth = 0    # > 0 inside a call of a ti.ad.no_grad Python function
        self.snapshot = None

    def skips(self, kernel):
        """Whether a launch of `kernel` stays out of the backward pass (ti.ad.no_grad)."""
        return kernel.no_grad or self.no_grad_depth > 0

    def check(self, kernel, compiled, args):
        """Before a launch: the global data access rules (engine/autodiff/rules.py). Saves what the
        launch will overwrite of what earlier launches read; returns what the launch must
        keep shadow words for to check the rules inside it (none: launch it as it is)."""
        if self.snapshot is not None:
            self._snapshot_ndarrays(args, compiled.layout.ndarrays)
        if self.checker is None or self.suspended:
            return None
        summary = compiled.access_summary()
        no_grad = self.skips(kernel)
        if not no_grad and summary.violation:
            raise summary.violation
        key = _args_key(args)
        saves, touched = self.checker.launch(summary, args, None if no_grad else kernel.name,
                                             (id(compiled), key))
        if saves:
            self._save(saves, f'kernel {kernel.name}')
        if no_grad:
            if touched and summary.stores_with_grad:
                # it overwrites what the tape used: the gradient of the old values ends here
                self.record_custom(lambda *a: pipeline.no_grad_adjoint_of(compiled).launch(a), args,
                                   f'{kernel.name} (no_grad)', forward=lambda *a: compiled.launch(a))
            return None
        if not (self.check_every_launch or self.checker.new_step):
            return None         # this launch was checked in this sequence of launches before
        return compiled.shadowed(args) or None

    def _snapshot_ndarrays(self, args, ndarrays):
        """grad_check replays the launches from the state the tape started with: the first
        time it sees an ndarray, before a launch changes it, it keeps a copy."""
        for k, *_ in ndarrays:
            array = args[k]
            if not any(array is a for a, _ in self.snapshot):
                self.snapshot.append((array, values_of(array).copy()))

    def _save(self, saves, before):
        """Keep the elements a write is about to change (and their tangents) for the
        backward pass of the launches before it."""
        saved = [(t, index, t.data[index].copy(), None if t.dual is None else t.dual[index].copy())
                 for t, index in saves]
        self.record_custom(lambda: _put_back(saved), (), f'restore before {before}', forward=lambda: None)
        for t, _ in saves:
            self.restored[id(t)] = t
        if ctx.capture is not None:
            ctx.capture.replayable = False

    def record(self, kernel, args, compiled, launched):
        """A launch of `kernel`: primal code `compiled`, run as `launched` (whose buffer
        holds the packed arguments)."""
        if self.suspended or self.skips(kernel):
            return
        self.native.add(compiled, launched.buffer, kernel, args)
        if compiled.layout.ndarrays and self.clear_gradients:
            self._clear_ndarray_gradients(args, compiled.layout.ndarrays)

    def python_write(self, obj, index, assign):
        """A write from Python (`x[i] = v`, from_numpy, fill) while recording. Over elements
        no launch on the tape touched yet it sets inputs, as in Taichi (`.grad` is then the
        gradient with respect to the value written). Over elements launches used, its value
        is a constant that replaces a version the tape depends on: the backward pass puts
        back the old values for the launches that read them and ends the gradient there."""
        if self.suspended or self.checker is None or getattr(obj, 'role', 'primal') != 'primal':
            return assign()
        target, read, touched = self.checker.python_write(obj, index)
        if not touched:
            return assign()
        old = (target.data[index].copy(), None if target.dual is None else target.dual[index].copy())
        assign()
        new = target.data[index].copy()

        def backward():
            if read:
                _put_back([(target, index) + old])
            if target.grad is not None:
                target.grad[index] = 0

        def forward():
            target.data[index] = new
            if target.dual is not None:
                target.dual[index] = 0
        if read:
            self.restored[id(target)] = target
        self.record_custom(backward, (), f'write to {target.name} from Python', forward=forward)

    def _clear_ndarray_gradients(self, args, ndarrays):
        """Fields' gradients are zeroed on entry; an ndarray's when the tape first sees it."""
        for k, *_ in ndarrays:
            self.clear_ndarray_gradient(args[k])

    def clear_ndarray_gradient(self, array):
        grad = getattr(array, 'grad', None)
        if grad is not None and id(array) not in self.seen_ndarrays:
            self.seen_ndarrays[id(array)] = array
            grad.fill(0)
            if getattr(grad, 'dual', None) is not None:     # forward over reverse accumulates there too
                grad.dual.data.fill(0)

    def record_replay(self, recording):
        """A replay of a captured function: all its launches, as one unit. False when the
        function must run instead: the first time a tape sees it (its launches are checked
        one by one; if they need the tape to save something between them, they always run
        so), and at every call when the tape checks every launch."""
        if self.suspended:
            return True
        if self.no_grad_depth:
            return False        # its launches run one by one, each as a no_grad launch
        if self.checker is not None:
            if self.check_every_launch or not recording.checked:
                recording.checked = True
                recording.replayable = not tape_rules.needs_saves(recording.calls, recording.launches.kernels)
                return False
            saves = self.checker.replay(recording)
            if saves:
                self._save(saves, f'replay of {recording.name}')
        if self.clear_gradients:
            for array in recording.ndarrays_with_grad():
                self.clear_ndarray_gradient(array)
        self.units.append((len(self.native.kernels), Unit(
            _python_backward(recording), (), recording.name, recording.replay, recording)))
        return True

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
        if ctx.tape is not None:
            raise RuntimeError('ti.ad.Tape cannot be nested')
        if self.loss is not None:
            _check_loss(self.loss)
            if self.clear_gradients:
                current_program().clear_gradients()
                if isinstance(self.loss, Ndarray):      # zeroed now: the launches keep its seed
                    self.clear_ndarray_gradient(self.loss)
            self.loss[None] = 0
            self.loss.grad[None] = 1
        if self.grad_check:
            self.snapshot = snapshot_fields(self.grad_check)
        ctx.tape = self
        return self

    def __exit__(self, exc_type, exc, tb):
        ctx.tape = None
        if exc_type is None:
            try:
                self.grad()
                if self.grad_check:
                    check_tape(self)
            except USER_ERRORS as error:     # the traceback ends at the `with` statement
                user_frames_only(error)
                raise

    @contextlib.contextmanager
    def recording(self):
        """Records launches with no loss, and no backward pass at the end: the caller seeds
        the gradients and calls grad() later (engine/runtime/interop.py)."""
        if ctx.tape is not None:
            raise RuntimeError('ti.ad.Tape cannot be nested')
        ctx.tape = self
        try:
            yield self
        finally:
            ctx.tape = None

    def replay_forward(self, perturb=None):
        """Re-run the recorded launches from the state the tape started with (after
        `perturb()`, with which the gradient checker moves one entry)."""
        restore_fields(self.snapshot)
        if perturb is not None:
            perturb()
        self.loss[None] = 0
        for _, args, run_forward in self._in_order():
            run_forward(*args)

    def grad(self):
        final = [(t, Ellipsis, t.data.copy(), None if t.dual is None else t.dual.copy())
                 for t in self.restored.values()]
        try:
            self._backward()
        finally:
            _put_back(final)

    def _backward(self):
        if ctx.forward is not None or not current_program().config.native_replay:
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
                replay.run(functions, buffers, lambda k, r=unit.block:
                           pipeline.adjoint_of(r.launches.kernels[len(r.calls) - 1 - k]))
            else:
                unit.backward(*unit.args)
        self._run_adjoints(adjoints, 0, end)

    def _run_adjoints(self, adjoints, start, end):
        """The adjoints of kernel launches start..end-1, last first, in one native loop."""
        if end - start == 1:        # one launch between custom gradients: no array needed
            adjoint = pipeline.adjoint_of(self.native.kernels[start])
            prog = adjoint.program
            adjoint.cfunc(prog.field_table_address, int(self.native.buffer_addresses()[start]),
                          prog.runtime_address)
            if adjoint.check_errors:
                adjoint.report_errors()
        elif end > start:
            buffers = self.native.buffer_addresses()
            replay.run(adjoints[start:end][::-1], buffers[start:end][::-1],
                       lambda k: pipeline.adjoint_of(self.native.kernels[end - 1 - k]))


def _put_back(saved):
    for target, index, value, dual in saved:
        target.data[index] = value
        if dual is not None:
            target.dual[index] = dual


def _args_key(args):
    try:
        hash(args)
        return args
    except TypeError:
        return tuple(a if isinstance(a, (int, float)) else id(a) for a in args)


def _python_backward(recording):
    def backward():
        for kernel, args in reversed(recording.calls):
            kernel.grad(*args)
    return backward


def _check_loss(loss):
    if not isinstance(loss, (Field, Ndarray)):
        raise TypeError(f'the loss of ti.ad.Tape must be a 0-D field or ti.ndarray, got {type(loss).__name__}')
    shape = loss.shape
    if shape != ():
        what = 'ti.ndarray' if isinstance(loss, Ndarray) else 'field'
        raise ValueError(f'the loss of ti.ad.Tape must be a 0-D {what} (shape ()), got shape {shape}')
    if loss.element_shape:
        raise ValueError(f'the loss of ti.ad.Tape must be a scalar; {loss.name} holds elements of '
                         f'shape {loss.element_shape} (sum them into a 0-D scalar field)')
    if loss.grad is None or isinstance(loss, Field) and not loss.grad.placed:
        fix = 'ti.ndarray(..., needs_grad=True)' if isinstance(loss, Ndarray) else \
            'needs_grad=True or call ti.root.lazy_grad()'
        raise ValueError(f'the loss {loss.name} needs a gradient: declare it with {fix}')
