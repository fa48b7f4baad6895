"""Every field-declaration x gradient-allocation combination of docs/fields_and_gradients.md.

One test per row of the guide's table: the working combinations compare a small gradient
with float64 central differences, the others pin the error they raise today. Rows marked
"engine bug" in the guide pin current behaviour that /work/engine_bugs.md asks to change;
when the engine is fixed, update the test and the table together.
"""
import numpy as np
import pytest

import engine as ti

N = 4


@pytest.fixture(autouse=True)
def f64():
    ti.init(default_fp=ti.f64)


def _loss():
    loss = ti.field(float, shape=(), needs_grad=True)
    return loss


def _scalar_kernel(x, loss, n=N):
    @ti.kernel
    def compute():
        for i in range(n):
            loss[None] += ti.sin(x[i]) * x[(i + 1) % n]
    return compute


def _check(compute, loss, fields, values=None):
    """Float64 finite differences of the gradient of every entry of `fields`."""
    rng = np.random.default_rng(0)
    for f in fields:
        f.from_numpy(rng.uniform(-1, 1, f.data.shape) if values is None else values)
    report = ti.ad.check_gradients(compute, loss, fields, samples=64)
    assert report.ok, str(report)
    assert all(np.abs(f.grad.to_numpy()).max() > 0 for f in fields)
    return report


# --------------------------------------------------------------------------- rows that work

def test_shape_and_needs_grad():
    x = ti.field(float, shape=N, needs_grad=True)
    loss = _loss()
    _check(_scalar_kernel(x, loss), loss, [x])


def test_vector_and_matrix_fields_with_needs_grad():
    v = ti.Vector.field(2, float, shape=N, needs_grad=True)
    m = ti.Matrix.field(2, 2, float, shape=N, needs_grad=True)
    loss = _loss()

    @ti.kernel
    def compute():
        for i in range(N):
            loss[None] += ti.sin(m[i] @ v[i]).sum()

    _check(compute, loss, [v, m])


def test_place_then_lazy_grad():
    x = ti.field(float)
    loss = ti.field(float)
    ti.root.dense(ti.i, N).place(x)
    ti.root.place(loss)
    ti.root.lazy_grad()
    _check(_scalar_kernel(x, loss), loss, [x])


def test_needs_grad_then_place():
    x = ti.field(float, needs_grad=True)
    ti.root.dense(ti.i, N).place(x)          # places x.grad with x
    assert x.grad.placed
    loss = _loss()
    _check(_scalar_kernel(x, loss), loss, [x])


def test_needs_grad_place_and_lazy_grad():
    x = ti.field(float, needs_grad=True)
    ti.root.dense(ti.i, N).place(x)
    ti.root.lazy_grad()                      # nothing left to place for x: a no-op
    ti.root.lazy_grad()
    loss = _loss()
    _check(_scalar_kernel(x, loss), loss, [x])


def test_place_grad_yourself():
    x = ti.field(float)
    ti.root.dense(ti.i, N).place(x)
    ti.root.dense(ti.i, N).place(x.grad)
    loss = _loss()
    _check(_scalar_kernel(x, loss), loss, [x])


def test_place_field_and_grad_in_the_same_node():
    x, y = ti.field(float), ti.field(float)
    ti.root.dense(ti.i, N).place(x, y, x.grad, y.grad)
    loss = _loss()

    @ti.kernel
    def compute():
        for i in range(N):
            loss[None] += ti.sin(x[i]) * y[i] ** 2

    _check(compute, loss, [x, y])


def test_place_grad_before_the_field():
    x = ti.field(float)
    ti.root.dense(ti.i, N).place(x.grad)
    ti.root.dense(ti.i, N).place(x)
    loss = _loss()
    _check(_scalar_kernel(x, loss), loss, [x])


def test_grad_in_another_nesting_of_the_same_shape():
    x = ti.field(float)
    ti.root.dense(ti.i, 2).dense(ti.i, 2).place(x)
    ti.root.dense(ti.i, 4).place(x.grad)
    assert x.shape == x.grad.shape == (4,)
    loss = _loss()
    _check(_scalar_kernel(x, loss), loss, [x])


def test_nested_dense_then_lazy_grad():
    x = ti.field(float)
    ti.root.dense(ti.ij, (2, 2)).dense(ti.ij, (2, 3)).place(x)
    ti.root.lazy_grad()
    assert x.grad.shape == (4, 6)
    loss = _loss()

    @ti.kernel
    def compute():
        for i, j in x:
            loss[None] += ti.sin(x[i, j]) * x[(i + 1) % 4, j]

    _check(compute, loss, [x])


def test_gapped_time_major_layout_then_lazy_grad():
    T, n = 3, 2
    x = ti.field(float)
    ti.root.dense(ti.l, T).dense(ti.i, n).place(x)      # axes in Taichi's order: x[i, t]
    ti.root.lazy_grad()
    assert x.shape == x.grad.shape == (n, T)
    loss = _loss()

    @ti.kernel
    def compute():
        for i in range(n):
            for t in range(T - 1):
                loss[None] += x[i, t] * ti.cos(x[i, t + 1])

    _check(compute, loss, [x])


