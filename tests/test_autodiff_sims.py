"""End-to-end gradients through multi-kernel simulations recorded on a Tape.

* a damped 2D spring chain, 1,000 steps with one kernel launch per step and
  time-indexed state fields x[t, i], v[t, i] (global fields are the checkpoints):
  d loss / d initial velocity and d loss / d spring stiffness against finite differences;
* the DiffTaichi paper's first example (mass_spring_simple): a triangle of three
  springs next to a friction wall at x = 0.4, whose rest lengths are optimized by
  gradient descent (learning rate 5, 25 iterations) so that the area of the final
  triangle reaches 0.1; the loss must fall by more than 100x.
"""
import math
import time

import numpy as np
import pytest

import engine as ti

from ad_helpers import assert_grad_close, f64, fd_check  # noqa: F401

# --------------------------------------------------------------------------- 1,000-step chain

CHAIN_STEPS = 1000
CHAIN_N = 4


def _build_chain():
    n, steps = CHAIN_N, CHAIN_STEPS
    dt, damping, mass = 0.01, 0.5, 1.0
    x = ti.Vector.field(2, ti.f64, shape=(steps + 1, n), needs_grad=True)
    v = ti.Vector.field(2, ti.f64, shape=(steps + 1, n), needs_grad=True)
    x0 = ti.Vector.field(2, ti.f64, shape=n, needs_grad=True)
    v0 = ti.Vector.field(2, ti.f64, shape=n, needs_grad=True)
    stiffness = ti.field(ti.f64, shape=n - 1, needs_grad=True)
    rest = ti.field(ti.f64, shape=n - 1, needs_grad=True)
    target = ti.Vector.field(2, ti.f64, shape=n)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def initialize():
        for i in range(n):
            x[0, i] = x0[i]
            v[0, i] = v0[i]

    @ti.func
    def spring_force(t, i, j, s):
        d = x[t - 1, i] - x[t - 1, j]
        length = d.norm(1e-12)
        return -stiffness[s] * (length - rest[s]) / length * d

    @ti.kernel
    def step(t: ti.i32):
        for i in range(n):
            f = ti.Vector([0.0, -0.5])                      # gravity
            if i > 0:
                f += spring_force(t, i, i - 1, i - 1)
            if i < n - 1:
                f += spring_force(t, i, i + 1, i)
            v[t, i] = math.exp(-dt * damping) * v[t - 1, i] + dt * f / mass
            x[t, i] = x[t - 1, i] + dt * v[t, i]

    @ti.kernel
    def compute_loss():
        for i in range(n):
            d = x[steps, i] - target[i]
            loss[None] += d.dot(d) + 0.1 * v[steps, i].norm_sqr()

    def forward():
        initialize()
        for t in range(1, steps + 1):
            step(t)
        compute_loss()

    rng = np.random.default_rng(42)
    x0.from_numpy(np.stack([np.arange(n) * 0.3, np.zeros(n)], axis=1) + rng.uniform(-0.05, 0.05, (n, 2)))
    v0.from_numpy(rng.uniform(-1, 1, (n, 2)))
    stiffness.from_numpy(rng.uniform(20, 40, n - 1))
    rest.from_numpy(rng.uniform(0.25, 0.35, n - 1))
    target.from_numpy(np.stack([np.arange(n) * 0.3 + 0.5, np.full(n, -1.0)], axis=1))
    return forward, loss, dict(x0=x0, v0=v0, stiffness=stiffness, rest=rest, x=x)


def test_1000_step_simulation_gradients_match_finite_differences(f64):
    forward, loss, f = _build_chain()
    start = time.perf_counter()
    grads = fd_check(loss, [f['v0'], f['stiffness'], f['rest']], forward)
    elapsed = time.perf_counter() - start
    # the chain moved and the gradients are not negligible
    assert np.abs(f['x'].to_numpy()[CHAIN_STEPS] - f['x'].to_numpy()[0]).max() > 0.1
    assert all(np.abs(g).max() > 1e-4 for g in grads)
    # d loss / d x0 too, by Tape alone against a directional finite difference
    with ti.ad.Tape(loss):
        forward()
    g_x0 = f['x0'].grad.to_numpy()
    base = f['x0'].to_numpy()
    direction = np.random.default_rng(0).normal(size=base.shape)
    values = []
    for sign in (1, -1):
        f['x0'].from_numpy(base + sign * 1e-6 * direction)
        loss[None] = 0
        forward()
        values.append(loss[None])
    f['x0'].from_numpy(base)
    assert_grad_close((g_x0 * direction).sum(), (values[0] - values[1]) / 2e-6, 'directional d loss / d x0')
    assert elapsed < 30, f'FD check of the 1,000-step simulation took {elapsed:.1f} s'


# --------------------------------------------------------------------------- DiffTaichi: mass_spring_simple

