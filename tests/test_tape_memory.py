"""What a tape keeps grows with what it must remember: affine time indices need no saves,
and beyond ti.init(tape_memory_limit=...) a MemoryError says what the tape holds."""
import numpy as np
import pytest

import engine as ti
from engine.core.errors import AutodiffRuleError

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
    assert list(tape.memory_report()) == ['records']    # no launch overwrote what an earlier one read
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


def _overwriting_program(native_replay):
    """DiffTaichi's electric reads x[t] in one kernel before another overwrites it (and a
    scalar s[t], and a row r[t, :]): the tape saves each before the write and puts it
    back in the backward pass, natively between the adjoints or from Python."""
    ti.init(default_fp=ti.f64, native_replay=native_replay)
    steps = 5
    x = ti.Vector.field(2, ti.f64, shape=steps, needs_grad=True)
    s = ti.field(ti.f64, shape=steps, needs_grad=True)
    r = ti.field(ti.f64, shape=(steps, 4), needs_grad=True)
    h = ti.field(ti.f64, shape=steps, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def read(t: ti.i32):
        for _ in range(1):
            h[t] = ti.sin(x[t][0] * x[t][1] + s[t]) + r[t, 1] * r[t, 2]

    @ti.kernel
    def overwrite(t: ti.i32):
        for _ in range(1):
            x[t] = x[t - 1] * 0.9 + h[t - 1]
            s[t] = s[t - 1] ** 2
        for j in range(1, 3):
            r[t, j] = r[t - 1, j] * h[t - 1]

    @ti.kernel
    def total(t: ti.i32):
        loss[None] += h[t] * h[t] + x[t][0]

    def run(start):
        x.from_numpy(start[:, :2].copy())
        s.from_numpy(start[:, 2].copy())
        r.from_numpy(np.tile(start[:, 3:4], (1, 4)))
        with ti.ad.Tape(loss) as tape:
            for t in range(1, steps):
                read(t)
                overwrite(t)
                total(t)
        return tape, loss[None]
    return run, x


@pytest.mark.parametrize('native_replay', [True, False], ids=['native put-back', 'Python put-back'])
def test_saves_before_overwrites_are_put_back_and_gradients_match_finite_differences(native_replay):
    run, x = _overwriting_program(native_replay)
    start = np.random.default_rng(3).uniform(0.2, 0.8, size=(5, 4))
    tape, _ = run(start)
    report = tape.memory_report()
    assert report['values of x saved before a write over what earlier launches read'] == 4 * 2 * 8
    assert report['values of s saved before a write over what earlier launches read'] == 4 * 8
    # the loop over j makes the write's box the whole row r[t, :]
    assert report['values of r saved before a write over what earlier launches read'] == 4 * 4 * 8
    grad = x.grad.to_numpy().copy()
    after = x.to_numpy()
    eps = 1e-6
    for t in range(5):
        for c in range(2):
            up, down = start.copy(), start.copy()
            up[t, c] += eps
            down[t, c] -= eps
            fd = (run(up)[1] - run(down)[1]) / (2 * eps)
            assert grad[t, c] == pytest.approx(fd, rel=1e-6, abs=1e-9), (t, c)
    tape, _ = run(start)
    assert np.array_equal(x.to_numpy(), after)      # the backward pass left the forward state


def _array_program():
    ti.init(default_fp=ti.f64)
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def read(c: ti.types.ndarray()):
        for i in range(4):
            loss[None] += c[i] * x[i]

    @ti.kernel
    def write(c: ti.types.ndarray()):
        for i in c:
            c[i] = 100.0
    return x, loss, read, write


def test_a_write_through_another_view_of_what_a_launch_read_is_refused():
    """`c` read, then `c[2:]` written: the tape saves per array and cannot match elements
    across views, so it refuses rather than give a gradient from the overwritten values."""
    x, loss, read, write = _array_program()
    c = np.ones(6)
    x.fill(1.0)
    with ti.ad.Tape(loss):
        read(c)
        write(c[:])             # the same memory, shape and strides: one array, saved
    assert np.array_equal(x.grad.to_numpy(), np.ones(4))
    for view in (lambda a: a[2:], lambda a: a.reshape(2, 3)[1]):
        c = np.ones(6)
        with pytest.raises(AutodiffRuleError, match='shares memory with another array'):
            with ti.ad.Tape(loss):
                read(c)
                write(view(c))


def test_fresh_arrays_whose_ids_python_reuses_get_their_own_plan():
    """A loop over read(a); write(b); read(a) with new arrays each iteration, b apart from
    a or a view of it: the tape's memo of sequences keys arrays by memory, not by id (a
    freed array's id comes back), so each iteration saves what it must."""
    x, loss, read, write = _array_program()
    for b_is in ['apart', 'a', 'apart', 'a', 'apart', 'a[:]', 'a[:]', 'apart']:
        a = np.ones(4)
        b = {'apart': np.ones(4), 'a': a, 'a[:]': a[:]}[b_is]
        x.fill(1.0)
        with ti.ad.Tape(loss):
            read(a)
            write(b)
            read(a)
        assert x.grad[0] == (2.0 if b_is == 'apart' else 101.0), b_is
        del a, b


def test_tape_memory_limit_holds_at_every_launch():
    """The limit is exact: no launch leaves the tape above it without a MemoryError."""
    limit = 3000
    ti.init(default_fp=ti.f64, tape_memory_limit=limit)
    x = ti.field(ti.f64, shape=50, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def use():
        for i in x:
            loss[None] += x[i]

    @ti.kernel
    def overwrite():
        for i in x:
            x[i] = 0.5
    totals = []
    with pytest.raises(MemoryError, match='values of x saved'):
        with ti.ad.Tape(loss) as tape:
            for _ in range(20):
                use()
                overwrite()
                totals.append(sum(tape.memory_report().values()))
    assert totals and max(totals) <= limit


def test_validation_settings_are_checked(monkeypatch):
    ti.init()
    loss = ti.field(ti.f32, shape=(), needs_grad=True)
    with pytest.raises(ValueError, match='validation'):
        ti.ad.Tape(loss, validation='off')      # truthy: it must not turn the checks on
    with pytest.raises(Exception, match='ad_validation'):
        ti.init(ad_validation='never')
    monkeypatch.setenv('ENGINE_AD_VALIDATION', 'garbage')
    with pytest.raises(Exception, match='ENGINE_AD_VALIDATION'):
        ti.init()
    monkeypatch.setenv('ENGINE_AD_VALIDATION', 'off')
    ti.init()
    with pytest.raises(Exception, match='tape_memory_limit'):
        ti.init(tape_memory_limit=1.5)


def test_rule_cost_script_compares_checked_and_unchecked_tapes(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    program = tmp_path / 'program.py'
    program.write_text(
        'import taichi as ti\n'
        'ti.init()\n'
        'x = ti.field(ti.f32, shape=4, needs_grad=True)\n'
        'loss = ti.field(ti.f32, shape=(), needs_grad=True)\n'
        '@ti.kernel\n'
        'def step(t: ti.i32):\n'
        '    for i in x:\n'
        '        loss[None] += x[i] * t\n'
        'for _ in range(10):\n'
        '    with ti.ad.Tape(loss):\n'
        '        for t in range(3):\n'
        '            step(t)\n')
    script = Path(__file__).resolve().parents[1] / 'scripts' / 'rule_cost.py'
    out = subprocess.run([sys.executable, str(script), str(program)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert 'rule_cost: s / iteration checked' in out.stdout and '(2 and 3 iterations)' in out.stdout
