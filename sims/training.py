"""The gradient-descent loop shared by every simulator.

With a run folder (`out`, see sims/runs.py) every iteration appends its record to
metrics.jsonl, saves params.npz when its loss is the best so far and replaces
checkpoint.npz (the parameters after the update, the optimizer's state, the RNG states);
at the end, the parameters after the last update are evaluated too, and saved as the best
where they are.
`resume=True` continues from that checkpoint and computes, on one thread, the same losses
bit for bit as a run that was never stopped. Ctrl-C (or SIGTERM) stops after the current
iteration; a second Ctrl-C stops at once, the last checkpoint being on disk already.
"""
import contextlib
import json
import math
import os
import signal
import threading
import time

from engine.core import program

from . import optimizers, runs
from .progress import LogProgress, compile_counts, compile_report
from .render import plot_losses


def train(sim, iters=None, out=None, log=print, resume=False, progress=None, command=None):
    """Train `sim` up to `iters` iterations in all (default: its configuration's);
    returns the per-iteration records, fewer when stopped by Ctrl-C.

    Each record: iteration, loss (before the update), gradient norm (before clipping),
    seconds for forward + backward + update. `command`: the command line that config.json
    records (default: this process's)."""
    total = sim.cfg.iters if iters is None else iters
    optimizer = sim.make_optimizer()
    run = runs.RunFolder(out) if out else None
    records, best = _begin(sim, optimizer, run, resume, command)
    progress = progress or LogProgress(log)
    progress.start(sim.name, total, len(records))
    try:
        with _stop_request() as stop:
            begin = len(records)
            for it in range(begin, total):
                records.append(_iteration(sim, optimizer, it, run, best, progress, first=it == begin))
                if stop.requested:
                    break
            else:
                if records and begin < total:
                    _weigh_last(sim, optimizer, run, best, total)
    finally:
        progress.close()
        if run:
            _summarize(sim, run, records, best)
    return records


def _iteration(sim, optimizer, it, run, best, progress, first):
    if first:                           # the kernels compile (or load from the cache) now
        progress.compiling()
        before = compile_counts()
    start = time.perf_counter()
    loss = sim.loss_and_grad()
    seconds = time.perf_counter() - start
    if loss < best['loss']:             # the parameters that gave it, before the update
        best.update(loss=loss, iteration=it)
        if run:
            sim.save_parameters(run.file(runs.BEST))
    start = time.perf_counter()
    norm = optimizer.step()
    seconds += time.perf_counter() - start
    if first:
        progress.compiled(compile_report(before))
    record = dict(iteration=it, loss=loss, grad_norm=norm, seconds=seconds)
    if run:
        run.append_metrics(record)      # before the checkpoint: a resume drops lines past it
        run.save_checkpoint([p.to_numpy() for p in sim.parameters()], optimizer.state(),
                            _checkpoint_info(sim, it + 1, best))
    progress.update(record, first)
    return record


def _weigh_last(sim, optimizer, run, best, done):
    """The parameters after the last update: no iteration evaluated them. Their loss, and
    where it is the best, they are the best (`best_iteration` = `done`: the iteration that
    would have started from them), so that "best" is never worse than "last". The random
    streams are put back as the checkpoint has them (a resumed run continues from there)."""
    info = _checkpoint_info(sim, done, best)
    loss = sim.evaluate()
    _restore_rngs(sim, info)
    if loss < best['loss']:
        best.update(loss=loss, iteration=done)
        if run:
            sim.save_parameters(run.file(runs.BEST))
            run.save_checkpoint([p.to_numpy() for p in sim.parameters()], optimizer.state(),
                                dict(info, best_loss=loss, best_iteration=done))


# --- resuming -------------------------------------------------------------------------
def _begin(sim, optimizer, run, resume, command):
    """The records so far and the best loss: none for a fresh run, the checkpoint's with
    `resume` (with the parameters, optimizer state and RNGs restored)."""
    best = dict(loss=math.inf, iteration=None)
    if run is None:
        return [], best
    if not resume:
        run.start(sim, command)
        return [], best
    run.remove_leftovers()
    run.write_config(sim, command)      # adds this command line; --iters may have changed
    info, state = run.load_checkpoint()
    if info is None:                    # stopped before the first checkpoint: start over
        run.keep_metrics([])
        return [], best
    sim.load_parameters(run.file(runs.CHECKPOINT))
    optimizer.load_state(state)
    _restore_rngs(sim, info)
    records = _records(run, info['iteration'])
    run.keep_metrics(records)
    best.update(loss=math.inf if info['best_loss'] is None else info['best_loss'],
                iteration=info['best_iteration'])
    return records, best


def _records(run, done):
    """The first `done` records: metrics.jsonl's, or where lines of it were lost, those of
    losses.json (written at the end of each training command) that agree with it."""
    records = run.metrics()[:done]
    if len(records) == done:
        return records
    summary = run.summary_records()[:done]
    if len(summary) == done and summary[:len(records)] == records:
        return summary
    raise runs.DamagedFile(run.file(runs.METRICS), ValueError(f'{len(records)} of the checkpoint\'s {done} '
                           f'iterations are readable, and {runs.SUMMARY} cannot fill the gap'),
                           'this run cannot be resumed: train --force starts it over; render and eval still work')


def _checkpoint_info(sim, done, best):
    rng = getattr(sim, 'rng', None)
    return dict(iteration=done, best_loss=None if math.isinf(best['loss']) else best['loss'],
                best_iteration=best['iteration'],
                numpy_rng=rng.bit_generator.state if rng is not None else None,
                engine_rng=int(program.current().runtime_buffer[program.RT_RNG_COUNTER]))


def _restore_rngs(sim, info):
    """The random streams as they were: ti.random in kernels and the simulator's numpy RNG."""
    program.current().runtime_buffer[program.RT_RNG_COUNTER] = info['engine_rng']
    if info.get('numpy_rng') and getattr(sim, 'rng', None) is not None:
        sim.rng.bit_generator.state = info['numpy_rng']


def _summarize(sim, run, records, best):
    """losses.json and loss_curve.png, from the records of every iteration so far."""
    summary = dict(simulator=sim.name, config=vars(sim.cfg), iterations=records,
                   best_iteration=best['iteration'], best_loss=None if math.isinf(best['loss']) else best['loss'])
    runs.atomic_write(run.file(runs.SUMMARY), lambda f: f.write(json.dumps(summary, indent=1).encode()))
    if records:
        plot_losses([r['loss'] for r in records], run.file(runs.PLOT), f'{sim.name}: training loss')


# --- Ctrl-C -----------------------------------------------------------------------------
class _StopRequest:
    requested = False


@contextlib.contextmanager
def _stop_request():
    """Within: the first SIGINT or SIGTERM asks the loop to stop after the current
    iteration; a second SIGINT raises KeyboardInterrupt at once."""
    stop = _StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop                      # signal handlers belong to the main thread
        return

    def handle(signum, frame):
        if stop.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.requested = True
        _write_now('\nstopping after this iteration (Ctrl-C again to stop at once)\n')

    previous = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _write_now(text):
    """Unbuffered, so a signal that lands inside a print cannot re-enter its buffer."""
    try:
        os.write(2, text.encode())
    except OSError:
        pass
