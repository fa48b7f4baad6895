"""sims.fem: the generated mesh, the elastic forces three ways (tape of the energy kernel,
inline ti.ad.grad of the triangle energy, closed form), the gradient of short float64
rollouts against finite differences (sine and MLP controllers), the quick training losses,
the CLI and the configuration.

`FEM.create` starts a fresh engine program, which retires the simulators built before it:
`built()` keeps the last simulator per configuration and rebuilds it only when another
program took over.
"""
import json

import imageio.v2 as imageio
import numpy as np
import pytest

import engine.core.program
from sim_helpers import check_simulation_gradient
from sims.cli import main
from sims.fem import FEM
from sims.fem.scene import GROUND, robot_mesh

SHORT = 60      # steps of the float64 checks

# `train --quick` (f32, sine controller, 200 steps, Adam lr 0.05): its 5 losses
QUICK_LOSSES = [0.1225260, 0.1216969, 0.1207703, 0.1205538, 0.1197626]

_built = {}


def built(**overrides):
    key = tuple(sorted(overrides.items()))
    sim = _built.get(key)
    if sim is None or sim.loss.program is not engine.core.program.current():
        sim = _built[key] = FEM.create(quick=True, **overrides)
    return sim


def sim64(controller, actuate=True):
    """A short float64 robot; with `actuate`, controller weights large enough to move it."""
    sim = built(fp='f64', steps=SHORT, controller=controller)
    sim.initialize(np.random.default_rng(0))
    if actuate:
        rng = np.random.default_rng(1)
        for p in sim.parameters():
            p.from_numpy(rng.standard_normal(p.shape) * 0.5)
    return sim


# --------------------------------------------------------------------------- mesh and forces

def test_mesh():
    nodes, triangles, actuators = robot_mesh()
    assert (len(nodes), len(triangles)) == (59, 80)
    assert np.bincount(actuators + 1).tolist() == [48, 8, 8, 8, 8]      # 4 actuators, 2 per leg
    e1, e2 = nodes[triangles[:, 1]] - nodes[triangles[:, 0]], nodes[triangles[:, 2]] - nodes[triangles[:, 0]]
    area = 0.5 * (e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0])
    assert np.allclose(area, 0.025 ** 2 / 2)                               # counter-clockwise, equal
    assert nodes[:, 1].min() == GROUND and len(np.unique(triangles)) == len(nodes)
    sim = sim64('sine', actuate=False)
    assert sim.mass.to_numpy().sum() == pytest.approx(0.3 * 0.05 + 2 * 0.1 * 0.05, rel=1e-12)


def test_forces_three_ways():
    sim = sim64('sine')
    sim.evaluate()
    for t in (0, 20, SHORT - 2):
        closed_form = sim.analytic_forces(t)
        assert np.abs(closed_form).max() > 0.01
        np.testing.assert_allclose(sim.autodiff_forces(t), closed_form, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(sim.rollout_forces(t), closed_form, rtol=1e-10, atol=1e-10)
        assert np.abs(closed_form.sum(0)).max() < 1e-12                    # internal forces
    # at rest and without actuation there is no elastic force
    sim = sim64('sine', actuate=False)
    sim.controller.actuation.fill(0)
    assert np.abs(sim.autodiff_forces(0)).max() < 1e-12 and np.abs(sim.analytic_forces(0)).max() < 1e-12


# --------------------------------------------------------------------------- gradients

@pytest.mark.parametrize('controller', ['sine', 'mlp'])
def test_gradient_matches_finite_differences(controller):
    sim = sim64(controller)
    loss = sim.loss_and_grad()
    assert sim.evaluate() == loss                                    # forward is repeatable
    stopped = np.all(sim.v.to_numpy()[1:] == 0, axis=-1)
    assert stopped.sum() >= 10                                       # floor contacts happen
    assert np.abs(sim.com.to_numpy()[-1] - sim.com.to_numpy()[0]).max() > 1e-3
    if controller == 'mlp':
        assert np.abs(sim.controller.observation.to_numpy()[SHORT - 1]).max() > 1e-3
    assert check_simulation_gradient(sim, entries=4) >= 8


# --------------------------------------------------------------------------- training and CLI

def test_quick_training_regression_and_cli(tmp_path, capsys):
    main(FEM, ['train', '--quick', '--out', str(tmp_path)])
    printed = capsys.readouterr().out
    assert printed.count('iter ') == FEM.quick['iters']
    record = json.loads((tmp_path / 'losses.json').read_text())
    assert record['simulator'] == 'fem' and record['config']['controller'] == 'sine'
    losses = [r['loss'] for r in record['iterations']]
    np.testing.assert_allclose(losses, QUICK_LOSSES, rtol=1e-3)
    assert all(b < a for a, b in zip(losses, losses[1:]))
    assert (tmp_path / 'loss_curve.png').stat().st_size > 1000 and (tmp_path / 'params.npz').stat().st_size > 0

    main(FEM, ['train', '--quick', '--iters', '2', '--out', str(tmp_path / 'two')])
    assert len(json.loads((tmp_path / 'two' / 'losses.json').read_text())['iterations']) == 2

    main(FEM, ['render', '--quick', '--video', 'gif', '--out', str(tmp_path)])
    assert 'parameters from' in capsys.readouterr().out
    frames = imageio.mimread(tmp_path / 'fem.gif')
    assert len(frames) == FEM.quick['frames'] and np.asarray(frames[0]).shape[:2] == (512, 512)
    assert not np.array_equal(frames[0], frames[-1])


def test_configuration():
    cfg = FEM.config()
    assert (cfg.steps, cfg.dt, cfg.E, cfg.nu, cfg.controller, cfg.optimizer) == (1200, 5e-4, 200.0, 0.3, 'sine', 'adam')
    with pytest.raises(ValueError, match='unknown configuration keys'):
        FEM.config(stepz=3)
    with pytest.raises(ValueError, match='steps'):
        FEM.config(steps=1)
