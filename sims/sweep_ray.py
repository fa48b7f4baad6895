"""The sweep's workers on Ray (the optional extra: pip install -e '.[sweep]').

One Ray actor per worker, reserving `threads` CPUs, imports the engine and the simulator
once and runs trial after trial (sims/sweep_trial.py): its compiled kernels stay loaded in
memory from one trial to the next, and the disk cache ($ENGINE_CACHE_DIR, passed on to
the workers with the other ENGINE_* settings; a shared directory on a cluster) keeps them
for new workers. A worker whose process dies (killed, out of memory, its machine gone) is
seen as an actor error: its trial is tried again on a fresh actor, from its checkpoint. A
worker that does not see the sweep folder (no shared file system) sends its trial's files
every few seconds to an Inbox actor on this machine, which writes them there: the checkpoint
a retried or resumed trial starts from.

Early stopping (--scheduler asha) is one more actor holding the ASHA rungs: trials report
each iteration's loss to it and hear whether to stop.

Where: the Ray instance this process is connected to already, the cluster at --address
(`ray start --head` on one machine, `ray start --address=HEAD:6379` on the others; then
`--address auto` on any of them), else a local instance started for the sweep.
"""
import importlib.util
import logging
import os
import socket
import time

import ray
import ray.exceptions
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from . import load
from .sweep import SweepError, check_room
from .sweep_trial import FAILED, INTERRUPTED, Asha, run_trial, unpack


@ray.remote(max_restarts=0)
class SweepWorker:
    def __init__(self, simulator):
        load(simulator)                 # the engine and the simulator, imported once

    def place(self):
        return socket.gethostname(), os.getpid()

    def run(self, spec, asha, inbox):
        report = None if asha is None else (lambda name, t, loss: ray.get(asha.report.remote(name, t, loss)))
        # waits for the write: the trial's result, unpacked after, must land last
        send = lambda files: ray.get(inbox.put.remote(spec['folder'], files))   # noqa: E731
        return run_trial(spec, report, send=send)


@ray.remote(num_cpus=0, max_restarts=0)
class Inbox:
    """On the sweep's machine: writes the run files that workers send into the trials' folders."""

    def put(self, folder, files):
        unpack(files, folder)

    def flush(self):
        """Returns once the puts queued before it are written."""


@ray.remote(num_cpus=0, max_restarts=0)
class Scheduler:
    def __init__(self, state):
        self.asha = Asha.from_state(state)

    def report(self, name, iterations, loss):
        return self.asha.report(name, iterations, loss)

    def state(self):
        return self.asha.state()


WORKER_BYTES = 1 << 30          # a worker's memory: the engine, LLVM, a simulator's fields, with room


