"""ti.init / ti.reset, scalar data types, type promotion and integer/float arithmetic semantics."""
import numpy as np
import pytest

import engine as ti

pytestmark = pytest.mark.usefixtures('ti_init')

DTYPE_NAMES = ['f32', 'f64', 'i8', 'i16', 'i32', 'i64', 'u8', 'u16', 'u32', 'u64']
ALL_DTYPES = [getattr(ti, name) for name in DTYPE_NAMES]
NP_OF = {ti.f32: np.float32, ti.f64: np.float64, ti.i8: np.int8, ti.i16: np.int16,
         ti.i32: np.int32, ti.i64: np.int64, ti.u8: np.uint8, ti.u16: np.uint16,
         ti.u32: np.uint32, ti.u64: np.uint64}
BITS = {ti.i8: 8, ti.i16: 16, ti.i32: 32, ti.i64: 64, ti.u8: 8, ti.u16: 16, ti.u32: 32, ti.u64: 64}
SIGNED = {ti.i8, ti.i16, ti.i32, ti.i64}


def wrap(value, dt):
    """A Python int reduced to the range of integer type dt (two's complement)."""
    bits = BITS[dt]
    value %= 1 << bits
    if dt in SIGNED and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


# --------------------------------------------------------------------------- kernels

@ti.kernel
def k_fill_index(x: ti.template()):
    for i in x:
        x[i] = i * 3 + 1


@ti.kernel
def k_div(a: int, b: int) -> float:
    return a / b


@ti.kernel
def k_affine(x: ti.template()):
    for i in x:
        x[i] = x[i] * 2 + 1


@ti.kernel
def k_promote(i: ti.i32, f: ti.f32, d: ti.f64, big: ti.i32, one64: ti.i64, out: ti.template()):
    out[0] = i + f               # i32 + f32 -> f32
    out[1] = f + d               # f32 + f64 -> f64
    out[2] = f + 1               # f32 + int literal stays f32
    out[3] = (big + i) * 1.0     # i32 * float literal -> default_fp
    out[4] = big + i + one64     # (i32 + i32) + i64 -> i64 (no i32 wrap)
    out[5] = f * 1               # f32 * int literal stays f32 (exact)
    g = f
    g += 1                       # augmented assign keeps the f32 variable type
    out[6] = g


@ti.kernel
def k_intdiv(a: ti.i32, b: ti.i32, out: ti.template()):
    out[0] = a // b
    out[1] = a % b
    out[2] = a / b


@ti.kernel
def k_floatdiv(a: ti.f64, b: ti.f64, out: ti.template()):
    out[0] = a // b
    out[1] = a % b
    out[2] = a / b


@ti.kernel
def k_const_div(out: ti.template()):
    out[0] = -7 // 2
    out[1] = -7 % 2
    out[2] = 7 % -2
    out[3] = 7 // -2
    out[4] = -7 / 2
    out[5] = 7 // 2
    out[6] = -7.5 // 2.0
    out[7] = -7.5 % 2.0


@ti.kernel
def k_wrap_add(x: ti.i32) -> ti.i32:
    return x + 1


@ti.kernel
def k_wrap_mul(x: ti.i32) -> ti.i32:
    return x * 2


@ti.kernel
def k_field_inc(x: ti.template()):
    x[None] += 1


@ti.kernel
def k_cast(x: ti.f32, iout: ti.template(), fout: ti.template()):
    iout[0] = ti.cast(x, ti.i32)
    iout[1] = ti.cast(-x, ti.i32)
    iout[2] = ti.cast(x * 10.0, ti.i64)
    fout[0] = ti.cast(ti.cast(x, ti.i32), ti.f32)
    fout[1] = ti.cast(7, ti.f64) / 2


@ti.kernel
def k_augassign(iin: ti.template(), fin: ti.template(), iout: ti.template(), fout: ti.template()):
    a = iin[0]           # 17
    a += 3
    iout[0] = a          # 20
    a -= 5
    iout[1] = a          # 15
    a *= 2
    iout[2] = a          # 30
    a //= 4
    iout[3] = a          # 7
    a %= 4
    iout[4] = a          # 3
    a **= 3
    iout[5] = a          # 27
    b = -iin[0]          # -17
    b //= 5
    iout[6] = b          # -4
    c = -iin[0]
    c %= 5
    iout[7] = c          # 3
    f = fin[0]           # 1.5
    f /= 2.0
    fout[0] = f          # 0.75
    f += 1
    fout[1] = f          # 1.75
    f *= 4.0
    fout[2] = f          # 7.0
    f -= 0.5
    fout[3] = f          # 6.5
    f **= 2
    fout[4] = f          # 42.25
    f //= 4.0
    fout[5] = f          # 10.0
    f %= 3.0
    fout[6] = f          # 1.0
    iin[1] += 5
    iin[2] -= 5
    iin[3] *= 3
    iin[4] //= 2
    iin[5] %= 4
    fin[1] /= 4.0
    fin[2] **= 2