def _triangle(real):
    ti.init(arch=ti.cpu, default_fp=real)
    max_steps = 1024
    steps = 1024
    n_objects = 3
    mass = 1
    n_springs = 3
    spring_stiffness = 10
    damping = 20
    dt = 0.001
    friction = 0.01

    loss = ti.field(dtype=real)
    x = ti.Vector.field(2, dtype=real)
    v = ti.Vector.field(2, dtype=real)
    force = ti.Vector.field(2, dtype=real)
    spring_anchor_a = ti.field(ti.i32)
    spring_anchor_b = ti.field(ti.i32)
    spring_length = ti.field(dtype=real)
    ti.root.dense(ti.i, max_steps).dense(ti.j, n_objects).place(x, v, force)
    ti.root.dense(ti.i, n_springs).place(spring_anchor_a, spring_anchor_b, spring_length)
    ti.root.place(loss)
    ti.root.lazy_grad()

    @ti.kernel
    def apply_spring_force(t: ti.i32):
        for i in range(n_springs):
            a, b = spring_anchor_a[i], spring_anchor_b[i]
            x_a, x_b = x[t - 1, a], x[t - 1, b]
            dist = x_a - x_b
            length = dist.norm() + 1e-4
            F = (length - spring_length[i]) * spring_stiffness * dist / length
            ti.atomic_add(force[t, a], -F)
            ti.atomic_add(force[t, b], F)

    @ti.kernel
    def time_integrate(t: ti.i32):
        for i in range(n_objects):
            s = math.exp(-dt * damping)
            new_v = s * v[t - 1, i] + dt * force[t, i] / mass
            new_x = x[t - 1, i] + dt * new_v
            if new_x[0] > 0.4 and new_v[0] > 0:
                # friction projection at the wall x = 0.4
                if new_v[1] > 0:
                    new_v[1] -= ti.min(new_v[1], friction * new_v[0])
                if new_v[1] < 0:
                    new_v[1] += ti.min(-new_v[1], friction * new_v[0])
                new_v[0] = 0
            v[t, i] = new_v
            x[t, i] = new_x

    @ti.kernel
    def compute_loss(t: ti.i32):
        x01 = x[t, 0] - x[t, 1]
        x02 = x[t, 0] - x[t, 2]
        area = ti.abs(0.5 * (x01[0] * x02[1] - x01[1] * x02[0]))
        target_area = 0.1
        loss[None] = (area - target_area) ** 2

    def forward():
        for t in range(1, steps):
            apply_spring_force(t)
            time_integrate(t)
        compute_loss(steps - 1)

    x[0, 0] = [0.3, 0.5]
    x[0, 1] = [0.3, 0.4]
    x[0, 2] = [0.4, 0.4]
    spring_anchor_a[0], spring_anchor_b[0], spring_length[0] = 0, 1, 0.1
    spring_anchor_a[1], spring_anchor_b[1], spring_length[1] = 1, 2, 0.1
    spring_anchor_a[2], spring_anchor_b[2], spring_length[2] = 2, 0, 0.1 * 2 ** 0.5
    return forward, loss, x, force, spring_length, steps


@pytest.mark.parametrize('precision', ['f32', 'f64'])
def test_difftaichi_mass_spring_triangle_optimization(precision):
    real = getattr(ti, precision)
    forward, loss, x, force, spring_length, steps = _triangle(real)
    losses, walls = [], []
    start = time.perf_counter()
    for _ in range(25):
        force.fill(0)
        with ti.Tape(loss):
            forward()
        losses.append(loss[None])
        walls.append(x.to_numpy()[:steps, :, 0].max())
        grad = spring_length.grad.to_numpy()
        assert np.isfinite(grad).all() and np.abs(grad).max() > 0
        spring_length.from_numpy(spring_length.to_numpy() - 5 * grad)
    elapsed = time.perf_counter() - start
    print(f'{precision}: losses {losses[0]:.3e} -> {losses[-1]:.3e}, rest lengths '
          f'{spring_length.to_numpy()}, 25 iterations in {elapsed:.2f} s')
    assert losses[0] == pytest.approx((0.5 * 0.1 * 0.1 - 0.1) ** 2, rel=1e-2)   # area 0.005 at start
    assert losses[-1] < losses[0] / 100, losses
    # the wall matters: some mass reaches x = 0.4 and is stopped there (at most one step past it)
    assert max(walls) > 0.4 and max(walls) < 0.41
    assert elapsed < 20, f'25 iterations of the 1024-step triangle took {elapsed:.1f} s'


def test_difftaichi_triangle_gradient_matches_finite_differences(f64):
    """One gradient of the triangle's loss w.r.t. the rest lengths, in f64, by FD."""
    forward, loss, x, force, spring_length, steps = _triangle(ti.f64)

    def run():
        force.fill(0)
        forward()

    fd_check(loss, [spring_length], run, eps=1e-7)
