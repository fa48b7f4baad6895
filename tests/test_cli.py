"""The simulators' command line (sims/cli.py): self-describing run folders, nothing lost
on Ctrl-C or a kill, flags checked before anything is written, progress, eval, compare,
videos. Runs use --quick configurations, few iterations and one thread; only the kill
tests start processes of their own."""
import json
import os
import pathlib
import runpy
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from sims import cli, optimizers, render, runs
from sims.gravity import Gravity
from sims.mass_spring import MassSpring
from sims.smoke import Smoke

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICK = ['--quick', '--threads', '1']


def _losses(out):
    return [r['loss'] for r in runs.RunFolder(str(out)).metrics()]


def _fails(sim_class, argv, capsys):
    """The one-line error of a refused command line (exit status 2)."""
    with pytest.raises(SystemExit) as stop:
        cli.main(sim_class, argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count('\n') == 1 and 'Traceback' not in err, err
    return err


def _snapshot(folder):
    return {p: (folder / p).read_bytes() for p in sorted(os.listdir(folder))}


@pytest.fixture(scope='module')
def gravity_run(tmp_path_factory):
    """A finished quick gravity run of 3 iterations (read only)."""
    out = tmp_path_factory.mktemp('runs') / 'gravity'
    cli.main(Gravity, ['train', *QUICK, '--iters', '3', '--quiet', '--out', str(out)])
    return out


# --------------------------------------------------------------------------- 1. self-describing runs

def test_the_run_folder_records_everything_that_made_it(gravity_run):
    saved = json.loads((gravity_run / 'config.json').read_text())
    assert saved['simulator'] == 'gravity' and saved['quick'] is True and saved['threads'] == 1
    assert saved['config'] == vars(Gravity.config(quick=True, iters=3)) and saved['seed'] == 0
    assert saved['engine_version'] and len(saved['engine_build']) == 12
    assert saved['commands'][0]['command'].startswith('python -m sims.gravity train --quick')
    assert [r['iteration'] for r in runs.RunFolder(str(gravity_run)).metrics()] == [0, 1, 2]
    assert {'params.npz', 'checkpoint.npz', 'losses.json', 'loss_curve.png'} <= set(os.listdir(gravity_run))


def test_eval_prints_the_loss_of_the_trained_parameters(gravity_run, capsys):
    cli.main(Gravity, ['eval', '--out', str(gravity_run)])
    best, last = capsys.readouterr().out.splitlines()
    losses = _losses(gravity_run)
    # one more descent step than the iterations recorded: the last parameters are the best
    assert best.startswith('best parameters (the last ones, after 3 iterations)')
    assert last.startswith('last parameters (after 3 iterations)')
    assert float(last.split()[-1]) == float(best.split()[-1]) < min(losses)


def test_render_uses_the_runs_configuration(tmp_path, capsys):
    """The issue's cases: smoke's quick grid, mass_spring's sine controller, without flags."""
    smoke = tmp_path / 'smoke'
    cli.main(Smoke, ['train', *QUICK, '--iters', '1', '--quiet', '--out', str(smoke)])
    cli.main(Smoke, ['render', '--out', str(smoke)])
    assert 'best parameters from' in capsys.readouterr().out and (smoke / 'smoke.mp4').stat().st_size > 1000
    sine = tmp_path / 'sine'
    cli.main(MassSpring, ['train', *QUICK, '--controller', 'sine', '--iters', '1', '--quiet', '--out', str(sine)])
    cli.main(MassSpring, ['render', '--params', 'last', '--video', 'gif', '--out', str(sine)])
    assert (sine / 'mass_spring.gif').stat().st_size > 1000
    err = _fails(MassSpring, ['render', '--controller', 'mlp', '--out', str(sine)], capsys)
    assert '--controller mlp differs from the run' in err and '(--controller sine)' in err


# --------------------------------------------------------------------------- 2. nothing lost

def _popen_train(out, *flags):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get('PYTHONPATH', '')]))
    return subprocess.Popen([sys.executable, '-m', 'sims.mass_spring', 'train', *flags, '--out', str(out)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_iterations(out, count, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while len(_losses(out)) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, 'training did not start'
        time.sleep(0.02)


@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGKILL], ids=['SIGINT', 'SIGKILL'])
def test_a_killed_run_resumes_to_the_losses_of_an_uninterrupted_one(sig, tmp_path):
    flags = [*QUICK, '--steps', '32', '--optimizer', 'adam', '--lr', '0.01']    # Adam: state to restore
    out = tmp_path / 'killed'
    proc = _popen_train(out, *flags, '--iters', '100000', '--quiet')
    _wait_for_iterations(out, 3, proc)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    if sig == signal.SIGINT:     # stops after the iteration, saves, says how to resume
        assert proc.returncode == 130 and 'Traceback' not in stderr, stderr
        assert 'train --resume --out' in stderr and (out / 'losses.json').exists()
    else:
        assert proc.returncode == -signal.SIGKILL
    done = runs.RunFolder(str(out)).load_checkpoint()[0]['iteration']
    assert done >= 2
    cli.main(MassSpring, ['train', '--resume', '--iters', str(done + 2), '--quiet', '--out', str(out)])
    straight = tmp_path / 'straight'
    cli.main(MassSpring, ['train', *flags, '--iters', str(done + 2), '--quiet', '--out', str(straight)])
    assert _losses(out) == _losses(straight)
    assert not [n for n in os.listdir(out) if n.endswith('.tmp')]


def test_best_is_never_worse_than_last_and_eval_gives_its_loss_exactly(gravity_run, tmp_path, capsys):
    """The parameters after the last update are weighed at the end: here they are the best;
    with a step so long that the loss grows, iteration 0's stay the best, and both are kept."""
    losses = _losses(gravity_run)
    with np.load(gravity_run / 'params.npz') as best, np.load(gravity_run / 'checkpoint.npz') as last:
        assert np.array_equal(best['arr_0'], last['arr_0'])
    info = runs.RunFolder(str(gravity_run)).load_checkpoint()[0]
    assert info['best_loss'] < min(losses) and info['best_iteration'] == 3
    out = tmp_path / 'overshoot'
    cli.main(Gravity, ['train', *QUICK, '--iters', '3', '--lr', '1000', '--quiet', '--out', str(out)])
    losses = _losses(out)
    info = runs.RunFolder(str(out)).load_checkpoint()[0]
    assert info['best_loss'] == min(losses) and info['best_iteration'] == int(np.argmin(losses)) < 3
    with np.load(out / 'params.npz') as best, np.load(out / 'checkpoint.npz') as last:
        assert not np.array_equal(best['arr_0'], last['arr_0'])
    cli.main(Gravity, ['eval', '--out', str(out)])
    best, last = capsys.readouterr().out.splitlines()
    assert best.endswith(f'loss {info["best_loss"]:+.6e}') and info['best_loss'] < float(last.split()[-1])


def test_an_interrupted_write_leaves_the_previous_file(tmp_path):
    path = tmp_path / 'params.npz'
    runs.save_arrays(str(path), [np.zeros(3)])

    def torn(f):
        f.write(b'half a file')
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runs.atomic_write(str(path), torn)
    with np.load(path) as saved:
        assert saved['arr_0'].tolist() == [0, 0, 0]
    assert os.listdir(tmp_path) == ['params.npz']


def test_a_torn_metrics_line_is_ignored(tmp_path):
    run = runs.RunFolder(str(tmp_path))
    run.append_metrics(dict(iteration=0, loss=1.0))
    with open(run.file(runs.METRICS), 'a') as f:
        f.write('{"iteration": 1, "lo')
    assert run.metrics() == [dict(iteration=0, loss=1.0)]


def test_adam_state_round_trips(tmp_path):
    import engine as ti
    ti.init(default_fp=ti.f64)
    p = ti.field(ti.f64, shape=2, needs_grad=True)
    p.grad.from_numpy(np.array([1.0, -2.0]))
    adam = optimizers.Adam([p], lr=0.1)
    adam.step()
    run = runs.RunFolder(str(tmp_path))
    run.save_checkpoint([p.to_numpy()], adam.state(), dict(iteration=1))
    info, state = run.load_checkpoint()
    fresh = optimizers.Adam([p], lr=0.1)
    fresh.load_state(state)
    assert info == dict(iteration=1) and fresh.t == 1
    np.testing.assert_array_equal(fresh.m[0], adam.m[0])
    np.testing.assert_array_equal(fresh.v[0], adam.v[0])


# --------------------------------------------------------------------------- 3. input checked at the door

BAD_FLAGS = [
    (['--iters', '0'], '--iters must be at least 1, got 0'),
    (['--iters', '-3'], '--iters must be at least 1, got -3'),
    (['--lr', '-1'], '--lr must be positive, got -1.0'),
    (['--lr', 'nan'], '--lr must be a finite number'),
    (['--threads', '0'], 'argument --threads: must be at least 1, got 0'),
    (['--fp', 'f16'], "argument --fp: invalid choice: 'f16'"),
    (['--optimizer', 'lbfgs'], "argument --optimizer: invalid choice: 'lbfgs'"),
    (['--steps', '0'], '--steps must be at least 1, got 0'),
    (['--seed', '-1'], '--seed must be at least 0, got -1'),
    (['--steps', 'many'], "argument --steps: invalid int value: 'many'"),
    (['--resume', '--lr', '0.5'], '--lr 0.5 differs from the run'),
    (['--resume', '--iters', '1'], 'has 3 iterations already'),
    ([], 'holds a gravity run (3 iterations); --resume continues it, --force replaces it'),
]


@pytest.mark.parametrize('flags, message', BAD_FLAGS, ids=[' '.join(f) or 'no --resume' for f, _ in BAD_FLAGS])
def test_a_bad_flag_is_one_line_and_exit_2_and_the_run_is_untouched(flags, message, gravity_run, capsys):
    before = _snapshot(gravity_run)
    err = _fails(Gravity, ['train', '--quick', *flags, '--out', str(gravity_run)], capsys)
    assert err.startswith('python -m sims.gravity train: error: ') and message in err, err
    assert _snapshot(gravity_run) == before


def test_another_simulators_run_is_refused_unless_forced(gravity_run, tmp_path, capsys):
    err = _fails(MassSpring, ['train', '--quick', '--out', str(gravity_run)], capsys)
    assert 'holds a gravity run; --force replaces it' in err
    for command in ('render', 'eval'):
        assert 'use python -m sims.gravity' in _fails(MassSpring, [command, '--out', str(gravity_run)], capsys)
    assert 'holds no run' in _fails(Gravity, ['eval', '--out', str(tmp_path / 'none')], capsys)
    assert 'holds no run' in _fails(Gravity, ['train', '--resume', '--out', str(tmp_path / 'none')], capsys)
    assert not (tmp_path / 'none').exists()
    other = tmp_path / 'other'
    other.mkdir()
    (other / 'config.json').write_text(json.dumps(dict(simulator='smoke', config={})))
    cli.main(Gravity, ['train', *QUICK, '--iters', '1', '--force', '--quiet', '--out', str(other)])
    assert json.loads((other / 'config.json').read_text())['simulator'] == 'gravity'


def test_help_lists_the_choices(capsys):
    with pytest.raises(SystemExit):
        cli.main(MassSpring, ['train', '--help'])
    text = capsys.readouterr().out
    for choices in ('{f32,f64}', '{gd,normalized,adam}', '{mlp,sine,torch}', '{robot,triangle}', '{0,1,2}'):
        assert choices in text


# --------------------------------------------------------------------------- 4. progress

def test_a_terminal_gets_a_progress_bar(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, '_on_terminal', lambda: True)
    cli.main(Gravity, ['train', *QUICK, '--iters', '4', '--out', str(tmp_path)])
    err = capsys.readouterr().err
    assert 'compiling kernels for the first iteration' in err and 'loaded from the cache' in err
    assert err.index('kernels ready') < err.index('gravity:')
    bar = err.replace('\r', '\n').splitlines()[-1]
    assert '4/4' in bar and '/it, loss=' in bar and 'best=' in bar and '<' in bar, bar


def test_a_log_gets_lines_and_quiet_gets_nothing(tmp_path, capsys):
    cli.main(Gravity, ['train', *QUICK, '--iters', '3', '--out', str(tmp_path / 'log')])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith('compiling kernels') and 'compiled' in lines[1]
    assert lines[2].startswith('iter    0  loss ') and lines[3].endswith(', eta 00:00]') and '[3/3]' in lines[4]
    cli.main(Gravity, ['train', *QUICK, '--iters', '2', '--quiet', '--out', str(tmp_path / 'quiet')])
    assert capsys.readouterr() == ('', '')


# --------------------------------------------------------------------------- 5. listing, eval, compare

def test_python_m_sims_lists_the_simulators(capsys, monkeypatch):
    import sims
    monkeypatch.setattr(sys, 'argv', ['sims'])
    runpy.run_module('sims', run_name='__main__')
    lines = capsys.readouterr().out.splitlines()
    listed = [line.split()[0] for line in lines[1:-1]]
    assert listed == sims.names() and len(listed) == 10 and all(len(line.split()) > 3 for line in lines[1:-1])


def test_compare_plots_several_runs(gravity_run, tmp_path, capsys):
    other = tmp_path / 'lr1'
    cli.main(Gravity, ['train', *QUICK, '--iters', '2', '--lr', '1', '--quiet', '--out', str(other)])
    png = tmp_path / 'both.png'
    cli.main(Gravity, ['compare', str(gravity_run), str(other), '--output', str(png)])
    out = capsys.readouterr().out
    assert f'{gravity_run} --iters 3 --lr 4.0: 3 iterations' in out and f'{other} --iters 2 --lr 1.0' in out
    assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


# --------------------------------------------------------------------------- 6. videos and plots

def _frames(n=6, size=(48, 64)):
    return [np.full((*size, 3), 40 * i, np.uint8) for i in range(n)]


def test_videos_are_mp4_with_a_gif_fallback(tmp_path, monkeypatch):
    import imageio_ffmpeg
    path, count, why = render.write_video(_frames(), str(tmp_path / 'v'))
    assert (path, count, why) == (str(tmp_path / 'v.mp4'), 6, None)
    assert imageio_ffmpeg.count_frames_and_secs(path)[0] == 6
    with open(path, 'rb') as f:
        assert f.read(12)[4:8] == b'ftyp'

    def no_ffmpeg(*args):
        raise RuntimeError('no ffmpeg here')

    monkeypatch.setattr(render, '_write_mp4', no_ffmpeg)
    path, count, why = render.write_video(_frames(), str(tmp_path / 'w'))
    assert path.endswith('w.gif') and why == 'RuntimeError: no ffmpeg here' and os.path.getsize(path) > 0


def test_the_loss_plot_has_integer_iteration_ticks():
    fig, ax = render._axes('t')
    ax.plot([0, 1, 2], [3.0, 2.0, 1.5])
    fig.canvas.draw()
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks)


