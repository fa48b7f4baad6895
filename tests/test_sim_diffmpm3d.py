"""DiffMPM3D (sims/diffmpm3d): the scene, gradients, checkpointing, training, the CLI.

Every `DiffMPM3D.create` starts a fresh engine program (and compiles the 3D
kernels again, ~1.5 s), which retires the simulators built before it; the
float64 reference run is therefore cached as numbers, not as a live simulator.
The float64 checks use the --quick robot over SHORT steps, with the sine
weights scaled up (actuation of order 1 instead of 0.01) so that the robot
really deforms within the short horizon.
"""
import functools
import json
import os

import imageio.v2 as imageio
import numpy as np
import pytest

from engine.core import program
from sim_helpers import check_simulation_gradient
from sims import cli
from sims.diffmpm3d import DiffMPM3D, robot_scene

SHORT = 30          # steps of the float64 checks: 29 advances
SEGMENT = 6         # does not divide 29
WEIGHT_SCALE = 50.0

# The --quick training run (f32, sine controller, 4 Adam iterations).
QUICK_SINE_LOSSES = [-0.2499961, -0.2524572, -0.2543417, -0.2587127]


def _f64_sim(controller='sine', sticky_floor=True, **overrides):
    sim = DiffMPM3D.create(quick=True, fp='f64', steps=SHORT, controller=controller,
                           sticky_floor=sticky_floor, frames=5, **overrides)
    if controller == 'sine':
        sim.controller.weights.data[...] *= WEIGHT_SCALE
    return sim


def _grads(sim):
    return [p.grad.to_numpy().astype(np.float64) for p in sim.parameters()]


@functools.lru_cache(maxsize=None)
def f64_reference():
    """The short float64 rollout (sine, sticky floor) without checkpointing: its loss,
    gradients, evaluate() and frames, and the live simulator (current until the next
    DiffMPM3D.create)."""
    sim = _f64_sim()
    loss = sim.loss_and_grad()
    grads = _grads(sim)
    frames = [f.copy() for f in sim.render_frames()]
    return dict(sim=sim, loss=loss, grads=grads, value=sim.evaluate(), frames=frames)


def test_robot_scene_matches_difftaichi():
    x, actuators, n_act = robot_scene(64, density=3)          # DiffTaichi's size
    assert len(x) == 30495 and n_act == 16
    assert np.bincount(actuators + 1).tolist() == [3 * 19 * 13 * 19] + [9 * 6 * 19] * 16
    np.testing.assert_array_less([0.1, 0.05, 0.3], x.min(axis=0))   # offset (0.1, 0.05, 0.3)
    np.testing.assert_array_less(x.max(axis=0), [0.4, 0.12, 0.6])   # 0.3 x 0.07 x 0.3
    x, actuators, n_act = robot_scene(32, density=3)          # the default
    assert len(x) == 3186 and n_act == 16
    legs = x[actuators >= 0]
    body = x[actuators < 0]                 # the strip 0.1 <= z - 0.3 <= 0.2 joins the legs
    assert np.all(np.abs(body[:, 2] - 0.45) < 0.05) and np.all(np.abs(legs[:, 2] - 0.45) > 0.05)


@pytest.mark.parametrize('controller, sticky_floor', [('sine', True), ('mlp', True), ('sine', False)],
                         ids=['sine', 'mlp', 'sine-coulomb-floor'])
def test_gradient_matches_finite_differences(controller, sticky_floor):
    if (controller, sticky_floor) == ('sine', True):
        ref = f64_reference()
        sim = ref['sim']
        if sim.x.program is not program.current():     # retired by a later create: rebuild it
            sim = _f64_sim()
        assert all(np.abs(g).max() > 1e-6 for g in ref['grads'])
    else:
        sim = _f64_sim(controller, sticky_floor)
    entries = 2 if controller == 'mlp' else 4          # the MLP has 4 parameter fields
    assert check_simulation_gradient(sim, entries=entries, eps=1e-6, rtol=1e-4, atol=1e-9) >= 8
    assert np.abs(sim.x.data[SHORT - 1] - sim.x.data[0]).max() > 1e-3     # the robot moved
    if controller == 'mlp':      # the observation is filled and moves
        obs = sim.controller.observation.to_numpy()
        assert np.abs(obs[SHORT - 2]).max() > 1e-3 and np.all(obs[0] == pytest.approx(0, abs=1e-12))


