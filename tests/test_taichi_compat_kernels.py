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
