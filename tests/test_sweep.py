"""Sweeps (sims/sweep.py): every combination a trial with a run folder of its own, the results
table and plot, each trial's losses those of the same run trained alone, failures retried
then reported, interrupted sweeps resumed, early stopping; on Ray (the optional extra): the
acceptance test of 4 trials on 2 CPUs, and a worker killed with SIGKILL. Tiny
configurations, one thread per trial (so that losses compare bit for bit)."""
import csv
import gc
import json
import os
import pickle
import pickletools
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import weakref
from types import SimpleNamespace

import numpy as np
import pytest

from engine.core import program
from interop_support import optional
from sims import cli, runs, sweep, sweep_trial
from sims.gravity import Gravity
from sims.mass_spring import MassSpring

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRAVITY = ['--quick', '--iters', '3']                       # 4 trials with --lr 2,4 --seeds 0:2
GRID = ['--lr', '2,4', '--seeds', '0:2']
IN_PROCESS = ['--workers', '1', '--threads-per-trial', '1', '--quiet']


def _losses(folder):
    return [r['loss'] for r in runs.RunFolder(str(folder)).metrics()]


def _state(out):
    return json.loads((out / 'sweep.json').read_text())


def _exit_code(sim_class, argv):
    with pytest.raises(SystemExit) as stop:
        cli.main(sim_class, argv)
    return stop.value.code


@pytest.fixture(scope='module')
def alone(tmp_path_factory):
    """The losses of each gravity trial trained alone with `train` (one thread), by (lr, seed)."""
    found = {}
    for lr in (2.0, 4.0):
        for seed in (0, 1):
            out = tmp_path_factory.mktemp('alone') / f'{lr}-{seed}'
            cli.main(Gravity, ['train', *GRAVITY, '--threads', '1', '--lr', str(lr), '--seed', str(seed),
                               '--quiet', '--out', str(out)])
            found[lr, seed] = _losses(out)
    return found


@pytest.fixture(scope='module')
def gravity_sweep(tmp_path_factory):
    """A finished in-process sweep of 4 gravity trials (read only); what crossed to the
    trials (specs, results) is kept."""
    out = tmp_path_factory.mktemp('sweeps') / 'gravity'
    crossed = []
    real = sweep.run_trial

    def recording(spec, report=None, sim_class=None):
        result = real(spec, report, sim_class)
        crossed.append((spec, result))
        return result
    sweep.run_trial = recording
    try:
        cli.main(Gravity, ['sweep', *GRAVITY, *GRID, *IN_PROCESS, '--out', str(out)])
    finally:
        sweep.run_trial = real
    return out, crossed


# --------------------------------------------------------------------------- in this process

def test_the_sweep_folder_holds_a_run_folder_per_trial_a_table_and_a_plot(gravity_sweep):
    out, _ = gravity_sweep
    state = _state(out)
    names = ['000_lr-2.0_seed-0', '001_lr-2.0_seed-1', '002_lr-4.0_seed-0', '003_lr-4.0_seed-1']
    assert [t['name'] for t in state['trials']] == names and {t['status'] for t in state['trials']} == {'done'}
    assert state['grid'] == {'lr': [2.0, 4.0]} and state['seeds'] == [0, 1] and state['iters'] == 3
    assert state['commands'][0]['command'].startswith('python -m sims.gravity sweep --quick')
    assert state['commands'][0]['where'] == 'in this process' and state['commands'][0]['threads_per_trial'] == 1
    for name in names:
        assert set(runs.RUN_FILES) <= set(os.listdir(out / 'trials' / name))
    with open(out / 'results.csv') as f:
        table = list(csv.DictReader(f))
    rows = json.loads((out / 'results.json').read_text())
    assert [r['trial'] for r in table] == [r['trial'] for r in rows] == names
    assert table[3]['lr'] == '4.0' and table[3]['seed'] == '1' and table[3]['status'] == 'done'
    assert rows[3]['iterations'] == 3 and rows[3]['attempts'] == 1 and rows[3]['folder'] == 'trials/' + names[3]
    assert rows[3]['final_loss'] == _losses(out / 'trials' / names[3])[-1]
    assert (out / 'loss_curves.png').read_bytes()[:4] == b'\x89PNG'


