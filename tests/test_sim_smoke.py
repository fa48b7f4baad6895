"""sims.smoke: the rollout against a numpy reference, advection and projection
properties, the gradient against finite differences, quick training and the CLI.

Building a simulator starts a fresh engine program (and compiles its step kernel
and adjoint), which invalidates the fields of the previous one: `built()` keeps the
last simulator per configuration and rebuilds it only when another program took over,
and the tests are ordered so that each configuration is built once.
"""
import json

import numpy as np
import pytest

import engine.core.program
from sim_helpers import check_simulation_gradient
from sims.cli import main
from sims.smoke import Smoke
from sims.smoke.scene import initial_density, target_density

N = 16          # grid of the physics and gradient tests
STEPS = 6

_built = {}


def built(**overrides):
    key = tuple(sorted(overrides.items()))
    sim = _built.get(key)
    if sim is None or sim.loss.program is not engine.core.program.current():
        sim = _built[key] = Smoke.create(quick=True, **overrides)
    return sim


def sim64(**overrides):
    return built(fp='f64', n_grid=N, steps=STEPS, **overrides)


def smooth_velocity(n, seed, amplitude, modes=2):
    """A random periodic velocity field (n, n, 2) of Fourier modes up to `modes`, max |v| = amplitude."""
    rng = np.random.default_rng(seed)
    x = 2 * np.pi * (np.arange(n) + 0.5) / n
    X, Y = np.meshgrid(x, x, indexing='ij')
    v = np.zeros((n, n, 2))
    for a in range(-modes, modes + 1):
        for b in range(-modes, modes + 1):
            phase = rng.uniform(0, 2 * np.pi, 2)
            v += rng.normal(size=2) * np.cos(a * X[..., None] + b * Y[..., None] + phase)
    return amplitude * v / np.abs(v).max()


# --------------------------------------------------------------------------- numpy reference

def ref_sample(f, vel):
    """f (n, n) or (n, n, 2) sampled at (i, j) - vel, bilinear, periodic."""
    n = f.shape[0]
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing='ij')
    ci, cj = i - vel[..., 0], j - vel[..., 1]
    fi, fj = np.floor(ci), np.floor(cj)
    wi, wj = ci - fi, cj - fj
    i0, j0 = fi.astype(int) % n, fj.astype(int) % n
    i1, j1 = (i0 + 1) % n, (j0 + 1) % n
    if f.ndim == 3:
        wi, wj = wi[..., None], wj[..., None]
    return (1 - wi) * ((1 - wj) * f[i0, j0] + wj * f[i0, j1]) + wi * ((1 - wj) * f[i1, j0] + wj * f[i1, j1])


def central_divergence(v):
    """(v_x[i+1] - v_x[i-1] + v_y[j+1] - v_y[j-1]) / 2, periodic (cell units)."""
    return 0.5 * (np.roll(v[..., 0], -1, 0) - np.roll(v[..., 0], 1, 0)
                  + np.roll(v[..., 1], -1, 1) - np.roll(v[..., 1], 1, 1))


def ref_project(v, sweeps):
    n = v.shape[0]
    dx = 1.0 / n
    div = -dx * central_divergence(v)
    p = np.zeros_like(div)
    for _ in range(sweeps):
        p = (div + np.roll(p, 1, 0) + np.roll(p, -1, 0) + np.roll(p, 1, 1) + np.roll(p, -1, 1)) / 4
    grad_p = np.stack([np.roll(p, -1, 0) - np.roll(p, 1, 0), np.roll(p, -1, 1) - np.roll(p, 1, 1)], -1)
    return v - 0.5 / dx * grad_p


def ref_rollout(v, smoke, steps, sweeps):
    for _ in range(steps):
        v = ref_project(ref_sample(v, v), sweeps)
        smoke = ref_sample(smoke, v)
    return v, smoke


# --------------------------------------------------------------------------- physics (float64)

