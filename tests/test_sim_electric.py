"""sims.electric (DiffTaichi's electric.py): goal path, dynamics, gradients, training, the CLI.

* the goal moves along a polyline from the seed, the particle starts at its first point;
* a numpy replay of the rollout from the recorded charges (Coulomb-like forces, damping);
* the MLP's observation is the state the step starts from;
* gradients of short float64 rollouts against central finite differences, MLP and sine
  controllers;
* `train --quick` losses pinned (f32), `render --quick` writes a GIF.
"""
import json
import math

import numpy as np
import pytest

from sim_helpers import check_simulation_gradient
from sims import cli
from sims.electric import Electric
from sims.electric.scene import CHARGES, goal_path

# `train --quick` (MLP 8-16-8, 128 steps of dt 0.06, gd lr 0.1): its 4 losses (f32)
QUICK_LOSSES = [0.6537466, 0.61210227, 0.58276892, 0.55924839]


def test_configuration_matches_difftaichi():
    cfg = Electric.config()
    assert (cfg.steps, cfg.dt, cfg.damping, cfg.K, cfg.seg_size, cfg.hidden, cfg.lr) == (
        512, 0.03, 0.2, 1e-3, 256, 64, 2e-2)
    assert len(CHARGES) == 8 and (0.5, 0.9) in CHARGES and (0.1, 0.1) in CHARGES
    assert Electric.config(controller='sine').n_waves == 8 and Electric.config().n_waves == 0
    assert Electric.config(controller='sine', n_waves=3).n_waves == 3
    with pytest.raises(ValueError, match='steps'):
        Electric.config(steps=1)


def test_goal_path():
    goal, goal_v, points = goal_path(10, 4, np.random.default_rng(0))
    assert points.shape == (4, 2) and points.min() >= 0.2 and points.max() <= 0.8
    np.testing.assert_allclose(goal[0], points[0])
    np.testing.assert_allclose(goal[6], 0.5 * (points[1] + points[2]))
    np.testing.assert_allclose(goal[9], 0.75 * points[2] + 0.25 * points[3])
    np.testing.assert_allclose(goal_v[5], points[2] - points[1])


def test_gradient_and_dynamics_mlp():
    sim = Electric.create(quick=True, fp='f64', steps=64)
    c = sim.cfg
    loss = sim.loss_and_grad()
    x, v, goal = sim.x.to_numpy(), sim.v.to_numpy(), sim.goal.to_numpy()
    act = sim.controller.actuation.to_numpy()
    # replay in numpy from the charges the controller set
    xs, vs = x[0].copy(), np.zeros(2)
    replay = 0.0
    for t in range(c.steps - 1):
        force = np.zeros(2)
        for k, q in enumerate(CHARGES):
            r = xs - np.array(q)
            force += c.K * act[t, k] / max(np.linalg.norm(r), 0.1) ** 3 * r
        vs = vs * math.exp(-c.dt * c.damping) + c.dt * force
        xs = xs + c.dt * vs
        np.testing.assert_allclose([xs, vs], [x[t + 1], v[t + 1]], rtol=1e-12, atol=1e-14)
        replay += c.dt * np.sum((xs - goal[t + 1]) ** 2)
    assert loss == pytest.approx(replay, rel=1e-12)
    assert np.abs(x[-1] - x[0]).max() > 1e-3 and np.abs(act).max() > 0.3
    obs = sim.controller.observation.to_numpy()          # the state each step starts from
    t = 40
    np.testing.assert_allclose(obs[t], np.concatenate([x[t] - 0.5, v[t], goal[t + 1] - 0.5,
                                                       sim.goal_v.to_numpy()[t + 1] - 0.5]))
    assert sim.evaluate() == loss
    assert check_simulation_gradient(sim, entries=4) >= 13


def test_gradient_sine():
    sim = Electric.create(quick=True, fp='f64', steps=64, controller='sine')
    assert check_simulation_gradient(sim, entries=4) >= 5


def test_quick_training_and_render_from_the_command_line(tmp_path):
    cli.main(Electric, ['train', '--quick', '--out', str(tmp_path)])
    record = json.loads((tmp_path / 'losses.json').read_text())
    losses = [r['loss'] for r in record['iterations']]
    assert record['simulator'] == 'electric' and record['config']['controller'] == 'mlp'
    np.testing.assert_allclose(losses, QUICK_LOSSES, rtol=1e-3)
    assert np.all(np.diff(losses) < 0) and losses[-1] < 0.9 * losses[0]
    assert (tmp_path / 'loss_curve.png').stat().st_size > 1000 and (tmp_path / 'params.npz').stat().st_size > 0

    cli.main(Electric, ['render', '--quick', '--video', 'gif', '--out', str(tmp_path)])
    import imageio.v2 as imageio
    frames = imageio.mimread(tmp_path / 'electric.gif')
    assert 40 <= len(frames) <= 100
    first, last = np.asarray(frames[0]), np.asarray(frames[-1])
    assert first.shape[:2] == (384, 384) and not np.array_equal(first, last)
    assert (tmp_path / 'electric.gif').stat().st_size < 2_000_000