def test_each_trial_computes_the_losses_of_the_same_run_trained_alone(gravity_sweep, alone):
    out, _ = gravity_sweep
    for row in json.loads((out / 'results.json').read_text()):
        assert _losses(out / row['folder']) == alone[row['lr'], row['seed']], row['trial']
    # the last trial ran after three others in the same process: the same losses as in a
    # process of its own (nothing of the earlier trials leaked into it)
    last = _state(out)['trials'][-1]
    script = ('from sims.gravity import Gravity; from sims.training import train; '
              'print(repr([r["loss"] for r in train(Gravity.create(quick=True, threads=1, lr=4.0, seed=1), '
              'iters=3, log=lambda line: None)]))')
    printed = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, check=True, cwd=ROOT,
                             env=dict(os.environ, PYTHONPATH=ROOT)).stdout
    assert eval(printed) == _losses(out / last['folder'])


def test_a_trial_folder_is_a_run_folder_of_the_command_line(gravity_sweep, capsys):
    out, _ = gravity_sweep
    trial = out / 'trials' / '003_lr-4.0_seed-1'
    saved = json.loads((trial / 'config.json').read_text())
    assert saved['config']['lr'] == 4.0 and saved['seed'] == 1 and saved['quick'] and saved['threads'] == 1
    assert saved['commands'][0]['command'].startswith('python -m sims.gravity train --quick --lr 4.0 --seed 1 '
                                                      '--iters 3 --threads 1 --out ')
    cli.main(Gravity, ['eval', '--out', str(trial)])
    assert capsys.readouterr().out.startswith('best parameters (the last ones, after 3 iterations)')


def test_the_trials_after_the_first_compile_nothing(gravity_sweep):
    kernels = [t['kernels'] for t in _state(gravity_sweep[0])['trials'][1:]]
    assert kernels == [dict(compiled=0, loaded=0)] * 3


def test_what_crosses_to_a_worker_pickles(gravity_sweep):
    """A trial's spec and its result are plain data: they pickle, and nothing of the engine
    is in them."""
    _, crossed = gravity_sweep
    assert len(crossed) == 4
    for spec, result in crossed:
        for value in (spec, result):
            data = pickle.dumps(value)
            assert pickle.loads(data) == value
            assert not [arg for op, arg, _ in pickletools.genops(data) if 'GLOBAL' in op.name]   # no class at all
    assert crossed[0][0]['config'] == dict(lr=2.0, seed=0, iters=3) and crossed[0][1]['status'] == 'done'


def test_a_trials_program_and_fields_are_freed_when_the_next_trial_starts(tmp_path):
    """One worker process runs trial after trial: each starts a program of its own (ti.init)
    and nothing keeps the earlier ones, their fields included, alive."""
    (tmp_path / sweep_trial.MARKER).write_text('here')
    programs = []
    for seed in range(3):
        spec = dict(name=f't{seed}', simulator='gravity', quick=True, config=dict(seed=seed, iters=2), threads=1,
                    folder=str(tmp_path / f't{seed}'), sweep_dir=str(tmp_path), sweep_id='here', files=None,
                    command='x')
        assert sweep_trial.run_trial(spec)['status'] == 'done'
        programs.append(weakref.ref(program.current()))
        assert program.current().fields and all(p() is not program.current() for p in programs[:-1])
    gc.collect()
    assert [p() is None for p in programs] == [True, True, False]


