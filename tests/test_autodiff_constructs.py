"""Reverse-mode autodiff through the language's constructs, checked by finite differences.

Each test builds a small kernel with one construct (mutable locals, if/elif/else,
static loops, ti.func, gathers and scatters, scalar arguments, serial loops with
carried locals, stop_grad, vectors and matrices, SVD / polar decomposition,
integer values), takes d loss / d inputs with ti.ad.Tape and compares it with
central differences in float64 (relative error < 1e-5). Branchy constructs are
checked with inputs on every side of their conditions, and with no element
taking a branch.
"""
import numpy as np
import pytest

import engine as ti

from ad_helpers import assert_grad_close, f64, fd_check, set_field  # noqa: F401

pytestmark = pytest.mark.usefixtures('f64')

N = 8


def _rng(seed):
    return np.random.default_rng(seed)


def _scalar_setup(n=N, extra=()):
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    others = [ti.field(ti.f64, shape=n, needs_grad=True) for _ in extra]
    return x, loss, others


# --------------------------------------------------------------------------- mutable locals

def test_mutable_locals():
    x, loss, (w,) = _scalar_setup(extra=['w'])
    r = _rng(1)
    set_field(x, r.uniform(-1.5, 1.5, N))
    set_field(w, r.uniform(0.5, 1.5, N))

    @ti.kernel
    def compute():
        for i in range(N):
            s = x[i]
            t = s * w[i]
            s = s * s + t              # overwrite a local with a function of itself
            s += ti.sin(t)             # augmented assignment
            t = 0.0                    # an overwrite that kills t's old value
            t += s * x[i]
            s -= 0.5 * t
            s *= w[i]
            s /= 1.0 + x[i] * x[i]
            loss[None] += s

    fd_check(loss, [x, w], compute)


# --------------------------------------------------------------------------- if / elif / else

_BRANCH_INPUTS = {
    # values in each interval of the conditions below, away from the thresholds
    'all-branches': [-1.7, -0.9, -0.3, 0.2, 0.35, 0.8, 1.4, -1.2],
    'only-if': [0.8, 1.4, 0.9, 1.1, 1.6, 0.7, 1.2, 1.9],
    'only-elif': [-0.3, 0.2, 0.35, 0.1, -0.4, 0.0, 0.45, -0.1],
    'only-else': [-1.7, -0.9, -1.2, -0.7, -2.0, -1.1, -0.8, -1.5],
}


@pytest.mark.parametrize('case', sorted(_BRANCH_INPUTS))
def test_if_elif_else(case):
    x, loss, (w,) = _scalar_setup(extra=['w'])
    xs = np.array(_BRANCH_INPUTS[case])
    set_field(x, xs)
    set_field(w, _rng(2).uniform(0.5, 1.5, N))

    @ti.kernel
    def compute():
        for i in range(N):
            v = x[i]
            r = v * w[i]                      # a local written in some branches only
            if v > 0.5:
                q = v * v * w[i]              # a value defined inside a branch
                r = q + ti.sin(v)
            elif v > -0.5:
                r = ti.exp(v) * r
                if w[i] > 1.0:                # nested if on another input
                    r += w[i] * v
            else:
                r -= ti.cos(v * w[i])
            loss[None] += r * r

    taken = {'if': xs > 0.5, 'elif': (xs > -0.5) & (xs <= 0.5), 'else': xs <= -0.5}
    expect_taken = {'all-branches': {'if', 'elif', 'else'}, 'only-if': {'if'},
                    'only-elif': {'elif'}, 'only-else': {'else'}}[case]
    assert {k for k, m in taken.items() if m.any()} == expect_taken
    fd_check(loss, [x, w], compute)


@pytest.mark.parametrize('sign', [1.0, -1.0, 0.0])
def test_if_without_else_on_a_mutable_local(sign):
    """`if` with no else that updates an outer local; sign=0 mixes both sides."""
    x, loss, _ = _scalar_setup()
    xs = _rng(3).uniform(0.2, 1.5, N) * (sign if sign else np.where(np.arange(N) % 2, 1.0, -1.0))
    set_field(x, xs)

    @ti.kernel
    def compute():
        for i in range(N):
            s = x[i] * 0.5
            if x[i] > 0:
                s = s * x[i] + 1.0
                s *= ti.tanh(x[i])
            loss[None] += s * s

    fd_check(loss, [x], compute)


# --------------------------------------------------------------------------- static loops and ti.func

COEFFS = [0.5, -1.25, 2.0, 0.75]


