"""Time of impact: the DiffTaichi paper's bouncing-ball demonstration, on the engine directly.

A ball falls at constant speed 1 from height h0 onto the ground (y = 0) and bounces back
elastically (restitution 1); after time T = 1 it is at h(T) = T - h0, so dh(T)/dh0 = -1.
Without time of impact, a step that would end below the ground only flips the velocity
and moves the ball up by dt |v| from where it was: the bounce happens at a whole step, a
small change of h0 just shifts the whole trajectory, and autodiff reports dh(T)/dh0 = +1,
at every dt. With time of impact the ball moves down until it touches the ground and up
for the rest of the step, and the gradient is -1. (sims/billiards uses the same
correction for ball-ball collisions.)
"""
import numpy as np
import pytest

import engine as ti

T = 1.0
H0 = 0.4321          # not a multiple of any dt: the impact falls inside a step
V0 = -1.0
DTS = (1e-2, 1e-3, 1e-4)
MAX_STEPS = round(T / min(DTS))


@pytest.fixture(scope='module')
def scene():
    ti.init(default_fp=ti.f64)
    x = ti.field(float, shape=MAX_STEPS + 1, needs_grad=True)
    v = ti.field(float, shape=MAX_STEPS + 1, needs_grad=True)
    height = ti.field(float, shape=(), needs_grad=True)

    def make_step(toi):
        @ti.kernel
        def step(t: ti.i32, dt: ti.f64):
            for _ in range(1):
                old_x, old_v = x[t], v[t]
                new_x, new_v = old_x + dt * old_v, old_v
                if new_x < 0 and old_v < 0:
                    new_v = -old_v                                  # restitution 1
                    if ti.static(toi):
                        impact = -old_x / old_v                     # time until the ground
                        new_x = old_x + impact * old_v + (dt - impact) * new_v
                    else:
                        new_x = old_x + dt * new_v
                x[t + 1] = new_x
                v[t + 1] = new_v
        return step

    @ti.kernel
    def final_height(n: ti.i32):
        height[None] = x[n]

    steps = {toi: make_step(toi) for toi in (True, False)}

    def run(dt, toi, h0=H0):
        n = round(T / dt)
        x[0], v[0] = h0, V0
        with ti.ad.Tape(loss=height):
            for t in range(n):
                steps[toi](t, dt)
            final_height(n)
        return height[None], x.grad[0], v.grad[0]

    return run


@pytest.mark.parametrize('dt', DTS)
def test_gradient_with_time_of_impact_is_minus_one(scene, dt):
    h, dh_dh0, dh_dv0 = scene(dt, toi=True)
    assert h == pytest.approx(T - H0, abs=1e-9)          # h(T) = |h0 + v0 T|, exactly
    assert abs(dh_dh0 - (-1)) < 0.05, dh_dh0
    assert dh_dv0 == pytest.approx(-T, abs=1e-9)


@pytest.mark.parametrize('dt', DTS)
def test_gradient_without_time_of_impact_is_plus_one(scene, dt):
    h, dh_dh0, _ = scene(dt, toi=False)
    assert 0 < h and abs(h - (T - H0)) <= 2 * dt         # the position is only O(dt) off
    assert abs(dh_dh0 - 1) < 0.05, dh_dh0


def test_only_the_toi_gradient_matches_the_slope_of_the_rollout(scene):
    """Over a change of h0 spanning several steps, the final height falls with slope -1
    in both rollouts; autodiff without time of impact sees the wrong sign."""
    dt, delta = 1e-3, 5e-3
    for toi, autodiff in ((True, -1.0), (False, 1.0)):
        assert scene(dt, toi)[1] == pytest.approx(autodiff, abs=1e-9)
        slope = (scene(dt, toi, H0 + delta)[0] - scene(dt, toi, H0 - delta)[0]) / (2 * delta)
        assert slope == pytest.approx(-1, abs=1e-9 if toi else 0.25)
