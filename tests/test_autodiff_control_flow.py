"""Reverse-mode autodiff through `while`, `break`, `continue` and run-time trip counts.

Each kernel is checked against central differences in float64 (ad_helpers.fd_check)
and against forward mode along a random direction (ti.ad.FwdMode copies the control
flow as is, so it is an independent check of the reversed loops). Conditions are
exercised taken, not taken and mixed; a loop's trip count is treated as constant,
so inputs are kept away from the points where it changes.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import engine as ti

from ad_helpers import assert_grad_close, f64, fd_check, set_field  # noqa: F401

pytestmark = pytest.mark.usefixtures('f64')

N = 8


def _fields(*names, n=N):
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    return loss, [ti.field(ti.f64, shape=n, needs_grad=True) for _ in names]


def check(loss, inputs, forward):
    """Tape vs finite differences, then Tape vs forward mode (a JVP along a random seed)."""
    grads = fd_check(loss, inputs, forward)
    rng = np.random.default_rng(0)
    for field, grad in zip(inputs, grads):
        seed = rng.uniform(-1, 1, grad.shape)
        loss[None] = 0
        with ti.ad.FwdMode(loss=loss, param=field, seed=seed.ravel()):
            forward()
        assert loss.dual[None] == pytest.approx(float((grad * seed).sum()), rel=1e-10, abs=1e-12)
    return grads


# --------------------------------------------------------------------------- while

@pytest.mark.parametrize('case', ['mixed', 'no_trips'])
def test_while_with_a_data_dependent_trip_count(case):
    loss, (x,) = _fields('x')
    trips = ti.field(ti.i32, shape=N)
    lo = 0.2 if case == 'mixed' else 10.5
    set_field(x, np.linspace(lo, lo + 11.3, N))           # mixed: 0 to 5 trips

    @ti.kernel
    def compute():
        for i in range(N):
            s = x[i]
            trips[i] = 0
            while s < 10.0:
                s = s * 1.7 + 0.3 * ti.sin(s)
                trips[i] += 1
            loss[None] += s * s

    check(loss, [x], compute)
    t = trips.to_numpy()
    assert (t == 0).all() if case == 'no_trips' else (t.min() == 0 and t.max() >= 4), t


def test_newton_iteration_converges_to_the_implicit_derivative():
    """y solves y^3 + a y = b: Newton until the step is below 1e-10, then dy/da and
    dy/db must be the implicit function's -y / (3y^2 + a) and 1 / (3y^2 + a)."""
    loss, (a, b) = _fields('a', 'b')
    rng = np.random.default_rng(1)
    set_field(a, rng.uniform(0.5, 2.0, N))
    set_field(b, rng.uniform(-3.0, 3.0, N))
    y_out = ti.field(ti.f64, shape=N)

    @ti.kernel
    def solve():
        for i in range(N):
            y = 1.0
            step = 1.0
            n = 0
            while abs(step) > 1e-10 and n < 50:
                step = (y * y * y + a[i] * y - b[i]) / (3.0 * y * y + a[i])
                y -= step
                n += 1
            y_out[i] = y
            loss[None] += y

    ga, gb = check(loss, [a, b], solve)
    y, av = y_out.to_numpy(), a.to_numpy()
    np.testing.assert_allclose(y ** 3 + av * y, b.to_numpy(), atol=1e-12)
    np.testing.assert_allclose(ga, -y / (3 * y * y + av), rtol=1e-8)
    np.testing.assert_allclose(gb, 1 / (3 * y * y + av), rtol=1e-8)


def test_while_true_with_break_and_continue():
    loss, (x,) = _fields('x')
    set_field(x, np.linspace(0.3, 2.2, N))

    @ti.kernel
    def compute():
        for i in range(N):
            v = x[i]
            s = 0.0
            n = 0
            while True:
                n += 1
                if n % 2 == 0:
                    continue
                s += v ** n / n
                if s > 2.0 or n > 9:
                    break
                s *= 1.0 + 0.1 * ti.sin(v)
            loss[None] += s

    check(loss, [x], compute)


