"""sims.wave (DiffTaichi's wave.py): the rollout against a numpy reference, the gradient
against finite differences, the quick training losses, the CLI and the configuration.

`Wave.create` starts a fresh engine program, which retires the simulators built before it:
`built()` keeps the last simulator per configuration and rebuilds it only when another
program took over.
"""
import json
import math

import imageio.v2 as imageio
import numpy as np
import pytest

import engine.core.program
from sim_helpers import check_simulation_gradient
from sims.cli import main
from sims.wave import Wave
from sims.wave.scene import target_pattern

N = 12          # grid of the physics and gradient tests
STEPS = 14

# `train --quick` (f32, 32^2 grid, 32 time levels, lr 1): its 5 losses
QUICK_LOSSES = [0.1373636, 0.1285676, 0.1214014, 0.1154325, 0.1103574]

_built = {}


def built(**overrides):
    key = tuple(sorted(overrides.items()))
    sim = _built.get(key)
    if sim is None or sim.loss.program is not engine.core.program.current():
        sim = _built[key] = Wave.create(quick=True, **overrides)
    return sim


def sim64(**overrides):
    return built(fp='f64', n_grid=N, steps=STEPS, **overrides)


def smooth_field(n, seed):
    rng = np.random.default_rng(seed)
    c = (np.arange(n) + 0.5) / n
    field = np.zeros((n, n))
    for _ in range(4):
        a, b, s = rng.uniform(0.2, 0.8), rng.uniform(0.2, 0.8), rng.uniform(0.05, 0.2)
        field += rng.normal() * np.exp(-((c[:, None] - a) ** 2 + (c[None, :] - b) ** 2) / (2 * s * s))
    return field


def ref_rollout(initial, steps, c, alpha):
    """DiffTaichi's FDTD update in numpy: p[0] = initial, p[1] = 0, zero outside the grid."""
    n = initial.shape[0]
    dx = 1.0 / n
    dt = (math.sqrt(alpha ** 2 + dx * dx / 3) - alpha) / c

    def lap(q):
        padded = np.pad(q, 1)
        return (padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:] - 4 * q) / (dx * dx)

    p = [initial, np.zeros_like(initial)]
    for _ in range(2, steps):
        p.append(2 * p[-1] + (c * c * dt * dt + c * alpha * dt) * lap(p[-1]) - p[-2] - c * alpha * dt * lap(p[-2]))
    return np.array(p)


# --------------------------------------------------------------------------- physics (float64)

@pytest.mark.parametrize('alpha', [0.0, 2e-4])
def test_rollout_matches_numpy_reference(alpha):
    sim = sim64(alpha=alpha)
    initial = smooth_field(N, seed=1)
    sim.initial.from_numpy(initial)
    loss = sim.evaluate()
    ref = ref_rollout(initial, STEPS, 340.0, alpha)
    got = np.array([sim.heights(t) for t in range(STEPS)])
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())
    border = sim.p.data.copy()
    border[:, 1:-1, 1:-1] = 0
    assert not border.any()                                        # the zero border stays zero
    assert np.abs(ref[-1] - ref[-3]).max() > 0.1 * np.abs(initial).max()   # the waves moved
    target = target_pattern(N)
    assert loss == pytest.approx(np.sum((target - ref[-1]) ** 2) / N ** 2, rel=1e-10)


def test_zero_field_stays_zero_and_loss_is_the_target_energy():
    sim = sim64()
    sim.initial.fill(0)
    loss = sim.evaluate()
    assert not sim.p.data.any()
    assert loss == pytest.approx(np.sum(target_pattern(N) ** 2) / N ** 2, rel=1e-12)


# --------------------------------------------------------------------------- gradient

@pytest.mark.parametrize('alpha', [0.0, 2e-4])
def test_gradient_matches_finite_differences(alpha):
    sim = sim64(alpha=alpha)
    sim.initial.from_numpy(smooth_field(N, seed=2))
    assert check_simulation_gradient(sim, entries=5, rtol=1e-6) >= 5