def test_rollout_matches_numpy_reference():
    sim = sim64()
    v0 = smooth_velocity(N, seed=3, amplitude=2.5)     # crosses the borders, and integer cells
    sim.v0.from_numpy(v0)
    loss = sim.evaluate()
    v, smoke = ref_rollout(v0, initial_density(N), STEPS, sweeps=6)
    np.testing.assert_allclose(sim.v.data[STEPS], v, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(sim.smoke.data[STEPS], smoke, rtol=1e-9, atol=1e-9)
    assert np.abs(smoke - initial_density(N)).max() > 0.3        # the smoke did move
    assert loss == pytest.approx(np.mean((smoke - target_density(N)) ** 2), rel=1e-9)


def test_zero_velocity_leaves_everything_unchanged():
    sim = sim64()
    sim.v0.fill(0)
    sim.evaluate()
    for t in range(STEPS + 1):
        np.testing.assert_array_equal(sim.smoke.data[t], sim.smoke.data[0])
    assert not sim.v.data.any() and not sim.p.data.any()


def test_uniform_velocity_translates_the_smoke_across_the_borders():
    sim = sim64()
    smoke0 = sim.smoke.data[0]
    # a whole number of cells per step: an exact periodic shift (3 * 6 = 18 > N along i)
    sim.v0.data[...] = (3.0, -2.0)
    sim.evaluate()
    assert np.all(sim.v.data == sim.v0.data)                    # uniform flow: no divergence
    for t in range(STEPS + 1):
        np.testing.assert_array_equal(sim.smoke.data[t], np.roll(smoke0, (3 * t, -2 * t), axis=(0, 1)))
    # half a cell per step along j: each value is the mean of a cell and the one before it,
    # and cell 0 takes half of cell N - 1
    sim.v0.data[...] = (0.0, 0.5)
    sim.evaluate()
    np.testing.assert_allclose(sim.smoke.data[1], 0.5 * (smoke0 + np.roll(smoke0, 1, axis=1)), atol=1e-15)
    np.testing.assert_allclose(sim.smoke.data[1][:, 0], 0.5 * (smoke0[:, 0] + smoke0[:, N - 1]), atol=1e-15)


def test_projection_reduces_divergence():
    sim = sim64()
    sim.v0.from_numpy(smooth_velocity(N, seed=5, amplitude=2.0, modes=3))
    sim.evaluate()
    # 6 Jacobi sweeps (DiffTaichi's count) from p = 0 remove only part of the divergence of
    # the advected field (central-difference divergence and gradient on a collocated grid)
    for t in range(STEPS):
        before = np.linalg.norm(central_divergence(sim.v_adv.data[t]))
        after = np.linalg.norm(central_divergence(sim.v.data[t + 1]))
        assert 0 < after < 0.85 * before
    # v[t + 1] = v_adv[t] - grad p / (2 dx), with p the last sweep
    p = sim.p.data[0, -1]
    grad_p = np.stack([np.roll(p, -1, 0) - np.roll(p, 1, 0), np.roll(p, -1, 1) - np.roll(p, 1, 1)], -1)
    np.testing.assert_allclose(sim.v.data[1], sim.v_adv.data[0] - 0.5 * N * grad_p, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- gradient

def test_gradient_matches_finite_differences():
    sim = sim64()
    sim.v0.from_numpy(smooth_velocity(N, seed=1, amplitude=1.5))
    sim.loss_and_grad()
    grad = np.abs(sim.v0.grad.data.reshape(-1))
    # the entries check_simulation_gradient picks (largest + 3 random, seed 0) matter
    randoms = np.random.default_rng(0).choice(grad.size, 3, replace=False)
    picks = {int(np.argmax(grad))} | set(randoms.tolist())
    assert min(grad[k] for k in picks) > 1e-3 * grad.max() > 1e-6
    assert check_simulation_gradient(sim, entries=4, rtol=1e-6) >= 4


def test_parallel_loops_give_the_same_gradient():
    sim = sim64()
    v0 = smooth_velocity(N, seed=2, amplitude=1.0)
    sim.v0.from_numpy(v0)
    loss, grad = sim.loss_and_grad(), sim.v0.grad.to_numpy()
    sim = sim64(parallel=True)
    sim.v0.from_numpy(v0)
    assert sim.loss_and_grad() == pytest.approx(loss, rel=1e-12)
    np.testing.assert_allclose(sim.v0.grad.data, grad, rtol=1e-9, atol=1e-15)


def test_many_jacobi_sweeps_remove_most_of_the_divergence():
    # (after the tests of the default configuration: it builds another program)
    sim = built(fp='f64', n_grid=N, steps=1, jacobi_iters=60)
    v0 = smooth_velocity(N, seed=7, amplitude=0.3, modes=1)
    sim.v0.from_numpy(v0)
    sim.evaluate()
    before = np.linalg.norm(central_divergence(sim.v_adv.data[0]))
    after = np.linalg.norm(central_divergence(sim.v.data[1]))
    assert after < 0.1 * before
    np.testing.assert_allclose(sim.v.data[1], ref_project(ref_sample(v0, v0), 60), rtol=1e-9, atol=1e-12)


# --------------------------------------------------------------------------- training and CLI

def test_quick_training_regression_and_cli(tmp_path, capsys):
    main(Smoke, ['train', '--quick', '--out', str(tmp_path)])
    printed = capsys.readouterr().out
    assert printed.count('iter ') == Smoke.quick['iters']
    record = json.loads((tmp_path / 'losses.json').read_text())
    assert record['simulator'] == 'smoke' and record['config']['optimizer'] == 'gd'
    losses = [r['loss'] for r in record['iterations']]
    np.testing.assert_allclose(losses, [0.2716580, 0.1634674, 0.1102053, 0.0963220, 0.0719406], rtol=1e-3)
    assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < 0.3 * losses[0]
    assert (tmp_path / 'loss_curve.png').stat().st_size > 1000
    with np.load(tmp_path / 'params.npz') as saved:
        assert saved['arr_0'].shape == (32, 32, 2) and np.abs(saved['arr_0']).max() > 0
    main(Smoke, ['render', '--quick', '--video', 'gif', '--out', str(tmp_path)])
    assert 'parameters from' in capsys.readouterr().out
    assert (tmp_path / 'smoke.gif').stat().st_size > 1000


def test_render_frames_show_density_next_to_target():
    sim = built(steps=8)
    frames = list(sim.render_frames(frames=5, size=64))
    assert len(frames) >= 5 and all(f.shape == (64, 2 * 64 + 8, 3) and f.dtype == np.uint8 for f in frames)
    assert not np.array_equal(frames[0][:, :64], frames[0][:, -64:])   # band vs ring


def test_configuration():
    cfg = Smoke.config()
    assert (cfg.n_grid, cfg.steps, cfg.jacobi_iters) == (110, 100, 6)          # DiffTaichi's scene
    assert (cfg.iters, cfg.lr, cfg.optimizer, cfg.parallel) == (150, 100.0, 'gd', False)
    with pytest.raises(ValueError, match='unknown configuration keys'):
        Smoke.config(n_gird=3)