# --------------------------------------------------------------------------- tests

def test_dtypes_exported():
    for name in DTYPE_NAMES:
        assert getattr(ti, name) is not None
    assert len({id(t) for t in ALL_DTYPES}) == 10


def test_init_default_types_for_python_annotations():
    ti.init(arch=ti.cpu, default_fp=ti.f64, default_ip=ti.i64, debug=False,
            cpu_max_num_threads=2, random_seed=0)
    x = ti.field(float, shape=3)
    y = ti.field(int, shape=3)
    assert x.dtype == ti.f64
    assert y.dtype == ti.i64
    assert x.to_numpy().dtype == np.float64
    assert y.to_numpy().dtype == np.int64
    ti.init(arch=ti.cpu)
    x = ti.field(float, shape=3)
    y = ti.field(int, shape=3)
    assert x.dtype == ti.f32
    assert y.dtype == ti.i32
    assert x.to_numpy().dtype == np.float32
    assert y.to_numpy().dtype == np.int32


def test_init_recompiles_kernels_with_new_defaults():
    ti.init(arch=ti.cpu, default_fp=ti.f32)
    a = k_div(1, 3)
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    b = k_div(1, 3)
    ti.init(arch=ti.cpu, default_fp=ti.f32)
    c = k_div(1, 3)
    assert a == float(np.float32(1) / np.float32(3))
    assert b == 1 / 3
    assert c == a
    assert k_div(7, 2) == 3.5
    assert k_div(-7, 2) == -3.5


def test_init_resets_fields_and_kernels_still_work():
    x = ti.field(ti.i32, shape=5)
    k_fill_index(x)
    assert x.to_numpy().tolist() == [1, 4, 7, 10, 13]
    ti.init(arch=ti.cpu)
    y = ti.field(ti.i32, shape=7)
    assert y.to_numpy().tolist() == [0] * 7
    k_fill_index(y)
    assert y.to_numpy().tolist() == [1, 4, 7, 10, 13, 16, 19]


def test_reset_then_init():
    x = ti.field(ti.i32, shape=4)
    k_fill_index(x)
    ti.reset()
    ti.init(arch=ti.cpu)
    y = ti.field(ti.i32, shape=3)
    k_fill_index(y)
    assert y.to_numpy().tolist() == [1, 4, 7]


