"""sims.gravity: autodiff forces, the inverse problem's gradient, quick training, the CLI."""
import json

import numpy as np
import pytest

from sim_helpers import check_simulation_gradient
from sims.cli import main
from sims.gravity import Gravity
from sims.training import train


def test_autodiff_forces_match_the_closed_form():
    sim = Gravity.create(quick=True, fp='f64', n=6)
    for t in (0,):
        forces = sim.autodiff_forces(t)
        np.testing.assert_allclose(forces, sim.analytic_forces(t), rtol=1e-12, atol=1e-12)
        assert np.abs(forces).max() > 0.1


def test_gradient_matches_finite_differences():
    sim = Gravity.create(quick=True, fp='f64', steps=20)
    assert check_simulation_gradient(sim, entries=4) >= 4


def test_quick_training_regression():
    sim = Gravity.create(quick=True)
    losses = [r['loss'] for r in train(sim, log=lambda line: None)]
    np.testing.assert_allclose(losses, [0.1760171, 0.1645839, 0.1538960, 0.1439053], rtol=1e-3)
    assert losses[-1] < 0.85 * losses[0]


def test_cli_train_then_render(tmp_path, capsys):
    main(Gravity, ['train', '--quick', '--iters', '2', '--out', str(tmp_path)])
    printed = capsys.readouterr().out
    assert printed.count('iter ') == 2 and 'grad_norm' in printed
    record = json.loads((tmp_path / 'losses.json').read_text())
    assert record['simulator'] == 'gravity' and len(record['iterations']) == 2
    assert (tmp_path / 'loss_curve.png').stat().st_size > 1000
    main(Gravity, ['render', '--quick', '--video', 'gif', '--out', str(tmp_path)])
    assert (tmp_path / 'gravity.gif').stat().st_size > 1000
    assert 'parameters from' in capsys.readouterr().out


def test_unknown_configuration_key_is_an_error():
    with pytest.raises(ValueError, match='unknown configuration keys'):
        Gravity.config(stepz=3)
