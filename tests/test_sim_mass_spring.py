"""The mass-spring simulator (DiffTaichi's mass_spring.py robots and mass_spring_simple.py triangle).

* gradients of short float64 rollouts against central finite differences: MLP controller
  with and without time-of-impact contact, the sine controller, the triangle's rest lengths;
* `python -m sims.mass_spring train --quick` pinned (f32) and `render` writing a GIF;
* `--controller sine` from the command line; robots 1 and 2; the triangle's training.

Every `MassSpring.create` starts a fresh engine program, so each test builds its own
simulator (a simulator from an earlier program cannot run after a later `ti.init`).
"""
import json

import numpy as np
import pytest

from sim_helpers import check_simulation_gradient
from sims import cli
from sims.mass_spring import MassSpring, robots
from sims.mass_spring.scene import GROUND_HEIGHT
from sims.training import train

# `train --quick` (robot 0, MLP, 128 steps, lr 0.2, clip 1): losses of its 6 iterations (f32)
QUICK_LOSSES = [-0.2078190, -0.2004913, -0.2071466, -0.2109487, -0.2297104, -0.2378296]


# --------------------------------------------------------------------------- gradients

@pytest.mark.parametrize('controller, toi', [('mlp', False), ('mlp', True), ('sine', False)])
def test_gradient_matches_finite_differences(controller, toi):
    sim = MassSpring.create(quick=True, fp='f64', steps=64, controller=controller, toi=toi)
    loss = sim.loss_and_grad()
    assert sim.evaluate() == loss                      # forward is repeatable (impulses cleared)
    stopped = np.all(sim.v.to_numpy()[1:] == 0, axis=-1)
    assert stopped.sum() >= 3                         # ground contacts happen in the horizon
    if toi:                                           # time of impact stops masses at the ground
        assert sim.x.to_numpy()[:, :, 1].min() > GROUND_HEIGHT - 1e-9
    assert np.abs(sim.controller.actuation.to_numpy()).max() > 0
    assert check_simulation_gradient(sim) >= 7


def test_triangle_gradient_matches_finite_differences():
    sim = MassSpring.create(fp='f64', scene='triangle', steps=400)
    assert check_simulation_gradient(sim, eps=1e-7) == 3


# --------------------------------------------------------------------------- command line

def test_quick_training_and_render_from_the_command_line(tmp_path):
    out = tmp_path / 'mlp'
    cli.main(MassSpring, ['train', '--quick', '--out', str(out)])
    record = json.loads((out / 'losses.json').read_text())
    losses = [r['loss'] for r in record['iterations']]
    assert record['config']['controller'] == 'mlp' and record['config']['steps'] == 128
    np.testing.assert_allclose(losses, QUICK_LOSSES, rtol=1e-3)
    assert losses[-1] < losses[0] - 0.005 and min(losses[3:]) < min(losses[:3])
    assert (out / 'loss_curve.png').stat().st_size > 0 and (out / 'params.npz').stat().st_size > 0

    cli.main(MassSpring, ['render', '--quick', '--video', 'gif', '--out', str(out)])
    import imageio.v2 as imageio
    frames = imageio.mimread(out / 'mass_spring.gif')
    assert 60 <= len(frames) <= 100
    first, last = np.asarray(frames[0]), np.asarray(frames[-1])
    assert first.shape[:2] == (512, 512) and not np.array_equal(first, last)


def test_sine_controller_from_the_command_line(tmp_path):
    cli.main(MassSpring, ['train', '--quick', '--controller', 'sine', '--out', str(tmp_path)])
    record = json.loads((tmp_path / 'losses.json').read_text())
    losses = [r['loss'] for r in record['iterations']]
    assert record['config']['controller'] == 'sine'
    assert np.all(np.diff(losses) < 0), losses
    assert losses[-1] < losses[0] - 5e-4


# --------------------------------------------------------------------------- robots and triangle

@pytest.mark.parametrize('robot, n_objects, n_springs, n_actuated', [(1, 14, 30, 4), (2, 20, 46, 8)])
def test_robots_1_and_2_build_and_train(robot, n_objects, n_springs, n_actuated):
    sim = MassSpring.create(quick=True, robot=robot, steps=64, toi=robot == 2)
    assert (sim.n_objects, sim.n_springs) == (n_objects, n_springs)
    assert np.count_nonzero(sim.amplitude.to_numpy()) == n_actuated
    before = [p.to_numpy().copy() for p in sim.parameters()]
    records = train(sim, iters=2, log=lambda _: None)
    assert all(np.isfinite(r['loss']) and r['grad_norm'] > 0 for r in records)
    assert any(not np.array_equal(b, p.to_numpy()) for b, p in zip(before, sim.parameters()))
    assert np.isfinite(sim.x.to_numpy()).all()


def test_triangle_rest_lengths_train():
    sim = MassSpring.create(quick=True, scene='triangle')
    assert (sim.cfg.steps, sim.cfg.lr, sim.cfg.clip) == (1024, 5.0, None)   # its own defaults
    records = train(sim, log=lambda _: None)
    losses = [r['loss'] for r in records]
    assert losses[0] == pytest.approx((0.5 * 0.1 * 0.1 - 0.1) ** 2, rel=1e-2)   # area 0.005 at start
    assert losses[-1] < losses[0] / 100, losses
    walls = sim.x.to_numpy()[:, :, 0].max()
    assert 0.4 < walls < 0.41                              # the wall at x = 0.4 stops the masses


def test_configuration():
    cfg = MassSpring.config()
    assert (cfg.steps, cfg.dt, cfg.optimizer, cfg.lr, cfg.controller, cfg.toi) == (682, 0.004, 'normalized', 0.2, 'mlp', False)
    triangle = MassSpring.config(scene='triangle', lr=2.0)
    assert (triangle.steps, triangle.dt, triangle.lr) == (1024, 0.001, 2.0)   # explicit values win
    with pytest.raises(ValueError, match='robot'):
        MassSpring.config(robot=7)
    with pytest.raises(ValueError, match='scene'):
        MassSpring.config(scene='snake')
    r0 = robots.robot0().arrays()
    assert r0['x0'].shape == (6, 2) and np.all(r0['stiffness'] == 14000) and np.all(r0['amplitude'] == 0.1)
