"""Programs an adversarial user wrote against the reverse- and forward-mode transforms,
each a class of silently wrong gradients (or a crash) that the engine once had. Every
check is float64 against central finite differences or a closed form."""
import os

import numpy as np
import pytest

import engine as ti
from ad_helpers import assert_grad_close, fd_check, fd_gradient, f64, set_field  # noqa: F401

# --- 1. locals carried across a serial loop, stored after their last read ------------------

N_FIB = 6


def _fibonacci(body):
    a = ti.field(float, shape=N_FIB, needs_grad=True)
    b = ti.field(float, shape=N_FIB, needs_grad=True)
    c = ti.field(ti.i32, shape=N_FIB)
    f = ti.field(float, shape=N_FIB, needs_grad=True)

    @ti.kernel
    def fib():
        for i in range(N_FIB):
            p = a[i]
            q = b[i]
            for j in range(c[i]):
                if ti.static(body == 'tuple'):
                    p, q = q, p + q
                else:
                    t = p + q
                    p = q
                    q = t
            f[i] = q

    b.fill(1)
    c.from_numpy(np.arange(N_FIB, dtype=np.int32))
    fib()
    f.grad.fill(1)
    fib.grad()
    return f, a, b


@pytest.mark.parametrize('body', ['tuple', 'temporaries'])
def test_fibonacci_gradients_are_fibonacci_numbers(f64, body):
    f, a, b = _fibonacci(body)
    np.testing.assert_array_equal(f.to_numpy(), [1, 1, 2, 3, 5, 8])
    np.testing.assert_array_equal(b.grad.to_numpy(), [1, 1, 2, 3, 5, 8])
    np.testing.assert_array_equal(a.grad.to_numpy(), [0, 1, 1, 2, 3, 5])


