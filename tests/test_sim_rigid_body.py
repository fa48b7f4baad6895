"""The rigid-body simulator (DiffTaichi's rigid_body.py robots of robot_config.py).

* gradients of short float64 rollouts against central finite differences: both
  controllers, time of impact on and off, robots 0, 1 and 2, with ground contacts
  inside the horizon;
* `python -m sims.rigid_body train --quick` pinned (f32, decreasing) with its outputs,
  and `render --quick` writing a small GIF;
* the robots' geometry and the configuration (no compilation).

Every `RigidBody.create` starts a fresh engine program and compiles its kernels, so each
test builds its own simulator.
"""
import json

import numpy as np
import pytest

from sim_helpers import check_simulation_gradient
from sims import cli
from sims.rigid_body import RigidBody, robots
from sims.rigid_body.scene import GROUND_HEIGHT

# `train --quick` (robot 0, MLP, toi, 400 steps, gd lr 1 clip 0.2): losses of its 5 iterations (f32)
QUICK_LOSSES = [0.6072430, 0.6039665, 0.6025321, 0.6006042, 0.5996398]


@pytest.mark.parametrize('controller, toi, robot', [('mlp', True, 0), ('mlp', False, 2),
                                                     ('sine', True, 1), ('sine', False, 0)])
def test_gradient_matches_finite_differences(controller, toi, robot):
    sim = RigidBody.create(quick=True, fp='f64', steps=120, controller=controller, toi=toi, robot=robot)
    loss = sim.loss_and_grad()
    assert sim.evaluate() == loss                          # forward is repeatable (increments cleared)
    corners = np.stack([sim.box_outlines(t) for t in range(sim.cfg.steps)])
    assert (corners[..., 1] < GROUND_HEIGHT).any()         # ground contacts happen in the horizon
    moved_back = np.abs(sim.x_inc.to_numpy()).max()
    assert moved_back > 0 if toi else moved_back == 0      # time of impact corrects positions
    assert np.abs(sim.controller.actuation.to_numpy()).max() > 0
    assert check_simulation_gradient(sim) >= (12 if controller == 'mlp' else 6)


def test_quick_training_and_render_from_the_command_line(tmp_path):
    cli.main(RigidBody, ['train', '--quick', '--out', str(tmp_path)])
    record = json.loads((tmp_path / 'losses.json').read_text())
    losses = [r['loss'] for r in record['iterations']]
    assert record['simulator'] == 'rigid_body' and record['config']['steps'] == 400
    np.testing.assert_allclose(losses, QUICK_LOSSES, rtol=1e-3)
    assert np.all(np.diff(losses) < 0) and losses[-1] < losses[0] - 0.005
    assert (tmp_path / 'loss_curve.png').stat().st_size > 1000
    assert (tmp_path / 'params.npz').stat().st_size > 0

    cli.main(RigidBody, ['render', '--quick', '--video', 'gif', '--out', str(tmp_path)])
    import imageio.v2 as imageio
    frames = imageio.mimread(tmp_path / 'rigid_body.gif')
    assert len(frames) == 20 and np.asarray(frames[0]).shape[:2] == (512, 512)
    assert not np.array_equal(frames[0], frames[-1])


@pytest.mark.parametrize('robot, boxes, springs, joints, head', [(0, 5, 6, 1, 0), (1, 3, 2, 2, 0),
                                                                  (2, 7, 6, 6, 3), (3, 4, 6, 0, 3)])
def test_robots(robot, boxes, springs, joints, head):
    r = robots.ROBOTS[robot]()
    box, spring, joint = r.arrays()
    assert (len(box['x0']), len(spring['a']), len(joint['a']), r.head) == (boxes, springs, joints, head)
    w, h = box['half_size'].T
    np.testing.assert_allclose(box['inverse_mass'], 1 / (4 * w * h))
    assert np.all(spring['amplitude'] > 0) and np.all(spring['stiffness'] > 0)
    if robot == 2:   # the leg's joints start closed: anchor points coincide
        rotation = box['rotation0']

        def world(boxes, offsets):
            c, s = np.cos(rotation[boxes]), np.sin(rotation[boxes])
            return box['x0'][boxes] + np.stack([c * offsets[:, 0] - s * offsets[:, 1],
                                                s * offsets[:, 0] + c * offsets[:, 1]], axis=-1)
        np.testing.assert_allclose(world(joint['a'], joint['offset_a']), world(joint['b'], joint['offset_b']),
                                   atol=1e-12)


def test_configuration():
    cfg = RigidBody.config()
    assert (cfg.steps, cfg.dt, cfg.optimizer, cfg.lr, cfg.clip, cfg.controller, cfg.toi) == (
        2048, 0.001, 'gd', 1.0, 0.2, 'mlp', True)
    with pytest.raises(ValueError, match='robot'):
        RigidBody.config(robot=9)
    with pytest.raises(ValueError, match='steps'):
        RigidBody.config(steps=1)
