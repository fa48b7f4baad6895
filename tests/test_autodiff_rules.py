"""The global data access rules are checked: a broken rule is an error naming the rule, the
field and the line, never a silently wrong gradient."""
import numpy as np
import pytest

import engine as ti

HERE = __file__.rsplit('/', 1)[-1]


def _line_of(fn, text):
    import inspect
    lines, first = inspect.getsourcelines(fn.fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


def test_seed_docs_func_broke_rule_1_raises_naming_rule_1_and_the_line():
    ti.init()
    N = 16
    x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
    loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
    b = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def func_broke_rule_1():
        # BAD: broke global data access rule #1, reading global field and before mutation is done.
        loss[None] = x[1] * b[None]
        b[None] += 100

    for i in range(N):
        x[i] = i
    b[None] = 10
    with pytest.raises(ti.ad.AutodiffRuleError, match='rule 1') as info:
        with ti.ad.Tape(loss):
            func_broke_rule_1()
    message = str(info.value)
    assert 'field b' in message and HERE in message
    assert f'line {_line_of(func_broke_rule_1, "b[None] += 100")}' in message


def test_seed_docs_func_break_rule_2_raises_naming_rule_2_and_the_line():
    ti.init()
    N = 16
    x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
    loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def func_break_rule_2():
        loss[None] += x[1] ** 2
        # Bad: broke global data access rule #2, it's not an atomic_add.
        loss[None] *= x[2]

    for i in range(N):
        x[i] = i
    loss.grad[None] = 1
    loss[None] = 2
    func_break_rule_2()
    with pytest.raises(ti.ad.AutodiffRuleError, match='rule 2') as info:
        func_break_rule_2.grad()
    message = str(info.value)
    assert 'field loss' in message and HERE in message
    assert f'line {_line_of(func_break_rule_2, "loss[None] *= x[2]")}' in message


def _ewma(correct):
    """The user request's parallel EWMA (with the loss reading the last column)."""
    ti.init(default_fp=ti.f64)
    rows, cols = 3, 4
    data = ti.field(float, shape=(rows, cols), needs_grad=True)
    ewma = ti.field(float, shape=(rows, cols), needs_grad=True)
    sample = ti.field(ti.i32, shape=rows)
    sample_tape = ti.field(ti.i32, shape=(rows, cols))
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def calc_ewma_err():
        for row in range(rows):
            for col in range(cols):
                col_idx = sample[row]
                if col_idx == 0:
                    ewma[row, col_idx] = data[row, col_idx]
                else:
                    ewma[row, col_idx] = ewma[row, col_idx - 1] * 0.5 + data[row, col_idx] * 0.5
                sample[row] += 1  # Data Access Rule violation here

    @ti.kernel
    def prepare_sample_tape():
        for row in range(rows):
            for col in range(cols):
                sample_tape[row, col] = col

    @ti.kernel
    def calc_ewma_ok():
        for row in range(rows):
            for col in range(cols):
                col_idx = sample_tape[row, col]
                if col_idx == 0:
                    ewma[row, col_idx] = data[row, col_idx]
                else:
                    ewma[row, col_idx] = ewma[row, col_idx - 1] * 0.5 + data[row, col_idx] * 0.5

    @ti.kernel
    def calc_loss():
        for row in range(rows):
            loss[None] += ewma[row, cols - 1] ** 2

    values = np.random.default_rng(0).normal(size=(rows, cols))
    data.from_numpy(values)
    prepare_sample_tape()
    with ti.ad.Tape(loss):
        (calc_ewma_ok if correct else calc_ewma_err)()
        calc_loss()
    return values, data.grad.to_numpy()


def test_ewma_wrong_version_raises_and_right_version_gives_the_gradient():
    with pytest.raises(ti.ad.AutodiffRuleError, match='rule 1.*field sample'):
        _ewma(correct=False)
    values, grad = _ewma(correct=True)
    weights = np.array([0.125, 0.125, 0.25, 0.5])        # d ewma[:, -1] / d data
    expected = 2 * (values @ weights)[:, None] * weights[None, :]
    np.testing.assert_allclose(grad, expected, rtol=1e-12)


def _two_kernels(second_body):
    ti.init(default_fp=ti.f64)
    x = ti.field(float, shape=4, needs_grad=True)
    y = ti.field(float, shape=4, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def first():
        for i in range(4):
            y[i] = x[i] ** 2          # written, not read
            loss[None] += x[i]

    @ti.kernel
    def second():
        for i in range(4):
            if ti.static(second_body == 'overwrite'):
                y[i] = 3 * x[i]
            else:
                x[i] += 1.0

    x.from_numpy(np.array([0.5, -1.0, 2.0, 3.0]))
    with ti.ad.Tape(loss):
        first()
        second()
    return x


def test_a_later_kernel_mutating_what_an_earlier_one_read_gets_the_right_gradient():
    # `second` accumulates into x after `first` read it: the tape saves x before `second`
    # and puts it back for `first`'s backward pass (engine/autodiff/rules.py)
    x = _two_kernels('mutate input')
    assert x.to_numpy().tolist() == [1.5, 0.0, 3.0, 4.0]     # the forward result stays
    assert x.grad.to_numpy().tolist() == [1.0, 1.0, 1.0, 1.0]


def test_a_later_kernel_overwriting_what_no_one_read_is_accepted():
    _two_kernels('overwrite')           # y is written twice, never read: nothing to refuse


def test_time_indexed_fields_pass_and_the_check_sees_only_the_slots_used():
    ti.init(default_fp=ti.f64)
    steps = 5
    x = ti.field(float, shape=(steps + 1, 3), needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        for i in range(3):
            x[t + 1, i] = ti.sin(x[t, i]) + x[t, i]

    @ti.kernel
    def total():
        for i in range(3):
            loss[None] += x[steps, i]

    x.from_numpy(np.zeros((steps + 1, 3)))
    x.data[0] = [0.1, 0.2, 0.3]
    with ti.ad.Tape(loss):
        for t in range(steps):
            step(t)
        total()
    xs, expected = np.array([0.1, 0.2, 0.3]), np.ones(3)
    for _ in range(steps):
        expected *= np.cos(xs) + 1
        xs = np.sin(xs) + xs
    np.testing.assert_allclose(x.grad.to_numpy()[0], expected, rtol=1e-12)
    with ti.ad.Tape(loss):                  # writing the last slot a second time is fine:
        for t in range(steps):              # the gradient is that of the last write
            step(t)
        step(steps - 1)
        total()
    np.testing.assert_allclose(x.grad.to_numpy()[0], expected, rtol=1e-12)


def test_a_0d_field_read_then_accumulated_by_a_later_kernel_gets_the_right_gradient():
    ti.init(default_fp=ti.f64)
    x = ti.field(float, shape=4, needs_grad=True)
    z = ti.field(float, shape=4, needs_grad=True)
    s = ti.field(float, shape=(), needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def scale():
        for i in range(4):
            loss[None] += x[i] * s[None]

    @ti.kernel
    def bump():
        for i in range(4):
            s[None] += z[i] ** 2

    @ti.kernel
    def use_again():
        loss[None] += 10 * s[None]

    def run():
        scale()
        bump()
        use_again()

    def value(xv, zv, sv):
        return np.sum(xv * sv) + 10 * (sv + np.sum(zv ** 2))

    xv, zv, sv = np.arange(1.0, 5.0), np.array([0.5, -1, 2, 0.25]), 3.0
    for captured in (False, True):
        x.from_numpy(xv)
        z.from_numpy(zv)
        run_once = ti.capture(run) if captured else run
        for _ in range(2):
            s[None] = sv
            with ti.ad.Tape(loss):
                run_once()
            assert s[None] == sv + np.sum(zv ** 2)          # the forward result is kept
            assert loss[None] == pytest.approx(value(xv, zv, sv))
            np.testing.assert_allclose(x.grad.to_numpy(), np.full(4, sv))
            np.testing.assert_allclose(z.grad.to_numpy(), 10 * 2 * zv)
            assert s.grad[None] == pytest.approx(np.sum(xv) + 10)


def test_validation_can_be_switched_off_per_tape_and_globally():
    for switch in ('tape', 'global'):
        ti.init(ad_validation=switch != 'global')
        x = ti.field(ti.f32, shape=4, needs_grad=True)
        b = ti.field(ti.f32, shape=(), needs_grad=True)
        loss = ti.field(ti.f32, shape=(), needs_grad=True)

        @ti.kernel
        def broke():
            loss[None] = x[1] * b[None]
            b[None] += 100

        x[1] = 1
        b[None] = 10
        with ti.ad.Tape(loss, validation=False if switch == 'tape' else None):
            broke()
        assert x.grad[1] == 110      # the wrong gradient the rule check exists to prevent
