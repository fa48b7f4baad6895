"""DiffMPM (sims/diffmpm): gradients, checkpointing, training, rendering, memory.

Every `DiffMPM.create` starts a fresh engine program, which retires the
simulators built before it; the float64 reference runs are therefore cached as
numbers (loss, gradients, frames), not as live simulators.
"""
import functools
import json
import os

import imageio.v2 as imageio
import numpy as np
import pytest

import engine as ti
from engine.core import program
from scripts.diffmpm_memory import peak_memory
from sim_helpers import check_simulation_gradient
from sims import cli
from sims.diffmpm import DiffMPM, robot_scene

SHORT = 40          # steps of the float64 checks: 39 advances
SEGMENT = 7         # does not divide 39

# The --quick training runs (f32, 4 iterations of plain gradient descent).
QUICK_SINE_LOSSES = [-0.2499788, -0.2513398, -0.2529011, -0.2535979]
QUICK_MLP_LOSSES = [-0.2520296, -0.2533047, -0.2539602, -0.2548833]


def _f64_sim(controller, sticky_floor=True, **overrides):
    return DiffMPM.create(quick=True, fp='f64', steps=SHORT, controller=controller,
                          sticky_floor=sticky_floor, **overrides)


def _grads(sim):
    return [p.grad.to_numpy().astype(np.float64) for p in sim.parameters()]


@functools.lru_cache(maxsize=None)
def f64_reference(controller, sticky_floor=True):
    """A short float64 rollout without checkpointing: its loss, gradients,
    evaluate() and rendered frames, and the live simulator (current until the
    next DiffMPM.create)."""
    sim = _f64_sim(controller, sticky_floor)
    loss = sim.loss_and_grad()
    grads = _grads(sim)
    frames = [f.copy() for f in sim.render_frames()]
    return dict(sim=sim, loss=loss, grads=grads, value=sim.evaluate(), frames=frames)


def test_robot_scene_matches_difftaichi():
    x, actuators, n_act = robot_scene(128)
    assert len(x) == 2976 and n_act == 4
    assert np.bincount(actuators + 1).tolist() == [1824, 288, 288, 288, 288]
    assert x[:, 0].min() > 0.1 and x[:, 0].max() < 0.4          # offset (0.1, 0.03), 0.3 x 0.2
    assert x[:, 1].min() > 0.03 and x[:, 1].max() < 0.23


@pytest.mark.parametrize('controller, sticky_floor', [('sine', True), ('mlp', True), ('sine', False)],
                         ids=['sine', 'mlp', 'sine-coulomb-floor'])
def test_gradient_matches_finite_differences(controller, sticky_floor):
    ref = f64_reference(controller, sticky_floor)
    sim = ref['sim']
    if sim.x.program is not program.current():     # retired by a later create: rebuild it
        sim = _f64_sim(controller, sticky_floor)
    assert all(np.abs(g).max() > 1e-6 for g in ref['grads'])
    assert check_simulation_gradient(sim, entries=4, eps=1e-6, rtol=1e-4, atol=1e-9) >= 4
    if controller == 'mlp':      # the observation is filled and moves
        obs = sim.controller.observation.to_numpy()
        assert np.abs(obs[SHORT - 2]).max() > 1e-3 and np.all(obs[0] == pytest.approx(0, abs=1e-12))


@pytest.mark.parametrize('controller', ['sine', 'mlp'])
def test_checkpointed_gradient_equals_plain_gradient(controller):
    ref = f64_reference(controller)
    sim = _f64_sim(controller, checkpoint=SEGMENT)
    assert sim.x.shape[0] == SEGMENT + 1
    loss = sim.loss_and_grad()
    assert loss == pytest.approx(ref['loss'], rel=1e-12)
    for got, want in zip(_grads(sim), ref['grads']):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())
    # a second iteration gives the same again (no stale gradients or state)
    assert sim.loss_and_grad() == pytest.approx(ref['loss'], rel=1e-12)
    np.testing.assert_allclose(_grads(sim)[0], ref['grads'][0], rtol=1e-10, atol=1e-16)
    # evaluation and rendering work with checkpointing too
    assert sim.evaluate() == pytest.approx(ref['value'], rel=1e-12)
    frames = list(sim.render_frames())
    assert len(frames) == len(ref['frames'])
    for got, want in zip(frames, ref['frames']):
        assert got.shape == want.shape and (got != want).any(axis=-1).mean() < 1e-4