# --------------------------------------------------------------------------- found by the review

def test_a_second_training_into_a_folder_in_use_is_refused_even_with_force(tmp_path, capsys):
    out = tmp_path / 'busy'
    held = cli._lock(str(out))            # as a training process holds it
    try:
        err = _fails(Gravity, ['train', *QUICK, '--iters', '2', '--force', '--out', str(out)], capsys)
    finally:
        held.close()
    assert 'another process is training into' in err
    assert not (out / 'metrics.jsonl').exists()


def test_resume_without_a_checkpoint_after_trained_iterations_is_refused(gravity_run, tmp_path, capsys):
    out = tmp_path / 'copy'
    out.mkdir()
    for name in os.listdir(gravity_run):
        if name != 'checkpoint.npz':
            (out / name).write_bytes((gravity_run / name).read_bytes())
    before = _snapshot(out)
    err = _fails(Gravity, ['train', '--resume', '--iters', '4', '--out', str(out)], capsys)
    assert 'no checkpoint.npz' in err and _snapshot(out) == before


def test_a_failed_or_interrupted_video_leaves_the_previous_one(tmp_path):
    stem = str(tmp_path / 'sim')
    frames = [np.zeros((8, 8, 3), np.uint8)] * 3
    render.write_video(frames, stem, kind='gif')
    good = (tmp_path / 'sim.gif').read_bytes()

    def broken():
        yield frames[0]
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        render.write_video(broken(), stem, kind='gif')
    assert (tmp_path / 'sim.gif').read_bytes() == good
    assert sorted(os.listdir(tmp_path)) == ['sim.gif']


