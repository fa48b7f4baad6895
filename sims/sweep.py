"""`python -m sims.<name> sweep`: many training runs, one per combination of the values given
(seeds, learning rates, controllers, any configuration key), on one machine or a Ray cluster.

Every trial trains with `sims.training.train` into a run folder of its own,
`<out>/trials/<trial>/` (config.json, metrics.jsonl, checkpoint.npz, params.npz: what
`train` writes, so `render --out <trial folder>` works on it). The sweep folder holds
sweep.json (the grid, the command lines, each trial's status: done, stopped by early
stopping, failed with its error, interrupted, pending), results.csv and results.json (one
row per trial) and loss_curves.png (every trial's curve).

Where the trials run (sims/sweep_trial.py runs one): in this process one after the other
(no Ray, or --workers 1 without --address), or on Ray actors, one per worker, each running
many trials with its compiled kernels kept warm (sims/sweep_ray.py). A trial that raises is
tried again (--retries), from its checkpoint; so is one whose worker process died. Then it
is reported as failed, never dropped. `--resume` runs the trials that are not done or
stopped, each from its checkpoint. `--scheduler asha` stops trials early by Ray Tune's ASHA
rule on the per-iteration loss.
"""
import argparse
import collections
import contextlib
import csv
import fcntl
import importlib.util
import io
import itertools
import json
import math
import os
import re
import shlex
import shutil
import signal
import threading
import time
import uuid

from . import command_of, command_words, load, reference, runs
from .base import flag
from .render import _axes, _save
from .sweep_trial import DONE, FAILED, INTERRUPTED, MARKER, STOPPED, Asha, pack, run_trial, unpack

SWEEP, TABLE, ROWS, PLOT, TRIALS = 'sweep.json', 'results.csv', 'results.json', 'loss_curves.png', 'trials'
PENDING, RUNNING = 'pending', 'running'
FINAL = (DONE, STOPPED)                 # a resumed sweep runs every trial but these
NOT_SWEPT = ('seed', 'iters')           # configuration keys with flags of their own: --seeds, --iters
TRIAL_NAME = re.compile(r'\d{3,}(_\S+)?_seed-\d+')     # the folder of a trial (plan_trials names them)


class SweepError(runs.RunError):
    """A sweep that cannot be run as asked (the command line reports it in one line, exit 2)."""


# --- the flags' values ----------------------------------------------------------------
def value_list(kind, choices=None):
    """An argparse type: a comma-separated list of values of `kind` (bools: true/false)."""
    def parse(text):
        items = [item.strip() for item in text.split(',')]
        if not all(items):
            raise argparse.ArgumentTypeError(f'expected a comma-separated list of values, got {text!r}')
        values = [_value(kind, item, choices) for item in items]
        repeated = [v for i, v in enumerate(values) if v in values[:i]]
        if repeated:
            raise argparse.ArgumentTypeError(f'{repeated[0]} is listed twice in {text!r}')
        return values
    return parse


def _value(kind, text, choices):
    if kind is bool:
        if text.lower() in ('true', 'yes', 'on', '1'):
            return True
        if text.lower() in ('false', 'no', 'off', '0'):
            return False
        raise argparse.ArgumentTypeError(f'expected true or false, got {text!r}')
    try:
        value = kind(text)
    except ValueError:
        what = {int: 'whole numbers', float: 'numbers'}.get(kind, kind.__name__)
        raise argparse.ArgumentTypeError(f'expected {what}, got {text!r}') from None
    if choices is not None and value not in choices:
        raise argparse.ArgumentTypeError(f'{text!r} is not one of {", ".join(map(str, choices))}')
    return value


def seed_list(text):
    """--seeds: A:B (A, A+1, ..., B-1) or a list (0,3,5)."""
    if ':' not in text:
        return value_list(int)(text)
    low, _, high = text.partition(':')
    try:
        low, high = int(low), int(high)
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected A:B with whole numbers, got {text!r}') from None
    if high <= low:
        raise argparse.ArgumentTypeError(f'{text} holds no seed (A:B is A, A+1, ..., B-1)')
    return list(range(low, high))


