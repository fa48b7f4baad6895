"""Native replay: the tape's backward pass in one native loop, and ti.capture of forward passes.

Results must be bit-identical with replay on and off, and with 1 and 2 threads for programs
without floating-point atomics (each thread writes its own elements; sums run serially).
"""
import numpy as np
import pytest

import engine as ti

STEPS, N = 12, 64


def _chain(native_replay, threads, captured):
    """A particle chain in several kernels per step; returns (loss, gradients) as numpy."""
    ti.init(default_fp=ti.f64, native_replay=native_replay, cpu_max_num_threads=threads)
    x = ti.field(float, shape=(STEPS + 1, N), needs_grad=True)
    v = ti.field(float, shape=(STEPS + 1, N), needs_grad=True)
    k = ti.field(float, shape=N, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def forces(t: ti.i32):
        for i in range(N):
            v[t + 1, i] = v[t, i] - 0.05 * k[i] * ti.sin(x[t, i]) - 0.01 * v[t, i] ** 3

    @ti.kernel
    def advance(t: ti.i32):
        for i in range(N):
            x[t + 1, i] = x[t, i] + 0.05 * v[t + 1, i]

    @ti.kernel
    def total():
        ti.loop_config(serialize=True)
        for i in range(N):
            loss[None] += x[STEPS, i] ** 2 + ti.exp(-v[STEPS, i])

    def rollout():
        for t in range(STEPS):
            forces(t)
            advance(t)
        total()

    x.from_numpy(np.zeros((STEPS + 1, N)))
    x.data[0] = np.linspace(-1, 1, N)
    k.from_numpy(1 + np.arange(N) / N)
    run = ti.capture(rollout) if captured else rollout
    for _ in range(2):                # a captured rollout replays the second time
        with ti.ad.Tape(loss):
            run()
    return loss[None], x.grad.to_numpy(), k.grad.to_numpy()


@pytest.mark.parametrize('threads', [1, 2])
def test_bit_identical_with_replay_on_and_off_and_across_threads(threads):
    reference = _chain(native_replay=False, threads=1, captured=False)
    for captured in (False, True):
        result = _chain(native_replay=True, threads=threads, captured=captured)
        assert result[0] == reference[0]
        for got, want in zip(result[1:], reference[1:]):
            np.testing.assert_array_equal(got, want)
    assert np.abs(reference[2]).max() > 0


def test_custom_gradients_run_between_native_segments():
    ti.init(default_fp=ti.f64)
    x = ti.field(float, shape=4, needs_grad=True)
    y = ti.field(float, shape=4, needs_grad=True)
    z = ti.field(float, shape=4, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def square(a: ti.template(), b: ti.template()):
        for i in range(4):
            b[i] = a[i] ** 2

    @ti.kernel
    def total():
        for i in range(4):
            loss[None] += z[i]

    @ti.ad.grad_replaced
    def custom(a, b):
        square(a, b)

    @ti.ad.grad_for(custom)
    def custom_grad(a, b):
        square.grad(a, b)
        for i in range(4):
            a.grad[i] *= 10          # deliberately not the true gradient: proves it ran

    x.from_numpy(np.arange(4.0))
    with ti.ad.Tape(loss):
        square(x, y)
        custom(y, z)
        total()
    np.testing.assert_allclose(x.grad.to_numpy(), 10 * 4 * np.arange(4.0) ** 3)


def test_capture_replays_without_running_python():
    ti.init()
    x = ti.field(ti.i32, shape=())
    calls = []

    @ti.kernel
    def bump(k: ti.i32):
        x[None] += k

    @ti.capture
    def rollout(n):
        calls.append(n)
        for k in range(n):
            bump(k)

    for _ in range(3):
        rollout(4)
    rollout(2)
    assert calls == [4, 2] and x[None] == 3 * 6 + 1


@pytest.mark.parametrize('access', ['read', 'write', 'to_numpy', 'fill', '.data', 'return value',
                                    'grad_replaced', 'returns'])
def test_capture_refuses_python_that_could_steer_the_launches(access):
    ti.init()
    x = ti.field(float, shape=4)

    @ti.kernel
    def double():
        for i in range(4):
            x[i] *= 2

    @ti.kernel
    def peek() -> ti.f32:
        return x[0]

    @ti.ad.grad_replaced
    def custom():
        double()

    def rollout():
        double()
        if access == 'read' and x[0] > 1:
            double()
        elif access == 'write':
            x[1] = 3
        elif access == 'to_numpy':
            x.to_numpy()
        elif access == 'fill':
            x.fill(0)
        elif access == '.data':
            x.data.fill(0)
        elif access == 'grad_replaced':
            custom()
        elif access == 'return value':
            peek()
        elif access == 'returns':
            return 1

    with pytest.raises(ti.CaptureError, match='rollout'):
        ti.capture(rollout)()


def test_capture_again_after_init_and_plain_in_forward_mode():
    def build():
        x = ti.field(float, shape=(), needs_grad=True)
        y = ti.field(float, shape=(), needs_grad=True)

        @ti.kernel
        def cube():
            y[None] = x[None] ** 3
        return x, y, cube

    holder = {}
    rollout = ti.capture(lambda: holder['cube']())
    for _ in range(2):
        ti.init(default_fp=ti.f64)
        x, y, holder['cube'] = build()
        x[None] = 2.0
        rollout()
        rollout()
        assert y[None] == 8.0
    with ti.ad.FwdMode(loss=y, param=x):
        rollout()
    assert y.dual[None] == 12.0


def test_an_error_inside_a_replay_names_the_kernel():
    ti.init(debug=True)
    x = ti.field(float, shape=4, needs_grad=True)
    at = ti.field(ti.i32, shape=())
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def pick():
        loss[None] += x[at[None]]

    rollout = ti.capture(lambda: pick())
    rollout()
    at[None] = 7
    with pytest.raises(ti.TaichiIndexError, match='pick'):
        rollout()
    at[None] = 1
    tape = ti.ad.Tape(loss)
    with tape:
        rollout()
    np.testing.assert_array_equal(x.grad.to_numpy(), [0, 1, 0, 0])
    at[None] = 9                     # the fields now disagree with the forward pass
    with pytest.raises(ti.TaichiIndexError, match='in kernel pick'):
        tape.grad()