def test_a_worker_without_the_sweep_folder_sends_the_run_back(tmp_path, alone):
    """On another machine (no shared file system) a trial trains in a folder of its own and
    its result carries the run's files; resumed, it starts from the files its spec carries."""
    folder = tmp_path / 'sweep' / 'trials' / 't'
    spec = dict(name='t', simulator='gravity', quick=True, config=dict(lr=2.0, seed=1, iters=2), threads=1,
                folder=str(folder), sweep_dir=str(tmp_path / 'sweep'), sweep_id='elsewhere', files=None, command='x')
    result = sweep_trial.run_trial(spec)
    assert result['status'] == 'done' and not folder.exists()
    assert set(result['files']) == set(runs.RUN_FILES)
    sweep_trial.unpack(result['files'], str(folder))
    assert _losses(folder) == alone[2.0, 1][:2]
    more = dict(spec, config=dict(spec['config'], iters=3), files=sweep_trial.pack(str(folder)))
    again = sweep_trial.run_trial(pickle.loads(pickle.dumps(more)))
    assert again['resumed_from'] == 2 and again['losses'] == alone[2.0, 1]


def test_a_sweep_whose_workers_cannot_see_its_folder_still_fills_it(tmp_path, monkeypatch, alone):
    """As on a cluster without a shared file system: the trials' files come back with their
    results and land in the sweep folder; an interrupted trial travels with its checkpoint."""
    monkeypatch.setattr(sweep_trial, 'sees_sweep_folder', lambda spec: False)
    monkeypatch.setattr(sweep.InProcess, 'ships', True)
    out = tmp_path / 'remote'
    cli.main(Gravity, ['sweep', *GRAVITY, '--lr', '2', '--seeds', '0:2', '--iters', '2', *IN_PROCESS,
                       '--out', str(out)])
    state = _state(out)
    assert [t['status'] for t in state['trials']] == ['done', 'done']
    state['iters'] = 3                      # as if the sweep had been stopped after 2 of 3 iterations
    for trial in state['trials']:
        trial.update(status='interrupted', config=dict(trial['config'], iters=3))
    (out / 'sweep.json').write_text(json.dumps(state))
    cli.main(Gravity, ['sweep', '--resume', *IN_PROCESS, '--out', str(out)])
    for trial in _state(out)['trials']:
        assert trial['resumed_from'] == 2 and trial['attempts'] == 2
        assert set(runs.RUN_FILES) <= set(os.listdir(out / trial['folder']))
        assert _losses(out / trial['folder']) == alone[2.0, trial['config']['seed']]
        assert runs.RunFolder(str(out / trial['folder'])).load_checkpoint()[0]['iteration'] == 3


class _WorkerDied(BaseException):
    """As a worker process killed mid-trial: nothing returns from run_trial."""


def test_a_worker_without_the_sweep_folder_sends_its_progress_home(tmp_path, monkeypatch, alone):
    """Its death then loses nothing sent: the retry starts from the checkpoint that came home."""
    folder = tmp_path / 'sweep' / 'trials' / 't'
    spec = dict(name='t', simulator='gravity', quick=True, config=dict(lr=4.0, seed=0, iters=3), threads=1,
                folder=str(folder), sweep_dir=str(tmp_path / 'sweep'), sweep_id='elsewhere', files=None, command='x')
    update = sweep_trial._Watch.update

    def dies_after_2(self, record, first):
        update(self, record, first)
        if record['iteration'] == 1:
            raise _WorkerDied
    monkeypatch.setattr(sweep_trial._Watch, 'update', dies_after_2)
    monkeypatch.setattr(sweep_trial, 'SEND_EVERY', 0.0)
    sent = []
    with pytest.raises(_WorkerDied):
        sweep_trial.run_trial(spec, send=lambda files: (sent.append(files), sweep_trial.unpack(files, str(folder))))
    assert len(sent) == 2 and _losses(folder) == alone[4.0, 0][:2]
    monkeypatch.setattr(sweep_trial._Watch, 'update', update)
    again = sweep_trial.run_trial(dict(spec, files=sweep_trial.pack(str(folder))))
    assert again['resumed_from'] == 2 and again['losses'] == alone[4.0, 0]