@pytest.mark.parametrize('dt', ALL_DTYPES, ids=DTYPE_NAMES)
def test_every_dtype_roundtrip_and_arithmetic(dt):
    npdt = NP_OF[dt]
    x = ti.field(dt, shape=6)
    assert x.dtype == dt
    assert x.to_numpy().dtype == npdt
    if dt in (ti.f32, ti.f64):
        vals = np.array([-2.5, 0.0, 1.25, 3.0, 1e3, -0.125], dtype=npdt)
        expected = vals * npdt(2) + npdt(1)
    else:
        bits = BITS[dt]
        lo = -(1 << (bits - 1)) if dt in SIGNED else 0
        hi = (1 << (bits - 1)) - 1 if dt in SIGNED else (1 << bits) - 1
        pyvals = [lo, hi, 0, 1, hi // 3, (lo + hi) // 2 + 5]
        vals = np.array(pyvals, dtype=npdt)
        expected = np.array([wrap(v * 2 + 1, dt) for v in pyvals], dtype=npdt)
    x.from_numpy(vals)
    np.testing.assert_array_equal(x.to_numpy(), vals)
    k_affine(x)
    got = x.to_numpy()
    assert got.dtype == npdt
    np.testing.assert_array_equal(got, expected)


def test_promotion_rules_default_f32():
    ti.init(arch=ti.cpu, default_fp=ti.f32)
    out = ti.field(ti.f64, shape=7)
    k_promote(1, 16777216.0, 1.0, 16777216, 1, out)
    r = out.to_numpy()
    assert r[0] == 16777216.0      # computed in f32: 16777217 is not representable
    assert r[1] == 16777217.0      # computed in f64
    assert r[2] == 16777216.0      # f32 + 1 stays f32
    assert r[3] == 16777216.0      # int * 1.0 -> default_fp (f32)
    assert r[4] == 16777218.0      # i32 + i64 in i64
    assert r[5] == 16777216.0
    assert r[6] == 16777216.0


def test_promotion_rules_default_f64():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    out = ti.field(ti.f64, shape=7)
    k_promote(1, 16777216.0, 1.0, 16777216, 1, out)
    r = out.to_numpy()
    assert r[0] == 16777216.0      # i32 + f32 is still f32, whatever default_fp is
    assert r[1] == 16777217.0
    assert r[2] == 16777216.0      # f32 + 1 stays f32
    assert r[3] == 16777217.0      # int * 1.0 -> default_fp (f64)
    assert r[4] == 16777218.0
    assert r[6] == 16777216.0


def test_promotion_i32_plus_i64_does_not_wrap():
    out = ti.field(ti.f64, shape=7)
    k_promote(1, 0.0, 0.0, 2147483646, 1, out)
    assert out[4] == 2147483648.0


@pytest.mark.parametrize('a,b', [(-7, 2), (7, -2), (7, 2), (-7, -2), (-8, 2), (0, 3), (-1, 5)])
def test_int_floordiv_mod_truediv_python_semantics(a, b):
    out = ti.field(ti.f64, shape=3)
    k_intdiv(a, b, out)
    assert out[0] == a // b
    assert out[1] == a % b
    assert out[2] == float(np.float32(a) / np.float32(b))     # int / int -> default_fp (f32)


def test_int_floordiv_mod_into_int_field():
    out = ti.field(ti.i32, shape=3)
    k_intdiv(-7, 2, out)
    assert out.to_numpy()[:2].tolist() == [-4, 1]
    k_intdiv(7, -2, out)
    assert out.to_numpy()[:2].tolist() == [-4, -1]


@pytest.mark.parametrize('a,b', [(-7.5, 2.0), (7.5, -2.0), (7.5, 2.0), (-7.5, -2.0), (5.25, 0.5)])
def test_float_floordiv_mod_python_semantics(a, b):
    out = ti.field(ti.f64, shape=3)
    k_floatdiv(a, b, out)
    assert out[0] == a // b
    assert out[1] == pytest.approx(a % b, abs=1e-12)
    assert out[2] == a / b


@ti.kernel
def k_divmod_fields(a: ti.template(), b: ti.template(), q: ti.template(), r: ti.template()):
    for i in a:
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]