def test_static_loops():
    n = 6
    x = ti.Vector.field(4, ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(_rng(4).uniform(-1, 1, (n, 4)))

    @ti.kernel
    def compute():
        for i in range(n):
            acc = 0.0
            for j in ti.static(range(4)):
                acc = acc * x[i][j] + COEFFS[j]          # Horner, unrolled
            for j, k in ti.static(ti.ndrange(2, 2)):
                acc += x[i][j] * x[i][k + 2] * COEFFS[j + 2 * k]
            loss[None] += acc * acc

    fd_check(loss, [x], compute)


@ti.func
def _inner(a, b):
    s = a * b
    if s > 0:
        s = ti.sqrt(s + 1.0)
    return s * ti.sin(a)


@ti.func
def _outer(a, b):
    t = _inner(a, b) + _inner(b, a * 0.5)
    t *= b
    return t


def test_func_calls():
    x, loss, (y,) = _scalar_setup(extra=['y'])
    r = _rng(5)
    set_field(x, r.uniform(-1.5, 1.5, N))
    set_field(y, r.uniform(-1.5, 1.5, N))
    xs, ys = x.to_numpy(), y.to_numpy()
    assert ((xs * ys) > 0).any() and ((xs * ys) < 0).any()   # both sides of _inner's if

    @ti.kernel
    def compute():
        for i in range(N):
            loss[None] += _outer(x[i], y[i])

    fd_check(loss, [x, y], compute)


# --------------------------------------------------------------------------- gathers, scatters, kernels with arguments

def test_gathers_and_atomic_scatters_across_kernels():
    n = 10
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    y = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    set_field(x, _rng(6).uniform(-1, 1, n))

    @ti.kernel
    def scatter():
        for i in range(n):
            g = x[(i * 3 + 1) % n]                     # gather with a computed index
            y[(i * 7 + 2) % n] += x[i] * g             # scatter (atomic add)
            ti.atomic_add(y[i // 2], ti.sin(g))        # colliding scatter
            y[(i + 1) % n] -= 0.25 * x[i]              # atomic sub

    @ti.kernel
    def reduce():
        for i in range(n):
            loss[None] += y[i] * y[(i * 3 + 1) % n]

    def forward():
        y.fill(0)
        scatter()
        reduce()

    fd_check(loss, [x], forward)


def test_kernel_with_scalar_arguments():
    x, loss, _ = _scalar_setup()
    set_field(x, _rng(7).uniform(0.2, 1.5, N))

    @ti.kernel
    def compute(scale: ti.f64, power: ti.i32, shift: ti.f64):
        for i in range(N):
            v = x[i] + shift
            acc = 1.0
            for _ in range(power):
                acc *= v
            loss[None] += scale * acc

    def forward():
        compute(0.75, 3, 0.1)
        compute(-1.5, 2, -0.05)     # same kernel, other arguments, both on the tape

    fd_check(loss, [x], forward)


# --------------------------------------------------------------------------- serial loops

@pytest.mark.parametrize('threshold,taken', [(0.0, 'some'), (-10.0, 'all'), (10.0, 'none')])
def test_serial_loop_with_carried_locals(threshold, taken):
    """A 20-iteration recurrence in a serial inner loop, with a branch inside taken
    in some, all or none of the iterations (the threshold is a kernel argument)."""
    x, loss, (a,) = _scalar_setup(extra=['a'])
    count = ti.field(ti.i32, shape=N)
    r = _rng(8)
    set_field(x, r.uniform(-1, 1, N))
    set_field(a, r.uniform(0.6, 0.95, N))

    @ti.kernel
    def compute(thr: ti.f64):
        for i in range(N):
            s = x[i]
            p = 1.0
            for t in range(20):
                s = a[i] * s + 0.1 * ti.sin(s + t * 0.1)
                p = p * 0.9 + s * s
                if s > thr:
                    p += 0.01 * s * p
                    count[i] += 1
            loss[None] += s + 0.1 * p

    fd_check(loss, [x, a], lambda: compute(threshold))
    count.fill(0)
    compute(threshold)
    c = count.to_numpy()
    assert {'all': (c == 20).all(), 'none': (c == 0).all(),
            'some': ((c > 0) & (c < 20)).any() or ((c == 0).any() and (c == 20).any())}[taken], c


def test_serial_loop_with_run_time_trip_count():
    x, loss, _ = _scalar_setup()
    m = ti.field(ti.i32, shape=N)
    set_field(x, _rng(9).uniform(0.1, 0.9, N))
    m.from_numpy(np.arange(N, dtype=np.int32) % 5)     # includes 0 trips

    @ti.kernel
    def compute():
        for i in range(N):
            s = x[i]
            for _ in range(m[i]):
                s = s * s + 0.1
            loss[None] += s

    fd_check(loss, [x], compute)


def test_nested_serial_loops():
    n = 4
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    y = ti.field(ti.f64, shape=5, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    r = _rng(10)
    set_field(x, r.uniform(-1, 1, n))
    set_field(y, r.uniform(-1, 1, 5))

    @ti.kernel
    def compute():
        for i in range(n):
            acc = x[i]
            for j in range(3):
                inner = acc * 0.5
                for k in range(5):
                    inner = ti.tanh(inner + x[i] * y[k] + j * 0.1)
                    acc += 0.1 * inner * y[k]
                acc = acc * 0.8 + inner
            loss[None] += acc * acc

    fd_check(loss, [x, y], compute)


def test_serial_loop_over_a_local_declared_in_a_branch():
    """The reversed branch replays the loop: it needs the branch's local too."""
    x, loss, _ = _scalar_setup()
    set_field(x, np.linspace(-0.5, 0.8, N))

    @ti.kernel
    def compute():
        for i in range(N):
            if x[i] > 0:
                t = 0.0
                for _ in range(3):
                    t += x[i] * t + x[i]
                loss[None] += t

    fd_check(loss, [x], compute)


# --------------------------------------------------------------------------- stop_grad

def test_stop_grad():
    x, loss, (y,) = _scalar_setup(extra=['y'])
    r = _rng(11)
    xs, ys = r.uniform(-1, 1, N), r.uniform(-1, 1, N)
    set_field(x, xs)
    set_field(y, ys)

    @ti.kernel
    def compute():
        for i in range(N):
            v = ti.Vector([x[i], y[i]])
            frozen = ti.stop_grad(v)                    # a whole vector
            loss[None] += ti.stop_grad(x[i]) * x[i] + frozen.dot(v) * y[i]

    with ti.ad.Tape(loss):
        compute()
    # d/dx [x0 x + (x0 x + y0 y) y] = x0 + x0 y ; d/dy = x0 x + 2 y0 y (x0, y0 frozen)
    assert_grad_close(x.grad.to_numpy(), xs + xs * ys, 'dloss/dx')
    assert_grad_close(y.grad.to_numpy(), xs * xs + 2 * ys * ys, 'dloss/dy')
    # and the stopped path really differs from the true derivative
    assert not np.allclose(x.grad.to_numpy(), 2 * xs + 2 * xs * ys)


# --------------------------------------------------------------------------- vectors and matrices

def _well_conditioned(r, n, count, dim):
    """Matrices close to a multiple of the identity, so inverse/normalization are smooth."""
    return np.eye(dim) * 1.5 + r.uniform(-0.4, 0.4, (count, dim, dim))


def test_vector_matrix_ops():
    n = 3
    A = ti.Matrix.field(3, 3, ti.f64, shape=n, needs_grad=True)
    B = ti.Matrix.field(2, 2, ti.f64, shape=n, needs_grad=True)
    u = ti.Vector.field(3, ti.f64, shape=n, needs_grad=True)
    v = ti.Vector.field(3, ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    r = _rng(12)
    A.from_numpy(_well_conditioned(r, 3, n, 3))
    B.from_numpy(_well_conditioned(r, 2, n, 2))
    u.from_numpy(r.uniform(-1, 1, (n, 3)))
    v.from_numpy(r.uniform(-1, 1, (n, 3)))
    W = ti.Matrix([[0.3, -0.7, 1.1], [0.5, 0.2, -0.4], [-0.9, 0.6, 0.8]])

    @ti.kernel
    def compute():
        for i in range(n):
            a, b = A[i], B[i]
            ai = a.inverse()
            c = u[i].cross(v[i])
            o = u[i].outer_product(v[i])
            m = a @ o.transpose() + ai @ a.transpose() * 0.5
            loss[None] += (W * m).sum()
            loss[None] += a.determinant() + b.inverse().trace() * b.determinant()
            loss[None] += c.norm(1e-3) + c.normalized(1e-6).dot(v[i])
            loss[None] += (ai @ u[i]).dot(v[i]) + m.trace()
            loss[None] += (b @ b.transpose())[0, 1] + (u[i].normalized() * 2.0).dot(W @ v[i])

    fd_check(loss, [A, B, u, v], compute)


def _with_singular_values(r, count, dim, sigma):
    """Random matrices U diag(sigma) V^T with U, V rotations (positive determinant)."""
    out = []
    for _ in range(count):
        q1, _ = np.linalg.qr(r.normal(size=(dim, dim)))
        q2, _ = np.linalg.qr(r.normal(size=(dim, dim)))
        q1 *= np.sign(np.linalg.det(q1))
        q2 *= np.sign(np.linalg.det(q2))
        s = np.array(sigma) * r.uniform(0.9, 1.1, dim)
        out.append(q1 @ np.diag(s) @ q2.T)
    return np.array(out)


@pytest.mark.parametrize('dim', [2, 3])
def test_svd(dim):
    n = 3
    sigma = [2.0, 1.0] if dim == 2 else [2.5, 1.2, 0.5]
    A = ti.Matrix.field(dim, dim, ti.f64, shape=n, needs_grad=True)
    wu = ti.Matrix.field(dim, dim, ti.f64, shape=n)
    ws = ti.Matrix.field(dim, dim, ti.f64, shape=n)
    wv = ti.Matrix.field(dim, dim, ti.f64, shape=n)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    r = _rng(13 + dim)
    mats = _with_singular_values(r, n, dim, sigma)
    A.from_numpy(mats)
    for w in (wu, ws, wv):
        w.from_numpy(r.uniform(-1, 1, (n, dim, dim)))

    @ti.kernel
    def compute():
        for i in range(n):
            U, S, V = ti.svd(A[i])
            loss[None] += (wu[i] * U).sum() + (ws[i] * S).sum() + (wv[i] * V).sum()

    # the decomposition itself is right (so that we differentiate an SVD)
    @ti.kernel
    def reconstruct(out: ti.template()):
        for i in range(n):
            U, S, V = ti.svd(A[i])
            out[i] = U @ S @ V.transpose()

    out = ti.Matrix.field(dim, dim, ti.f64, shape=n)
    reconstruct(out)
    np.testing.assert_allclose(out.to_numpy(), mats, atol=1e-9)

    grads = fd_check(loss, [A], compute)
    # d(sum of singular values weighted by diag(ws)) alone is the classic U diag(ws) V^T:
    # check the S part of the gradient analytically too.
    wu.fill(0)
    wv.fill(0)
    with ti.ad.Tape(loss):
        compute()
    for i in range(n):
        u_, s_, vt = np.linalg.svd(mats[i])
        expected = u_ @ np.diag(np.diag(ws.to_numpy()[i])) @ vt
        assert_grad_close(A.grad.to_numpy()[i], expected, f'd sum(ws S) / dA[{i}]', atol=1e-8)
    assert np.abs(grads[0]).max() > 0


@pytest.mark.parametrize('dim', [2, 3])
def test_polar_decompose(dim):
    n = 3
    sigma = [2.0, 0.8] if dim == 2 else [2.0, 1.1, 0.6]
    A = ti.Matrix.field(dim, dim, ti.f64, shape=n, needs_grad=True)
    wu = ti.Matrix.field(dim, dim, ti.f64, shape=n)
    wp = ti.Matrix.field(dim, dim, ti.f64, shape=n)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    r = _rng(20 + dim)
    mats = _with_singular_values(r, n, dim, sigma)
    A.from_numpy(mats)
    wu.from_numpy(r.uniform(-1, 1, (n, dim, dim)))
    wp.from_numpy(r.uniform(-1, 1, (n, dim, dim)))

    @ti.kernel
    def compute():
        for i in range(n):
            U, P = ti.polar_decompose(A[i])
            loss[None] += (wu[i] * U).sum() + (wp[i] * P).sum()

    fd_check(loss, [A], compute)


# --------------------------------------------------------------------------- integers and comparisons

def test_integer_and_comparison_values_carry_no_gradient():
    x, loss, _ = _scalar_setup()
    xs = np.array([0.3, 1.4, 2.2, -0.6, 0.7, 1.9, -1.3, 2.6])   # away from integers and 1.0
    set_field(x, xs)
    table = ti.field(ti.f64, shape=8, needs_grad=True)
    set_field(table, _rng(14).uniform(-1, 1, 8))

    @ti.kernel
    def compute():
        for i in range(N):
            v = x[i]
            k = ti.cast(v * 2.0, ti.i32)             # integer path: no gradient
            big = v > 1.0                            # comparison: 0 or 1, no gradient
            j = (k + 8) % 8
            loss[None] += k * v + big * v * v + table[j] * v + ti.cast(k, ti.f64) * 0.5

    grads = fd_check(loss, [x, table], compute)
    k = np.trunc(xs * 2.0)
    expected = k + 2 * xs * (xs > 1.0) + table.to_numpy()[(k.astype(int) + 8) % 8]
    assert_grad_close(grads[0], expected, 'dloss/dx')


# --------------------------------------------------------------------------- locals a loop reads, changed after it

def _stale_kernels(x, y, loss):
    """Kernels whose loops read a mutable local that is assigned again after the loop.

    The adjoint recomputes each loop's iterations during the reverse sweep, so the
    loop must see the local's value at the time the loop ran, not a later one."""

    @ti.kernel
    def parallel_then_kernel_scope_store():
        c = y[0]
        for i in range(N):
            loss[None] += c * c * x[i]
        c = c * 3.0                      # kernel scope, after the parallel loop
        loss[None] += c

    @ti.kernel
    def serial_then_store():
        for i in range(N):
            c = x[i]
            s = 0.0
            for _ in range(3):
                s += c * c * y[i]
            c = c * 5.0                  # after the serial loop that read c
            loss[None] += s + c

    @ti.kernel
    def serial_then_serial_store():
        for i in range(N):
            c = x[i]
            s = 0.0
            for _ in range(2):
                s += c * c * y[i]
            for _ in range(2):
                c = c * 2.0              # a later serial loop changes c
            loss[None] += s + c

    @ti.kernel
    def serial_then_if_store():
        for i in range(N):
            c = x[i]
            s = 0.0
            for _ in range(2):
                s += c * c
            if y[i] > 0.0:
                c = 0.0
            loss[None] += s * y[i] + c

    @ti.kernel
    def nested_inner_then_store():
        for i in range(N):
            s = x[i]
            for _ in range(3):
                c = s * 2.0
                acc = 0.0
                for _ in range(2):
                    acc += c * c
                c = 0.0                  # the inner loop read c; the outer body resets it
                s = s + 0.1 * acc * y[i]
            loss[None] += s

    return {k.__name__: k for k in (parallel_then_kernel_scope_store, serial_then_store,
                                    serial_then_serial_store, serial_then_if_store,
                                    nested_inner_then_store)}


@pytest.mark.parametrize('which', ['parallel_then_kernel_scope_store', 'serial_then_store',
                                   'serial_then_serial_store', 'serial_then_if_store',
                                   'nested_inner_then_store'])
def test_local_assigned_after_a_loop_that_reads_it(which):
    x, loss, (y,) = _scalar_setup(extra=['y'])
    r = _rng(30)
    set_field(x, r.uniform(-1, 1, N))
    set_field(y, r.uniform(-1, 1, N))
    kernel = _stale_kernels(x, y, loss)[which]
    fd_check(loss, [x, y], kernel)


# --------------------------------------------------------------------------- custom gradients, ndarrays

def test_custom_gradient_arguments_reach_the_backward_function():
    x, loss, _ = _scalar_setup()
    set_field(x, _rng(31).uniform(-1, 1, N))

    @ti.kernel
    def accumulate(mul: ti.f64):
        for i in range(N):
            loss[None] += x[i] * x[i] * mul

    seen = []

    @ti.ad.grad_replaced
    def forward(pair, scale=1.0):
        accumulate(pair[1] * scale)

    @ti.ad.grad_for(forward)
    def backward(pair, scale=1.0):
        seen.append((pair, scale))
        accumulate.grad(pair[1] * scale)

    with ti.ad.Tape(loss):
        forward(('mul', 2.0), scale=3.0)       # a tuple argument and a keyword argument
        forward(('mul', 0.5))
    assert seen == [(('mul', 0.5), 1.0), (('mul', 2.0), 3.0)]    # replayed in reverse order
    assert_grad_close(x.grad.to_numpy(), 2 * x.to_numpy() * 6.5, 'dloss/dx')


def test_ndarray_argument_gradients():
    a = ti.ndarray(ti.f64, shape=N, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    a.from_numpy(_rng(32).uniform(-1, 1, N))

    @ti.kernel
    def compute(arr: ti.types.ndarray()):
        for i in range(N):
            loss[None] += ti.sin(arr[i]) * arr[(i * 3 + 1) % N]

    with ti.ad.Tape(loss):
        compute(a)
    g = a.grad.to_numpy()
    base = a.to_numpy()
    fd = np.zeros(N)
    for i in range(N):
        vals = []
        for sign in (1, -1):
            p = base.copy()
            p[i] += sign * 1e-6
            a.from_numpy(p)
            loss[None] = 0
            compute(a)
            vals.append(loss[None])
        fd[i] = (vals[0] - vals[1]) / 2e-6
    a.from_numpy(base)
    assert_grad_close(g, fd, 'dloss/darr')