def test_a_failing_trial_is_retried_then_reported_and_the_others_finish(tmp_path, monkeypatch, capsys):
    initialize = Gravity.initialize

    def failing(self, rng):
        if self.cfg.lr == 4.0 and self.cfg.seed == 0:
            raise FloatingPointError('the test breaks this trial')
        initialize(self, rng)
    monkeypatch.setattr(Gravity, 'initialize', failing)
    out = tmp_path / 'failing'
    assert _exit_code(Gravity, ['sweep', *GRAVITY, *GRID, *IN_PROCESS, '--out', str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and '1 of 4 trials failed (002_lr-4.0_seed-0: FloatingPointError' in err
    trials = {t['name']: t for t in _state(out)['trials']}
    broken = trials.pop('002_lr-4.0_seed-0')
    assert broken['status'] == 'failed' and broken['attempts'] == 2       # --retries 1: tried twice
    assert broken['errors'] == ['FloatingPointError: the test breaks this trial'] * 2
    assert 'initialize' in broken['traceback']
    assert {t['status'] for t in trials.values()} == {'done'}
    rows = {r['trial']: r for r in csv.DictReader(open(out / 'results.csv'))}
    broken = rows['002_lr-4.0_seed-0']
    assert broken['status'] == 'failed' and 'FloatingPointError' in broken['error']
    monkeypatch.setattr(Gravity, 'initialize', initialize)               # fixed: --resume runs it alone
    cli.main(Gravity, ['sweep', '--resume', '--out', str(out), *IN_PROCESS])
    assert [t['status'] for t in _state(out)['trials']] == ['done'] * 4


def test_an_interrupted_sweep_resumes_to_the_losses_of_an_uninterrupted_one(tmp_path, monkeypatch, alone):
    """Ctrl-C in the second trial: it stops after its iteration, the sweep exits 130 with the
    trials after it pending; --resume runs them and continues the second from its checkpoint."""
    update = sweep_trial._Watch.update

    def ctrl_c(self, record, first):
        update(self, record, first)
        if self.name.startswith('001') and record['iteration'] == 1:
            os.kill(os.getpid(), signal.SIGINT)
    monkeypatch.setattr(sweep_trial._Watch, 'update', ctrl_c)
    out = tmp_path / 'interrupted'
    assert _exit_code(Gravity, ['sweep', *GRAVITY, *GRID, *IN_PROCESS, '--out', str(out)]) == 130
    assert [t['status'] for t in _state(out)['trials']] == ['done', 'interrupted', 'pending', 'pending']
    assert len(_losses(out / 'trials' / '001_lr-2.0_seed-1')) == 2
    monkeypatch.setattr(sweep_trial._Watch, 'update', update)
    cli.main(Gravity, ['sweep', '--resume', '--out', str(out), *IN_PROCESS])
    state = _state(out)
    assert [t['status'] for t in state['trials']] == ['done'] * 4 and len(state['commands']) == 2
    assert [t['attempts'] for t in state['trials']] == [1, 2, 1, 1]
    for trial in state['trials']:
        assert _losses(out / trial['folder']) == alone[trial['config']['lr'], trial['config']['seed']]
    assert _exit_code(Gravity, ['sweep', '--resume', '--out', str(out), '--lr', '1']) == 2   # the grid stays


def test_asha_stops_bad_trials_early_and_they_are_not_failures(tmp_path):
    out = tmp_path / 'asha'
    cli.main(MassSpring, ['sweep', '--quick', '--steps', '32', '--iters', '8', '--lr', '0.02,0.1,0.3,1',
                          '--scheduler', 'asha', *IN_PROCESS, '--out', str(out)])
    state = _state(out)
    statuses = [t['status'] for t in state['trials']]
    assert statuses[0] == 'done' and 'stopped' in statuses and 'failed' not in statuses
    assert state['scheduler']['name'] == 'asha' and state['scheduler']['rungs']['1']
    for trial in state['trials']:
        folder = out / trial['folder']
        summary = json.loads((folder / 'losses.json').read_text())      # the summary has every iteration
        done = runs.RunFolder(str(folder)).load_checkpoint()[0]['iteration']
        assert len(summary['iterations']) == len(_losses(folder)) == done
        assert (done == 8) == (trial['status'] == 'done')
    rows = json.loads((out / 'results.json').read_text())
    assert all(r['iterations'] < 8 for r in rows if r['status'] == 'stopped')


def test_the_asha_rule_is_ray_tunes(monkeypatch):
    """Random losses reported in a random order: the same decisions as Tune's ASHA bracket."""
    optional('ray')
    from ray.tune.schedulers.async_hyperband import _Bracket
    rng = np.random.default_rng(0)
    for max_t, grace, factor in ((20, 1, 4), (64, 2, 2), (9, 1, 3)):
        ours, tune = sweep_trial.Asha(max_t, grace, factor), _Bracket(grace, max_t, factor, 0)
        progress = {f't{i}': 0 for i in range(12)}
        while progress:
            name = rng.choice(sorted(progress))
            progress[name] += 1
            loss = float(rng.normal())
            stop = ours.report(name, progress[name], loss)
            assert stop == (tune.on_result(SimpleNamespace(trial_id=name), progress[name], -loss) == 'STOP')
            if stop or progress[name] == max_t:
                del progress[name]
        restored = sweep_trial.Asha.from_state(json.loads(json.dumps(ours.state())))
        assert restored.rungs == ours.rungs


@pytest.mark.parametrize('flags, message', [
    (['--seeds', '5:2'], 'argument --seeds: 5:2 holds no seed'),
    (['--seeds', '0,0'], 'argument --seeds: 0 is listed twice'),
    (['--lr', 'a,b'], "argument --lr: expected numbers, got 'a'"),
    (['--lr', '2,'], 'argument --lr: expected a comma-separated list'),
    (['--lr=-1,2'], '--lr must be positive, got -1.0'),
    (['--optimizer', 'gd,sgd'], "argument --optimizer: 'sgd' is not one of gd, normalized, adam"),
    (['--scheduler', 'hyperband'], "argument --scheduler: invalid choice: 'hyperband'"),
    (['--workers', '0'], 'argument --workers: must be at least 1, got 0'),
    (['--retries', '-1'], 'argument --retries: must be at least 0, got -1'),
    (['--resume'], 'holds no sweep to resume'),
    (['--resume', '--force'], '--resume continues the sweep in --out and --force replaces it: give one'),
    (['--grace-period', '2'], '--grace-period is the early stopping of --scheduler asha'),
    (['--seed', '3'], 'unrecognized arguments: --seed 3'),        # not taken as --seeds
    (['--workers', '1', '--threads-per-trial', '100000'], '1 worker x 100000 threads need 100000 CPUs; this machine'),
])
def test_a_bad_flag_is_one_line_and_exit_2_and_nothing_is_written(flags, message, tmp_path, capsys):
    out = tmp_path / 'bad'
    assert _exit_code(Gravity, ['sweep', *GRAVITY, *flags, '--out', str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and message in err and 'Traceback' not in err, err
    assert not out.exists()


@pytest.mark.parametrize('given, message', [
    (dict(grid=dict(lr=2.0)), '--lr: expected a non-empty list of values, got 2.0'),
    (dict(grid=dict(lr=[])), '--lr: expected a non-empty list of values, got []'),
    (dict(seeds=[0, 0]), '--seeds: 0 is listed twice'),
])
def test_the_python_api_checks_what_the_flags_check(given, message, tmp_path):
    with pytest.raises(sweep.SweepError, match=re.escape(message)):
        sweep.sweep(Gravity, str(tmp_path / 'api'), quick=True, iters=1, workers=1, log=lambda line: None, **given)
    assert not (tmp_path / 'api').exists()


def test_a_folder_holding_a_sweep_or_a_run_is_refused(gravity_sweep, tmp_path, capsys):
    out, _ = gravity_sweep
    before = (out / 'sweep.json').read_text()
    assert _exit_code(Gravity, ['sweep', *GRAVITY, *IN_PROCESS, '--out', str(out)]) == 2
    assert 'holds a sweep already; --resume continues it, --force replaces it' in capsys.readouterr().err
    assert (out / 'sweep.json').read_text() == before
    run = out / 'trials' / '000_lr-2.0_seed-0'
    assert _exit_code(Gravity, ['sweep', *GRAVITY, *IN_PROCESS, '--out', str(run)]) == 2
    assert 'holds a training run, not a sweep' in capsys.readouterr().err
    assert _exit_code(MassSpring, ['sweep', '--resume', *IN_PROCESS, '--out', str(out)]) == 2
    assert 'holds a gravity sweep: use python -m sims.gravity' in capsys.readouterr().err


def test_a_resumed_sweep_runs_on_the_threads_it_ran_on(gravity_sweep, tmp_path):
    out = tmp_path / 'resumed'
    shutil.copytree(gravity_sweep[0], out)
    cli.main(Gravity, ['sweep', '--resume', '--workers', '1', '--quiet', '--out', str(out)])
    assert [c['threads_per_trial'] for c in _state(out)['commands']] == [1, 1]


def test_trial_folders_whose_sweep_json_is_gone_are_not_replaced_without_force(gravity_sweep, tmp_path, capsys):
    out = tmp_path / 'orphans'
    shutil.copytree(gravity_sweep[0], out)
    (out / 'sweep.json').unlink()
    before = (out / 'trials' / '000_lr-2.0_seed-0' / 'metrics.jsonl').read_text()
    assert _exit_code(Gravity, ['sweep', *GRAVITY, '--lr', '3', *IN_PROCESS, '--out', str(out)]) == 2
    assert "holds the trials of a sweep whose sweep.json is gone; --force replaces them" in capsys.readouterr().err
    assert (out / 'trials' / '000_lr-2.0_seed-0' / 'metrics.jsonl').read_text() == before
    assert _exit_code(Gravity, ['sweep', *GRAVITY, '--force', *IN_PROCESS, '--out', str(out / 'trials' /
                                                                                       '000_lr-2.0_seed-0')]) == 2
    assert 'holds a training run, not a sweep' in capsys.readouterr().err          # --force or not
    (out / 'trials' / 'mine').mkdir()
    assert _exit_code(Gravity, ['sweep', *GRAVITY, '--force', *IN_PROCESS, '--out', str(out)]) == 2
    assert 'trials holds mine, which is not a trial of a sweep: --force would delete it' in capsys.readouterr().err
    assert (out / 'trials' / '000_lr-2.0_seed-0' / 'metrics.jsonl').read_text() == before


def test_a_ray_that_does_not_import_leaves_the_default_in_process(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sweep, 'ray_installed', lambda: True)
    monkeypatch.setattr(sweep, '_ray_pool', lambda: (None, 'Ray, which does not import here (ImportError: broken)'))
    monkeypatch.setattr(os, 'cpu_count', lambda: 2)
    assert _exit_code(Gravity, ['sweep', *GRAVITY, '--workers', '2', '--out', str(tmp_path / 'a')]) == 2
    assert '--workers 2 needs Ray, which does not import here (ImportError: broken)' in capsys.readouterr().err
    cli.main(Gravity, ['sweep', *GRAVITY, '--seeds', '0', '--out', str(tmp_path / 'b')])
    assert 'note: the trials run in this process: the default of several workers needs Ray, which does not ' \
        'import here' in capsys.readouterr().out
    assert _state(tmp_path / 'b')['commands'][0]['where'] == 'in this process'


def test_a_diverged_trial_has_null_losses_in_the_table():
    trial = sweep._new_trial(dict(name='t', config=dict(lr=1.0, seed=0)))
    row = sweep._row(trial, ['lr', 'seed'], [2.0, 1.0, float('nan')])
    assert (row['final_loss'], row['best_loss'], row['best_iteration']) == (None, 1.0, 1)
    assert json.loads(json.dumps(row, allow_nan=False))['final_loss'] is None


def test_without_ray_more_workers_are_refused_and_one_runs_in_process(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sweep, 'ray_installed', lambda: False)
    assert _exit_code(Gravity, ['sweep', *GRAVITY, '--workers', '2', '--out', str(tmp_path / 'a')]) == 2
    assert "--workers 2 needs Ray: pip install -e '.[sweep]'" in capsys.readouterr().err
    cli.main(Gravity, ['sweep', *GRAVITY, '--threads-per-trial', '1', '--quiet', '--out', str(tmp_path / 'b')])
    assert _state(tmp_path / 'b')['commands'][0]['where'] == 'in this process'


def test_more_workers_than_cpus_are_refused_before_ray_starts(tmp_path, monkeypatch, capsys):
    optional('ray')
    monkeypatch.setattr(os, 'cpu_count', lambda: 2)
    out = tmp_path / 'crowded'
    assert _exit_code(Gravity, ['sweep', *GRAVITY, '--workers', '3', '--out', str(out)]) == 2
    assert '3 workers x 1 thread need 3 CPUs; this machine has 2 (fewer --workers' in capsys.readouterr().err
    assert not out.exists()


def test_an_address_where_nothing_listens_is_refused_at_once(tmp_path, capsys):
    """Ray would retry such an address for minutes; the sweep asks first."""
    optional('ray')
    with socket.socket() as s:          # a port that was free a moment ago: nothing listens
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    out = tmp_path / 'nowhere'
    assert _exit_code(Gravity, ['sweep', *GRAVITY, '--address', f'127.0.0.1:{port}', '--out', str(out)]) == 2
    err = capsys.readouterr().err
    assert f'cannot start or reach Ray at 127.0.0.1:{port}: nothing answers there' in err and err.count('\n') == 1
    assert not out.exists()


# --------------------------------------------------------------------------- on Ray

# A sweep on a local Ray instance of 2 CPUs, in a process of its own: Ray's threads and
# signal handlers stay out of the test process.
RAY_SWEEP = """
import logging, sys
import ray
ray.init(address='local', num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
from sims import cli
from sims.mass_spring import MassSpring
try:
    cli.main(MassSpring, sys.argv[1:])
finally:
    ray.shutdown()
"""


def _sweep_on_ray(*argv):
    optional('ray')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get('PYTHONPATH', '')]))
    return subprocess.Popen([sys.executable, '-c', RAY_SWEEP, 'sweep', *argv, '--quiet'], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope='module')
def mass_spring_alone(tmp_path_factory):
    optional('ray')                         # skipped (or failed, where required) before training
    found = {}
    for lr in (0.1, 0.3):
        for seed in (0, 1):
            out = tmp_path_factory.mktemp('alone') / f'{lr}-{seed}'
            cli.main(MassSpring, ['train', '--quick', '--steps', '32', '--iters', '3', '--threads', '1',
                                  '--lr', str(lr), '--seed', str(seed), '--quiet', '--out', str(out)])
            found[lr, seed] = _losses(out)
    return found


def test_a_sweep_of_4_trials_on_ray_with_2_cpus_matches_each_run_alone(mass_spring_alone, tmp_path):
    """The issue's acceptance test: 2 workers (actors) of 1 thread each on a local Ray
    instance of 2 CPUs; every trial's final loss is that of the same run trained alone."""
    out = tmp_path / 'ray'
    proc = _sweep_on_ray('--quick', '--steps', '32', '--iters', '3', '--lr', '0.1,0.3', '--seeds', '0:2',
                         '--workers', '2', '--out', str(out))
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    state = _state(out)
    assert state['commands'][0]['where'] == 'on Ray (local, 2 CPUs)' and state['commands'][0]['threads_per_trial'] == 1
    rows = json.loads((out / 'results.json').read_text())
    assert [r['status'] for r in rows] == ['done'] * 4
    for row in rows:
        assert row['final_loss'] == mass_spring_alone[row['lr'], row['seed']][-1], row['trial']
        assert _losses(out / row['folder']) == mass_spring_alone[row['lr'], row['seed']]
    workers = {r['worker'] for r in rows}
    assert len(workers) == 2 and f':{proc.pid}' not in ' '.join(workers)
    # actor reuse: a worker's trials after its first find their kernels loaded already
    assert sum(r['compiled'] == 0 and r['loaded'] == 0 for r in rows) >= 2
    assert (out / 'loss_curves.png').exists()


def _sweep_workers():
    """The pids of this test session's sweep workers (their ENGINE_CACHE_DIR is the session's)."""
    mine = f'ENGINE_CACHE_DIR={os.environ["ENGINE_CACHE_DIR"]}'.encode()
    found = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as f, open(f'/proc/{pid}/environ', 'rb') as e:
                if f.read().startswith(b'ray::SweepWorker') and mine in e.read().split(b'\0'):
                    found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='finds the worker processes in /proc')