def test_while_inside_while_and_static_loop_inside():
    loss, (x,) = _fields('x')
    set_field(x, np.linspace(0.5, 3.0, N))

    @ti.kernel
    def compute():
        for i in range(N):
            s = x[i]
            outer = 0
            while outer < 3:
                inner = 0
                while s < 5.0 + outer:
                    for k in ti.static(range(2)):       # unrolled, untouched
                        s = s * (1.2 + 0.1 * k) + 0.05 * ti.sin(s)
                    inner += 1
                    if inner > 8:
                        break
                s = s - 3.0 + 0.1 * ti.cos(s * x[i])
                outer += 1
            loss[None] += s * s

    check(loss, [x], compute)


def test_kernel_scope_while_and_a_serialized_loop_with_break():
    loss, (x,) = _fields('x')
    set_field(x, np.linspace(-0.9, 1.1, N))

    @ti.kernel
    def compute():
        acc = 0.0
        i = 0
        while i < N:
            acc = acc * 0.8 + x[i] * x[i]
            i += 1
        ti.loop_config(serialize=True)
        for j in range(N):
            if x[j] * acc > 1.5:
                break
            acc += ti.sin(x[j]) * acc
        loss[None] = acc

    check(loss, [x], compute)


# --------------------------------------------------------------------------- break / continue

@pytest.mark.parametrize('threshold,expect', [(100.0, 'none'), (1.2, 'some'), (-100.0, 'all')])
def test_break_inside_nested_ifs(threshold, expect):
    """A field is written in every iteration: only the iterations that ran are reversed."""
    loss, (x, a) = _fields('x', 'a')
    trips = ti.field(ti.i32, shape=N)
    rng = np.random.default_rng(2)
    set_field(x, rng.uniform(-1, 1, N))
    set_field(a, rng.uniform(0.9, 1.3, N))

    @ti.kernel
    def compute(thr: ti.f64):
        for i in range(N):
            s = x[i]
            trips[i] = 0
            for t in range(12):
                trips[i] += 1
                s = s * a[i] + 0.2 * ti.sin(s) + 0.1
                loss[None] += 0.1 * s * s
                if s > thr:
                    if t >= 2:
                        break
                    s = s * 0.8
                s = s * 0.95
            loss[None] += s

    check(loss, [x, a], lambda: compute(threshold))
    t = trips.to_numpy()
    assert {'none': (t == 12).all(), 'all': (t == 3).all(),
            'some': (t < 12).any() and (t == 12).any()}[expect], t


@pytest.mark.parametrize('threshold', [-2.0, 0.0])
def test_continue_in_an_inner_serial_loop(threshold):
    loss, (x, a) = _fields('x', 'a')
    rng = np.random.default_rng(3)
    set_field(x, rng.uniform(-1, 1, N))
    set_field(a, rng.uniform(0.5, 1.5, N))

    @ti.kernel
    def compute(thr: ti.f64):
        for i in range(N):
            s = x[i]
            p = 0.0
            for t in range(10):
                s = ti.sin(s * a[i] + t * 0.3)
                if s < thr:
                    continue
                p = p * 0.9 + s * s
                if t % 3 == 0:
                    continue
                p += 0.1 * s
            loss[None] += p + s

    check(loss, [x, a], lambda: compute(threshold))


def test_continue_in_a_parallel_loop():
    loss, (x,) = _fields('x')
    set_field(x, np.linspace(-1.0, 1.2, N))

    @ti.kernel
    def compute():
        for i in range(N):
            v = x[i]
            if v < 0.0:
                continue
            v = v * ti.sin(v) + 1.0
            if v > 1.5:
                continue
            loss[None] += v * v

    check(loss, [x], compute)