@pytest.mark.parametrize('dt', ALL_DTYPES, ids=DTYPE_NAMES)
def test_floordiv_mod_every_dtype(dt):
    npdt = NP_OF[dt]
    if dt in (ti.f32, ti.f64):
        pairs = [(-7.5, 2.0), (7.5, -2.0), (7.5, 2.0), (-7.5, -2.0), (-6.0, 3.0), (5.25, 0.5), (-0.5, 4.0)]
    elif dt in SIGNED:
        pairs = [(-7, 2), (7, -2), (7, 2), (-7, -2), (-8, 2), (0, 3), (-1, 5), (-100, 7), (100, -7)]
    else:
        pairs = [(7, 2), (8, 2), (0, 3), (200, 7), (255, 16), (1, 5)]
    a = ti.field(dt, shape=len(pairs))
    b = ti.field(dt, shape=len(pairs))
    q = ti.field(dt, shape=len(pairs))
    r = ti.field(dt, shape=len(pairs))
    a.from_numpy(np.array([p[0] for p in pairs], dtype=npdt))
    b.from_numpy(np.array([p[1] for p in pairs], dtype=npdt))
    k_divmod_fields(a, b, q, r)
    assert q.to_numpy().tolist() == [x // y for x, y in pairs]
    assert r.to_numpy().tolist() == [x % y for x, y in pairs]


def test_constant_division_semantics():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    out = ti.field(ti.f64, shape=8)
    k_const_div(out)
    assert out.to_numpy().tolist() == [-4.0, 1.0, -1.0, -4.0, -3.5, 3.0, -4.0, 0.5]


def test_i32_overflow_wraps():
    assert k_wrap_add(2147483647) == -2147483648
    assert k_wrap_mul(2 ** 30) == -2 ** 31
    assert k_wrap_mul(-2 ** 30 - 1) == 2 ** 31 - 2
    x = ti.field(ti.i32, shape=())
    x[None] = 2147483647
    k_field_inc(x)
    assert x[None] == -2147483648


def test_cast_truncates_toward_zero():
    iout = ti.field(ti.i64, shape=3)
    fout = ti.field(ti.f64, shape=2)
    k_cast(2.7, iout, fout)
    assert iout.to_numpy().tolist() == [2, -2, 27]
    assert fout.to_numpy().tolist() == [2.0, 3.5]
    k_cast(-0.5, iout, fout)
    assert iout.to_numpy().tolist() == [0, 0, -5]
    assert fout[0] == 0.0


def test_true_division_of_ints_gives_default_fp(fp):
    got = k_div(1, 3)
    if fp == ti.f32:
        assert got == float(np.float32(1) / np.float32(3))
    else:
        assert got == 1 / 3
    assert k_div(1, 4) == 0.25


def test_augmented_assignments(fp):
    iin = ti.field(ti.i32, shape=6)
    fin = ti.field(fp, shape=3)
    iout = ti.field(ti.i32, shape=8)
    fout = ti.field(fp, shape=7)
    iin.from_numpy(np.array([17, 10, 10, 10, -7, -7], dtype=np.int32))
    fin.from_numpy(np.array([1.5, 3.0, 3.0]))
    k_augassign(iin, fin, iout, fout)
    assert iout.to_numpy().tolist() == [20, 15, 30, 7, 3, 27, -4, 3]
    assert fout.to_numpy().tolist() == [0.75, 1.75, 7.0, 6.5, 42.25, 10.0, 1.0]
    assert iin.to_numpy().tolist() == [17, 15, 5, 30, -4, 1]
    assert fin.to_numpy().tolist() == [1.5, 0.75, 9.0]


@ti.kernel
def k_mixed_int_float(n: ti.i32, out: ti.template()):
    out[0] = ti.sqrt(n)              # math on an int gives default_fp
    out[1] = n ** 0.5
    out[2] = ti.max(n, 0.5)          # int vs float literal compares as float
    out[3] = 1.0 if n < 0.5 else 0.0
    out[4] = n // 2.0                # int // float is a float floor division
    out[5] = -n // 2.0
    out[6] = n % 2.5
    out[7] = n * 0.1


@pytest.mark.parametrize('n', [0, 2, 7])
def test_mixed_int_float_operations(fp, n):
    out = ti.field(ti.f64, shape=8)
    k_mixed_int_float(n, out)
    r = out.to_numpy()
    if fp == ti.f32:
        f = np.float32
        expected = [np.sqrt(f(n)), f(n) ** f(0.5), max(n, 0.5), float(n < 0.5), n // 2.0, -n // 2.0,
                    n % 2.5, f(n) * f(0.1)]
        np.testing.assert_allclose(r, np.array(expected, dtype=np.float64), rtol=1e-6, atol=1e-7)
        assert r[7] == float(f(n) * f(0.1))          # computed in f32, not in f64
    else:
        expected = [np.sqrt(n), n ** 0.5, max(n, 0.5), float(n < 0.5), n // 2.0, -n // 2.0, n % 2.5, n * 0.1]
        np.testing.assert_allclose(r, expected, rtol=1e-15, atol=0)


def test_cast_to_python_float_and_int_inside_a_kernel(fp):
    x = ti.field(float, shape=4)
    n = ti.field(ti.i32, shape=4)
    v = ti.Vector.field(2, float, shape=4)

    @ti.kernel
    def convert():
        for i in range(4):
            x[i] = ti.cast(i, float) / 2
            n[i] = ti.cast(x[i] * 3, int)
            v[i] = ti.Vector([i, i + 1]).cast(float) / 4

    convert()
    assert x.to_numpy().tolist() == [0, 0.5, 1, 1.5]
    assert n.to_numpy().tolist() == [0, 1, 3, 4]
    assert v.to_numpy()[1].tolist() == [0.25, 0.5]
    assert x.dtype == fp


def test_cast_to_something_that_is_not_a_type_is_a_clear_error():
    ti.init()
    x = ti.field(float, shape=2)

    @ti.kernel
    def bad():
        for i in range(2):
            x[i] = ti.cast(i, 'fast')

    with pytest.raises(ti.TaichiTypeError, match="ti.cast: 'fast' is not a data type"):
        bad()


def test_cast_of_a_python_number_in_a_kernel_is_typed_and_converted_like_a_value():
    ti.init(arch=ti.cpu, default_fp=ti.f64)

    @ti.kernel
    def casts(t: ti.f64) -> ti.types.vector(6, ti.f64):
        a = ti.cast(0, ti.u8)
        a = 300                      # a is a u8 local: stored as 44
        return ti.Vector([ti.cast(300, ti.u8), ti.cast(150 * 2, ti.u8), ti.cast(3e9, ti.i32),
                          ti.cast(-1.0, ti.u8), (ti.cast(0.1, ti.f32) - t) * 1e9, a])

    got = casts(0.1)
    np.testing.assert_allclose(got.to_numpy(), [44, 44, 2147483647, 0,
                                                (float(np.float32(0.1)) - 0.1) * 1e9, 44])
    assert ti.cast(300, ti.u8) == 44 and ti.cast(float('nan'), ti.i32) == 0