def test_a_killed_worker_is_seen_and_its_trial_retried_from_its_checkpoint(tmp_path):
    out = tmp_path / 'killed'
    proc = _sweep_on_ray('--quick', '--iters', '150', '--lr', '0.1,0.3', '--workers', '2', '--out', str(out))
    deadline = time.monotonic() + 120
    while [len(_losses(folder)) >= 5 for folder in out.glob('trials/*')] != [True, True] or not _sweep_workers():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    os.kill(_sweep_workers()[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert [t['status'] for t in _state(out)['trials']] == ['done', 'done']
    [killed] = [t for t in _state(out)['trials'] if t['errors']]
    assert killed['attempts'] == 2 and killed['errors'][0].startswith('the worker process died (') \
        and 'Actor' in killed['errors'][0]      # ActorDiedError (RayActorError before Ray 2.10)
    assert killed['resumed_from'] >= 4                                  # its checkpoint, not the start
    straight = tmp_path / 'straight'
    cli.main(MassSpring, ['train', '--quick', '--iters', '150', '--threads', '1', '--lr', str(killed['config']['lr']),
                          '--quiet', '--out', str(straight)])
    assert _losses(out / killed['folder']) == _losses(straight)


def test_sigterm_stops_a_sweep_on_ray_as_ctrl_c_does(tmp_path):
    """A batch system's SIGTERM: exit 130, the table written, the command to continue (Ray's
    own handler in the driver would abort it)."""
    out = tmp_path / 'terminated'
    proc = _sweep_on_ray('--quick', '--iters', '3000', '--lr', '0.1,0.3', '--workers', '2', '--out', str(out))
    deadline = time.monotonic() + 120
    while [len(_losses(folder)) >= 3 for folder in out.glob('trials/*')] != [True, True]:
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert f'to continue: python -m sims.mass_spring sweep --resume --out {out}' in err
    rows = json.loads((out / 'results.json').read_text())
    assert [r['status'] for r in rows] == ['interrupted'] * 2 and (out / 'loss_curves.png').exists()
    # the workers were gone before the table was written; their attempts count
    assert [r['iterations'] for r in rows] == [len(_losses(out / r['folder'])) for r in rows]
    assert [(r['attempts'], r['seconds'] > 0) for r in rows] == [(1, True)] * 2


def test_ray_workers_are_sized_from_the_memory_available(tmp_path):
    """With memory for one worker of two CPUs' worth, one worker runs, and the sweep says why
    (Ray's memory monitor killed workers started beyond it)."""
    optional('ray')
    script = RAY_SWEEP.replace('from sims import cli\n', 'from sims import cli, sweep_ray\n'
                               'sweep_ray.available_memory = lambda: int(1.5 * 2**30)\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get('PYTHONPATH', '')]))
    argv = ['sweep', *GRAVITY, '--lr', '2,4', '--seeds', '0', '--out', str(tmp_path / 's')]
    done = subprocess.run([sys.executable, '-c', script.replace('MassSpring', 'Gravity').replace(
        'sims.mass_spring', 'sims.gravity'), *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert 'note: 1 worker, not 2: 1.5 GB of memory is available' in done.stdout, done.stdout
    assert [r['status'] for r in json.loads((tmp_path / 's' / 'results.json').read_text())] == ['done'] * 2


def test_the_table_gives_each_trials_best_parameters(gravity_sweep):
    """Training weighs the parameters after the last update too: the table's best loss is the
    one the trial keeps (and eval gives), not only the best recorded iteration's."""
    out, _ = gravity_sweep
    for row in json.loads((out / 'results.json').read_text()):
        info = runs.RunFolder(str(out / row['folder'])).load_checkpoint()[0]
        assert (row['best_loss'], row['best_iteration']) == (info['best_loss'], info['best_iteration'])
