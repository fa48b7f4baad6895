"""The tape across kernels: records launches and replays their adjoints backwards.

Only (kernel, arguments) records are kept; global fields are the checkpoints.
The backward pass runs the adjoint kernels in one native loop (engine/runtime/replay.py),
returning to Python only for custom gradients (grad_replaced) and in forward mode.
"""
import contextlib

import numpy as np

from . import pipeline, replay, tape_rules
from .tape_rules import forget_memo
from ..core.context import ctx
from ..core.program import current as current_program, validation_setting
from ..core.errors import USER_ERRORS, user_frames_only
from ..language.fields import Field, Ndarray
from .finite_diff import check_tape, loss_key, restore_fields, snapshot_fields, values_of



_KEPT = {'saved': 'values of {} saved before a write over what earlier launches read',
         'python': 'values of {} around writes from Python'}
_RECORD_BYTES = 120      # a launch's record besides its argument bytes (list entries, the args tuple)


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
        validation = config.ad_validation if validation is None else \
            validation_setting(validation, 'ti.ad.Tape(validation=...)')
        self.checker = tape_rules.TapeChecker(tape_rules.memo_of(current_program())) if validation else None
        # the rules inside a launch: checked at each launch, or at the first launch of each
        # kernel with each arguments (engine/autodiff/rules.py)
        self.check_every_launch = 'always' in (validation, config.ad_validation) or config.debug
        self.restored = {}      # Targets whose elements a backward pass puts back: id(data) -> Target
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
        self.kept = {}          # what the tape keeps besides launch records: (what, name) -> bytes
        self.kept_bytes = 0
        self.memory_limit = config.tape_memory_limit
        # the records and native saves pass the limit when their bytes pass check_at (_keep)
        self.check_at = self.memory_limit or float('inf')

    def skips(self, kernel):
        """Whether a launch of `kernel` stays out of the backward pass (ti.ad.no_grad)."""
        return kernel.no_grad or ctx.no_grad_depth > 0

    def check(self, kernel, compiled, args):
        """Before a launch: the global data access rules (engine/autodiff/rules.py). Saves what the
        launch will overwrite of what earlier launches read; returns what the launch must
        keep shadow words for to check the rules inside it (none: launch it as it is).
        Runs at every launch: a DiffTaichi loop makes thousands a second, so it is kept short."""
        if self.snapshot is not None:
            self._snapshot_ndarrays(args, compiled.layout.ndarrays)
        checker = self.checker
        if checker is None or self.suspended:
            return None
        summary = compiled.summary or compiled.access_summary()
        no_grad = kernel.no_grad or ctx.no_grad_depth > 0
        if not no_grad and summary.violation:
            raise summary.violation
        saves, touched = checker.launch(summary, args, None if no_grad else kernel.name, id(compiled))
        if saves:
            self._save(saves, args, kernel.name)
        if no_grad:
            if touched and summary.stores_with_grad:
                # it overwrites what the tape used: the gradient of the old values ends here
                self.record_custom(lambda *a: _launch_adjoint(pipeline.no_grad_adjoint_of(compiled), a), args,
                                   f'{kernel.name} (no_grad)', forward=lambda *a: compiled.launch(a))
            return None
        if not (self.check_every_launch or checker.new_step):
            return None         # this launch was checked in this sequence of launches before
        return compiled.shadowed(args) or None

    def _snapshot_ndarrays(self, args, ndarrays):
        """grad_check replays the launches from the state the tape started with: the first
        time it sees an ndarray, before a launch changes it, it keeps a copy."""
        for k, *_ in ndarrays:
            array = args[k]
            if not any(array is a for a, _ in self.snapshot):
                self.snapshot.append((array, values_of(array).copy()))

    def _save(self, saves, args, before):
        """Keep the elements a write is about to change (and their tangents) for the backward
        pass of the launches before it: `saves` are tape_rules.Saves, `args` the launch's,
        `before` what writes (a kernel's name).
        Contiguous elements without tangents are put back natively, as a step of the
        replayed adjoints (LaunchList.add_restore); this path runs once per save, so it is short."""
        python = []
        for save in saves:
            target = self._target(save.obj, args)
            if save.offset is not None and target.dual is None:     # a field's contiguous elements
                if save.nbytes:
                    self.native.add_restore(target.address + save.offset, save)
                continue
            index = save.index
            values = target.data[index].copy()
            tangents = None if target.dual is None else target.dual[index].copy()
            python.append((target, index, values, tangents))
            self._keep(('saved', target.name), values.nbytes + (0 if tangents is None else tangents.nbytes))
        if python:
            self.record_custom(lambda: _put_back(python), (), f'restore before {before}', forward=_nothing)
        if self._grown() > self.check_at:
            self._keep(None, 0)
        if ctx.capture is not None:
            ctx.capture.replayable = False

    def _target(self, obj, args):
        """The tapes_rules.Target of what a save names, kept in self.restored: the state
        the backward pass leaves is put back at its end."""
        if isinstance(obj, Field):      # the common case, found with no call
            target = self.restored.get(id(obj._data))
            if target is not None:
                return target
        target = obj if isinstance(obj, tape_rules.Target) else self.checker.target(obj, args)
        self.restored[id(target.data)] = target
        return target

    def record(self, kernel, args, compiled, launched):
        """A launch of `kernel`: primal code `compiled`, run as `launched` (whose buffer
        holds the packed arguments)."""
        if self.suspended or kernel.no_grad or ctx.no_grad_depth > 0:      # self.skips(kernel)
            return
        native = self.native
        native.add(compiled, launched.buffer, kernel, args)
        if len(native.arguments) + _RECORD_BYTES * len(native.kernels) > self.check_at:    # _grown()
            self._keep(None, 0)
        if compiled.layout.ndarrays and self.clear_gradients:
            self._clear_ndarray_gradients(args, compiled.layout.ndarrays)

    def inputs_loaded(self, obj, mask):
        """The caller loaded obj's elements where `mask` holds as the inputs of what the tape
        records (engine/runtime/interop.py): the recorded code's writes from Python over them
        replace the inputs, whose gradient there is then 0."""
        if self.checker is not None:
            self.checker.caller_read(obj, mask)

    def python_write(self, obj, index, assign):
        """A write from Python (`x[i] = v`, from_numpy, fill) while recording. Over elements
        no launch on the tape touched yet it sets inputs, as in Taichi (`.grad` is then the
        gradient with respect to the value written). Over elements launches used, its value
        is a constant that replaces a version the tape depends on: the backward pass puts
        back the old values for the launches that read them and ends the gradient there.
        `index` may name one component of a vector or matrix element (`v[i][0] = 1`): the
        tape tracks whole elements, and puts back and cuts only the component."""
        role = getattr(obj, 'role', 'primal')
        if role == 'grad':
            return self._grad_write(obj, index, assign)
        if self.suspended or self.checker is None or role != 'primal':
            return assign()
        element = index[:len(obj.shape)] if isinstance(index, tuple) else index
        target, read, touched = self.checker.python_write(obj, element)
        if not touched:
            return assign()
        old = (target.data[index].copy(), None if target.dual is None else target.dual[index].copy())
        self._keep(('python', target.name),     # before the write
                   2 * old[0].nbytes + (0 if old[1] is None else old[1].nbytes))
        assign()
        new = target.data[index].copy()

        def backward():
            if read:
                _put_back([(target, index) + old])
            if target.grad is not None:
                target.grad[index] = 0
                grad_dual = _grad_dual(obj)
                if grad_dual is not None:       # forward over reverse: its tangent ends too
                    grad_dual[index] = 0

        def forward():
            target.data[index] = new
            if target.dual is not None:
                target.dual[index] = 0
        if read:
            self.restored[id(target.data)] = target
        self.record_custom(backward, (), f'write to {target.name} from Python', forward=forward)

    def _grad_write(self, obj, index, assign):
        """A write from Python to a gradient while recording. The tape seeded loss.grad = 1
        on entry and the backward pass at exit starts from it: zeroing gradients here
        (`x.grad.fill(0)`, `loss.grad[None] = 0`, ti.ad.clear_all_gradients()) clears
        them for that backward pass and keeps the seed. Any other value written to the
        loss's gradient is refused (the tape owns the seed: scale the loss instead); other
        gradients take the value, and the backward pass accumulates onto it."""
        seed = self.loss.grad if self.loss is not None else None
        if obj is not seed:
            return assign()
        old = np.array(seed.data, copy=True)
        assign()
        if np.all(seed.data == 0):
            self.reseed()
        elif not np.all(seed.data == 1):
            seed.data[...] = old
            name = self.loss.name
            raise ValueError(f'a write to {name}.grad inside ti.ad.Tape({name}): the tape seeds '
                             f'{name}.grad = 1 on entry and starts its backward pass from it at exit; '
                             f'zeroing gradients inside the block keeps that seed, other values are refused. '
                             f'To weight the gradient, scale the loss in a kernel (or seed the gradients '
                             f'yourself: ti.ad.Tape(loss=None) and kernel.grad())')

    def reseed(self):
        """loss.grad = 1 again after gradients were cleared inside the block."""
        if self.loss is None:
            return
        grad = self.loss.grad
        grad.data[...] = 1
        dual = getattr(grad, 'dual', None)
        if dual is not None and (not isinstance(dual, Field) or dual.placed):
            dual.data[...] = 0       # a constant seed: no tangent (forward over reverse)

    def _clear_ndarray_gradients(self, args, ndarrays):
        """Fields' gradients are zeroed on entry; an ndarray's when the tape first sees it as
        an argument with a gradient (not one declared ti.types.ndarray(needs_grad=False))."""
        for k, _, _, companions in ndarrays:
            if any(path == ('grad',) for _, path in companions):
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
        if ctx.no_grad_depth:
            return False        # its launches run one by one, each as a no_grad launch
        if self.checker is not None:
            if self.check_every_launch or not recording.checked:
                recording.checked = True
                recording.replayable = not tape_rules.needs_saves(recording.calls, recording.launches.kernels)
                return False
            saves = self.checker.replay(recording)
            if saves:
                self._save(saves, None, f'the replay of {recording.name}')
        if self.clear_gradients:
            for array in recording.ndarrays_with_grad():
                self.clear_ndarray_gradient(array)
        self.units.append((len(self.native.kernels), Unit(
            _python_backward(recording), (), recording.name, recording.replay, recording)))
        return True

    def _keep(self, what, nbytes):
        """Count `nbytes` more kept for `what` (a key of _KEPT, and a name; None: only check);
        beyond ti.init(tape_memory_limit=...) a MemoryError that says what the tape holds,
        before the system runs out of memory."""
        if what:
            self.kept[what] = self.kept.get(what, 0) + nbytes
            self.kept_bytes += nbytes
        native = self.native
        records = self._grown() - native.restored_bytes
        total = self._grown() + self.kept_bytes
        self.check_at = self.memory_limit - self.kept_bytes if self.memory_limit else float('inf')
        if self.memory_limit and total > self.memory_limit:
            held = sorted(self.memory_report().items(), key=lambda item: -item[1])
            lines = [f'  {_size(nbytes)}: {what}' for what, nbytes in held if what != 'records'][:6]
            lines.append(f'  {_size(records)}: the records of {len(native.kernels):,} launches')
            raise MemoryError(
                f'the tape holds {_size(total)}, more than ti.init(tape_memory_limit='
                f'{self.memory_limit}) allows ({_size(self.memory_limit)}):\n' + '\n'.join(lines) + '\nTo keep less: record fewer steps '
                f'per tape, or checkpoint a long rollout (ti.ad.grad_replaced segments, see '
                f'docs/checkpointing_and_custom_gradients.md); index a state by time step '
                f'(x[t + 1, i] = f(x[t, i])) instead of updating it in place, which needs no saves; '
                f'or raise the limit (0: none)')

    def _grown(self):
        """The bytes launch records and native saves hold: total - kept_bytes."""
        return len(self.native.arguments) + _RECORD_BYTES * len(self.native.kernels)

    def memory_report(self):
        """What the tape holds, in bytes: {'records': the launches' records, and per field or
        ndarray, its values saved before writes over what earlier launches read and around
        writes from Python}."""
        native = self.native
        report = {'records': self._grown() - native.restored_bytes}
        for (kind, name), nbytes in self.kept.items():
            report[_KEPT[kind].format(name)] = nbytes
        for name, nbytes in native.restored_by_name().items():
            what = _KEPT['saved'].format(name)
            report[what] = report.get(what, 0) + nbytes
        return report

    def record_custom(self, backward, args, name, forward=None):
        if not self.suspended:
            self.units.append((len(self.native.kernels), Unit(backward, args, name, forward)))

    def __len__(self):
        return len(self.native.kernels) + len(self.units)

    @property
    def calls(self):
        """The kernel launches recorded so far, in order, as (kernel, arguments) (Taichi's
        Tape.calls; launches inside grad_replaced functions and captured replays are parts
        of their units, not listed)."""
        return [call for call in self.native.calls if call[0] is not replay.RESTORE]

    def _in_order(self):
        """Every unit as (backward, args, forward), in recording order (the Python paths)."""
        calls, units, n = self.native.calls, self.units, 0
        for before, unit in units + [(len(calls), None)]:
            for k in range(n, before):
                kernel, args = calls[k]
                if kernel is replay.RESTORE:
                    yield self.native.put_back, (k,), _nothing
                else:
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
            self.loss[loss_key(self.loss)] = 0
            self.loss.grad[loss_key(self.loss)] = 1
        if self.grad_check:
            self.snapshot = snapshot_fields(self.grad_check)
        ctx.tape = self
        return self

    def __exit__(self, exc_type, exc, tb):
        ctx.tape = None
        if exc_type is not None and self.checker is not None:
            # the memo may hold the steps of this sequence up to the launch that failed (a
            # rule broken inside it): a later tape must check them again, not follow them
            forget_memo(current_program())
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
        except BaseException:
            if self.checker is not None:
                forget_memo(current_program())      # as in __exit__
            raise
        finally:
            ctx.tape = None

    def replay_forward(self, perturb=None):
        """Re-run the recorded launches from the state the tape started with (after
        `perturb()`, with which the gradient checker moves one entry)."""
        restore_fields(self.snapshot)
        if perturb is not None:
            perturb()
        self.loss[loss_key(self.loss)] = 0
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
        if end - start == 1 and self.native.kernels[start] is replay.RESTORE:
            self.native.put_back(start)
        elif end - start == 1:        # one launch between custom gradients: no array needed
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