def test_checkpointed_gradient_equals_plain_gradient():
    ref = f64_reference()
    sim = _f64_sim(checkpoint=SEGMENT)
    assert sim.x.shape[0] == SEGMENT + 1
    loss = sim.loss_and_grad()
    assert loss == pytest.approx(ref['loss'], rel=1e-12)
    for got, want in zip(_grads(sim), ref['grads']):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
    # a second iteration gives the same again (no stale gradients or state)
    assert sim.loss_and_grad() == pytest.approx(ref['loss'], rel=1e-12)
    np.testing.assert_allclose(_grads(sim)[0], ref['grads'][0], rtol=1e-9, atol=1e-9 * np.abs(ref['grads'][0]).max())
    # evaluation and rendering work with checkpointing too
    assert sim.evaluate() == pytest.approx(ref['value'], rel=1e-12)
    frames = list(sim.render_frames())
    assert len(frames) == len(ref['frames'])
    for got, want in zip(frames, ref['frames']):
        assert got.shape == want.shape and (got != want).any(axis=-1).mean() < 1e-4


def test_per_cell_and_incremental_stencil_sums_agree():
    """The 3D robot with the per-cell stencil sums of the 2D one (sims/mpm/kernels.py):
    the same loss and gradients but for rounding."""
    class PerCell(DiffMPM3D):
        incremental = False

    ref = f64_reference()
    sim = PerCell.create(quick=True, fp='f64', steps=SHORT, controller='sine', frames=5)
    sim.controller.weights.data[...] *= WEIGHT_SCALE
    assert sim.loss_and_grad() == pytest.approx(ref['loss'], rel=1e-12)
    for got, want in zip(_grads(sim), ref['grads']):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())


def test_quick_training_and_render_from_the_command_line(tmp_path):
    out = str(tmp_path / 'out')
    cli.main(DiffMPM3D, ['train', '--quick', '--out', out])
    with open(os.path.join(out, 'losses.json')) as f:
        record = json.load(f)
    losses = [r['loss'] for r in record['iterations']]
    assert record['simulator'] == 'diffmpm3d' and record['config']['controller'] == 'sine'
    assert losses == pytest.approx(QUICK_SINE_LOSSES, rel=1e-3)
    assert all(b < a for a, b in zip(losses, losses[1:]))
    assert losses[-1] < losses[0] - 5e-3
    for name in ('losses.json', 'loss_curve.png', 'params.npz'):
        assert os.path.getsize(os.path.join(out, name)) > 0
    # render picks up the trained parameters: two 2D projections per frame
    cli.main(DiffMPM3D, ['render', '--quick', '--video', 'gif', '--out', out, '--frames', '4'])
    frames = imageio.mimread(os.path.join(out, 'diffmpm3d.gif'))
    cfg = DiffMPM3D.config(quick=True)
    assert len(frames) == len(range(0, cfg.steps, (cfg.steps - 1) // 4))
    image = np.asarray(frames[0])[..., :3]
    assert image.shape == (512, 512, 3)
    dark = image.min(axis=-1) < 100          # particles and the floor line
    assert dark[:256].any() and dark[256:].any()                 # side view above, top view below


def test_a_grid_too_coarse_for_the_robot_is_refused_with_the_configuration():
    """Before anything is built: a sweep refuses the combination up front."""
    with pytest.raises(ValueError, match='--n-grid 8 at --density 2 is too coarse for the robot'):
        DiffMPM3D.config(True, n_grid=8)
    with pytest.raises(ValueError, match='too coarse'):
        robot_scene(8, 2)