def grid_keys(sim_class):
    """The configuration keys a sweep takes lists of: all but seed and iters."""
    return [k for k in vars(sim_class.config_unchecked()) if k not in NOT_SWEPT]


# --- the trials -----------------------------------------------------------------------
def plan_trials(sim_class, quick, grid, seeds, iters):
    """One trial per combination (keys in configuration order, seeds innermost), each
    configuration checked: [{'name', 'config'}]."""
    unknown = sorted(set(grid) - set(grid_keys(sim_class)))
    if unknown:
        raise SweepError(f'{sim_class.name} has no configuration keys {unknown} to sweep')
    keys = [k for k in grid_keys(sim_class) if k in grid]
    seeds = list(seeds) if seeds else [sim_class.config_unchecked(quick).seed]
    combos = list(itertools.product(*(grid[k] for k in keys)))
    varying = [k for k in keys if len(grid[k]) > 1]
    width = max(3, len(str(len(combos) * len(seeds) - 1)))
    trials = []
    for combo in combos:
        for seed in seeds:
            config = dict(zip(keys, combo), seed=seed, **({'iters': iters} if iters is not None else {}))
            try:
                sim_class.config(bool(quick), **config)
            except ValueError as e:
                raise SweepError(str(e)) from None
            name = f'{len(trials):0{width}d}' + ''.join(f'_{k}-{_safe(config[k])}' for k in varying + ['seed'])
            trials.append(dict(name=name, config=config))
    return trials


def _safe(value):
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return re.sub(r'[^A-Za-z0-9.+-]', '_', text)


def _listing(path):
    return os.listdir(path) if os.path.isdir(path) else []


def _new_trial(trial):
    return dict(name=trial['name'], folder=f'{TRIALS}/{trial["name"]}', config=trial['config'], status=PENDING,
                attempts=0, seconds=0.0, errors=[], error=None, traceback=None, worker=None, kernels=None,
                resumed_from=0)


# --- the sweep folder -----------------------------------------------------------------
class SweepFolder:
    def __init__(self, path):
        self.path = path

    def file(self, *names):
        return os.path.join(self.path, *names)

    def trial(self, trial):
        return os.path.abspath(self.file(trial['folder']))

    def read(self):
        """sweep.json, or None; an unreadable one is a SweepError."""
        return runs.read_json(self.file(SWEEP), ('simulator', 'trials'), 'a sweep', SweepError)

    def write(self, state):
        runs.atomic_write(self.file(SWEEP), lambda f: f.write(json.dumps(state, indent=1).encode()))

    def start(self, state):
        """A fresh sweep: an earlier one's files go, the marker workers look for comes."""
        os.makedirs(self.path, exist_ok=True)
        for name in (SWEEP, TABLE, ROWS, PLOT, MARKER):
            if os.path.isfile(self.file(name)):
                os.remove(self.file(name))
        shutil.rmtree(self.file(TRIALS), ignore_errors=True)
        self.mark(state)
        self.write(state)

    def mark(self, state):
        runs.atomic_write(self.file(MARKER), lambda f: f.write(state['sweep_id'].encode()))

    def lock(self):
        """An exclusive lock on <out>/.lock while this process runs the sweep."""
        os.makedirs(self.path, exist_ok=True)
        handle = open(self.file('.lock'), 'w')
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise SweepError(f'another process is running a sweep or training in {self.path}') from None
        return handle


