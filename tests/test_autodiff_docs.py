"""The examples of Taichi's "Differentiable programming" documentation.

The code of each example is the documentation's, with `import taichi as ti`
replaced by `import engine as ti` (kept as a comment where the docs have it) and
the GUI loop of the gravity example replaced by a few substeps; the asserts are
the documentation's, plus checks of the documented results (dy/dx = cos x,
forces = -dU/dx against numpy). The documented examples use f32 (`ti.init()`);
the gravity case study is also run in f64 for a tight comparison.
"""
import numpy as np
import pytest


def test_sin_example():
    import engine as ti
    ti.init()

    x = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
    y = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def compute_y():
        y[None] = ti.sin(x[None])

    with ti.Tape(y):
        compute_y()

    print('dy/dx =', x.grad[None], ' at x =', x[None])
    assert x.grad[None] == pytest.approx(1.0)                     # cos(0)
    for value in (0.7, -1.3, 2.5):
        x[None] = value
        with ti.Tape(y):
            compute_y()
        assert y[None] == pytest.approx(np.sin(value), rel=1e-6)
        assert x.grad[None] == pytest.approx(np.cos(value), rel=1e-6, abs=1e-7)


def _gravity_case_study(real):
    import engine as ti  # was: import taichi as ti
    ti.init()

    N = 8
    dt = 1e-5

    x = ti.Vector.field(2, dtype=real(ti), shape=N, needs_grad=True)  # particle positions
    v = ti.Vector.field(2, dtype=real(ti), shape=N)  # particle velocities
    U = ti.field(dtype=real(ti), shape=(), needs_grad=True)  # potential energy

    @ti.kernel
    def compute_U():
        for i, j in ti.ndrange(N, N):
            r = x[i] - x[j]
            # r.norm(1e-3) is equivalent to ti.sqrt(r.norm()**2 + 1e-3)
            # This is to prevent 1/0 error which can cause wrong derivative
            U[None] += -1 / r.norm(1e-3)  # U += -1 / |r|

    @ti.kernel
    def advance():
        for i in x:
            v[i] += dt * -x.grad[i]  # dv/dt = -dU/dx
        for i in x:
            x[i] += dt * v[i]  # dx/dt = v

    def substep():
        with ti.Tape(loss=U):
            # Kernel invocations in this scope will later contribute to partial derivatives of
            # U with respect to input variables such as x.
            compute_U(
            )  # The tape will automatically compute dU/dx and save the results in x.grad
        advance()

    @ti.kernel
    def init():
        for i in x:
            x[i] = [ti.random(), ti.random()]

    init()
    return ti, x, v, U, substep, N, dt


def _energy_and_gradient(p):
    """U = sum_{i,j} -1/sqrt(|xi - xj|^2 + 1e-3) and dU/dx, in float64 numpy."""
    d = p[:, None, :] - p[None, :, :]
    q = (d ** 2).sum(-1) + 1e-3
    energy = (-q ** -0.5).sum()
    grad = 2 * (q[:, :, None] ** -1.5 * d).sum(axis=1)
    return energy, grad


@pytest.mark.parametrize('real,rtol', [(lambda ti: ti.f32, 2e-4), (lambda ti: ti.f64, 1e-10)],
                         ids=['f32 (as documented)', 'f64'])
def test_gravity_case_study(real, rtol):
    ti, x, v, U, substep, N, dt = _gravity_case_study(real)
    p0 = x.to_numpy().astype(np.float64)
    assert p0.min() >= 0 and p0.max() < 1 and np.ptp(p0) > 0.1      # ti.random() in [0, 1)
    velocity = np.zeros((N, 2))
    for step in range(20):
        before = x.to_numpy().astype(np.float64)
        substep()
        energy, grad = _energy_and_gradient(before)
        assert U[None] == pytest.approx(energy, rel=rtol)
        scale = np.abs(grad).max()
        np.testing.assert_allclose(x.grad.to_numpy(), grad, rtol=rtol, atol=rtol * scale,
                                   err_msg=f'dU/dx at substep {step}')
        # the forces move the particles: v += dt * (-dU/dx), x += dt * v
        velocity += dt * -grad
        np.testing.assert_allclose(v.to_numpy(), velocity, rtol=10 * rtol, atol=10 * rtol * np.abs(velocity).max())
        np.testing.assert_allclose(x.to_numpy(), before + dt * v.to_numpy(), rtol=0, atol=1e-6)
    assert np.abs(velocity).max() > 0


def test_kernel_grad_example():
    import engine as ti  # was: import taichi as ti
    ti.init()

    N = 16

    x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
    loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
    loss2 = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def func():
        for i in x:
            loss[None] += x[i] ** 2
            loss2[None] += x[i]

    for i in range(N):
        x[i] = i
    loss.grad[None] = 1
    loss2.grad[None] = 1

    func()
    func.grad()
    for i in range(N):
        assert x.grad[i] == i * 2 + 1


def test_custom_gradient_example():
    import engine as ti  # was: import taichi as ti
    ti.init()

    x = ti.field(ti.f32)
    total = ti.field(ti.f32)

    n = 128

    ti.root.dense(ti.i, n).place(x)
    ti.root.place(total)
    ti.root.lazy_grad()

    @ti.kernel
    def func(mul: ti.f32):
        for i in range(n):
            ti.atomic_add(total[None], x[i] * mul)

    @ti.ad.grad_replaced
    def forward(mul):
        func(mul)
        func(mul)

    @ti.ad.grad_for(forward)
    def backward(mul):
        func.grad(mul)

    with ti.Tape(loss=total):
        forward(4)

    assert x.grad[0] == 4
    # without the custom gradient the two launches would give 8
    assert (x.grad.to_numpy() == 4).all()


def test_global_data_access_rule_examples_equivalent_kernels():
    """The documented correct results of the two global-data-access-rule examples."""
    import engine as ti  # was: import taichi as ti
    ti.init()

    N = 16

    x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
    loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
    b = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def func_equivalent():
        loss[None] = x[1] * 10

    for i in range(N):
        x[i] = i
    b[None] = 10
    loss.grad[None] = 1

    with ti.Tape(loss):
        func_equivalent()

    assert x.grad[1] == 10.0

    ti.init()
    x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
    loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def func_equivalent2():
        loss[None] = (2 + x[1] ** 2) * x[2]

    for i in range(N):
        x[i] = i
    loss.grad[None] = 1
    loss[None] = 2

    func_equivalent2()
    func_equivalent2.grad()
    assert x.grad[1] == 4.0
    assert x.grad[2] == 3.0