def test_gapped_layout_with_grad_placed_yourself():
    T, n = 3, 2
    x = ti.field(float)
    ti.root.dense(ti.l, T).dense(ti.i, n).place(x)
    ti.root.dense(ti.l, T).dense(ti.i, n).place(x.grad)
    loss = _loss()

    @ti.kernel
    def compute():
        for t, i in ti.ndrange(T, n):
            loss[None] += ti.sin(x[i, t]) * (t + 1)

    _check(compute, loss, [x])


def test_vector_and_matrix_placed_then_lazy_grad():
    v = ti.Vector.field(2, float)
    m = ti.Matrix.field(2, 2, float)
    ti.root.dense(ti.i, N).place(v, m)
    loss = ti.field(float)
    ti.root.place(loss)
    ti.root.lazy_grad()
    assert v.grad.to_numpy().shape == (N, 2) and m.grad.to_numpy().shape == (N, 2, 2)

    @ti.kernel
    def compute():
        for i in range(N):
            loss[None] += ti.tanh(m[i] @ v[i]).sum()

    _check(compute, loss, [v, m])


def test_zero_d_fields():
    a = ti.field(float, shape=(), needs_grad=True)
    b = ti.field(float)
    ti.root.place(b)
    ti.root.lazy_grad()
    loss = _loss()

    @ti.kernel
    def compute():
        loss[None] = ti.sin(a[None]) * b[None] ** 2

    _check(compute, loss, [a, b], values=0.7)


def test_kernel_grad_without_a_tape():
    x = ti.field(float)
    loss = ti.field(float)
    ti.root.dense(ti.i, N).place(x)
    ti.root.place(loss)
    ti.root.lazy_grad()
    compute = _scalar_kernel(x, loss)
    x.from_numpy(np.linspace(0.1, 0.4, N))
    compute()
    loss.grad[None] = 1
    compute.grad()
    xs = x.to_numpy()
    expected = np.cos(xs) * np.roll(xs, -1) + np.sin(np.roll(xs, 1))
    np.testing.assert_allclose(x.grad.to_numpy(), expected, rtol=1e-12)


def _ndarray_fd(a, loss, compute, h=1e-6):
    base = a.to_numpy()
    fd = np.zeros(base.size)
    for k in range(base.size):
        vals = []
        for sign in (1, -1):
            p = base.copy().reshape(-1)
            p[k] += sign * h
            a.from_numpy(p.reshape(base.shape))
            loss[None] = 0
            compute(a)
            vals.append(loss[None])
        fd[k] = (vals[0] - vals[1]) / (2 * h)
    a.from_numpy(base)
    return fd.reshape(base.shape)


def test_ndarrays_with_needs_grad():
    a = ti.ndarray(float, shape=N, needs_grad=True)
    b = ti.Vector.ndarray(2, float, shape=N, needs_grad=True)
    loss = _loss()

    @ti.kernel
    def scalar(arr: ti.types.ndarray()):
        for i in range(N):
            loss[None] += ti.sin(arr[i]) * arr[(i + 1) % N]

    @ti.kernel
    def vector(arr: ti.types.ndarray()):
        for i in range(N):
            loss[None] += ti.sin(arr[i]).dot(arr[(i + 1) % N])

    rng = np.random.default_rng(1)
    for arr, compute in ((a, scalar), (b, vector)):
        arr.from_numpy(rng.uniform(-1, 1, arr.data.shape))
        arr.grad.fill(0)
        with ti.ad.Tape(loss):
            compute(arr)
        np.testing.assert_allclose(arr.grad.to_numpy(), _ndarray_fd(arr, loss, compute), rtol=1e-6, atol=1e-9)


def test_tape_zeroes_ndarray_gradients():
    """The tape zeroes an ndarray's gradient when it first sees it, as fields' on entry."""
    a = ti.ndarray(float, shape=3, needs_grad=True)
    loss = _loss()

    @ti.kernel
    def compute(arr: ti.types.ndarray()):
        for i in range(3):
            loss[None] += arr[i] ** 2

    a.from_numpy(np.array([1.0, 2.0, 3.0]))
    for _ in range(2):
        with ti.ad.Tape(loss):
            compute(a)
            compute(a)
    np.testing.assert_array_equal(a.grad.to_numpy(), [4.0, 8.0, 12.0])     # two launches, one tape
    with ti.ad.Tape(loss, clear_gradients=False):
        compute(a)
    np.testing.assert_array_equal(a.grad.to_numpy(), [6.0, 12.0, 18.0])


# --------------------------------------------------------------------------- rows that raise