def _fresh_state(sim_class, folder, options, trials):
    if os.path.exists(folder.path) and not os.path.isdir(folder.path):
        raise SweepError(f'{folder.path} is a file, not a sweep folder')
    if runs.RunFolder(folder.path).simulator() is not None:
        raise SweepError(f'{folder.path} holds a training run, not a sweep; --out DIR sweeps elsewhere')
    if not options['force']:
        if folder.read() is not None:
            raise SweepError(f'{folder.path} holds a sweep already; --resume continues it, --force replaces it, '
                             f'--out DIR sweeps elsewhere')
        trial_dir = folder.file(TRIALS)
        if os.path.exists(folder.file(MARKER)) or os.path.isdir(trial_dir) and os.listdir(trial_dir):
            raise SweepError(f'{folder.path} holds the trials of a sweep whose {SWEEP} is gone; --force replaces '
                             f'them, --out DIR sweeps elsewhere')
    strangers = sorted(name for name in _listing(folder.file(TRIALS)) if not TRIAL_NAME.fullmatch(name))
    if strangers:
        raise SweepError(f'{folder.file(TRIALS)} holds {strangers[0]}, which is not a trial of a sweep: --force '
                         f'would delete it; move it, or --out DIR sweeps elsewhere')
    scheduler = options['scheduler'] or 'fifo'
    return dict(simulator=sim_class.name, command=command_words(sim_class), quick=bool(options['quick']),
                grid=options['grid'], seeds=options['seeds'], iters=options['iters'], retries=options['retries'],
                scheduler=_scheduler_state(sim_class, options, trials) if scheduler == 'asha' else dict(name='fifo'),
                sweep_id=uuid.uuid4().hex, **runs.engine_version(), commands=[],
                trials=[_new_trial(t) for t in trials])


def _scheduler_state(sim_class, options, trials):
    max_t = max(sim_class.config(bool(options['quick']), **t['config']).iters for t in trials)
    return Asha(max_t, grace_period=options['grace_period'] or 1).state()


def _resumed_state(sim_class, folder, options):
    state = folder.read()
    if state is None:
        raise SweepError(f'{folder.path} holds no sweep to resume (run one: {command_of(sim_class)} '
                         f'sweep --out {shlex.quote(folder.path)} ...)')
    if state['simulator'] != sim_class.name:
        raise SweepError(f'{folder.path} holds a {state["simulator"]} sweep: use python -m sims.{state["simulator"]}')
    for key, given in options['grid'].items():
        if given != state['grid'].get(key):
            raise SweepError(f'{flag(key)} differs from the sweep in {folder.path}; a resumed sweep keeps its grid: '
                             f'leave it out')
    named = dict(seeds=state['seeds'], iters=state['iters'], scheduler=state['scheduler']['name'],
                 grace_period=state['scheduler'].get('grace_period'), quick=state['quick'] or None)
    for key, saved in named.items():
        if options[key] is not None and options[key] != saved:
            raise SweepError(f'{flag(key)} differs from the sweep in {folder.path} '
                             f'({bool(saved) if key == "quick" else saved}); a resumed sweep keeps its settings: '
                             f'leave it out')
    state['retries'] = options['retries']
    return state


# --- the sweep --------------------------------------------------------------------------
def sweep(sim_class, out, grid=None, seeds=None, iters=None, quick=False, workers=None, threads_per_trial=None,
          address=None, scheduler=None, grace_period=None, retries=1, resume=False, force=False, log=print,
          command=None):
    """Train every combination of `grid` ({key: [values]}) and `seeds` into the sweep folder
    `out`; returns the rows of results.json (one dict per trial, in the grid's order).

    workers: parallel trials (None: 1 without Ray, else CPUs / threads_per_trial); address: a
    Ray cluster's; scheduler: 'fifo' or 'asha'; retries: further attempts of a failing trial;
    resume: continue the sweep in `out` (its grid and settings)."""
    options = dict(grid=grid or {}, seeds=seeds, iters=iters, quick=quick or None, scheduler=scheduler,
                   grace_period=grace_period, retries=retries, force=force)
    folder = SweepFolder(out)
    _check_options(options, resume)
    if resume:
        state = _resumed_state(sim_class, folder, options)
        # the threads it ran on: on one thread a resumed trial computes the losses of an uninterrupted one
        threads_per_trial = threads_per_trial or (state['commands'] or [{}])[-1].get('threads_per_trial')
    else:
        state = _fresh_state(sim_class, folder, options, plan_trials(sim_class, quick, options['grid'], seeds, iters))
    executor = _executor(sim_class, state, workers, threads_per_trial, address, log)
    try:
        with _sigterm_as_ctrl_c():
            lock = folder.lock()      # noqa: F841 - held until the sweep ends
            folder.mark(state) if resume else folder.start(state)
            state['commands'].append(dict(command=command or runs.command_line(), time=runs._now(),
                                          workers=executor.workers, threads_per_trial=executor.threads,
                                          where=executor.where))
            return _run(state, folder, executor, log)
    finally:
        executor.close()


