"""Laziness of adjoint compilation, and the errors of the reverse-mode autodiff.

* a forward launch compiles the kernel once; its adjoint is compiled only by
  kernel.grad() or at the exit of a Tape that recorded it, once;
* a loss that is not a 0-D field is refused by ti.ad.Tape;
* constructs the adjoint pass cannot handle (the old value of an atomic, ...)
  raise engine.core.errors.AutodiffError (engine/autodiff/refusals.py) naming the user's file and line, also from
  inside loops with `break`; `while`, `break` and `continue` differentiate.
"""
import inspect

import numpy as np
import pytest

import engine as ti
from engine.runtime import pipeline
from engine.core.errors import AutodiffError

from ad_helpers import f64  # noqa: F401

pytestmark = pytest.mark.usefixtures('f64')

N = 8


def _fields():
    x = ti.field(ti.f64, shape=N, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.linspace(0.1, 0.8, N))
    return x, loss


def _line_of(fn, text):
    """Absolute line number of the first source line of fn containing `text`."""
    lines, first = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if text in line:
            return first + k
    raise AssertionError(f'{text!r} not in the source of {fn.__name__}')


# --------------------------------------------------------------------------- lazy compilation

def test_adjoint_compiled_only_by_kernel_grad():
    x, loss = _fields()

    @ti.kernel
    def compute():
        for i in range(N):
            loss[None] += x[i] * x[i]

    c0 = pipeline.compile_count
    compute()
    assert pipeline.compile_count == c0 + 1          # the forward kernel, nothing else
    compute()
    compute()
    assert pipeline.compile_count == c0 + 1
    loss.grad[None] = 1.0
    compute.grad()
    assert pipeline.compile_count == c0 + 2          # the adjoint, on first use
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * x.to_numpy())
    compute.grad()
    assert pipeline.compile_count == c0 + 2          # not again
    np.testing.assert_allclose(x.grad.to_numpy(), 4 * x.to_numpy())
    with ti.ad.Tape(loss):
        compute()
    assert pipeline.compile_count == c0 + 2          # the Tape reuses both
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * x.to_numpy())


def test_adjoint_compiled_at_tape_exit():
    x, loss = _fields()

    @ti.kernel
    def compute(scale: ti.f64):
        for i in range(N):
            loss[None] += scale * ti.sin(x[i])

    c0 = pipeline.compile_count
    with ti.ad.Tape(loss):
        compute(2.0)
        compute(0.5)
        assert pipeline.compile_count == c0 + 1      # recorded, adjoint not compiled yet
    assert pipeline.compile_count == c0 + 2          # compiled once at exit, replayed twice
    np.testing.assert_allclose(x.grad.to_numpy(), 2.5 * np.cos(x.to_numpy()), rtol=1e-12)
    with ti.ad.Tape(loss):
        compute(1.0)
    assert pipeline.compile_count == c0 + 2          # a second Tape compiles nothing
    np.testing.assert_allclose(x.grad.to_numpy(), np.cos(x.to_numpy()), rtol=1e-12)


def test_forward_launches_never_compile_adjoints():
    x, loss = _fields()
    y = ti.field(ti.f64, shape=N, needs_grad=True)

    @ti.kernel
    def a():
        for i in range(N):
            y[i] = x[i] * 2.0

    @ti.kernel
    def b():
        for i in range(N):
            loss[None] += y[i] * y[i]

    @ti.ad.no_grad
    @ti.kernel
    def side():
        for i in range(N):
            y[i] += 0.0

    c0 = pipeline.compile_count
    for _ in range(5):
        a()
        b()
        side()
    assert pipeline.compile_count == c0 + 3
    with ti.ad.Tape(loss):
        a()
        b()
        side()                                      # skipped by the tape: no adjoint
    assert pipeline.compile_count == c0 + 5
    np.testing.assert_allclose(x.grad.to_numpy(), 8 * x.to_numpy(), rtol=1e-12)


