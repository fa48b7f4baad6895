"""A run folder: what a training run writes, so that render, eval, compare and --resume
work from the folder alone.

config.json     the simulator, its full configuration (seed included), --quick and
                --threads, the engine version, the command lines that trained it
metrics.jsonl   one JSON line per iteration, flushed as it is written
checkpoint.npz  the last parameters (arr_0, arr_1, ...), the optimizer's state, the RNG
                states and the best loss so far: --resume continues from it
params.npz      the parameters with the lowest loss so far (render and eval use them)
losses.json, loss_curve.png   the summary, written when training ends or stops

Every file but metrics.jsonl is replaced atomically (written beside, then renamed), so a
kill at any moment leaves the previous version whole.
"""
import datetime
import hashlib
import importlib.metadata
import json
import os
import platform
import shlex
import sys
import zipfile

import numpy as np

CONFIG, METRICS, CHECKPOINT, BEST = 'config.json', 'metrics.jsonl', 'checkpoint.npz', 'params.npz'
SUMMARY, PLOT = 'losses.json', 'loss_curve.png'
RUN_FILES = (CONFIG, METRICS, CHECKPOINT, BEST, SUMMARY, PLOT)


class RunError(Exception):
    """A run folder that cannot be used as asked (the command line reports it in one line)."""


# what reading a truncated, empty or foreign .npz raises
DAMAGE = (zipfile.BadZipFile, EOFError, ValueError, KeyError, TypeError, OSError)


class DamagedFile(RunError):
    """A file of a run that cannot be read: names it, what was wrong and what to do."""

    def __init__(self, path, error, advice):
        text = str(error).strip().splitlines()
        first = text[0].split('. ')[0] if text else ''       # numpy's advice to unpickle: not ours to give
        why = f'{type(error).__name__}: {first}' if first else type(error).__name__
        super().__init__(f'{path} is damaged ({why}); {advice}')
        self.path = path