def test_nested_loops_with_jumps_at_every_level():
    loss, (x, y) = _fields('x', 'y')
    rng = np.random.default_rng(4)
    set_field(x, rng.uniform(0.2, 1.0, N))
    set_field(y, rng.uniform(0.5, 1.0, N))

    @ti.kernel
    def compute():
        for i in range(N):
            s = x[i]
            acc = 0.0
            for j in range(4):
                if j == 2 and s > 2.5:
                    continue
                t = s + 0.1 * j
                m = 0
                while t < 4.0:
                    t = t * 1.3 + 0.1 * ti.sin(s)
                    m += 1
                    if t > 3.0 and j == 1:
                        break
                acc += t * y[j]
                s = s * 0.9 + 0.1 * t
                if acc > 12.0:
                    break
            loss[None] += acc + s

    check(loss, [x, y], compute)


# --------------------------------------------------------------------------- run-time trip counts

@pytest.mark.parametrize('count', [0, 3])
def test_run_time_trip_counts_from_a_field_and_from_data(count):
    loss, (x,) = _fields('x')
    n = ti.field(ti.i32, shape=())
    n[None] = count
    set_field(x, np.linspace(0.11, 0.9, N))       # x * 4 stays away from integers

    @ti.kernel
    def compute():
        for i in range(N):
            s = x[i]
            k = ti.cast(x[i] * 4.0, ti.i32)
            for j in range(n[None]):
                s = s * 0.9 + 0.1 * ti.cos(s * j)
                for _ in range(k):
                    s = s + 0.05 * s * s
                    if s > 1.0:
                        break
            loss[None] += s

    check(loss, [x], compute)


# --------------------------------------------------------------------------- second order

def test_hessian_vector_product_through_loops():
    """Forward over reverse: the adjoint's stacks carry tangents too (a mirror stack)."""
    loss, (x,) = _fields('x')
    set_field(x, np.linspace(0.3, 0.9, N))

    @ti.kernel
    def compute():
        for i in range(N):
            s = x[i]
            for _ in range(3):
                s = s * s * 0.9 + 0.2
            while s < 3.0:
                s = s * s + 0.9 * s + 0.2
            loss[None] += s

    v = np.random.default_rng(5).uniform(-1, 1, N)
    hv = ti.ad.hvp(compute, loss, x, v)
    base, grads = x.to_numpy(), []
    for sign in (1, -1):
        x.from_numpy(base + sign * 1e-6 * v)
        with ti.ad.Tape(loss):
            compute()
        grads.append(x.grad.to_numpy())
    x.from_numpy(base)
    assert_grad_close(hv, (grads[0] - grads[1]) / 2e-6, 'Hv', rtol=1e-5, atol=1e-7)
    assert np.abs(hv).min() > 0.1


# --------------------------------------------------------------------------- the autodiff stack

@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='RLIMIT_AS and /proc are Linux-only')
def test_a_while_loop_whose_stack_cannot_grow_raises_memory_error(tmp_path):
    code = '''
import resource
import engine as ti
ti.init(default_fp=ti.f64)
x = ti.field(ti.f64, shape=(), needs_grad=True)
loss = ti.field(ti.f64, shape=(), needs_grad=True)
n = ti.field(ti.i32, shape=())

@ti.kernel
def compute():
    s = x[None]
    i = 0
    while i < n[None]:
        s = s * 0.5 + 1.0
        i += 1
    loss[None] = s

x[None], n[None] = 1.0, 10
with ti.ad.Tape(loss):                  # compiles both kernels before memory is limited
    compute()
assert x.grad[None] == 0.5 ** 10
vm = int([l for l in open('/proc/self/status') if l.startswith('VmSize')][0].split()[1]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), resource.getrlimit(resource.RLIMIT_AS)[1]))
n[None] = 100_000_000                   # 1.6 GB of pushed locals
try:
    with ti.ad.Tape(loss):
        compute()
except MemoryError as e:
    print('MemoryError:', e)
'''
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get('PYTHONPATH', ''))
    script = tmp_path / 'oom.py'                  # kernels need their source in a file
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], cwd=root, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert 'MemoryError: kernel compute (its adjoint): out of memory for the autodiff stack of a loop' in out.stdout, \
        out.stdout + out.stderr
    assert 'while i < n[None]:' in out.stdout, out.stdout       # the loop's line