def test_gradient_is_the_adjoint_of_the_linear_rollout():
    # p[T] = M initial is linear: d loss / d initial = -2 dx^2 M^T (target - M initial);
    # M^T applied through the numpy rollout's columns on a few entries
    sim = sim64()
    initial = smooth_field(N, seed=3)
    sim.initial.from_numpy(initial)
    sim.loss_and_grad()
    grad = sim.initial.grad.to_numpy()
    residual = target_pattern(N) - ref_rollout(initial, STEPS, 340.0, 0.0)[-1]
    for k in (0, 5, N * N // 2 + 3, N * N - 1):
        e = np.zeros(N * N)
        e[k] = 1
        column = ref_rollout(e.reshape(N, N), STEPS, 340.0, 0.0)[-1]
        assert grad.reshape(-1)[k] == pytest.approx(-2 / N ** 2 * np.sum(column * residual), rel=1e-9, abs=1e-14)


def test_parallel_loops_give_the_same_gradient():
    sim = sim64()
    initial = smooth_field(N, seed=4)
    sim.initial.from_numpy(initial)
    loss, grad = sim.loss_and_grad(), sim.initial.grad.to_numpy()
    sim = sim64(parallel=True)
    sim.initial.from_numpy(initial)
    assert sim.loss_and_grad() == pytest.approx(loss, rel=1e-12)
    np.testing.assert_allclose(sim.initial.grad.data, grad, rtol=1e-9, atol=1e-15)


# --------------------------------------------------------------------------- training and CLI

def test_quick_training_regression_and_cli(tmp_path, capsys):
    main(Wave, ['train', '--quick', '--out', str(tmp_path)])
    printed = capsys.readouterr().out
    assert printed.count('iter ') == Wave.quick['iters']
    record = json.loads((tmp_path / 'losses.json').read_text())
    assert record['simulator'] == 'wave' and record['config']['optimizer'] == 'gd'
    losses = [r['loss'] for r in record['iterations']]
    np.testing.assert_allclose(losses, QUICK_LOSSES, rtol=1e-3)
    assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < 0.85 * losses[0]
    assert (tmp_path / 'loss_curve.png').stat().st_size > 1000
    with np.load(tmp_path / 'params.npz') as saved:
        assert saved['arr_0'].shape == (32, 32) and np.abs(saved['arr_0']).max() > 0

    main(Wave, ['train', '--quick', '--iters', '2', '--out', str(tmp_path / 'two')])
    assert len(json.loads((tmp_path / 'two' / 'losses.json').read_text())['iterations']) == 2

    main(Wave, ['render', '--quick', '--video', 'gif', '--out', str(tmp_path)])
    assert 'parameters from' in capsys.readouterr().out
    frames = imageio.mimread(tmp_path / 'wave.gif')
    assert len(frames) >= 16 and np.asarray(frames[0]).shape[:2] == (256, 2 * 256 + 8)
    assert not np.array_equal(frames[0], frames[-1])


def test_configuration_and_target():
    cfg = Wave.config()
    assert (cfg.n_grid, cfg.steps, cfg.c, cfg.alpha) == (256, 256, 340.0, 0.0)   # DiffTaichi's scene
    assert (cfg.iters, cfg.lr, cfg.optimizer) == (200, 1.0, 'gd')
    with pytest.raises(ValueError, match='unknown configuration keys'):
        Wave.config(n_gird=3)
    with pytest.raises(ValueError, match='steps'):
        Wave.config(steps=2)
    target = target_pattern(64)
    assert abs(target.mean()) < 1e-12 and target.max() - target.min() > 0.9
    # dark on the left of the symbol's centre, light on the right, light in the corners
    assert target[20, 32] < 0 < target[44, 32] and target[0, 0] > 0