def read_json(path, keys, what, error=None):
    """The JSON object in `path` holding `keys`, or None where there is no such file; an
    unreadable one raises `error` (RunError) saying it is not `what`."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            found = json.load(f)
        [found[key] for key in keys]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise (error or RunError)(f'{path} is not {what} ({e})') from None
    return found


def atomic_write(path, write):
    """Call write(file) on a temporary file beside `path`, then rename it over `path`."""
    tmp = f'{path}.{os.getpid()}.tmp'
    try:
        with open(tmp, 'wb') as f:
            write(f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def save_arrays(path, arrays, **named):
    atomic_write(path, lambda f: np.savez(f, *arrays, **named))


def engine_version():
    """The package version, and a hash of what decides the compiled code (the engine's
    source, LLVM and the CPU): two runs with the same hash compute the same numbers."""
    from engine.backend import cache
    try:
        version = importlib.metadata.version('difftaichi-engine')
    except importlib.metadata.PackageNotFoundError:
        version = 'unknown'
    build = hashlib.sha256(cache.fingerprint().encode()).hexdigest()[:12]
    return dict(engine_version=version, engine_build=build)


def command_line(argv=None):
    """The command as typed: `python -m sims.NAME ...` rather than the path of __main__.py."""
    return ' '.join(shlex.quote(a) for a in (argv or ['python', *sys.orig_argv[1:]]))


class RunFolder:
    def __init__(self, path):
        self.path = path

    def file(self, name):
        return os.path.join(self.path, name)

    def has(self, name):
        """Whether the folder holds `name`: a file, or anything in its place (a directory, a
        broken link), which reading it then reports as damaged."""
        return os.path.lexists(self.file(name))

    # --- configuration ------------------------------------------------------------------
    def read_config(self):
        """config.json, or None where there is none; an unreadable one is DamagedFile."""
        path = self.file(CONFIG)
        if not os.path.lexists(path):
            return None
        try:
            with open(path) as f:
                found = json.load(f)
            if not isinstance(found, dict) or not isinstance(found.get('config'), dict) or \
                    not isinstance(found.get('simulator'), str):
                raise ValueError('not a run configuration: no simulator or config in it')
        except (OSError, ValueError) as e:
            raise DamagedFile(path, e, 'the run cannot be read without it: train --force starts it over '
                              '(render --params FILE still renders a parameters file)') from None
        return found

    def simulator(self):
        """The simulator of the run in this folder, or None (a losses.json of the command
        line before config.json existed counts too)."""
        saved = self.read_config()
        if saved:
            return saved['simulator']
        try:
            with open(self.file(SUMMARY)) as f:
                return json.load(f).get('simulator')
        except (OSError, ValueError, AttributeError):
            return None

    def start(self, sim, command=None):
        """A fresh run: the files of an earlier one go, config.json comes."""
        os.makedirs(self.path, exist_ok=True)
        for name in RUN_FILES:
            if self.has(name):
                os.remove(self.file(name))
        self.remove_leftovers()
        self.write_config(sim, command, commands=[])

    def remove_leftovers(self):
        """Temporary files of writes that a kill interrupted."""
        for name in os.listdir(self.path):
            if name.endswith('.tmp') and name.rsplit('.', 2)[0] in RUN_FILES:
                os.remove(self.file(name))

    def write_config(self, sim, command=None, commands=None):
        """config.json for `sim`; the command lines so far (a resume adds its own)."""
        if commands is None:
            commands = (self.read_config() or {}).get('commands', [])
        saved = dict(simulator=sim.name, config=vars(sim.cfg), seed=sim.cfg.seed,
                     quick=getattr(sim, 'quick', False), threads=getattr(sim, 'threads', None),
                     **engine_version(), python=platform.python_version(), numpy=np.__version__,
                     commands=[*commands, dict(command=command or command_line(), time=_now())])
        atomic_write(self.file(CONFIG), lambda f: f.write(json.dumps(saved, indent=1).encode()))

    # --- metrics ------------------------------------------------------------------------
    def append_metrics(self, record):
        with open(self.file(METRICS), 'a') as f:     # closed, hence flushed, per line
            f.write(json.dumps(record) + '\n')

    def metrics(self):
        """The records of metrics.jsonl, up to a line torn by a kill or otherwise unreadable
        (resuming restores what is missing from losses.json, or refuses)."""
        records = []
        try:
            with open(self.file(METRICS), errors='replace') as f:
                for k, line in enumerate(f):
                    record = _record(line, k)
                    if record is None:
                        break
                    records.append(record)
        except OSError:                 # none, or a directory in its place: no records
            pass
        return records

    def keep_metrics(self, records):
        """Rewrite metrics.jsonl with `records` only (lines past the checkpoint go)."""
        text = ''.join(json.dumps(r) + '\n' for r in records)
        atomic_write(self.file(METRICS), lambda f: f.write(text.encode()))

    # --- parameters and checkpoints -----------------------------------------------------
    def save_checkpoint(self, arrays, optimizer_state, info):
        named = {'info': np.array(json.dumps(info))}
        for key, value in optimizer_state.items():
            if isinstance(value, list):
                named.update({f'opt.{key}.{i}': a for i, a in enumerate(value)})
            else:
                named[f'opt.{key}'] = np.array(value)
        save_arrays(self.file(CHECKPOINT), arrays, **named)

    def load_checkpoint(self):
        """(info, optimizer state) of checkpoint.npz, or (None, None) when there is none;
        DamagedFile when it cannot be read."""
        if not self.has(CHECKPOINT):
            return None, None
        try:
            with np.load(self.file(CHECKPOINT)) as saved:
                info = json.loads(str(saved['info']))
                state = {}
                for name in saved.files:
                    if name.startswith('opt.'):
                        _, key, *index = name.split('.')
                        if index:
                            state.setdefault(key, {})[int(index[0])] = saved[name]
                        else:
                            state[key] = saved[name][()]
                info['iteration']       # noqa: B018 - a checkpoint's info has it
        except DAMAGE as e:
            raise DamagedFile(self.file(CHECKPOINT), e, 'the last parameters and the optimizer state are lost: '
                              'train --force starts the run over; render and eval use params.npz') from None
        state = {k: [v[i] for i in sorted(v)] if isinstance(v, dict) else v for k, v in state.items()}
        return info, state

    def summary_records(self):
        """The per-iteration records of losses.json, [] when it is missing or unreadable."""
        try:
            found = read_json(self.file(SUMMARY), ['iterations'], 'a summary')
        except RunError:
            return []
        records = []
        for k, record in enumerate(found['iterations'] if found and isinstance(found['iterations'], list) else []):
            if not _is_record(record, k):
                break
            records.append(record)
        return records

    def parameters_file(self, which):
        """The file holding the 'best' or 'last' parameters."""
        return self.file(BEST if which == 'best' else CHECKPOINT)


def _record(line, k):
    """Line k of metrics.jsonl as a record ({iteration k, loss, ...}), or None."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if _is_record(record, k) else None


def _is_record(record, k):
    return isinstance(record, dict) and record.get('iteration') == k and isinstance(record.get('loss'), (int, float))


def _now():
    return datetime.datetime.now().astimezone().isoformat(timespec='seconds')