def test_adjoint_compiled_per_template_specialization():
    x, loss = _fields()
    z = ti.field(ti.f64, shape=N, needs_grad=True)
    z.from_numpy(np.linspace(1.0, 2.0, N))

    @ti.kernel
    def compute(f: ti.template()):
        for i in range(N):
            loss[None] += f[i] * f[i] * f[i]

    c0 = pipeline.compile_count
    with ti.ad.Tape(loss):
        compute(x)
        compute(z)
    assert pipeline.compile_count == c0 + 4
    np.testing.assert_allclose(x.grad.to_numpy(), 3 * x.to_numpy() ** 2, rtol=1e-12)
    np.testing.assert_allclose(z.grad.to_numpy(), 3 * z.to_numpy() ** 2, rtol=1e-12)
    compute.grad(x)
    compute.grad(z)
    assert pipeline.compile_count == c0 + 4


# --------------------------------------------------------------------------- Tape errors

@pytest.mark.parametrize('shape', [(N,), (2, 3)])
def test_tape_rejects_a_loss_that_is_not_0d(shape):
    x, _ = _fields()
    loss = ti.field(ti.f64, shape=shape, needs_grad=True)
    loss.fill(7.0)

    @ti.kernel
    def compute():
        for i in range(N):
            loss[0] += x[i]

    with pytest.raises((ValueError, RuntimeError), match='0-D') as info:
        with ti.ad.Tape(loss):
            compute()
    assert str(shape) in str(info.value)
    assert (loss.to_numpy() == 7.0).all()           # refused before touching anything
    # the failed Tape is not left recording: a correct one works afterwards
    scalar = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def ok():
        for i in range(N):
            scalar[None] += x[i] * 3.0

    with ti.ad.Tape(scalar):
        ok()
    assert (x.grad.to_numpy() == 3.0).all()


def test_tape_rejects_a_loss_without_gradient():
    loss = ti.field(ti.f64, shape=())
    with pytest.raises((ValueError, RuntimeError), match='needs_grad'):
        with ti.ad.Tape(loss):
            pass


# --------------------------------------------------------------------------- AutodiffError

def _assert_points_at(err, fn, text):
    message = str(err)
    assert __file__ in message, message
    assert f'line {_line_of(fn, text)}' in message, message


