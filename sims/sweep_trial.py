"""One trial of a sweep, where it runs, and the early-stopping rule trials report to.

sims/sweep.py schedules the trials: in its own process, or in worker processes (Ray actors,
sims/sweep_ray.py) that each run many. What crosses to a worker is a plain dict (the
trial's spec) and what comes back is one too (its result): no engine object is pickled.
The worker builds everything: `Simulation.create` starts a fresh engine program (`ti.init`:
the previous trial's fields are dropped, nothing leaks from one trial to the next), while
the compiled kernels stay loaded in the process, keyed by their content, so the trials
after a worker's first compile nothing and load nothing.

A trial trains with `sims.training.train` into a normal run folder (sims/runs.py): with a
checkpoint there (an earlier attempt, an interrupted sweep) it resumes from it, which on one
thread gives the losses of an uninterrupted run bit for bit. A worker that cannot see the
sweep folder (another machine without a shared file system) trains into a folder of its
own, seeded with the files the spec carries, and sends the run's files back in its result;
while it trains it also sends them home every SEND_EVERY seconds, so that its death, or a
Ctrl-C of the sweep, loses no more than those seconds of the trial.
"""
import math
import os
import shutil
import socket
import tempfile
import time
import traceback

import numpy as np

from . import load, runs
from .progress import QuietProgress, compile_counts
from .training import train

MARKER = '.sweep-id'        # in the sweep folder: its id, so that a worker knows it sees the folder
DONE, FAILED, STOPPED, INTERRUPTED = 'done', 'failed', 'stopped', 'interrupted'
SEND_EVERY = 10.0           # seconds between the run files a worker without the sweep folder sends


class StoppedEarly(Exception):
    """Raised before an iteration of a trial that the early-stopping rule stopped."""


def run_trial(spec, report=None, sim_class=None, send=None):
    """Train the trial `spec` (a dict: name, simulator, quick, config, threads, folder,
    sweep_dir, sweep_id, command, files) into its run folder; returns its result (a dict:
    status done / stopped / failed / interrupted, losses, error, kernels, seconds, ...).

    report(name, updates made, the loss after them) -> True stops the trial (early
    stopping); sim_class: the simulator (default: the one the spec names, loaded here);
    send(files): where a worker that does not see the sweep folder sends the run's files
    (pack()) after an iteration, every SEND_EVERY seconds."""
    start = time.perf_counter()
    result = dict(name=spec['name'], worker=f'{socket.gethostname()}:{os.getpid()}', files=None,
                  error=None, traceback=None, losses=[], resumed_from=0)
    local = sees_sweep_folder(spec)
    folder = spec['folder'] if local else _unpack(spec)
    before = compile_counts()
    try:
        result.update(_train(spec, folder, report, sim_class or load(spec.get('load') or spec['simulator']), None if local else send))
    except Exception as e:      # noqa: BLE001 - any error is the trial's, reported with it
        result.update(status=FAILED, error=describe(e), traceback=traceback.format_exc(limit=-8))
    finally:
        compiled, loaded, _ = (now - then for now, then in zip(compile_counts(), before))
        result.update(kernels=dict(compiled=compiled, loaded=loaded), seconds=time.perf_counter() - start)
        if not local:
            result['files'] = pack(folder)
            shutil.rmtree(os.path.dirname(folder), ignore_errors=True)
    return result


def describe(error):
    """One line: the error's type and the first line of its message."""
    text = str(error).strip().splitlines()
    return f'{type(error).__name__}: {text[0]}' if text else type(error).__name__


def _train(spec, folder, report, sim_class, send):
    sim = sim_class.create(quick=spec['quick'], threads=spec['threads'], **spec['config'])
    run = runs.RunFolder(folder)
    checkpoint = run.load_checkpoint()[0] if os.path.isdir(folder) else None
    watch = _Watch(sim, spec['name'], report, folder, send)
    try:
        records = train(sim, out=folder, resume=checkpoint is not None, progress=watch, command=spec['command'])
        status = DONE if len(records) >= sim.cfg.iters else INTERRUPTED      # Ctrl-C or SIGTERM
    except StoppedEarly:
        records, status = run.metrics(), STOPPED
    try:
        kept = run.load_checkpoint()[0] or {}
    except runs.RunError:
        kept = {}
    best = kept.get('best_loss')
    return dict(status=status, losses=[r['loss'] for r in records],
                best=best if best is not None and math.isfinite(best) else None,
                resumed_from=checkpoint['iteration'] if checkpoint else 0)


