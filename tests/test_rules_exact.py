"""The global data access rules, enforced exactly (issue: Trustworthy gradients II).

Each program breaks a rule in a way a pattern matcher cannot see (aliasing, iteration
order, several loops, ndarrays, no_grad kernels, Python writes, captures). Each must give
the float64 finite-difference gradient or an AutodiffRuleError naming the rule, the field
by its Python name, the kernel and the source line.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import engine as ti
from ad_helpers import assert_grad_close, f64  # noqa: F401

EPS = 1e-6


def fd_of(inputs, evaluate):
    """Central differences of `evaluate()` w.r.t. every element of each array in `inputs`
    (fields or ndarrays); evaluate() must compute from scratch."""
    out = []
    for arr in inputs:
        base = arr.to_numpy()
        fd = np.zeros(base.shape)
        for idx in np.ndindex(*base.shape):
            vals = []
            for sign in (1, -1):
                moved = base.copy()
                moved[idx] += sign * EPS
                arr.from_numpy(moved)
                vals.append(evaluate())
            fd[idx] = (vals[0] - vals[1]) / (2 * EPS)
        arr.from_numpy(base)
        out.append(fd)
    return out


def rule_error(run, field_name, kernel_name=None, rule=None, line=None, what='field'):
    with pytest.raises(ti.ad.AutodiffRuleError) as info:
        run()
    message = str(info.value)
    assert f'{what} {field_name} ' in message, message
    if kernel_name:
        assert kernel_name in message, message
    if rule:
        assert f'rule {rule}' in message, message
    if line:
        assert line in message, message
    return message


# --- inside one kernel: errors the run-time check sees --------------------------------
def test_two_top_level_loops_read_then_accumulate(f64):
    n = 4
    b = ti.field(float, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def two_loops():
        for j in range(n):
            loss[None] += b[j] ** 2
        for j in range(n):
            b[j] += 10

    b.from_numpy(np.arange(n, dtype=np.float64))
    rule_error(lambda: _tape(loss, two_loops), 'b', 'two_loops', 1, 'b[j] += 10')


def test_exclusive_branches_of_a_serial_loop_are_not_exclusive_across_iterations(f64):
    n = 3
    b = ti.field(float, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def steps():
        for i in range(n):
            for j in range(3):
                if j == 0:
                    loss[None] += b[i] ** 2
                else:
                    b[i] += 100

    b.from_numpy(np.arange(n, dtype=np.float64) + 1)
    rule_error(lambda: _tape(loss, steps), 'b', 'steps', 1, 'b[i] += 100')


def test_scratch_field_overwritten_in_every_iteration(f64):
    n = 4
    x = ti.field(float, shape=n, needs_grad=True)
    s = ti.field(float, shape=(), needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def scratch():
        for _ in range(1):
            for j in range(n):
                s[None] = x[j]
                loss[None] += s[None] ** 2

    x.from_numpy(np.arange(n, dtype=np.float64) + 1)
    rule_error(lambda: _tape(loss, scratch), 's', 'scratch', None, 's[None] = x[j]')


def test_aliasing_through_an_argument(f64):
    n = 3
    b = ti.field(float, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def alias(m: ti.i32):
        loss[None] += b[1] ** 2
        b[m] += 10

    b.from_numpy(np.arange(n, dtype=np.float64) + 1)
    rule_error(lambda: _tape(loss, lambda: alias(1)), 'b', 'alias', 1, 'b[m] += 10')
    # with m = 2 nothing that was read is changed: the gradient is right
    b.from_numpy(np.arange(n, dtype=np.float64) + 1)
    _tape(loss, lambda: alias(2))
    assert b.grad.to_numpy().tolist() == [0.0, 4.0, 0.0]


def test_lost_gradient_inside_one_kernel(f64):
    n = 3
    x = ti.field(float, shape=n, needs_grad=True)
    tmp = ti.field(float, shape=n)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def through_tmp():
        for i in range(n):
            tmp[i] = x[i] ** 2
            loss[None] += 3 * tmp[i]

    x.from_numpy(np.arange(n, dtype=np.float64) + 1)
    rule_error(lambda: _tape(loss, through_tmp), 'tmp', 'through_tmp')


def test_lost_gradient_through_an_ndarray_without_gradient(f64):
    n = 3
    x = ti.field(float, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)
    scratch = ti.ndarray(ti.f64, shape=n)

    @ti.kernel
    def through(a: ti.types.ndarray()):
        for i in range(n):
            a[i] = x[i] ** 2
            loss[None] += 3 * a[i]

    x.from_numpy(np.arange(n, dtype=np.float64) + 1)
    rule_error(lambda: _tape(loss, lambda: through(scratch)), 'a', 'through', what='ndarray')


# --- across kernels, ndarrays, no_grad kernels, Python writes: the right answer --------
def test_accumulate_then_overwrite_across_kernels(f64):
    n = 3
    x = ti.field(float, shape=n, needs_grad=True)
    y = ti.field(float, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def acc():
        for i in range(n):
            y[i] += 5 * x[i]

    @ti.kernel
    def over():
        for i in range(n):
            y[i] = x[i] ** 2

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += y[i] * (i + 1)

    def forward():
        y.fill(0)
        loss[None] = 0
        acc()
        over()
        total()
        return loss[None]

    x.from_numpy(np.array([0.5, -1.0, 2.0]))
    y.fill(0)
    with ti.ad.Tape(loss):
        acc()
        over()
        total()
    (fd,) = fd_of([x], forward)
    assert_grad_close(x.grad.to_numpy(), fd)


def test_ndarray_read_then_overwritten_by_the_next_kernel(f64):
    n = 3
    a = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def use(arr: ti.types.ndarray()):
        for i in range(n):
            loss[None] += arr[i] ** 3

    @ti.kernel
    def overwrite(arr: ti.types.ndarray()):
        for i in range(n):
            arr[i] = 7.0

    def forward():
        saved = a.to_numpy()
        loss[None] = 0
        use(a)
        overwrite(a)
        use(a)
        value = loss[None]
        a.from_numpy(saved)
        return value

    a.from_numpy(np.array([0.5, -1.0, 2.0]))
    (fd,) = fd_of([a], forward)
    with ti.ad.Tape(loss):
        use(a)
        overwrite(a)
        use(a)
    assert_grad_close(a.grad.to_numpy(), fd)
    assert a.to_numpy().tolist() == [7.0, 7.0, 7.0]       # the forward result stays


def _constant_writes(n):
    x = ti.field(float, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def use():
        for i in range(n):
            loss[None] += x[i] ** 3

    @ti.ad.no_grad
    @ti.kernel
    def reset():
        for i in range(n):
            x[i] = 4.0

    writes = {'no_grad': reset, 'item': lambda: x.__setitem__(1, 4.0),
              'from_numpy': lambda: x.from_numpy(np.full(n, 4.0)), 'fill': lambda: x.fill(4.0)}
    return x, loss, use, writes


@pytest.mark.parametrize('how', ['no_grad', 'item', 'from_numpy', 'fill'])
def test_a_constant_written_over_what_a_launch_read_ends_its_gradient(f64, how):
    x, loss, use, writes = _constant_writes(3)

    def forward():
        saved = x.to_numpy()
        loss[None] = 0
        use()
        writes[how]()
        use()
        value = loss[None]
        x.from_numpy(saved)
        return value

    x.from_numpy(np.array([0.5, -1.0, 2.0]))
    (fd,) = fd_of([x], forward)
    with ti.ad.Tape(loss):
        use()
        writes[how]()
        use()
    assert_grad_close(x.grad.to_numpy(), fd)


@pytest.mark.parametrize('how', ['no_grad', 'fill'])
def test_a_constant_written_before_any_launch_used_it_sets_an_input(f64, how):
    # as in Taichi: .grad is then the gradient with respect to the value written
    x, loss, use, writes = _constant_writes(3)
    with ti.ad.Tape(loss):
        writes[how]()
        use()
    assert x.grad.to_numpy().tolist() == [48.0, 48.0, 48.0]


def test_time_major_rollout_is_valid(f64):
    n, steps = 3, 4
    x = ti.field(float, shape=(n, steps + 1), needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def advance(t: ti.i32):
        for i in range(n):
            x[i, t + 1] = ti.sin(x[i, t]) + 0.5 * x[i, t]

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += x[i, steps] ** 2

    def forward():
        loss[None] = 0
        for t in range(steps):
            advance(t)
        total()
        return loss[None]

    start = np.zeros((n, steps + 1))
    start[:, 0] = [0.3, -0.6, 1.1]
    x.from_numpy(start)
    with ti.ad.Tape(loss):
        for t in range(steps):
            advance(t)
        total()
    grad = x.grad.to_numpy()[:, 0]
    x.from_numpy(start)
    fd = fd_of([x], forward)[0][:, 0]
    assert_grad_close(grad, fd)


# --- captures -----------------------------------------------------------------------
def test_captured_replay_under_a_later_tape_is_checked(f64):
    n = 3
    b = ti.field(float, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def two_loops():
        for j in range(n):
            loss[None] += b[j] ** 2
        for j in range(n):
            b[j] += 10

    step = ti.capture(lambda: two_loops())
    step()                      # captured outside a tape
    b.fill(1)
    rule_error(lambda: _tape(loss, step), 'b', 'two_loops', 1)


def test_captured_outside_a_tape_keeps_the_0d_restore(f64):
    n = 3
    s = ti.field(float, shape=(), needs_grad=True)
    w = ti.field(float, shape=n, needs_grad=True)
    out = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def scaled_sum():
        for i in range(n):
            out[None] += w[i] * s[None]

    @ti.kernel
    def bump():
        for i in range(n):
            s[None] += w[i] ** 2

    @ti.kernel
    def use_scale():
        out[None] += 10 * s[None]

    def forward():
        scaled_sum()
        bump()
        use_scale()

    captured = ti.capture(forward)
    w.from_numpy(np.array([1.0, 2.0, 3.0]))
    s[None] = 2.0
    captured()                  # captured outside any tape
    for _ in range(2):          # checked launch by launch, then replayed
        s[None] = 2.0
        with ti.ad.Tape(out):
            captured()
        assert out[None] == 172.0
        assert w.grad.to_numpy().tolist() == [22.0, 42.0, 62.0]
        assert s.grad[None] == 16.0


def test_captured_replays_zero_ndarray_gradients(f64):
    n = 3
    a = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def use(arr: ti.types.ndarray()):
        for i in range(n):
            loss[None] += arr[i] ** 2

    captured = ti.capture(lambda: use(a))
    a.from_numpy(np.array([1.0, 2.0, 3.0]))
    for _ in range(3):
        with ti.ad.Tape(loss):
            captured()
    assert a.grad.to_numpy().tolist() == [2.0, 4.0, 6.0]


def test_field_names_from_tuple_assignment(f64):
    x, y = ti.field(float, shape=3, needs_grad=True), ti.field(float, shape=3, needs_grad=True)
    assert (x.name, y.name) == ('x', 'y')


def _tape(loss, *kernels):
    with ti.ad.Tape(loss):
        for k in kernels:
            k()


def test_gradient_checker_perturbs_ndarrays(f64):
    n = 3
    a = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def use(arr: ti.types.ndarray()):
        for i in range(n):
            loss[None] += ti.sin(arr[i]) * arr[i]

    @ti.kernel
    def overwrite(arr: ti.types.ndarray()):
        for i in range(n):
            arr[i] = 0.25 * i

    def forward():
        use(a)
        overwrite(a)
        use(a)

    a.from_numpy(np.array([0.5, -1.0, 2.0]))
    report = ti.ad.check_gradients(forward, loss, [a])
    assert report.ok and len(report.entries) == n, str(report)
    a.from_numpy(np.array([0.5, -1.0, 2.0]))
    with ti.ad.Tape(loss, grad_check=[a]):       # raises GradientCheckError on a mismatch
        forward()


def test_every_launch_checked_when_asked():
    ti.init(default_fp=ti.f64, ad_validation=True)      # the default (the suite sets 'always')
    n = 3
    b = ti.field(float, shape=n, needs_grad=True)
    idx = ti.field(ti.i32, shape=n)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def gather():
        ti.loop_config(serialize=True)
        for i in range(n):
            loss[None] += b[i] ** 2
            if i == 0:
                b[idx[0]] += 1.0

    idx.from_numpy(np.array([1, 2, 0], dtype=np.int32))     # no alias: each b[i] read first
    b.from_numpy(np.array([0.5, -1.0, 2.0]))
    for validation in (True, 'always'):
        with ti.ad.Tape(loss, validation=validation):
            gather()
    idx.from_numpy(np.array([0, 2, 1], dtype=np.int32))     # the data now aliases b[0]
    with ti.ad.Tape(loss):                 # the first launch was checked: not again
        gather()
    with pytest.raises(ti.ad.AutodiffRuleError, match='field b '):
        with ti.ad.Tape(loss, validation='always'):
            gather()


def test_two_parallel_iterations_storing_one_element_is_a_race(f64):
    n = 4
    x = ti.field(float, shape=n, needs_grad=True)
    y = ti.field(float, shape=(), needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def last_wins():
        for i in range(n):
            y[None] = x[i]

    @ti.kernel
    def total():
        loss[None] += y[None] ** 2

    rule_error(lambda: _tape(loss, last_wins, total), 'y', 'last_wins')


def test_python_writes_of_ndarray_slices_between_launches(f64):
    n = 4
    a = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def use(arr: ti.types.ndarray()):
        for i in range(n):
            loss[None] += arr[i] ** 3

    def forward():
        saved = a.to_numpy()
        loss[None] = 0
        use(a)
        a[1:3] = 0.5
        use(a)
        value = loss[None]
        a.from_numpy(saved)
        return value

    a.from_numpy(np.array([0.5, -1.0, 2.0, 1.5]))
    (fd,) = fd_of([a], forward)
    for _ in range(2):                      # the second tape follows the memo
        a.from_numpy(np.array([0.5, -1.0, 2.0, 1.5]))
        with ti.ad.Tape(loss):
            use(a)
            a[1:3] = 0.5
            use(a)
        assert_grad_close(a.grad.to_numpy(), fd)


def test_a_tape_leaving_a_remembered_sequence_catches_up_with_its_marks(f64):
    # the second tape repeats the first's launches, then does something new that
    # overwrites what they read: the saves must still be found
    n = 3
    x = ti.field(float, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def use(k: ti.f64):
        for i in range(n):
            loss[None] += k * x[i] ** 3

    @ti.kernel
    def reset(v: ti.f64):
        for i in range(n):
            x[i] = v

    start = np.array([0.5, -1.0, 2.0])
    for tail in ((), (lambda: reset(2.0), lambda: use(1.0))):
        x.from_numpy(start)
        with ti.ad.Tape(loss):
            use(1.0)
            use(2.0)
            for step in tail:
                step()
        np.testing.assert_allclose(x.grad.to_numpy(), 3 * 3 * start ** 2)


# --- found by the adversarial review -------------------------------------------------
def test_one_ndarray_passed_as_two_arguments_is_one_array_to_the_check(f64):
    n = 4
    a = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def square(src: ti.types.ndarray(), dst: ti.types.ndarray()):
        for i in range(n):
            dst[i] = src[i] * src[i] + 1.0

    @ti.kernel
    def total(v: ti.types.ndarray()):
        for i in range(n):
            loss[None] += v[i] * v[i]

    a.from_numpy(np.array([0.5, 1.0, 1.5, 2.0]))
    rule_error(lambda: _tape(loss, lambda: square(a, a), lambda: total(a)), 'dst', 'square', 1,
               what='ndarray')
    b = ti.ndarray(ti.f64, shape=n, needs_grad=True)       # two arrays: fine
    a.from_numpy(np.array([0.5, 1.0, 1.5, 2.0]))
    _tape(loss, lambda: square(a, b), lambda: total(b))
    np.testing.assert_allclose(a.grad.to_numpy(), 4 * a.to_numpy() * (a.to_numpy() ** 2 + 1))


def test_index_data_changed_within_a_tape_gets_the_launch_checked_again():
    ti.init(default_fp=ti.f64, ad_validation=True)      # the default (the suite sets 'always')
    n = 4
    g = ti.field(float, shape=n, needs_grad=True)
    out = ti.field(float, shape=n, needs_grad=True)
    dst = ti.field(ti.i32, shape=n)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in range(n):
            out[i] = g[0] ** 2
        for i in range(n):
            g[dst[i]] += 1.0

    g.from_numpy(np.array([0.5, -1.0, 2.0, 0.3]))
    dst.fill(1)
    with pytest.raises(ti.ad.AutodiffRuleError, match='field g '):
        with ti.ad.Tape(loss):
            k()             # clean: loop 2 adds into g[1]
            dst.fill(0)     # a new step of the sequence: the next launch is checked again
            k()


def test_a_mask_without_gradient_steering_a_branch_is_not_a_lost_gradient(f64):
    n = 4
    p = ti.field(float, shape=n, needs_grad=True)
    q = ti.field(float, shape=n)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def mask():
        for i in range(n):
            q[i] = 2 * p[i]

    @ti.kernel
    def use():
        for i in range(n):
            if q[i] > 0:
                loss[None] += p[i] ** 2

    p.from_numpy(np.array([0.5, -1.0, 0.9, 1.6]))
    _tape(loss, mask, use)
    np.testing.assert_allclose(p.grad.to_numpy(), [1.0, 0.0, 1.8, 3.2])


def test_an_ndarray_without_gradient_between_kernels_is_a_lost_gradient(f64):
    n = 3
    w = ti.field(float, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def write(v: ti.types.ndarray()):
        for i in range(n):
            v[i] = 3 * w[i]

    @ti.kernel
    def read(v: ti.types.ndarray()):
        for i in range(n):
            loss[None] += v[i] * v[i]

    for scratch in (ti.ndarray(ti.f64, shape=n), np.zeros(n)):
        rule_error(lambda: _tape(loss, lambda: write(scratch), lambda: read(scratch)), 'v', 'read',
                   what='ndarray')


def test_reading_one_component_and_writing_another_is_valid(f64):
    n = 3
    v = ti.Vector.field(2, float, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def square():
        for i in range(n):
            v[i][1] = v[i][0] * v[i][0]

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += v[i][1] * v[i][0]

    v.from_numpy(np.array([[0.5, 0.0], [1.0, 0.0], [-0.3, 0.0]]))
    _tape(loss, square, total)
    np.testing.assert_allclose(v.grad.to_numpy()[:, 0], 3 * v.to_numpy()[:, 0] ** 2)


def test_a_rollout_reading_neighbours_of_the_last_step_is_proven_safe(f64):
    n, steps = 6, 3
    x = ti.field(float, shape=(n, steps + 1), needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        for i in range(1, n - 1):
            x[i, t + 1] = x[i, t] + 0.1 * ti.sin(x[i + 1, t] + x[i - 1, t])

    step(0)
    assert step.compiled((0,)).access_summary().unproven == []   # no checked build needed


def test_a_checked_build_from_the_disk_cache_names_the_right_lines(tmp_path):
    # native code names source lines by the kernel's own table (codegen.location_table),
    # so a build another process compiled reports the same lines
    script = tmp_path / 'alias.py'
    script.write_text(
        'import numpy as np\n'
        'import engine as ti\n'
        'ti.init(default_fp=ti.f64)\n'
        'b = ti.field(float, shape=3, needs_grad=True)\n'
        'loss = ti.field(float, shape=(), needs_grad=True)\n'
        '\n'
        '@ti.kernel\n'
        'def alias(m: ti.i32):\n'
        '    loss[None] += b[1] ** 2\n'
        '    b[m] += 10\n'
        '\n'
        'try:\n'
        '    with ti.ad.Tape(loss):\n'
        '        alias(1)\n'
        'except ti.ad.AutodiffRuleError as error:\n'
        '    print(str(error).strip().splitlines()[-1])\n')
    env = dict(os.environ, ENGINE_CACHE_DIR=str(tmp_path / 'cache'))
    outputs = [subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                              check=True).stdout for _ in range(2)]
    assert outputs[0] == outputs[1] and 'field b is read at line 9 and then accumulated into' in outputs[0]