def _check_options(options, resume):
    if options['scheduler'] not in (None, 'fifo', 'asha'):
        raise SweepError(f'--scheduler must be fifo or asha, got {options["scheduler"]!r}')
    if resume and options['force']:
        raise SweepError('--resume continues the sweep in --out and --force replaces it: give one')
    if options['grace_period'] is not None and options['scheduler'] != 'asha' and not resume:
        raise SweepError('--grace-period is the early stopping of --scheduler asha')
    for key, values in options['grid'].items():
        if not isinstance(values, (list, tuple)) or not values:
            raise SweepError(f'{flag(key)}: expected a non-empty list of values, got {values!r}')
    for key, values in list(options['grid'].items()) + [('seeds', options['seeds'] or [])]:
        repeated = [v for i, v in enumerate(values) if v in values[:i]]
        if repeated:
            raise SweepError(f'{flag(key)}: {repeated[0]} is listed twice')


@contextlib.contextmanager
def _sigterm_as_ctrl_c():
    """SIGTERM (a batch system or `kill` stopping the job) stops the sweep as Ctrl-C does,
    table written, exit 130; Ray's handler, which a driver gets, would abort the process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _run(state, folder, executor, say):
    started = time.perf_counter()
    total = len(state['trials'])
    say(f'sweep: {_count(total, "trial")} of {state["simulator"]} ({_shape(state)}), {executor.where}; '
        f'{executor.workers} worker{"s" * (executor.workers > 1)} x {executor.threads} '
        f'thread{"s" * (executor.threads > 1)} per trial; into {folder.path}')
    if getattr(executor, 'note', None):
        say(f'note: {executor.note}')
    todo = collections.deque(t for t in state['trials'] if not _finished(t, folder))
    if len(todo) < total:
        say(f'resuming: {total - len(todo)} trials are finished already, {len(todo)} to run')
    ran = _loop(state, folder, executor, todo, say)
    rows = write_results(state, folder)
    elapsed = time.perf_counter() - started
    counts = collections.Counter(r['status'] for r in rows)
    say(f'wrote {folder.path}: {SWEEP}, {TABLE}, {ROWS}, {PLOT}; ' + ', '.join(f'{n} {s}' for s, n in counts.items())
        + (f'; {_count(ran, "trial")} in {elapsed:.1f} s ({60 * ran / elapsed:.1f} trials/minute)' if ran else ''))
    return rows


def _count(n, thing):
    return f'{n} {thing}{"s" * (n != 1)}'


def _shape(state):
    sizes = [f'{len(v)} {k}' for k, v in state['grid'].items() if len(v) > 1]
    return ' x '.join(sizes + [f'{len(state["seeds"] or [0])} seed{"s" * (len(state["seeds"] or [0]) > 1)}'])


def _finished(trial, folder):
    """Done or stopped, with its iterations on disk (a trial whose folder went is run again)."""
    return trial['status'] in FINAL and len(runs.RunFolder(folder.trial(trial)).metrics()) > 0


def _loop(state, folder, executor, todo, say):
    """Run the trials of `todo`; returns how many of them finished (the throughput's count)."""
    by_name = {t['name']: t for t in state['trials']}
    failures, ran, submitted = collections.Counter(), 0, {}
    try:
        while todo or executor.busy():
            while todo and executor.room():
                trial = todo.popleft()
                trial['status'] = RUNNING
                submitted[trial['name']] = time.perf_counter()
                executor.submit(_spec(state, trial, folder, executor))
            folder.write(state)
            spec, result = executor.wait()
            trial = by_name[spec['name']]
            _record(trial, result, folder)
            if result['status'] == INTERRUPTED and executor.in_process:
                raise KeyboardInterrupt          # Ctrl-C, caught by the training loop
            if result['status'] in (FAILED, INTERRUPTED):
                failures[trial['name']] += 1
                again = failures[trial['name']] <= state['retries']
                trial['status'] = PENDING if again else FAILED
                todo.extend([trial] if again else [])
            ran += trial['status'] in FINAL + (FAILED,)
            say(_line(state, trial, result, again=trial['status'] == PENDING))
    except KeyboardInterrupt:
        for spec in executor.running():         # an attempt that returned nothing
            trial = by_name[spec['name']]
            trial.update(status=INTERRUPTED, attempts=trial['attempts'] + 1,
                         seconds=trial['seconds'] + time.perf_counter() - submitted[spec['name']])
        executor.stop()         # the workers write no more: the table is what the folders hold
        say('interrupted: the trials that ran keep their checkpoints (--resume continues them)')
    finally:
        if state['scheduler']['name'] == 'asha':
            state['scheduler'] = executor.scheduler_state() or state['scheduler']
        for trial in state['trials']:
            trial['status'] = INTERRUPTED if trial['status'] == RUNNING else trial['status']
        folder.write(state)
    return ran


def _spec(state, trial, folder, executor):
    path = folder.trial(trial)
    command = _train_command(state, trial, executor.threads, path)
    shipped = pack(path) if executor.ships and runs.RunFolder(path).has(runs.CHECKPOINT) else None
    return dict(name=trial['name'], simulator=state['simulator'], load=executor.reference,
                quick=state['quick'], config=trial['config'],
                threads=executor.threads, folder=path, sweep_dir=os.path.abspath(folder.path),
                sweep_id=state['sweep_id'], files=shipped,
                command=f'{command}  # trial {trial["name"]} of the sweep in {os.path.abspath(folder.path)}')


def _train_command(state, trial, threads, path):
    """The `train` command line that trains this trial alone."""
    words = state.get('command', ['python', '-m', f'sims.{state["simulator"]}'])     # older sweeps: sims.<name>
    words = list(words) + ['train'] + ['--quick'] * bool(state['quick'])
    for key, value in trial['config'].items():
        if isinstance(value, bool):
            words.append(flag(key) if value else '--no-' + flag(key)[2:])
        else:
            words += [flag(key), str(value)]
    return shlex.join(words + ['--threads', str(threads), '--out', path])


def _record(trial, result, folder):
    if result.get('files') is not None:          # a worker without the sweep folder sent the run
        unpack(result['files'], folder.trial(trial))
    trial['attempts'] += 1
    trial['seconds'] += result['seconds']
    trial.update(status=result['status'], worker=result['worker'], kernels=result['kernels'], error=result['error'],
                 traceback=result['traceback'], resumed_from=result['resumed_from'])
    if result['error']:
        trial['errors'].append(result['error'])


def _line(state, trial, result, again):
    done = sum(t['status'] in FINAL + (FAILED,) for t in state['trials'])
    head = f'[{done:>{len(str(len(state["trials"])))}}/{len(state["trials"])}] {trial["name"]}: {result["status"]}'
    if result['error']:
        retry = f'; trying again (attempt {trial["attempts"] + 1})' if again else ''
        return f'{head} after {trial["attempts"]} attempt(s) ({result["error"]}){retry}'
    losses = result['losses']
    kernels = result['kernels']
    finite = [loss for loss in losses if math.isfinite(loss)]
    finite += [result['best']] if result.get('best') is not None else []       # the last parameters, weighed
    best = f', best {min(finite):+.6e}' if finite else ''
    detail = f', final loss {losses[-1]:+.6e}{best}, {len(losses)} iterations' if losses else ''
    resumed = f', resumed after {result["resumed_from"]}' if result['resumed_from'] else ''
    return (f'{head}{detail}{resumed}, {result["seconds"]:.2f} s ({result["worker"]}: {kernels["compiled"]} kernels '
            f'compiled, {kernels["loaded"]} loaded from the disk cache)')


# --- where the trials run ----------------------------------------------------------------
class InProcess:
    """The trials one after the other in this process."""
    in_process, ships, workers, where = True, False, 1, 'in this process'
    reference = None        # the trials get the class itself

    def __init__(self, sim_class, threads, scheduler):
        self.sim_class, self.threads, self.spec = sim_class, threads, None
        self.asha = Asha.from_state(scheduler) if scheduler['name'] == 'asha' else None

    def room(self):
        return self.spec is None

    def busy(self):
        return self.spec is not None

    def running(self):
        return [self.spec] if self.spec else []

    def submit(self, spec):
        self.spec = spec

    def wait(self):
        result = run_trial(self.spec, self.asha.report if self.asha else None, self.sim_class)
        spec, self.spec = self.spec, None
        return spec, result

    def scheduler_state(self):
        return self.asha.state() if self.asha else None

    def stop(self):
        self.spec = None

    def close(self):
        pass


def ray_installed():
    return importlib.util.find_spec('ray') is not None


def _ray_pool():
    """sims.sweep_ray's Pool, or why Ray cannot be had: (Pool, None) or (None, reason)."""
    if not ray_installed():
        return None, "Ray: pip install -e '.[sweep]'"
    try:
        from .sweep_ray import Pool
    except Exception as e:      # noqa: BLE001 - a broken install raises anything
        return None, f'Ray, which does not import here ({type(e).__name__}: {str(e).strip().splitlines()[0]})'
    return Pool, None


def check_room(workers, threads, cpus, where):
    """Workers x threads within the CPUs: oversubscribed, every trial would run slower."""
    if workers and workers * (threads or 1) > cpus:
        raise SweepError(f'{_count(workers, "worker")} x {_count(threads or 1, "thread")} need '
                         f'{workers * (threads or 1)} CPUs; {where} has {cpus} (fewer --workers or '
                         f'--threads-per-trial)')


def _executor(sim_class, state, workers, threads, address, say=print):
    """In this process, or a pool of Ray actors (--address, or more than one worker)."""
    cpus = os.cpu_count() or 1
    if workers is not None and workers < 1 or threads is not None and threads < 1:
        raise SweepError('--workers and --threads-per-trial must be at least 1')
    asked = address is not None or (workers or 1) > 1
    ray = asked or (workers is None and ray_installed() and cpus // (threads or 1) > 1)
    pool, missing = _ray_pool() if ray else (None, None)
    if missing and not asked:
        say(f'note: the trials run in this process: the default of several workers needs {missing}')
    if pool is None:
        if asked:
            raise SweepError(f'{"--address" if address else f"--workers {workers}"} needs {missing} '
                             f'(--workers 1 runs the trials in this process)')
        check_room(1, threads, cpus, 'this machine')
        return InProcess(sim_class, threads or cpus, state['scheduler'])
    ref = reference(sim_class)
    if sim_class.__module__ == '__main__':
        raise SweepError(f'workers import the simulator from its module, and {sim_class.__name__} is defined in '
                         f'the script that was run: put it in a package, or --workers 1 runs the trials here')
    try:
        known = load(ref) is sim_class
    except (ImportError, LookupError, AttributeError):
        known = False
    if not known:
        raise SweepError(f'workers import the simulator as {ref}, which gives another class or none (a class '
                         f'of a script run directly?): --workers 1 runs the trials in this process')
    return pool(ref, workers, threads, address, state['scheduler'])


# --- results ------------------------------------------------------------------------------
def write_results(state, folder):
    """results.csv, results.json and loss_curves.png from sweep.json and the trials' folders."""
    keys = list(state['grid']) + ['seed']
    rows, curves = [], {}
    for trial in state['trials']:
        run = runs.RunFolder(folder.trial(trial))
        losses = [r['loss'] for r in run.metrics()]
        curves[trial['name']] = losses
        rows.append(_row(trial, keys, losses, _kept_best(run)))
    text = json.dumps(rows, indent=1, allow_nan=False)
    runs.atomic_write(folder.file(ROWS), lambda f: f.write(text.encode()))
    runs.atomic_write(folder.file(TABLE), lambda f: _write_csv(f, rows))
    plot_sweep(state, rows, curves, folder.file(PLOT))
    return rows


def _kept_best(run):
    """(loss, iteration) of the parameters a trial keeps as its best (training weighs the
    last ones at the end too: they may beat every recorded iteration), or None."""
    try:
        info = run.load_checkpoint()[0]
    except runs.RunError:
        return None
    if not info or info.get('best_loss') is None or not math.isfinite(info['best_loss']):
        return None
    return info['best_loss'], info.get('best_iteration')


def _row(trial, keys, losses, kept=None):
    """A trial's line of the table; a loss that is not a number (diverged) is null (JSON has no NaN).
    `kept`: the (loss, iteration) of the trial's best parameters, where lower than the records'."""
    finite = [(loss, i) for i, loss in enumerate(losses) if math.isfinite(loss)]
    best = min(finite) if finite else (None, None)
    if kept is not None and (best[0] is None or kept[0] < best[0]):
        best = kept
    kernels = trial['kernels'] or {}
    return dict(trial=trial['name'], status=trial['status'], **{k: trial['config'].get(k) for k in keys},
                final_loss=losses[-1] if losses and math.isfinite(losses[-1]) else None,
                best_loss=best[0], best_iteration=best[1],
                iterations=len(losses), seconds=round(trial['seconds'], 3), attempts=trial['attempts'],
                compiled=kernels.get('compiled'), loaded=kernels.get('loaded'), worker=trial['worker'],
                error=trial['error'], folder=trial['folder'])


def _write_csv(binary, rows):
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]) if rows else ['trial'], lineterminator='\n')
    writer.writeheader()
    writer.writerows({k: '' if v is None else v for k, v in row.items()} for row in rows)
    binary.write(text.getvalue().encode())


