"""What a tape keeps grows with what it must remember: affine time indices need no saves,
and beyond ti.init(tape_memory_limit=...) a MemoryError says what the tape holds."""
import numpy as np
import pytest

import engine as ti

SWEEPS, N = 3, 8


def _pressure_program(k_type=ti.template(), **init):
    """DiffTaichi's smoke indexes its pressure by `t * sweeps + k` (k a template there; here
    also a run-time argument): each launch reads one time slice and writes the next."""
    ti.init(default_fp=ti.f64, **init)
    p = ti.field(ti.f64, shape=(4 * SWEEPS + 1, N), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def relax(t: ti.i32, k: k_type):
        for i in range(N):
            a = k + t * SWEEPS
            p[a + 1, i] = 0.5 * p[a, i] + 0.25 * (p[a, (i + 1) % N] + p[a, (i + N - 1) % N]) ** 2

    @ti.kernel
    def total():
        for i in range(N):
            loss[None] += p[4 * SWEEPS, i]

    def run(tape_kwargs=None):
        with ti.ad.Tape(loss, **(tape_kwargs or {})) as tape:
            for t in range(4):
                for k in range(SWEEPS):
                    relax(t, k)
            total()
        return tape
    return p, loss, run


@pytest.mark.parametrize('k_type', [ti.template(), ti.i32], ids=['k template', 'k argument'])
def test_affine_time_index_needs_no_saves_and_gradient_matches_finite_differences(k_type):
    p, loss, run = _pressure_program(k_type)
    start = np.linspace(0.1, 0.4, N)
    p.from_numpy(np.zeros((4 * SWEEPS + 1, N)))
    p.data[0] = start
    tape = run()
    assert tape.kept == {}          # no launch overwrote what an earlier one read
    grad = p.grad.to_numpy()[0].copy()

    def value(x0):
        p.data[:] = 0
        p.data[0] = x0
        run()
        return loss[None]
    eps = 1e-6
    for i in range(N):
        bump = np.zeros(N)
        bump[i] = eps
        fd = (value(start + bump) - value(start - bump)) / (2 * eps)
        assert grad[i] == pytest.approx(fd, rel=1e-6, abs=1e-9)


def test_tape_memory_limit_raises_memory_error_naming_what_it_holds():
    ti.init(tape_memory_limit=200_000)
    n = 10_000
    x = ti.field(ti.f32, shape=n, needs_grad=True)
    y = ti.field(ti.f32, shape=n, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def step():
        for i in x:
            y[i] = x[i] * 0.9 + 1.0

    @ti.kernel
    def back():                     # overwrites x, which step read: the tape saves it
        for i in x:
            x[i] = y[i]

    with pytest.raises(MemoryError) as info:
        with ti.ad.Tape(loss):
            for _ in range(20):
                step()
                back()
    message = str(info.value)
    assert 'values of x saved' in message and 'tape_memory_limit=200000' in message
    assert 'fewer steps' in message
    x.fill(1.0)                     # the program goes on: nothing was lost
    assert x[3] == 1.0


def test_tape_memory_limit_zero_is_no_limit_and_bad_values_are_refused():
    ti.init(tape_memory_limit=0)
    with pytest.raises(ti.TaichiInitError if hasattr(ti, 'TaichiInitError') else Exception,
                       match='tape_memory_limit'):
        ti.init(tape_memory_limit=-5)
    with pytest.raises(Exception, match='tape_memory_limit'):
        ti.init(tape_memory_limit='2GB')
