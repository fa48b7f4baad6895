"""Debug mode (ti.init(debug=True)): NaN/Inf produced in a kernel and integer division by
zero are reported with the kernel and the source line; out-of-range indices are covered
in test_core_errors.py."""
import numpy as np
import pytest

import engine as ti


@pytest.fixture
def debug():
    ti.init(debug=True, default_fp=ti.f64)


def test_nan_from_finite_operands_names_the_line(debug):
    x = ti.field(float, shape=4)
    y = ti.field(float, shape=4)

    @ti.kernel
    def logs():
        for i in x:
            a = x[i] * 2.0
            y[i] = ti.log(a) + 1.0

    x.from_numpy(np.array([1.0, 2.0, 3.0, 4.0]))
    logs()
    x.from_numpy(np.array([1.0, 2.0, -1.0, 4.0]))
    with pytest.raises(ti.TaichiRuntimeError, match='kernel logs: NaN or Inf') as info:
        logs()
    assert isinstance(info.value, FloatingPointError)
    assert 'y[i] = ti.log(a) + 1.0' in str(info.value) and 'test_debug_mode.py' in str(info.value)


def test_inf_from_division_by_zero(debug):
    x = ti.field(float, shape=2)

    @ti.kernel
    def inverse():
        for i in x:
            x[i] = 1.0 / x[i]

    with pytest.raises(FloatingPointError, match='inverse'):
        inverse()


def test_nan_already_in_a_field_is_not_blamed_on_the_kernel(debug):
    x = ti.field(float, shape=2)

    @ti.kernel
    def double():
        for i in x:
            x[i] = x[i] * 2.0

    x.from_numpy(np.array([np.nan, 1.0]))
    double()
    assert np.isnan(x[0]) and x[1] == 2.0


def test_nan_in_an_adjoint_kernel(debug):
    x = ti.field(float, shape=1, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def root():
        loss[None] = ti.sqrt(x[0])

    x[0] = 0.0
    with pytest.raises(FloatingPointError, match='root'):
        with ti.ad.Tape(loss):
            root()


def test_integer_division_by_zero(debug):
    n = ti.field(ti.i32, shape=3)

    @ti.kernel
    def divide() -> ti.i32:
        total = 0
        for i in range(3):
            total += 7 // n[i] + 7 % (n[i] + 1)
        return total

    n.from_numpy(np.array([1, 2, 3]))
    assert divide() == 7 + 3 + 2 + 1 + 1 + 3
    n[1] = 0
    with pytest.raises(ZeroDivisionError, match='division or modulo by zero') as info:
        divide()
    assert '7 // n[i]' in str(info.value)


def test_release_mode_does_not_check_or_crash():
    ti.init(debug=False, default_fp=ti.f64)
    n = ti.field(ti.i32, shape=1)
    x = ti.field(float, shape=1)

    @ti.kernel
    def risky():
        n[0] = 7 // n[0]
        x[0] = ti.log(x[0] - 1.0)

    risky()          # no error, no trap: the values are unspecified
    assert np.isnan(x[0])


def test_integer_selects_compile_in_debug_mode(debug):
    # the NaN/Inf check is for floats: an integer select has none (it failed to compile)
    o = ti.field(ti.i32, shape=4)

    @ti.kernel
    def k(a: ti.i32, b: ti.i32):
        o[0] = ti.select(a > b, a, b)
        o[1] = a if a < b else b
        o[2] = ti.cast(a, ti.u8) if a > 0 else ti.cast(b, ti.u8)
        o[3] = ti.select(ti.Vector([a > 0, b > 0]), ti.Vector([1, 2]), ti.Vector([3, 4]))[1]

    k(3, 2)
    assert o.to_numpy().tolist() == [3, 2, 3, 2]
