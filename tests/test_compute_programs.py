"""scripts/compute_programs.py: each benchmark program runs under the engine at a tiny size
and gives numpy's answer (float64 references of f32 kernels), or, for the MPM programs,
the answer one substep from rest has (gravity alone) and the invariants of more steps.
No timing here: scripts/bench.py times them."""
import numpy as np
import pytest

import engine as ti
from scripts import compute_programs as cp

pytestmark = pytest.mark.usefixtures('ti_init')


def test_the_programs_are_listed():
    assert set(cp.PROGRAMS) == {'vortex', 'fractal', 'rasterizer', 'stencil', 'mpm88', 'mpm99', 'nbody'}


def test_vortex_matches_numpy(n=256, dt=0.01):
    program = cp.vortex(ti, n=n, dt=dt)
    start = program.result()['pos'].astype(np.float64)
    program()
    np.testing.assert_allclose(program.result()['pos'], cp.vortex_reference(start, dt), rtol=0, atol=2e-6)


def test_fractal_matches_numpy(width=64, height=32, iterations=50):
    program = cp.fractal(ti, width=width, height=height, iterations=iterations)
    program()
    got = program.result()['pixels']
    expected = cp.fractal_reference(width, height, iterations, cp.fractal_angle(1))
    # c's sine and cosine may round differently in the last bit from numpy's, and a pixel on
    # the set's boundary is chaotic: a few pixels may end an iteration apart
    assert np.mean(np.abs(got - expected) > 1e-6) < 0.01
    assert abs(got.mean() - expected.mean()) < 1e-3
    assert 0.2 < got.mean() < 0.6         # a third of the pixels run every iteration


def test_rasterizer_matches_numpy(width=48, height=32, triangles=20):
    program = cp.rasterizer(ti, width=width, height=height, triangles=triangles)
    program()
    image = program.result()['image']
    np.testing.assert_allclose(image, cp.rasterizer_reference(width, height, triangles), rtol=0, atol=1e-5)
    assert (image != np.float32(0.1)).any(axis=-1).mean() > 0.2      # triangles cover a good part of it


@pytest.mark.parametrize('sweeps', [2, 4])
def test_stencil_matches_numpy(sweeps, n=32):
    program = cp.stencil(ti, n=n, sweeps=sweeps)
    program()
    expected = cp.stencil_reference(n, sweeps)
    for name, got in program.result().items():
        np.testing.assert_allclose(got, expected[name], rtol=0, atol=1e-5)


def test_nbody_matches_numpy(n=64):
    program = cp.nbody(ti, n=n)
    program()
    expected = cp.nbody_reference(n)
    for name, got in program.result().items():
        np.testing.assert_allclose(got, expected[name], rtol=0, atol=1e-5 * np.abs(expected[name]).max())


@pytest.mark.parametrize('name', ['mpm88', 'mpm99'])
def test_mpm_from_rest_falls_and_keeps_its_mass(name, n_particles=600, n_grid=64, dt=1e-4):
    program = cp.PROGRAMS[name](ti, n_particles=n_particles, n_grid=n_grid, substeps=1, dt=dt)
    start = program.result()['x']
    program()           # from rest, unstressed: every grid node's velocity is gravity's alone
    state = program.result()
    np.testing.assert_allclose(state['v'], np.tile([0.0, -9.8 * dt], (n_particles, 1)), rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(state['x'], start + dt * state['v'], rtol=0, atol=1e-7)
    p_mass = (0.5 / n_grid) ** 2
    for _ in range(20):
        program()
        state = program.result()
        assert np.isclose(state['grid_m'].sum(), n_particles * p_mass, rtol=1e-4)
    assert np.isfinite(state['v']).all() and ((state['x'] > 0) & (state['x'] < 1)).all()
    assert (state['v'][:, 1] < 0).mean() > 0.9          # still falling


def test_compare_reports_the_largest_relative_difference_and_the_share():
    ours = {'a': np.array([1.0, 2.0, 4.0]), 'b': np.zeros(1)}
    assert cp.compare(ours, ours) == (0.0, 0.0)
    worst, share = cp.compare({'a': np.array([1.0, 2.0, 4.04]), 'b': np.zeros(1)}, ours)
    assert np.isclose(worst, 0.01) and share == 0.25
    assert cp.compare({'a': np.array([np.nan, 2.0, 4.0]), 'b': np.zeros(1)}, ours)[0] == np.inf
