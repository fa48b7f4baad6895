"""The gradient checker (ti.ad.check_gradients, Tape(grad_check=...)) and the rollout report."""
import numpy as np
import pytest

import engine as ti

from ad_helpers import f64  # noqa: F401
from test_autodiff_sims import _triangle


def _quadratic_setup():
    x = ti.field(float, shape=5, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def compute():
        for i in x:
            loss[None] += ti.sin(x[i]) * x[i] ** 2

    x.from_numpy(np.linspace(-1, 1, 5))
    return x, loss, compute


def test_check_gradients_passes_on_a_correct_kernel(f64):
    x, loss, compute = _quadratic_setup()
    report = ti.ad.check_gradients(compute, loss, [x])
    assert report.ok and len(report.entries) == 5
    assert 'gradient check: 5 entries, 0 beyond' in str(report)
    np.testing.assert_allclose(x.to_numpy(), np.linspace(-1, 1, 5))    # inputs restored


def test_tape_grad_check_catches_a_wrong_custom_gradient(f64):
    x, loss, compute = _quadratic_setup()

    @ti.ad.grad_replaced
    def forward():
        compute()

    @ti.ad.grad_for(forward)
    def backward():
        compute.grad()
        x.grad.data[2] += 0.5        # a bug in a hand-written gradient

    with pytest.raises(ti.ad.GradientCheckError) as info:
        with ti.ad.Tape(loss, grad_check=[x]):
            forward()
    text = str(info.value)
    assert '1 beyond' in text and 'x[2]' in text


def test_tape_grad_check_replays_from_the_starting_state():
    """The triangle accumulates forces with atomics into a field cleared from Python
    before the tape starts; replaying from the snapshot reproduces the forward pass."""
    forward, loss, x, force, spring_length, steps = _triangle(ti.f64)
    force.fill(0)
    with ti.ad.Tape(loss, grad_check=[spring_length]):
        forward()
    assert np.abs(spring_length.grad.to_numpy()).max() > 0


def test_grad_check_needs_a_loss():
    with pytest.raises(ValueError, match='needs a loss'):
        ti.ad.Tape(None, grad_check=[object()])


def _chain(factor, steps=40, start=1.0):
    x = ti.field(float, shape=steps + 1, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        x[t + 1] = factor * ti.sqrt(x[t] * x[t] + 1e-30) if factor < 0 else factor * x[t]

    @ti.kernel
    def final():
        loss[None] = x[steps]

    x[0] = start
    ti.ad.keep_adjoints(x)
    with ti.ad.Tape(loss):
        for t in range(steps):
            step(t)
        final()
    return ti.ad.rollout_report(x)


def test_rollout_report_measures_growth(f64):
    report = _chain(1.5)
    assert report.growth_per_step() == pytest.approx(1.5, rel=1e-9)
    assert report.exploding and 'EXPLODING' in str(report)
    calm = _chain(0.9)
    assert calm.growth_per_step() == pytest.approx(0.9, rel=1e-9) and not calm.exploding
    assert 'growth per step backwards: x0.9000' in str(calm)


def test_rollout_report_finds_non_finite_gradients(f64):
    x = ti.field(float, shape=6, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        x[t + 1] = ti.sqrt(x[t])          # d/dx sqrt at 0 is infinite

    @ti.kernel
    def final():
        loss[None] = x[5]

    x[0] = 0.0
    ti.ad.keep_adjoints(x)
    with ti.ad.Tape(loss):
        for t in range(5):
            step(t)
        final()
    report = ti.ad.rollout_report(x)
    assert report.first_non_finite == 4 and 'NON-FINITE gradient from step 4' in str(report)
