"""Kernel-language behaviours that follow Taichi 1.7 (found by an adversarial review):
typed constants from dtype calls, ti.ad.no_grad Python functions, template parameters of
ti.funcs passed by reference, str.format and %-formatting in print/assert, atomics on
locals and components, floor/ceil/round with a dtype, ndarray argument checks."""
import numpy as np
import pytest

import engine as ti
from tests.ad_helpers import assert_grad_close, f64, fd_check  # noqa: F401  (f64 is a fixture)

pytestmark = pytest.mark.usefixtures('ti_init')


# --- dtype calls and ti.cast of compile-time constants give typed values -----------------

def test_dtype_call_of_a_constant_is_typed():
    big = 3000000000

    @ti.kernel
    def k() -> ti.types.vector(8, ti.i64):
        a = ti.u8(250)
        a += ti.u8(10)                       # u8 arithmetic wraps
        b = ti.u8(3) - ti.u8(5)
        c = ti.u32(big)
        d = ti.i64(1) << 40                  # i64, not an overflowing i32 shift
        e = ti.cast(3000000, ti.i64) * 1000000
        f = ti.u16(-1)
        g = ti.i8(200)
        h = ti.cast(-1, ti.u32) >> 28        # a logical shift of 0xFFFFFFFF
        return ti.Vector([a, b, c, d, e, f, g, h])

    assert k().to_numpy().tolist() == [4, 254, 3000000000, 1 << 40, 3000000000000, 65535, -56, 15]


def test_unsigned_constants_compare_as_unsigned():
    @ti.kernel
    def k() -> ti.types.vector(4, ti.i32):
        z = ti.cast(-1, ti.u32)
        a = ti.u32(3000000000)
        b: ti.u32 = 0
        b -= 1
        return ti.Vector([z > 5, a > ti.u32(5), b > 5, (z // 2) > 0])

    assert k().to_numpy().tolist() == [1, 1, 1, 1]


def test_float_dtype_call_rounds_a_constant():
    @ti.kernel
    def k() -> ti.f64:
        return ti.f64(ti.f32(0.1))

    assert k() == float(np.float32(0.1))


# --- ti.ad.no_grad on a Python function --------------------------------------------------

def _no_grad_fields():
    x = ti.field(float, shape=3, needs_grad=True)
    y = ti.field(float, shape=3, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def double():
        for i in x:
            y[i] = 2 * x[i]

    @ti.kernel
    def total():
        for i in y:
            loss[None] += y[i] ** 3

    return x, y, loss, double, total


def test_no_grad_function_keeps_its_launches_off_the_backward_pass(f64):
    x, y, loss, double, total = _no_grad_fields()

    @ti.ad.no_grad
    def frozen():
        double()

    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    with ti.ad.Tape(loss):
        frozen()
        total()
    assert x.grad.to_numpy().tolist() == [0.0, 0.0, 0.0]
    assert y.grad.to_numpy().tolist() == [12.0, 48.0, 108.0]     # 3 y^2, as Taichi gives


def test_no_grad_function_overwriting_what_the_tape_read_ends_its_gradient(f64):
    x, y, loss, double, total = _no_grad_fields()

    @ti.kernel
    def reset():
        for i in y:
            y[i] = 4.0

    @ti.ad.no_grad
    def frozen_reset():
        reset()

    def forward():
        double()
        total()
        frozen_reset()
        total()

    x.from_numpy(np.array([0.5, -1.0, 2.0]))
    (g,) = fd_check(loss, [x], forward)
    assert_grad_close(g, 6 * (2 * x.to_numpy()) ** 2)       # only the first total() counts


def test_no_grad_function_results_are_constants(f64):
    x, y, loss, double, total = _no_grad_fields()

    @ti.kernel
    def triple():
        for i in y:
            y[i] = 3 * x[i]

    x.from_numpy(np.array([0.5, -1.0, 2.0]))
    with ti.ad.Tape(loss):
        double()
        total()
        ti.ad.no_grad(lambda: triple())()
        total()
    assert_grad_close(x.grad.to_numpy(), 6 * (2 * x.to_numpy()) ** 2)


def test_grad_replaced_inside_no_grad_is_not_recorded(f64):
    x, y, loss, double, total = _no_grad_fields()
    called = []

    @ti.ad.grad_replaced
    def step():
        double()

    @ti.ad.grad_for(step)
    def step_grad():
        called.append(1)

    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    with ti.ad.Tape(loss):
        ti.ad.no_grad(step)()
        total()
    assert not called and x.grad.to_numpy().tolist() == [0.0, 0.0, 0.0]