def test_while_loop_differentiates_by_kernel_grad_and_by_tape():
    """Formerly refused; the gradients are checked in depth in test_autodiff_control_flow.py."""
    x, loss = _fields()

    @ti.kernel
    def compute():
        for i in range(N):
            s = x[i]
            while s < 10.0:
                s = s * 2.0
            loss[None] += s

    x0 = x.to_numpy()
    expected = 2.0 ** np.ceil(np.log2(10.0 / x0))      # d s / d x: the number of doublings
    compute()
    assert loss[None] == pytest.approx((x0 * expected).sum())
    loss.grad[None] = 1.0
    compute.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), expected, rtol=1e-12)
    with ti.ad.Tape(loss):
        compute()
    np.testing.assert_allclose(x.grad.to_numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize('keyword', ['break', 'continue'])
def test_break_and_continue_differentiate(keyword):
    x, loss = _fields()

    if keyword == 'break':
        @ti.kernel
        def compute():
            for i in range(N):
                s = x[i]
                for _ in range(10):
                    s = s * 1.5
                    if s > 2.0:
                        break
                loss[None] += s
    else:
        @ti.kernel
        def compute():
            for i in range(N):
                s = x[i]
                for k in range(10):
                    if k % 2 == 0:
                        continue
                    s = s * 1.5
                loss[None] += s

    x0 = x.to_numpy()
    trips = np.ceil(np.log(2.0 / x0) / np.log(1.5) + 1e-12) if keyword == 'break' else 5
    with ti.ad.Tape(loss):
        compute()
    np.testing.assert_allclose(x.grad.to_numpy(), 1.5 ** trips, rtol=1e-12)


def test_autodiff_error_inside_a_loop_with_break_points_at_its_line():
    x, loss = _fields()
    z = ti.field(ti.f64, shape=N, needs_grad=True)

    @ti.kernel
    def compute():
        for i in range(N):
            s = x[i]
            while True:
                if s > 1.0:
                    break
                old = ti.atomic_add(z[i], s)
                s = s * 2.0 + old
            loss[None] += s

    compute()
    with pytest.raises(AutodiffError, match='old value') as info:
        compute.grad()
    _assert_points_at(info.value, compute.fn, 'old = ti.atomic_add')


def test_autodiff_error_is_a_compilation_error():
    assert issubclass(AutodiffError, ti.TaichiCompilationError)


def test_atomic_old_value_raises_autodiff_error_with_location():
    x, loss = _fields()
    z = ti.field(ti.f64, shape=N, needs_grad=True)

    @ti.kernel
    def compute():
        for i in range(N):
            old = ti.atomic_add(z[i], x[i])
            loss[None] += old * x[i]

    compute()
    with pytest.raises(AutodiffError, match='old value') as info:
        compute.grad()
    _assert_points_at(info.value, compute.fn, 'old = ti.atomic_add')


def test_float_atomic_max_raises_autodiff_error():
    x, loss = _fields()

    @ti.kernel
    def compute():
        for i in range(N):
            ti.atomic_max(loss[None], x[i])

    compute()
    assert loss[None] == pytest.approx(x.to_numpy().max())
    with pytest.raises(AutodiffError, match='atomic_max') as info:
        compute.grad()
    _assert_points_at(info.value, compute.fn, 'ti.atomic_max(loss[None], x[i])')


def test_reading_a_kernel_scope_accumulator_after_its_loop_raises_autodiff_error():
    x, loss = _fields()

    @ti.kernel
    def compute():
        total = 0.0
        for i in range(N):
            total += x[i] * x[i]
        loss[None] = total * 2.0

    compute()
    assert loss[None] == pytest.approx(2 * (x.to_numpy() ** 2).sum())
    with pytest.raises(AutodiffError) as info:
        with ti.ad.Tape(loss):
            compute()
    _assert_points_at(info.value, compute.fn, 'loss[None] = total * 2.0')


def test_random_numbers_in_a_differentiated_kernel():
    """ti.random() in a differentiated kernel: the adjoint must either use the very
    numbers the forward launch drew, or refuse (Taichi refuses) — never silently
    recompute new ones."""
    x, loss = _fields()
    drawn = ti.field(ti.f64, shape=N)

    @ti.kernel
    def compute():
        for i in range(N):
            r = ti.random()
            drawn[i] = r
            loss[None] += x[i] * r

    try:
        with ti.ad.Tape(loss):
            compute()
    except AutodiffError as err:
        _assert_points_at(err, compute.fn, 'ti.random()')
        return
    np.testing.assert_allclose(x.grad.to_numpy(), drawn.to_numpy(), rtol=1e-12,
                               err_msg='the adjoint used other random numbers than the forward launch')


def test_nested_tapes_are_refused():
    x, loss = _fields()
    other = ti.field(ti.f64, shape=(), needs_grad=True)
    with pytest.raises(RuntimeError, match='nested'):
        with ti.ad.Tape(loss):
            with ti.ad.Tape(other):
                pass
    with ti.ad.Tape(loss):                          # and the outer one was not left recording
        pass


def test_an_exception_inside_a_tape_skips_the_adjoints_and_stops_recording():
    x, loss = _fields()

    @ti.kernel
    def compute():
        for i in range(N):
            loss[None] += x[i] * 2.0

    with pytest.raises(KeyError):
        with ti.ad.Tape(loss):
            compute()
            raise KeyError('user error')
    assert (x.grad.to_numpy() == 0).all()
    with ti.ad.Tape(loss):
        compute()
    assert (x.grad.to_numpy() == 2.0).all()


def test_tape_clear_gradients_option_and_clear_all_gradients():
    x, loss = _fields()

    @ti.kernel
    def compute():
        for i in range(N):
            loss[None] += x[i] * x[i]

    with ti.ad.Tape(loss):
        compute()
    with ti.ad.Tape(loss, clear_gradients=False):   # accumulates onto the previous gradients
        compute()
    np.testing.assert_allclose(x.grad.to_numpy(), 4 * x.to_numpy())
    with ti.ad.Tape(loss):                          # clears first (the default)
        compute()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * x.to_numpy())
    ti.ad.clear_all_gradients()
    assert (x.grad.to_numpy() == 0).all() and loss.grad[None] == 0