def test_per_cell_and_incremental_stencil_sums_agree():
    """sims/mpm/kernels.py sums the B-spline stencil per cell (the 2D robot) or
    incrementally (the 3D one): the same mathematics over any dim, so the 2D robot with
    the incremental sums has the same loss and gradients but for rounding."""
    class Incremental(DiffMPM):
        incremental = True

    ref = f64_reference('sine')
    sim = Incremental.create(quick=True, fp='f64', steps=SHORT, controller='sine')
    assert sim.loss_and_grad() == pytest.approx(ref['loss'], rel=1e-12)
    for got, want in zip(_grads(sim), ref['grads']):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())


def _train(tmp_path, *flags):
    out = str(tmp_path / 'out')
    cli.main(DiffMPM, ['train', '--quick', '--out', out, *flags])
    with open(os.path.join(out, 'losses.json')) as f:
        record = json.load(f)
    return out, record


def test_quick_training_from_the_command_line(tmp_path):
    out, record = _train(tmp_path)
    losses = [r['loss'] for r in record['iterations']]
    assert record['simulator'] == 'diffmpm' and record['config']['controller'] == 'sine'
    assert losses == pytest.approx(QUICK_SINE_LOSSES, rel=1e-3)
    assert all(b < a for a, b in zip(losses, losses[1:]))
    assert losses[-1] < losses[0] - 3e-3
    for name in ('losses.json', 'loss_curve.png', 'params.npz'):
        assert os.path.getsize(os.path.join(out, name)) > 0
    # render picks up the trained parameters
    cli.main(DiffMPM, ['render', '--quick', '--video', 'gif', '--out', out])
    frames = imageio.mimread(os.path.join(out, 'diffmpm.gif'))
    cfg = DiffMPM.config(quick=True)
    assert len(frames) == len(range(0, cfg.steps, (cfg.steps - 1) // cfg.frames))
    assert frames[0].shape[:2] == (512, 512)


def test_mlp_controller_from_the_command_line(tmp_path):
    out, record = _train(tmp_path, '--controller', 'mlp')
    losses = [r['loss'] for r in record['iterations']]
    assert record['config']['controller'] == 'mlp'
    assert losses == pytest.approx(QUICK_MLP_LOSSES, rel=1e-3)
    assert all(b < a for a, b in zip(losses, losses[1:]))
    with np.load(os.path.join(out, 'params.npz')) as params:
        assert len(params.files) == 4      # w1, b1, w2, b2


def test_checkpointing_cuts_peak_memory_of_the_full_scene():
    """The full 1,024-step scene: tracemalloc peak while building the simulator
    and running its forward rollout (all fields, gradients and checkpoint
    buffers exist by then; scripts/diffmpm_memory.py measures a whole iteration)."""
    assert DiffMPM.config().steps == 1024 and DiffMPM.config().n_grid == 128
    plain, _ = peak_memory(checkpoint=0, backward=False)
    checkpointed, _ = peak_memory(checkpoint=32, backward=False)
    state_bytes = 1024 * 2976 * (2 + 2 + 4 + 4) * 4          # x, v, C, F in f32
    assert plain > 2 * state_bytes                         # values and gradients
    assert plain >= 4 * checkpointed, (plain, checkpointed)


def test_rollout_gradient_report_on_the_robot():
    """ti.ad.rollout_report over the particle positions of a (short) diffmpm rollout: one
    norm per time slot, finite, growing backwards at a moderate rate."""
    sim = DiffMPM.create(quick=True, steps=60)
    ti.ad.keep_adjoints(sim.x)
    sim.loss_and_grad()
    report = ti.ad.rollout_report(sim.x)
    assert len(report.norms) == 60 and report.first_non_finite is None and not report.exploding
    assert report.norms[-1] > 0 and np.all(report.norms > 0)
    assert 0.5 < report.growth_per_step() < 2.0
    text = str(report)
    assert 'rollout gradient report for' in text and 'step     59' in text


def test_a_grid_too_coarse_for_the_robot_is_refused_in_one_line(tmp_path, capsys):
    """Below n_grid 20 the 0.05-wide legs get no particle: a ValueError naming the flag,
    which the command line reports in one line (it was a ZeroDivisionError)."""
    assert len(robot_scene(20)[0]) > 0
    with pytest.raises(SystemExit) as stop:
        cli.main(DiffMPM, ['train', '--quick', '--n-grid', '8', '--iters', '1', '--out', str(tmp_path / 'r')])
    assert stop.value.code == 2
    assert '--n-grid 8 is too coarse for the robot' in capsys.readouterr().err