def test_an_unusable_output_folder_is_one_line_not_a_traceback(tmp_path, capsys):
    (tmp_path / 'afile').write_text('x')
    with pytest.raises(SystemExit) as stop:
        cli.main(Gravity, ['train', *QUICK, '--iters', '2', '--out', str(tmp_path / 'afile' / 'sub')])
    err = capsys.readouterr().err
    assert stop.value.code == 1 and err.count('\n') == 1 and 'Traceback' not in err, err
    assert 'expected a path' in _fails(Gravity, ['train', *QUICK, '--out', ''], capsys)


def test_flags_that_contradict_each_other_or_the_machine_are_refused(tmp_path, capsys):
    out = str(tmp_path / 'run')
    cli.main(Gravity, ['train', '--quick', '--iters', '1', '--quiet', '--out', out])
    err = _fails(Gravity, ['train', '--resume', '--force', '--out', out], capsys)
    assert '--resume' in err and '--force' in err
    err = _fails(Gravity, ['train', '--quick', '--threads', str((os.cpu_count() or 1) + 1), '--out', out], capsys)
    assert 'CPUs' in err
    err = _fails(Gravity, ['render', '--params', 'worst', '--out', out], capsys)
    assert "neither 'best', 'last'" in err
    err = _fails(Gravity, ['render', '--initial', '--params', 'best', '--out', out], capsys)
    assert '--initial' in err
    empty = tmp_path / 'empty'
    err = _fails(Gravity, ['render', '--out', str(empty)], capsys)
    assert 'holds no run' in err and not empty.exists()