def plot_sweep(state, rows, curves, path):
    """Every trial's loss curve: one color per combination (its seeds share it), dashed when
    stopped early, dotted when it failed or did not finish."""
    from matplotlib import colormaps
    from matplotlib.lines import Line2D
    fig, ax = _axes(f'{state["simulator"]}: {len(rows)} trials')
    fig.set_size_inches(7, 4.5)
    varying = [k for k, v in state['grid'].items() if len(v) > 1]
    def shown(row):
        return ' '.join(f'{flag(k)} {str(row[k]).lower() if isinstance(row[k], bool) else row[k]}' for k in varying)
    groups = list(dict.fromkeys(shown(row) for row in rows))
    palette = colormaps['tab10' if len(groups) <= 10 else 'tab20' if len(groups) <= 20 else 'viridis']
    colors = [palette(i if len(groups) <= 20 else i / (len(groups) - 1)) for i in range(len(groups))]
    for row in rows:
        group = groups.index(shown(row))
        style = {DONE: '-', STOPPED: '--'}.get(row['status'], ':')
        ax.plot(range(len(curves[row['trial']])), curves[row['trial']], style, color=colors[group], lw=1, alpha=0.8)
    if varying and len(groups) <= 16:
        ax.legend([Line2D([], [], color=c) for c in colors], groups, fontsize='x-small')
    _save(fig, path)