class _Watch(QuietProgress):
    """Training's progress, silent: reports each iteration's loss; when told to stop, the next
    iteration raises StoppedEarly before it computes anything (the run folder then holds
    every iteration so far, summary and checkpoint included). With `send`, the run's files
    go home now and then (an iteration's metrics and checkpoint are on disk when it ends)."""

    def __init__(self, sim, name, report, folder, send):
        super().__init__()
        self.name, self.report, self.stop = name, report, False
        self.folder, self.send, self.sent = folder, send, time.monotonic()
        if report is not None:
            compute = sim.loss_and_grad

            def loss_and_grad():
                if self.stop:
                    raise StoppedEarly
                return compute()
            sim.loss_and_grad = loss_and_grad       # this simulator only: it is the trial's

    def update(self, record, first):
        # the loss of the parameters after record['iteration'] updates: ASHA's time
        if self.report is not None and self.report(self.name, record['iteration'], record['loss']):
            self.stop = True
        if self.send is not None and time.monotonic() - self.sent >= SEND_EVERY:
            self.send(pack(self.folder))
            self.sent = time.monotonic()


# --- a worker without the sweep folder ------------------------------------------------
def sees_sweep_folder(spec):
    try:
        with open(os.path.join(spec['sweep_dir'], MARKER)) as f:
            return f.read().strip() == spec['sweep_id']
    except OSError:
        return False


def pack(folder):
    """The run files of a folder: {name: bytes}."""
    found = {}
    for name in runs.RUN_FILES:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, 'rb') as f:
                found[name] = f.read()
    return found


def unpack(files, folder):
    """Write the files of pack() into a folder, each atomically."""
    os.makedirs(folder, exist_ok=True)
    for name, data in (files or {}).items():
        if name in runs.RUN_FILES:
            runs.atomic_write(os.path.join(folder, name), lambda f, data=data: f.write(data))


def _unpack(spec):
    folder = os.path.join(tempfile.mkdtemp(prefix='sweep-trial-'), spec['name'])
    if spec.get('files'):
        unpack(spec['files'], folder)
    return folder


# --- early stopping -------------------------------------------------------------------
class Asha:
    """Asynchronous successive halving: the rule of Ray Tune's ASHAScheduler (one bracket,
    mode 'min'). Rungs sit at grace_period * reduction_factor**k iterations below max_t; the
    first time a trial reaches a rung, its loss is recorded there and the trial stops when
    that loss is worse than the best 1/reduction_factor of the losses recorded there so far.
    Trials that reach a rung first are never stopped by it (nothing to compare with)."""

    def __init__(self, max_t, grace_period=1, reduction_factor=4, rungs=None):
        self.max_t, self.grace_period, self.reduction_factor = max_t, grace_period, reduction_factor
        count = max(int(math.log(max_t / grace_period) / math.log(reduction_factor) + 1), 0)
        self.milestones = [grace_period * reduction_factor ** k for k in reversed(range(count))]
        self.rungs = {str(m): dict((rungs or {}).get(str(m), {})) for m in self.milestones}

    def report(self, trial, iterations, loss):
        """The trial's loss after `iterations` updates; True: stop the trial."""
        loss = loss if math.isfinite(loss) else 1e308     # NaN or Inf: the worst
        for milestone in self.milestones:                 # the highest first
            recorded = self.rungs[str(milestone)]
            if iterations < milestone or trial in recorded:
                continue
            cutoff = np.percentile(list(recorded.values()), 100 / self.reduction_factor) if recorded else None
            recorded[trial] = loss
            return cutoff is not None and loss > cutoff
        return False

    def state(self):
        """What sweep.json keeps, so that a resumed sweep goes on with the same rungs."""
        return dict(name='asha', max_t=self.max_t, grace_period=self.grace_period,
                    reduction_factor=self.reduction_factor, rungs=self.rungs)

    @classmethod
    def from_state(cls, state):
        return cls(state['max_t'], state['grace_period'], state['reduction_factor'], state.get('rungs'))