def test_render_into_a_folder_it_cannot_write_is_one_line(gravity_run, tmp_path, capsys, monkeypatch):
    """Checked before the rollout (root can write anywhere: the refusal is simulated)."""
    folder, real = str(tmp_path / 'read_only'), cli.tempfile.TemporaryFile

    def refuse(*args, dir=None, **kwargs):
        if dir == folder:
            raise PermissionError(13, 'Permission denied')
        return real(*args, dir=dir, **kwargs)
    monkeypatch.setattr(cli.tempfile, 'TemporaryFile', refuse)
    with pytest.raises(SystemExit) as stop:
        cli.main(Gravity, ['render', *QUICK, '--params', str(gravity_run / 'params.npz'), '--out', folder])
    err = capsys.readouterr().err
    assert stop.value.code == 1 and err.count('\n') == 1 and f'{folder} cannot be written' in err, err


def _copy(run, tmp_path, name):
    out = tmp_path / name
    shutil.copytree(run, out)
    return out


def _fails_with(sim_class, argv, capsys, status=1):
    """The one-line error of a command that fails on its run folder's files, and its output."""
    with pytest.raises(SystemExit) as stop:
        cli.main(sim_class, argv)
    out, err = capsys.readouterr()
    assert stop.value.code == status and err.count('\n') == 1 and 'Traceback' not in err, err
    return out, err