def available_memory():
    """Bytes of memory available now (Linux's MemAvailable), or None where unknown."""
    try:
        with open('/proc/meminfo') as f:
            for line in f:
                if line.startswith('MemAvailable:'):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def workers_in_memory():
    """How many workers the available memory holds (at least 1), or None where unknown."""
    free = available_memory()
    return None if free is None else max(1, int(free * 0.8) // WORKER_BYTES)


def worker_env(simulator='sims'):
    """What the workers inherit from this process: the ENGINE_* settings (the cache
    directory among them), this checkout of sims/ ahead of an installed one, and the folder
    of the package that defines the simulator (a user's own, outside sims/)."""
    roots = [_root_of('sims'), _root_of(simulator.split(':')[0].split('.')[0])]
    env = {k: v for k, v in os.environ.items() if k.startswith('ENGINE_')}
    paths = list(dict.fromkeys([r for r in roots if r] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
    env['PYTHONPATH'] = os.pathsep.join(paths)
    return env


def _root_of(top):
    """The folder that holds the top-level module or package `top` (None: not a file)."""
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None
    here = os.path.dirname(os.path.abspath(spec.origin))
    return os.path.dirname(here) if spec.submodule_search_locations else here


class Pool:
    in_process, ships = False, True

    def __init__(self, simulator, workers, threads, address, scheduler):
        self.simulator, self.reference, self.started = simulator, simulator, False
        if not ray.is_initialized() and not address:
            check_room(workers, threads, os.cpu_count() or 1, 'this machine')      # before Ray starts
        if not ray.is_initialized():
            # 'local': a fresh instance, even where `ray start` left one running
            local = dict(address='local', num_cpus=os.cpu_count() or 1)
            kwargs = dict(address=address) if address else local
            try:
                _check_listening(address)
                ray.init(include_dashboard=False, logging_level=logging.ERROR, **kwargs)   # its notices: its session logs
            except (ConnectionError, RuntimeError, ValueError) as e:
                where = f' at {address}' if address else ''
                raise SweepError(f'cannot start or reach Ray{where}: {e}'.splitlines()[0]) from None
            self.started = True
        cpus = int(ray.cluster_resources().get('CPU', 0))
        self.threads = threads or (max(1, cpus // workers) if workers else 1)
        self.workers = workers or max(1, cpus // self.threads)
        self.note = None
        fit = None if workers or address else workers_in_memory()
        if fit is not None and fit < self.workers:       # Ray's memory monitor would kill the others
            self.note = (f'{fit} worker{"s" * (fit > 1)}, not {self.workers}: {available_memory() / 2**30:.1f} GB '
                         f'of memory is available and a worker takes about {WORKER_BYTES / 2**30:.1f} GB')
            self.workers = fit
        try:
            check_room(self.workers, self.threads, cpus, 'the Ray cluster' if address else 'this machine')
        except SweepError:
            self.close()
            raise
        self.where = f'on Ray ({"the cluster at " + address if address else "local"}, {cpus} CPUs)'
        self.scheduler = Scheduler.remote(scheduler) if scheduler['name'] == 'asha' else None
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        self.inbox = Inbox.options(scheduling_strategy=here).remote()
        self.actors, self.places, self.tasks = [None] * self.workers, [None] * self.workers, {}
        self.options = dict(num_cpus=self.threads, runtime_env=dict(env_vars=worker_env(simulator)))

    def room(self):
        return len(self.tasks) < self.workers

    def busy(self):
        return bool(self.tasks)

    def running(self):
        return [spec for _, spec in self.tasks.values()]

    def submit(self, spec):
        slot = min(set(range(self.workers)) - {s for s, _ in self.tasks.values()})
        if self.actors[slot] is None:
            self.actors[slot] = SweepWorker.options(**self.options).remote(self.simulator)
            self.places[slot] = self.actors[slot].place.remote()      # its process, for stop()
        self.tasks[self.actors[slot].run.remote(spec, self.scheduler, self.inbox)] = (slot, spec)

    def wait(self):
        [ref], _ = ray.wait(list(self.tasks), num_returns=1)
        slot, spec = self.tasks.pop(ref)
        try:
            result = ray.get(ref)
        except ray.exceptions.RayError as e:     # the worker died (or could not run the trial)
            ray.kill(self.actors[slot], no_restart=True)
            self.actors[slot] = None             # the next trial gets a fresh actor
            return spec, _failure(spec, f'the worker process died ({type(e).__name__}: '
                                        f'{str(e).strip().splitlines()[0] if str(e).strip() else ""})')
        if result['status'] == INTERRUPTED:      # SIGINT or SIGTERM in the worker, not here
            result.update(status=FAILED, error='the trial was stopped by a signal in its worker')
        return spec, result

    def stop(self):
        """Kill the workers (Ctrl-C, SIGTERM), and wait until they are gone: their trials'
        folders change no more. Ray reports an actor dead before its process has exited, so
        the processes on this machine are watched until they have; what remote ones sent
        is written before the inbox answers."""
        places = [_place(ref) for ref, actor in zip(self.places, self.actors) if actor is not None]
        for actor in filter(None, self.actors):
            ray.kill(actor, no_restart=True)
        if self.tasks:
            ray.wait(list(self.tasks), num_returns=len(self.tasks), timeout=30)
        for host, pid in filter(None, places):
            if host == socket.gethostname():
                _wait_for_exit(pid)
        try:
            ray.get(self.inbox.flush.remote(), timeout=30)
        except (ray.exceptions.RayError, TimeoutError):
            pass
        self.actors, self.places, self.tasks = [None] * self.workers, [None] * self.workers, {}

    def scheduler_state(self):
        try:
            return ray.get(self.scheduler.state.remote()) if self.scheduler else None
        except ray.exceptions.RayError:
            return None

    def close(self):
        helpers = [getattr(self, 'scheduler', None), getattr(self, 'inbox', None)]
        for actor in [a for a in getattr(self, 'actors', []) if a is not None] + helpers:
            if actor is not None:
                ray.kill(actor, no_restart=True)
        self.actors = []
        if self.started:
            ray.shutdown()
            self.started = False


def _place(ref):
    """A worker's (host, pid), or None where it never started."""
    try:
        return ray.get(ref, timeout=5)
    except (ray.exceptions.RayError, TimeoutError):
        return None


def _wait_for_exit(pid, seconds=10):
    """Until the process is gone or a zombie (Linux's /proc; elsewhere at once)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f'/proc/{pid}/stat') as f:
                if f.read().rpartition(')')[2].split()[0] in ('Z', 'X'):
                    return
        except OSError:
            return
        time.sleep(0.01)


def _check_listening(address, seconds=10):
    """Fail in seconds where nothing listens at HOST:PORT: Ray itself retries for minutes."""
    host, _, port = (address or '').removeprefix('ray://').rpartition(':')
    if not host or not port.isdigit():
        return                          # 'auto', or no port: Ray finds it and says what is wrong
    try:
        socket.create_connection((host.strip('[]'), int(port)), timeout=seconds).close()
    except OSError as e:
        raise ConnectionError(f'nothing answers there ({e.strerror or type(e).__name__})') from None


def _failure(spec, error):
    return dict(name=spec['name'], status=FAILED, error=error, traceback=None, worker=None, files=None,
                losses=[], resumed_from=0, kernels=dict(compiled=0, loaded=0), seconds=0.0)
