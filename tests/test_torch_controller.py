"""`--controller torch`: a torch.nn MLP trained with torch.optim drives mass_spring as a
chain of engine.torch steps, and follows the built-in MLP controller's loss curve from
the same initial weights."""
import json

import numpy as np
import pytest

from interop_support import optional

torch = optional('torch')

from sims import cli  # noqa: E402
from sims.fem import FEM  # noqa: E402
from sims.mass_spring import MassSpring  # noqa: E402
from sims.training import train  # noqa: E402


def _curve(controller, optimizer, lr, fp='f64', iters=4):
    sim = MassSpring.create(quick=True, controller=controller, optimizer=optimizer, lr=lr, fp=fp, steps=48)
    return [r['loss'] for r in train(sim, iters=iters, log=lambda *a: None)], sim


@pytest.mark.parametrize('optimizer, lr', [('normalized', 0.1), ('adam', 0.01)])
def test_the_loss_curve_matches_the_mlp_controller(optimizer, lr):
    builtin, _ = _curve('mlp', optimizer, lr)
    with_torch, sim = _curve('torch', optimizer, lr)
    assert np.allclose(with_torch, builtin, rtol=1e-9, atol=1e-12), (with_torch, builtin)
    # a rollout without gradients (evaluate, render) runs the network step by step
    assert np.isclose(sim.evaluate(), _curve('torch', optimizer, lr, iters=len(builtin) + 1)[0][-1])


def test_in_float32_it_follows_closely():
    builtin, _ = _curve('mlp', 'normalized', 0.1, fp='f32')
    with_torch, _ = _curve('torch', 'normalized', 0.1, fp='f32')
    assert np.allclose(with_torch, builtin, rtol=1e-4)


def test_the_command_line_trains_and_resumes(tmp_path, capsys):
    out = str(tmp_path / 'run')
    quick = ['--quick', '--steps', '32', '--controller', 'torch', '--optimizer', 'adam', '--lr', '0.01']
    cli.main(MassSpring, ['train', *quick, '--iters', '2', '--out', out])
    cli.main(MassSpring, ['train', *quick, '--iters', '4', '--out', out, '--resume'])
    whole = str(tmp_path / 'whole')
    cli.main(MassSpring, ['train', *quick, '--iters', '4', '--out', whole])
    capsys.readouterr()
    losses = [[json.loads(line)['loss'] for line in open(f'{d}/metrics.jsonl')] for d in (out, whole)]
    assert len(losses[0]) == 4 and np.allclose(losses[0], losses[1], rtol=1e-6)


def test_a_simulator_without_named_state_does_not_offer_it():
    assert 'torch' not in FEM.all_choices()['controller']
    with pytest.raises(ValueError, match='--controller must be one of'):
        FEM.config(controller='torch')