@pytest.mark.parametrize('damage', ['truncated', 'empty', 'directory', 'other arrays'])
def test_a_damaged_checkpoint_is_named_and_what_is_whole_still_serves(gravity_run, tmp_path, capsys, damage):
    out = _copy(gravity_run, tmp_path, 'run')
    checkpoint = out / 'checkpoint.npz'
    if damage == 'directory':
        checkpoint.unlink()
        checkpoint.mkdir()
    elif damage == 'other arrays':          # the run's own file: damage, not another configuration
        with np.load(checkpoint) as saved:
            np.savez(checkpoint, np.zeros(7), info=saved['info'])
    else:
        checkpoint.write_bytes(checkpoint.read_bytes()[:100] if damage == 'truncated' else b'')
    if damage == 'other arrays':
        printed, err = _fails_with(Gravity, ['eval', '--out', str(out)], capsys)
        assert printed.startswith('best parameters (the last ones') and f'{checkpoint} is damaged' in err
        return
    printed, err = _fails_with(Gravity, ['eval', '--out', str(out)], capsys)
    assert printed.startswith('best parameters (params.npz): loss') and f'{checkpoint} is damaged' in err
    _, err = _fails_with(Gravity, ['train', '--resume', '--iters', '5', '--out', str(out)], capsys)
    assert f'{checkpoint} is damaged' in err and 'train --force' in err
    cli.main(Gravity, ['render', '--video', 'gif', '--quiet', '--out', str(out)])     # the best: whole
    assert (out / 'gravity.gif').exists()


def test_damaged_best_parameters_are_named_and_the_last_still_serve(gravity_run, tmp_path, capsys):
    out = _copy(gravity_run, tmp_path, 'run')
    (out / 'params.npz').write_bytes(b'')
    _, err = _fails_with(Gravity, ['render', '--quiet', '--out', str(out)], capsys)
    assert f'{out / "params.npz"} is damaged' in err and '--params last' in err
    printed, _ = _fails_with(Gravity, ['eval', '--out', str(out)], capsys)
    assert printed.startswith('last parameters (after 3 iterations): loss')


