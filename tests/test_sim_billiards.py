"""sims.billiards (DiffTaichi's billiards.py): scene, collisions, gradients, training, the CLI.

* the rack: 1 + 2 + 3 + 4 balls and the cue ball, the target is the last one;
* collisions conserve momentum (equal masses, opposite impulses) and lose energy (e = 0.8);
* gradients of float64 rollouts through the collisions against central finite differences,
  with and without time of impact;
* `train --quick` losses pinned (f32), `render --quick` writes a GIF.
"""
import json

import numpy as np
import pytest

from sim_helpers import check_simulation_gradient
from sims import cli
from sims.billiards import Billiards
from sims.billiards.scene import rack_positions

# `train --quick` (256 steps of dt 0.012, gd lr 0.01, toi): the losses of its 4 iterations (f32);
# with --no-toi they are 0.04542536, 0.03404559, 0.03173481, 0.03067245
QUICK_LOSSES = [0.04512765, 0.02814985, 0.02823694, 0.02401762]


def test_scene_matches_difftaichi():
    cfg = Billiards.config()
    assert (cfg.steps, cfg.dt, cfg.radius, cfg.elasticity, cfg.toi, cfg.lr) == (1024, 0.003, 0.03, 0.8, True, 0.01)
    rack = rack_positions(4, 0.03)
    assert len(rack) == 10
    np.testing.assert_allclose(rack[0], [0.5, 0.5])
    np.testing.assert_allclose(rack[-1], [0.5 + 0.18, 0.5 + 0.18 - 0.7 * 0.09])   # row 3, place 3
    gaps = np.linalg.norm(rack[:, None] - rack[None], axis=-1)[~np.eye(10, dtype=bool)]
    assert gaps.min() == pytest.approx(0.06)                 # touching, not overlapping


@pytest.mark.parametrize('toi', [True, False], ids=['toi', 'no-toi'])
def test_gradient_matches_finite_differences(toi):
    sim = Billiards.create(quick=True, fp='f64', toi=toi)
    assert (sim.n_balls, sim.target_ball) == (11, 10)
    loss = sim.loss_and_grad()
    assert sim.evaluate() == loss
    x, v = sim.x.to_numpy(), sim.v.to_numpy()
    # the cue ball broke the rack and the target ball moved
    assert np.linalg.norm(x[-1, 10] - x[0, 10]) > 0.02
    assert np.count_nonzero(np.linalg.norm(v[-1, 1:], axis=-1) > 1e-3) >= 8
    # equal masses, opposite impulses: momentum is conserved; e = 0.8 loses energy
    np.testing.assert_allclose(v[-1].sum(0), [0.3, 0.0], atol=1e-12)
    assert 0.2 * 0.09 < (v[-1] ** 2).sum() < 0.09
    assert check_simulation_gradient(sim, entries=3) == 4      # every entry of init_x, init_v
    grads = np.concatenate([p.grad.to_numpy() for p in sim.parameters()])
    assert np.abs(grads).max() > 0.1


def test_quick_training_and_render_from_the_command_line(tmp_path):
    out = tmp_path
    cli.main(Billiards, ['train', '--quick', '--out', str(out)])
    record = json.loads((out / 'losses.json').read_text())
    losses = [r['loss'] for r in record['iterations']]
    assert record['simulator'] == 'billiards' and record['config']['toi'] is True
    np.testing.assert_allclose(losses, QUICK_LOSSES, rtol=1e-3)
    assert losses[-1] < 0.6 * losses[0]
    assert (out / 'loss_curve.png').stat().st_size > 1000 and (out / 'params.npz').stat().st_size > 0

    cli.main(Billiards, ['render', '--quick', '--video', 'gif', '--out', str(out)])
    import imageio.v2 as imageio
    frames = imageio.mimread(out / 'billiards.gif')
    assert 30 <= len(frames) <= 100
    first, last = np.asarray(frames[0]), np.asarray(frames[-1])
    assert first.shape[:2] == (384, 384) and not np.array_equal(first, last)
    assert (out / 'billiards.gif').stat().st_size < 2_000_000


def test_configuration_errors():
    with pytest.raises(ValueError, match='steps'):
        Billiards.config(steps=1)
    with pytest.raises(ValueError, match='unknown configuration keys'):
        Billiards.config(ballz=3)