def test_several_carried_locals_with_a_constant_trip_count(f64):
    x = ti.field(float, shape=3, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def rotate():
        for i in range(3):
            p, q, r = x[i], x[(i + 1) % 3], 0.5
            for _ in range(4):
                p, q, r = q * 0.9, r + ti.sin(p), p * q     # every store after every read
            loss[None] += 2 * q + 3 * r                    # p is not read after the loop

    set_field(x, [0.3, -0.7, 1.1])
    fd_check(loss, [x], rotate)


# --- 2. the adjoint's "owned element, no atomics" shortcut on transposed accesses -----------

def test_transposed_reads_on_two_threads_give_the_analytic_gradient_every_time():
    ti.init(default_fp=ti.f64, cpu_max_num_threads=2)
    n = 1200
    x = ti.field(float, shape=(n, n), needs_grad=True)
    acc = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def transposed():
        for i in range(n):
            for j in range(n):
                acc[None] += x[i, j] * x[j, i]

    values = np.random.default_rng(0).uniform(-1, 1, (n, n))
    x.from_numpy(values)
    expected = 2 * values.T
    for _ in range(100):
        with ti.ad.Tape(acc):
            transposed()
        np.testing.assert_array_equal(x.grad.to_numpy(), expected)


_SHIFTED_PROGRAM = """
import numpy as np, engine as ti
from engine.ir.nodes import walk
from engine.runtime import pipeline
ti.init(default_fp=ti.f64, cpu_max_num_threads=2)
n = 200_000
p = ti.field(float, shape=(2, n), needs_grad=True)
loss = ti.field(float, shape=(), needs_grad=True)

@ti.kernel
def step():
    for i in range(2, n - 2):
        p[1, i] = p[0, i - 2] + 2.0 * p[0, i] + 3.0 * p[0, i + 1] + p[1 - 1, i + 2]

@ti.kernel
def total():
    for i in range(n):
        loss[None] += p[1, i]

near = {s.attrs.get('near') for s in walk(pipeline.adjoint_of(step.compiled(())).body) if s.op == 'atomic'}
assert near == {4}, near            # offsets -2..+2 at axis 1: span 4, atomics only near chunk ends
expected = np.zeros(n)
for shift, weight in ((-2, 1.0), (0, 2.0), (1, 3.0), (2, 1.0)):
    expected[2 + shift:n - 2 + shift] += weight
for _ in range(30):
    with ti.ad.Tape(loss):
        step()
        total()
    np.testing.assert_array_equal(p.grad.to_numpy()[0], expected)
print('ok')
"""


def test_shifted_reads_add_without_atomics_only_away_from_chunk_ends_on_two_threads(tmp_path):
    # reverse._owned_fields: iterations within the span of each other share elements, so
    # the adjoint adds plainly only where every such iteration runs in this thread's chunk.
    # Chunks of 9 iterations (ENGINE_CHUNKS_PER_THREAD) put chunk ends that two threads run
    # at once next to each other: codegen using span 3 instead of 4 lost adds in every run
    import subprocess
    import sys
    env = dict(os.environ, ENGINE_CHUNKS_PER_THREAD='11112')
    program = tmp_path / 'shifted.py'
    program.write_text(_SHIFTED_PROGRAM)
    done = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and 'ok' in done.stdout, done.stderr[-3000:]


def test_shifted_and_owned_accesses_in_one_parallel_loop(f64):
    n = 5
    x = ti.field(float, shape=n, needs_grad=True)
    y = ti.field(float, shape=(n, 2), needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def mixed():
        for i in range(n):
            loss[None] += x[i] * x[(i + 1) % n] + y[i, 0] * y[i, 1] ** 2

    set_field(x, np.linspace(-1, 1, n))
    set_field(y, np.linspace(0.5, 2, 2 * n).reshape(n, 2))
    fd_check(loss, [x, y], mixed)


# --- 3. conditional expressions evaluate only the side taken -----------------------------

def test_guarded_neighbour_reads_of_a_wave_step_stay_in_range_under_a_tape():
    ti.init(default_fp=ti.f64, debug=True)     # debug mode: an out-of-range index would raise
    n, steps = 6, 4
    h = ti.field(float, shape=(steps + 1, n, n), needs_grad=True)
    target = ti.field(float, shape=(n, n))
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        for i, j in ti.ndrange(n, n):
            up = h[t, i - 1, j] if i > 0 else 0.0
            down = h[t, i + 1, j] if i < n - 1 else 0.0
            left = h[t, i, j - 1] if 0 <= j - 1 < n else 0.0
            right = h[t, i, j + 1] if j + 1 < n and h[t, i, j + 1] > -10 else 0.0
            h[t + 1, i, j] = h[t, i, j] + 0.1 * (up + down + left + right - 4 * h[t, i, j])

    @ti.kernel
    def error():
        for i, j in ti.ndrange(n, n):
            loss[None] += (h[steps, i, j] - target[i, j]) ** 2

    def forward():
        for t in range(steps):
            step(t)
        error()

    rng = np.random.default_rng(3)
    start = np.zeros((steps + 1, n, n))
    start[0] = rng.uniform(-1, 1, (n, n))
    set_field(h, start)
    set_field(target, rng.uniform(-1, 1, (n, n)))
    with ti.ad.Tape(loss):
        forward()
    analytic = h.grad.to_numpy()[0]

    def evaluate():
        loss[None] = 0
        forward()
        return loss[None]
    fd = np.zeros((n, n))
    for i, j in np.ndindex(n, n):
        for sign in (1, -1):
            h[0, i, j] += sign * 1e-6
            fd[i, j] += sign * evaluate() / 2e-6
            h[0, i, j] -= sign * 1e-6
    assert_grad_close(analytic, fd, 'd loss / d h[0]')


def test_conditional_expression_of_vectors_and_short_circuit_conditions():
    ti.init(default_fp=ti.f64, debug=True)
    n = 5
    p = ti.field(float, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def guarded():
        for i in range(n):
            v = ti.Vector([p[i - 1], p[i]]) if i > 0 else ti.Vector([1.0, p[i] ** 2])
            if i > 0 and p[i - 1] > 0.3:
                v *= p[i - 1]
            if i == n - 1 or p[i + 1] < 0.5:
                v += p[i]
            loss[None] += v.dot(ti.Vector([1.0, 2.0]))

    set_field(p, np.linspace(0.2, 1.0, n))
    fd_check(loss, [p], guarded)


# --- 4. forward mode through the old value an atomic returns --------------------------------

def test_forward_mode_through_the_old_value_of_an_atomic_add(f64):
    x = ti.field(float, shape=(), needs_grad=True)
    y = ti.field(float, shape=())
    z = ti.field(float, shape=())

    @ti.kernel
    def k():
        y[None] = x[None] ** 2
        old = ti.atomic_add(y[None], 3 * x[None])
        z[None] = old * x[None] + y[None]          # x^3 + x^2 + 3x

    x[None] = 2.0
    with ti.ad.FwdMode(loss=z, param=x):
        k()
    assert z[None] == 18.0 and z.dual[None] == 3 * 4 + 2 * 2 + 3


def test_forward_mode_refuses_the_old_value_of_an_atomic_in_a_parallel_loop(f64):
    x = ti.field(float, shape=4)
    s = ti.field(float, shape=())
    z = ti.field(float, shape=4)

    @ti.kernel
    def racy():
        for i in range(4):
            z[i] = ti.atomic_add(s[None], x[i])

    with pytest.raises(ti.ad.AutodiffError, match='depends on the order of the threads'):
        with ti.ad.FwdMode(loss=z, param=x, seed=[1.0, 0.0, 0.0, 0.0]):
            racy()


# --- 5. Hessians through the tape's saved 0-D value --------------------------------------

def test_hessian_through_a_0d_field_read_then_accumulated_by_a_later_kernel(f64):
    n = 3
    s = ti.field(float, shape=(), needs_grad=True)
    w = ti.field(float, shape=n, needs_grad=True)
    out = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def scaled_sum():
        for i in range(n):
            out[None] += w[i] * s[None] * w[i]

    @ti.kernel
    def bump():
        for i in range(n):
            s[None] += w[i] ** 2

    @ti.kernel
    def use_scale():
        out[None] += 10 * s[None] ** 2

    def forward():
        s[None] = 2.0
        scaled_sum()
        bump()
        use_scale()

    base = np.array([1.0, 2.0, 3.0])
    set_field(w, base)
    hessian = ti.ad.hessian(forward, out, w)

    def gradient(values):
        set_field(w, values)
        with ti.ad.Tape(out):
            forward()
        return w.grad.to_numpy()
    eps = 1e-5
    fd = np.stack([(gradient(base + eps * e) - gradient(base - eps * e)) / (2 * eps) for e in np.eye(n)], 1)
    np.testing.assert_allclose(hessian, hessian.T, rtol=1e-12)
    assert_grad_close(hessian, fd, 'Hessian', rtol=1e-6, atol=1e-6)


# --- 6. overwrites give the gradient of the last write --------------------------------------

def test_three_kernels_overwriting_the_loss_give_the_last_ones_gradient(f64):
    x = ti.field(float, shape=(), needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def write(c: float):
        loss[None] = c * x[None]

    x[None] = 1.0
    with ti.ad.Tape(loss):
        write(2.0)
        write(3.0)
        write(5.0)
    assert loss[None] == 5.0 and x.grad[None] == 5.0


def test_accumulate_then_overwrite_in_one_kernel_and_across_kernels(f64):
    n = 4
    a = ti.field(float, shape=n, needs_grad=True)
    b = ti.field(ti.i32, shape=n)
    p = ti.field(float, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def accumulate_then_store():
        for i in range(n):
            for j in range(b[i]):
                p[i] += i * a[i]
            p[i] = a[i] * i

    @ti.kernel
    def add_first():
        for i in range(n):
            p[i] += 5 * a[i]

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += p[i] ** 2

    set_field(a, np.arange(n) + 1.0)
    b.from_numpy(np.arange(n, dtype=np.int32))

    def in_one_kernel():
        p.fill(0)
        accumulate_then_store()
        total()

    def across_kernels():
        p.fill(0)
        add_first()
        accumulate_then_store()
        total()
    for forward in (in_one_kernel, across_kernels):
        grad, = fd_check(loss, [a], forward)
        np.testing.assert_allclose(grad, 2 * (np.arange(n) + 1.0) * np.arange(n) ** 2, rtol=1e-12)


def test_a_read_modify_write_after_a_write_is_still_refused(f64):
    x = ti.field(float, shape=3, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def scale_after_sum():
        loss[None] += x[1] ** 2
        loss[None] *= x[2]

    with pytest.raises(ti.ad.AutodiffRuleError, match='rule 2'):
        with ti.ad.Tape(loss):
            scale_after_sum()


# --- 7. no untaken path turns a gradient into NaN --------------------------------------------

def test_norm_of_a_zero_vector_and_untaken_select_arms_keep_gradients_finite(f64):
    a = ti.field(float, shape=2, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        v = ti.Vector([a[0], a[1]])
        loss[None] += (v - v).norm() + 2 * v.norm()
        loss[None] += ti.select(a[0] > 5, ti.sqrt(a[0] - 5) * a[1], a[1] ** 2)
        loss[None] += ti.select(a[1] < 0, ti.log(a[1]) / (a[0] - a[0]), ti.exp(a[0]))
        loss[None] += ti.max(ti.sqrt(a[0] - 1.0), a[1])          # untaken arm, sqrt at 0
        loss[None] += ti.Vector([a[0] - 1.0, 0.0]).norm()        # zero at the sample point

    set_field(a, [1.0, 2.0])
    with ti.ad.Tape(loss):
        k()
    expected = 2 * np.array([1.0, 2.0]) / np.sqrt(5) + [np.exp(1.0), 4.0 + 1.0]
    np.testing.assert_allclose(a.grad.to_numpy(), expected, rtol=1e-12)
    with ti.ad.FwdMode(loss=loss, param=a, seed=[1.0, 0.0]):
        k()
    assert np.isfinite(loss.dual[None])
    np.testing.assert_allclose(loss.dual[None], expected[0], rtol=1e-12)


def test_a_zero_adjoint_still_carries_its_own_derivative_in_a_hessian(f64):
    """The NaN guard must not drop d(adjoint): at x = 0 the adjoint of sin(x) * y is 0 for
    y but its derivative with respect to x is not."""
    x = ti.field(float, shape=2, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        loss[None] += ti.sin(x[0]) * ti.sqrt(x[1])

    set_field(x, [0.0, 4.0])
    hessian = ti.ad.hessian(k, loss, x)
    np.testing.assert_allclose(hessian, [[0.0, 0.25], [0.25, 0.0]], atol=1e-12)


# --- ti.funcs that return early ----------------------------------------------------------------

@pytest.mark.parametrize('mode', ['reverse', 'forward'])
def test_funcs_returning_inside_branches_and_loops(f64, mode):
    n = 6
    x = ti.field(float, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.func
    def clipped(v):
        if v > 0.5:
            return v * 2.0
        elif v < -0.5:
            return -v
        w = v
        for k in range(3):
            w = w * 1.5
            if w > 0.6:
                return w + k
        return ti.sin(w)

    @ti.func
    def pick(i):
        for k in ti.static(range(3)):
            if i == k:
                return ti.Vector([x[i], 1.0])
        return ti.Vector([0.0, x[i] ** 2])

    @ti.kernel
    def k():
        for i in range(n):
            loss[None] += clipped(x[i]) + pick(i).sum()

    values = np.array([0.9, -0.8, 0.1, 0.3, -0.2, 0.45])
    set_field(x, values)
    if mode == 'reverse':
        fd_check(loss, [x], k, nonzero=False)
        return
    for j in range(n):
        with ti.ad.FwdMode(loss=loss, param=x, seed=np.eye(n)[j]):
            k()
        derivative = loss.dual[None]
        fd = fd_gradient(x, lambda: (loss.fill(0), k(), loss[None])[-1])[j]
        assert derivative == pytest.approx(fd, rel=1e-6, abs=1e-8)


def test_a_func_returning_an_integer_then_a_float_asks_for_an_annotation(f64):
    x = ti.field(float, shape=2)

    @ti.func
    def mixed(v):
        if v > 0:
            return 1
        return v * 0.5

    @ti.kernel
    def k():
        for i in range(2):
            x[i] = mixed(x[i])

    with pytest.raises(ti.TaichiTypeError, match='annotate its return type'):
        k()


# --- found by the adversarial review -----------------------------------------------------------

def test_debug_mode_does_not_flag_the_unused_exponent_partial_of_pow():
    ti.init(default_fp=ti.f64, debug=True)
    x = ti.field(float, shape=2, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in range(2):
            loss[None] += x[i] ** 2.0 + x[i] ** ti.cast(3, float)

    set_field(x, [0.5, -0.73])
    with ti.ad.Tape(loss):
        k()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * x.to_numpy() + 3 * x.to_numpy() ** 2, rtol=1e-12)


def test_hessian_jacobian_and_gradient_check_rerun_from_the_fields_they_started_with(f64):
    w = ti.field(float, shape=2, needs_grad=True)
    y = ti.field(float, shape=2, needs_grad=True)
    out = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def accumulate():
        for i in range(2):
            y[i] += w[i] ** 2               # y is not reset by the program

    @ti.kernel
    def total():
        for i in range(2):
            out[None] += y[i] ** 2

    def program():
        accumulate()
        total()

    values = np.array([0.7, 0.4])
    set_field(w, values)
    y.fill(0)
    np.testing.assert_allclose(ti.ad.hessian(program, out, w), np.diag(12 * values ** 2), rtol=1e-12)
    y.fill(0)
    jac = ti.ad.jacobian(program, [w], [y], mode='reverse')
    np.testing.assert_allclose(jac, np.diag(2 * values), rtol=1e-12)
    y.fill(0)
    assert ti.ad.check_gradients(program, out, [w]).ok
    np.testing.assert_allclose(y.to_numpy(), values ** 2, rtol=1e-12)   # as after one run


def test_a_kernel_scope_vector_accumulated_in_a_parallel_loop(f64):
    out = ti.field(float, shape=())

    @ti.kernel
    def total():
        v = ti.Vector([0.0, 0.0])
        for i in range(4):
            v += ti.Vector([1.0, i])
        out[None] = v[0] + v[1]

    total()
    assert out[None] == 4 + 6


def test_hessian_through_an_untaken_select_arm_is_finite(f64):
    x = ti.field(float, shape=2, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def f():
        for i in x:
            loss[None] += ti.select(x[i] > 0, ti.sqrt(x[i]), 0.5 * x[i] ** 2)

    set_field(x, [-0.3, 0.8])
    np.testing.assert_allclose(ti.ad.hessian(f, loss, x), np.diag([1.0, -0.25 * 0.8 ** -1.5]), rtol=1e-12)


def test_debug_mode_ignores_nan_in_an_untaken_select_arm_but_reports_a_taken_one():
    ti.init(default_fp=ti.f64, debug=True)
    y = ti.field(float, shape=1, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def guarded(flip: ti.i32):
        for i in y:
            loss[None] += ti.select((y[i] > 0) != flip, ti.sqrt(y[i]), 0.5 * y[i])

    y[0] = -0.3
    with ti.ad.Tape(loss):
        guarded(0)
    assert y.grad[0] == 0.5
    with pytest.raises(FloatingPointError, match='guarded'):
        guarded(1)                  # the select takes sqrt(-0.3)


# --- found by the interpreter's author ---------------------------------------------------------

def test_integer_division_of_int_min_by_minus_one_wraps_instead_of_trapping():
    ti.init()

    @ti.kernel
    def divide(a: ti.i32, b: ti.i32) -> ti.i32:
        return a // b

    @ti.kernel
    def remainder(a: ti.i32, b: ti.i32) -> ti.i32:
        return a % b

    assert divide(-2 ** 31, -1) == -2 ** 31 and remainder(-2 ** 31, -1) == 0
    assert [divide(a, b) for a, b in ((7, -1), (-7, 2), (7, -2))] == [-7, -4, -4]


def test_a_bare_return_inside_a_parallel_loop_is_refused():
    ti.init()
    x = ti.field(ti.i32, shape=8)

    @ti.kernel
    def early():
        for i in range(8):
            if i == 2:
                return
            x[i] = 1

    with pytest.raises(ti.TaichiSyntaxError, match='inside a loop'):
        early()


def test_validation_off_per_tape_also_holds_on_the_python_backward_path():
    ti.init(default_fp=ti.f64, native_replay=False)
    x = ti.field(float, shape=(), needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def broken():
        loss[None] = x[None] * 2
        x[None] += 1.0

    with ti.ad.Tape(loss, validation=False):
        broken()                    # rule 1 broken on purpose; no error, as asked


def test_bad_ndarray_arguments_get_clear_errors():
    ti.init(debug=True)
    out = ti.field(float, shape=())
    x = ti.field(float, shape=4)

    @ti.kernel
    def read4(a: ti.types.ndarray()):
        for i in range(4):
            out[None] += a[i]

    with pytest.raises(IndexError, match='ndarray argument a of shape \\(2,\\)'):
        read4(np.ones(2, dtype=np.float32))
    with pytest.raises(ti.TaichiTypeError, match='got Field'):
        read4(x)
    with pytest.raises(ti.TaichiTypeError, match='dtype bool'):
        read4(np.ones(4, dtype=bool))


# --- found by the generated programs -----------------------------------------------------------

def test_an_untaken_arm_folding_to_nan_at_compile_time_compiles(f64):
    x = ti.field(float, shape=2, needs_grad=True)
    y = ti.field(float, shape=2, needs_grad=True)

    @ti.kernel
    def k():
        for i in range(2):
            y[i] = ti.select(-1.25 > 0.1, ti.log(-1.25), x[i]) + ti.select(x[i] > 9, ti.exp(1000.0), 0.0)

    set_field(x, [0.3, 0.4])
    k()
    np.testing.assert_array_equal(y.to_numpy(), [0.3, 0.4])
    np.testing.assert_array_equal(ti.ad.jacobian(k, [x], [y], mode='reverse'), np.eye(2))


def test_reverse_jacobian_with_an_ndarray_output(f64):
    x = ti.field(float, shape=2, needs_grad=True)
    out = ti.ndarray(float, shape=2, needs_grad=True)

    @ti.kernel
    def k(o: ti.types.ndarray()):
        for i in range(2):
            o[i] = 3.0 * x[i]

    set_field(x, [0.3, 0.4])
    np.testing.assert_array_equal(ti.ad.jacobian(lambda: k(out), [x], [out], mode='reverse'), 3 * np.eye(2))


def test_writing_one_component_of_a_vector_field_element_reads_nothing(f64):
    # found by the adversarial review: `u[i][2] += v` loaded the whole element first, so
    # the rule check refused a valid program (rule 1: read, then accumulated into)
    n = 2
    x = ti.field(float, shape=n, needs_grad=True)
    u = ti.Vector.field(3, float, shape=n, needs_grad=True)
    C = ti.Matrix.field(2, 2, float, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def components():
        for i in range(n):
            u[i][2] += x[i] ** 2
            ti.atomic_sub(u[i][0], x[i])
            C[i][0, 1] = 3 * x[i]

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += u[i][2] * 2.0 + u[i][0] + C[i][0, 1]

    x.from_numpy(np.array([0.3, -0.5]))
    with ti.ad.Tape(loss):
        components()
        total()
    np.testing.assert_allclose(x.grad.to_numpy(), 4 * x.to_numpy() - 1 + 3)


def test_bad_arguments_to_the_ad_api_get_clear_errors(f64):
    k = ti.field(ti.i32, shape=2)
    v = ti.Vector.field(2, float, shape=(), needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)
    with pytest.raises(TypeError, match='float field'):
        with ti.ad.FwdMode(loss=loss, param=k, seed=[1, 0]):
            pass
    with pytest.raises(TypeError, match='float field'):
        with ti.ad.FwdMode(loss=loss, param=ti.ndarray(ti.f64, shape=2), seed=[1, 0]):
            pass
    with pytest.raises(TypeError, match='no gradient'):
        ti.ad.check_gradients(lambda: None, loss, [k])
    with pytest.raises(ValueError, match='scalar'):
        with ti.ad.Tape(loss=v):
            pass


def test_nan_guards_only_where_a_partial_can_be_non_finite(f64):
    # finite.finite_partials: a product of values that no division, sqrt, log, ... fed has
    # finite partials, so its chain terms need no guard; sqrt's (0.5 / sqrt) keeps one
    from engine.autodiff import finite as finite_module, reverse
    from engine.ir.nodes import walk
    x = ti.field(float, shape=2, needs_grad=True)
    y = ti.field(float, shape=2, needs_grad=True)

    @ti.kernel
    def k():
        for i in range(2):
            a = x[i] * x[i] + ti.sin(x[i])
            y[i] = ti.select(x[i] > 0, ti.sqrt(x[i]) * a, a)

    @ti.kernel
    def bounded():
        for i in range(2):
            m = ti.abs(x[i])
            scale = ti.select(m > 1e-6, m, 1.0)             # bounded away from zero
            y[i] = x[i] / scale + ti.rsqrt(ti.max(x[i] * x[i], 0.5)) + ti.sqrt(x[i] * x[i] + 1.0)

    x.from_numpy(np.array([0.25, -1.0]))
    k()
    body = k.compiled(()).body
    finite = {s.op for s in finite_module.finite_partials(body)}
    assert {'mul', 'add', 'sin'} <= finite and 'sqrt' not in finite
    bounded()
    cleared = {s.op for s in finite_module.finite_partials(bounded.compiled(()).body)}
    assert {'truediv', 'rsqrt', 'sqrt'} <= cleared
    guarded = {s.args[2].args[1].op if s.args[2].args[1].op != 'const' else 'const'
               for s in walk(reverse.adjoint(body)) if s.attrs.get('nan_guard')}
    assert guarded, 'the sqrt term and the product fed by sqrt keep their guards'
    y.grad.fill(1.0)
    k.grad()                    # x = -1: sqrt(-1) sits in the untaken arm, the gradient is finite
    np.testing.assert_allclose(x.grad.to_numpy()[1], 2 * -1.0 + np.cos(-1.0))


def test_nan_guards_of_an_inlined_gradient_see_its_arguments(f64):
    # the arguments of an inlined ti.ad.grad are bounded like the function's own values: an
    # expression of field values is finite, so floors on the divisor and the log's argument
    # clear every chain term (sims/fem); a value built from log(0) outside keeps the guards
    from engine.ir import ops
    from engine.ir.nodes import walk
    x = ti.field(float, shape=3)
    s = ti.field(float, shape=3)
    out = ti.field(float, shape=3)

    @ti.func
    def energy(p, stretch):
        return ti.log(ti.max(p * p, 1e-3)) / ti.max(stretch, 0.1) + p * stretch

    d_energy = ti.ad.grad(energy)

    @ti.kernel
    def floored():
        for i in range(3):
            out[i] = d_energy(x[i], 1.0 + 0.5 * s[i])

    @ti.kernel
    def from_log():
        for i in range(3):
            out[i] = d_energy(x[i], ti.log(s[i]))

    def guards(kernel):
        return sum(1 for st in walk(kernel.compiled(()).body) if st.attrs.get('nan_guard'))

    x.from_numpy(np.array([0.5, -2.0, 0.01]))
    s.from_numpy(np.array([0.3, -0.5, 1.0]))
    floored()
    stretch = np.maximum(1.0 + 0.5 * s.to_numpy(), 0.1)
    p = x.to_numpy()
    expected = np.where(p * p > 1e-3, 2 / p, 0.0) / stretch + (1.0 + 0.5 * s.to_numpy())
    np.testing.assert_allclose(out.to_numpy(), expected, rtol=1e-12)
    assert guards(floored) == 0
    s.from_numpy(np.array([0.0, 1.0, 2.0]))         # log(0) = -inf reaches the function
    from_log()
    assert guards(from_log) > 0
    assert np.isfinite(out.to_numpy()[1:]).all()


def test_function_transforms_refuse_random_numbers_and_promote_integer_arguments(f64):
    # adversarial review: each direction drew its own ti.random(); an integer local passed
    # to ti.ad.grad got a derivative of 0 (a literal was promoted to float and got 12.33)
    out = ti.field(float, shape=3)

    @ti.func
    def f(x, y):
        return x * x * y + x / y

    @ti.func
    def noisy(x):
        r = ti.random(float)
        for _ in range(2):
            r += 0.5
        return x * x * r

    d_f, jvp_f, d_noisy = ti.ad.grad(f), ti.ad.jvp(f), ti.ad.grad(noisy)

    @ti.kernel
    def integer_argument():
        for _ in range(1):
            n = 2
            out[0] = d_f(n, 3.0)
            out[1] = jvp_f((n, 3.0), (1.0, 0.0))[1]
            out[2] = d_f(2, 3.0)

    @ti.kernel
    def random_inside():
        for i in range(3):
            out[i] = d_noisy(1.0)

    integer_argument()
    np.testing.assert_allclose(out.to_numpy(), [2 * 2 * 3 + 1 / 3] * 3)
    with pytest.raises(ti.TaichiSyntaxError, match='ti.random'):
        random_inside()


def test_ti_math_helpers_differentiate_as_their_formulas(f64):
    # ti.math (issue 17): clamp, mix, smoothstep, fract, length, distance, normalize, dot,
    # cross and reflect are compositions of differentiable ops; checked against float64
    # finite differences at points away from their kinks
    p = ti.Vector.field(3, float, shape=2, needs_grad=True)
    s = ti.field(float, shape=2, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)
    m = ti.math

    @ti.kernel
    def compute():
        for i in range(2):
            a, b = p[i], p[(i + 1) % 2]
            t = m.clamp(s[i], 0.1, 0.9) + m.mix(s[i], a[0], 0.3) + m.smoothstep(-1.0, 1.0, s[i])
            t += m.fract(s[i] + 3.0) + m.length(a) + m.distance(a, b) + m.normalize(a)[1]
            t += m.dot(a, b) + m.cross(a, b)[2] + m.reflect(a, m.normalize(b))[0]
            loss[None] += t * t

    set_field(p, np.array([[0.3, -0.7, 1.1], [0.5, 0.2, -0.4]]))
    set_field(s, np.array([0.35, -0.45]))
    fd_check(loss, [p, s], compute)