def test_lost_lines_of_metrics_are_restored_from_the_summary_on_resume(gravity_run, tmp_path, capsys):
    out = _copy(gravity_run, tmp_path, 'run')
    metrics = out / 'metrics.jsonl'
    whole = metrics.read_text()
    metrics.write_text(whole.splitlines(keepends=True)[0])
    cli.main(Gravity, ['train', '--resume', '--iters', '4', '--quiet', '--out', str(out)])
    assert metrics.read_text().startswith(whole) and len(_losses(out)) == 4
    metrics.write_text(whole.splitlines(keepends=True)[0])
    (out / 'losses.json').unlink()
    _, err = _fails_with(Gravity, ['train', '--resume', '--iters', '5', '--out', str(out)], capsys)
    assert f'{metrics} is damaged' in err and "1 of the checkpoint's 4 iterations" in err and 'train --force' in err
    out = _copy(gravity_run, tmp_path, 'garbage')          # (the failed resume holds the lock of `run`)
    (out / 'metrics.jsonl').write_bytes(b'[1]\n"x"\n{"iteration": "a"}\n\x00\xff garbage\n')   # no records
    (out / 'losses.json').write_text('{"iterations": 7}')
    _, err = _fails_with(Gravity, ['train', '--resume', '--iters', '5', '--out', str(out)], capsys)
    assert "0 of the checkpoint's 3 iterations" in err
    err = _fails(Gravity, ['compare', str(out), str(gravity_run), '--output', str(tmp_path / 'c.png')], capsys)
    assert 'has no iterations yet' in err


@pytest.mark.parametrize('columns, bar', [(0, False), (20, False), (120, True)])
def test_a_terminal_that_reports_no_width_gets_lines_not_a_bar(monkeypatch, columns, bar):
    """Under `script` (and some CI logs) the terminal is 0 columns wide: a bar shows nothing."""
    monkeypatch.setattr(cli.sys.stdout, 'isatty', lambda: True, raising=False)
    monkeypatch.setattr(cli.sys.stderr, 'isatty', lambda: True, raising=False)
    monkeypatch.setattr(cli.sys.stderr, 'fileno', lambda: 2, raising=False)
    monkeypatch.setattr(cli.os, 'get_terminal_size', lambda fd=None: os.terminal_size((columns, 24)))
    args = cli.parser_for(Gravity).parse_args(['train'])
    assert isinstance(cli._progress(args), cli.BarProgress) == bar


def test_a_run_without_its_config_json_says_so(gravity_run, tmp_path, capsys):
    out = _copy(gravity_run, tmp_path, 'run')
    (out / 'config.json').unlink()
    for command in (['eval'], ['render'], ['train', '--resume']):
        _, err = _fails_with(Gravity, [*command, '--out', str(out)], capsys)
        assert f'{out / "config.json"} is damaged (FileNotFoundError: it is missing)' in err, err
    (out / 'config.json').write_text('[1, 2]')
    _, err = _fails_with(Gravity, ['eval', '--out', str(out)], capsys)
    assert f'{out / "config.json"} is damaged' in err and 'train --force' in err


def test_render_of_the_initial_parameters_keeps_the_trained_video(gravity_run, tmp_path):
    out = _copy(gravity_run, tmp_path, 'run')
    cli.main(Gravity, ['render', '--video', 'gif', '--quiet', '--out', str(out)])
    trained = (out / 'gravity.gif').read_bytes()
    cli.main(Gravity, ['render', '--initial', '--video', 'gif', '--quiet', '--out', str(out)])
    assert (out / 'gravity.gif').read_bytes() == trained and (out / 'gravity_initial.gif').exists()


PLAIN_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from sims.cli import main
from sims.gravity import Gravity

class Mine(Gravity):
    \"\"\"Gravity, defined in a script.\"\"\"
    name = 'mine'

main(Mine)
"""


def test_a_simulator_of_a_script_names_the_script_and_sweeps_only_here(tmp_path):
    script = tmp_path / 'plainsim.py'
    script.write_text(PLAIN_SCRIPT.format(root=str(pathlib.Path(__file__).parent.parent)))
    run = lambda *argv: subprocess.run([sys.executable, str(script), *argv], cwd=tmp_path, capture_output=True,  # noqa: E731
                                       text=True, timeout=300)
    assert run('train', '--help').stdout.startswith('usage: python plainsim.py train')
    done = run('sweep', '--quick', '--iters', '1', '--seeds', '0:2', '--workers', '2', '--out', 's')
    assert done.returncode == 2 and done.stderr.count('\n') == 1 and 'defined in the script' in done.stderr, \
        done.stderr