def _size(nbytes):
    for unit, scale in (('GiB', 2 ** 30), ('MiB', 2 ** 20), ('KiB', 2 ** 10)):
        if nbytes >= scale:
            return f'{nbytes / scale:,.1f} {unit}'
    return f'{nbytes:,} bytes'


def _put_back(saved):
    for target, index, value, dual in saved:
        target.data[index] = value
        if dual is not None:
            target.dual[index] = dual


def _nothing(*args):
    """Replaying the forward pass, a put-back does nothing: its values are the launches' to write."""


def _launch_adjoint(adjoint, args):
    """An adjoint launched from Python; in forward mode its tangents too (forward over reverse)."""
    if ctx.forward is not None:
        adjoint = pipeline.tangents_of(adjoint)
    adjoint.launch(args)


def _grad_dual(obj):
    """The array of obj.grad.dual (forward over reverse), or None."""
    dual = getattr(getattr(obj, 'grad', None), 'dual', None)
    if isinstance(dual, Field):
        return dual._data if dual.placed else None
    return None if dual is None else dual.data


def _python_backward(recording):
    def backward():
        for kernel, args in reversed(recording.calls):
            kernel.grad(*args)
    return backward


def _check_loss(loss):
    if not isinstance(loss, (Field, Ndarray)):
        raise TypeError(f'the loss of ti.ad.Tape must be a 0-D field or ti.ndarray, got {type(loss).__name__}')
    shape = loss.shape
    if isinstance(loss, Ndarray) and int(np.prod(shape)) != 1:
        raise ValueError(f'the loss of ti.ad.Tape must be a ti.ndarray of one element (shape () or (1,)), '
                         f'got shape {shape}')
    if isinstance(loss, Field) and shape != ():
        raise ValueError(f'the loss of ti.ad.Tape must be a 0-D field (shape ()), got shape {shape}')
    if loss.element_shape:
        raise ValueError(f'the loss of ti.ad.Tape must be a scalar; {loss.name} holds elements of '
                         f'shape {loss.element_shape} (sum them into a 0-D scalar field)')
    if loss.grad is None or isinstance(loss, Field) and not loss.grad.placed:
        fix = 'ti.ndarray(..., needs_grad=True)' if isinstance(loss, Ndarray) else \
            'needs_grad=True or call ti.root.lazy_grad()'
        raise ValueError(f'the loss {loss.name} needs a gradient: declare it with {fix}')