def test_needs_grad_place_and_place_grad_yourself_works():
    """As in Taichi: needs_grad placed x.grad with x; the user's place of the same shape agrees."""
    x = ti.field(float, needs_grad=True)
    ti.root.dense(ti.i, N).place(x)
    ti.root.dense(ti.i, N).place(x.grad)
    ti.root.lazy_grad()
    loss = _loss()
    compute = _scalar_kernel(x, loss)
    x.from_numpy(np.arange(N, dtype=float))
    with ti.ad.Tape(loss):
        compute()
    assert np.abs(x.grad.to_numpy()).max() > 0
    with pytest.raises(ti.TaichiRuntimeError, match='field x.grad is placed twice'):
        ti.root.dense(ti.i, N).place(x.grad)         # a second time by the user


def test_shape_needs_grad_and_place_grad_of_another_shape_raises():
    x = ti.field(float, shape=N, needs_grad=True)
    ti.root.dense(ti.i, N).place(x.grad)
    with pytest.raises(ti.TaichiRuntimeError, match='x.grad is placed twice'):
        ti.root.dense(ti.i, N + 1).place(x.grad)


def test_shape_and_place_raises():
    x = ti.field(float, shape=N)
    with pytest.raises(ti.TaichiRuntimeError, match='field x is placed twice'):
        ti.root.dense(ti.i, N).place(x)


def test_grad_of_another_shape_raises():
    x = ti.field(float)
    ti.root.dense(ti.ij, (3, 2)).place(x)
    with pytest.raises(ti.TaichiRuntimeError, match=r'x.grad must have the shape of x: \(3, 2\), got \(2, 3\)'):
        ti.root.dense(ti.ij, (2, 3)).place(x.grad)


def test_lazy_grad_before_place_allocates_nothing():
    x = ti.field(float)
    ti.root.lazy_grad()                       # only fields placed so far
    ti.root.dense(ti.i, N).place(x)
    loss = _loss()
    compute = _scalar_kernel(x, loss)
    with ti.ad.Tape(loss):
        compute()                              # runs: x simply has no gradient
    with pytest.raises(ti.TaichiRuntimeError, match=r'field x.grad is used before it was placed'):
        x.grad.to_numpy()


def test_no_gradient_anywhere_raises_on_reading_it():
    x = ti.field(float, shape=N)
    loss = _loss()
    compute = _scalar_kernel(x, loss)
    with ti.ad.Tape(loss):
        compute()
    with pytest.raises(ti.TaichiRuntimeError, match=r'field x.grad is used before it was placed'):
        x.grad[0]


def test_intermediate_field_without_gradient_is_an_error():
    x = ti.field(float, shape=N, needs_grad=True)
    y = ti.field(float, shape=N)              # forgot needs_grad
    loss = _loss()

    @ti.kernel
    def double():
        for i in x:
            y[i] = 2 * x[i]

    @ti.kernel
    def square():
        for i in y:
            loss[None] += y[i] ** 2

    x.fill(1.0)
    with pytest.raises(ti.ad.AutodiffRuleError, match='gradient would be lost.*field y'):
        with ti.ad.Tape(loss):
            double()
            square()


def test_loss_without_gradient_raises():
    ti.field(float, shape=N, needs_grad=True)
    loss = ti.field(float, shape=())
    with pytest.raises(ValueError, match='the loss loss needs a gradient: declare it with needs_grad=True'):
        with ti.ad.Tape(loss):
            pass


def test_loss_that_is_not_0d_raises():
    loss = ti.field(float, shape=N, needs_grad=True)
    with pytest.raises(ValueError, match=r'must be a 0-D field \(shape \(\)\), got shape \(4,\)'):
        with ti.ad.Tape(loss):
            pass


def test_integer_fields_have_no_gradient():
    n = ti.field(ti.i32)
    ti.root.dense(ti.i, N).place(n)
    ti.root.lazy_grad()
    assert n.grad is None


def test_integer_field_with_needs_grad_raises():
    with pytest.raises(ti.TaichiRuntimeError, match="needs_grad=True needs a floating-point dtype, got i32"):
        ti.field(ti.i32, shape=N, needs_grad=True)


def test_gradient_placed_after_a_backward_pass_is_seen():
    """An adjoint compiled before a gradient was placed is rebuilt."""
    x = ti.field(float, shape=N, needs_grad=True)
    y = ti.field(float, shape=N)
    loss = _loss()

    @ti.kernel
    def double():
        for i in x:
            y[i] = 2 * x[i]

    @ti.kernel
    def square():
        for i in y:
            loss[None] += y[i] ** 2

    def forward():
        double()
        square()

    x.fill(1.0)
    with pytest.raises(ti.ad.AutodiffRuleError, match='gradient would be lost'):
        ti.ad.check_gradients(forward, loss, [x])
    with ti.ad.Tape(loss, validation=False):
        forward()
    np.testing.assert_array_equal(x.grad.to_numpy(), 0)   # the adjoints, compiled without y.grad
    ti.root.dense(ti.i, N).place(y.grad)
    assert ti.ad.check_gradients(forward, loss, [x]).ok   # ... are rebuilt
    np.testing.assert_allclose(x.grad.to_numpy(), 8.0)
