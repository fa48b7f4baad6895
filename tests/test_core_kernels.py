"""Kernel arguments and returns, ti.func, compile-time Python, statements, control flow and loops."""
import numpy as np
import pytest

import engine as ti

pytestmark = pytest.mark.usefixtures('ti_init')

SCALE = 3
FLAG_ON = True
OFFSETS = [1.0, 2.5, 4.0]


# --------------------------------------------------------------------------- arguments and returns

@ti.kernel
def k_scalar_args(x: ti.f32, n: ti.i32) -> ti.f32:
    return x * n + 0.5


@ti.kernel
def k_float_arg(v: float) -> float:
    return v * 3.0


@ti.kernel
def k_int_arg(n: int) -> int:
    return n * 2 + 1


@ti.kernel
def k_typed_args(a: ti.i64, b: ti.f64, c: ti.u8, d: ti.i8) -> ti.f64:
    return a + b + c + d


@ti.kernel
def k_no_return(x: ti.template(), v: ti.i32):
    x[None] = v


@ti.kernel
def k_return_field(x: ti.template()) -> ti.i32:
    return x[None] * 2


@ti.kernel
def k_template_int(x: ti.template(), n: ti.template()):
    for i in range(n):
        x[i] = n * 10 + i


def test_scalar_args_and_return():
    assert k_scalar_args(1.5, 3) == 5.0
    assert k_scalar_args(-2.0, 4) == -7.5
    assert isinstance(k_scalar_args(1.0, 1), float)
    assert k_scalar_args(2, 2) == 4.5          # a Python int for an f32 arg is converted


def test_python_float_annotation_means_default_fp(fp):
    got = k_float_arg(0.1)
    if fp == ti.f32:
        assert got == float(np.float32(0.1) * np.float32(3.0))
        assert got != 0.1 * 3.0
    else:
        assert got == 0.1 * 3.0


def test_python_int_annotation_means_default_ip():
    assert k_int_arg(2 ** 30) == -2 ** 31 + 1           # i32 wraps
    ti.init(arch=ti.cpu, default_ip=ti.i64)
    assert k_int_arg(2 ** 40) == 2 ** 41 + 1
    assert isinstance(k_int_arg(3), int)


def test_typed_scalar_args():
    assert k_typed_args(2 ** 40, 0.5, 200, -100) == 2 ** 40 + 0.5 + 200 - 100


def test_kernel_without_return_returns_none():
    x = ti.field(ti.i32, shape=())
    assert k_no_return(x, 42) is None
    assert x[None] == 42
    assert k_return_field(x) == 84


@ti.kernel
def k_mixed_args(a: ti.i32, arr: ti.types.ndarray(), b: ti.f64, f: ti.template(), c: ti.f32,
                 arr2: ti.types.ndarray(), d: ti.i64, e: ti.u8) -> ti.f64:
    for i in range(arr.shape[0]):
        arr[i] = arr[i] * a + c
        arr2[i] = b
    f[None] = d
    return a + b + c + d + e


def test_mixed_argument_kinds_and_order():
    arr = np.arange(4, dtype=np.float32)
    arr2 = np.zeros(4, dtype=np.float64)
    f = ti.field(ti.i64, shape=())
    r = k_mixed_args(3, arr, 0.125, f, 0.5, arr2, 2 ** 40, 255)
    assert r == 3 + 0.125 + 0.5 + 2 ** 40 + 255
    assert arr.tolist() == [0.5, 3.5, 6.5, 9.5]
    assert arr2.tolist() == [0.125] * 4
    assert f[None] == 2 ** 40


def test_template_python_int_is_compile_time_constant():
    x = ti.field(ti.i32, shape=8)
    k_template_int(x, 3)
    assert x.to_numpy().tolist() == [30, 31, 32, 0, 0, 0, 0, 0]
    k_template_int(x, 5)
    assert x.to_numpy().tolist() == [50, 51, 52, 53, 54, 0, 0, 0]


# --------------------------------------------------------------------------- ti.func

@ti.func
def sq(a):
    return a * a


@ti.func
def hyp(a, b):
    return ti.sqrt(sq(a) + sq(b))


@ti.func
def make_vec(a):
    return ti.Vector([a, 2 * a, 3 * a])


@ti.func
def make_mat(a):
    return ti.Matrix([[a, 0.0], [1.0, a * a]])


@ti.func
def vlen2(v):
    return v.dot(v)


@ti.func
def field_sum(f: ti.template(), n):
    s = 0.0
    for k in range(n):
        s += f[k]
    return s


@ti.func
def bump(a):
    a += 1
    return a


@ti.func
def write_through(f: ti.template(), i, v):
    f[i] = v


@ti.func
def minmax(a, b):
    return ti.min(a, b), ti.max(a, b)


@ti.kernel
def k_funcs(x: ti.template(), out: ti.template(), vout: ti.template(), mout: ti.template()):
    out[0] = sq(x[0])
    out[1] = hyp(x[0], x[1])
    vout[0] = make_vec(x[0])
    mout[0] = make_mat(x[1])
    out[2] = vlen2(make_vec(x[1]))
    out[3] = field_sum(x, 3)
    t = x[0]
    u = bump(t)
    out[4] = t
    out[5] = u
    write_through(out, 6, x[2] * 10)
    out[7] = hyp(x[0], x[2]) / 3


@ti.kernel
def k_func_tuple(x: ti.template(), out: ti.template()):
    lo, hi = minmax(x[0], x[1])
    out[0] = lo
    out[1] = hi


def test_funcs(fp):
    x = ti.field(fp, shape=3)
    out = ti.field(fp, shape=8)
    vout = ti.Vector.field(3, fp, shape=1)
    mout = ti.Matrix.field(2, 2, fp, shape=1)
    x.from_numpy(np.array([3.0, 4.0, 0.5]))
    k_funcs(x, out, vout, mout)
    r = out.to_numpy()
    assert r[:7].tolist() == [9.0, 5.0, 16.0 * 14, 7.5, 3.0, 4.0, 5.0]
    if fp == ti.f32:
        assert r[7] == pytest.approx(np.sqrt(9.25) / 3, rel=1e-6)
    else:
        assert r[7] == pytest.approx(np.sqrt(9.25) / 3, rel=1e-15)
    np.testing.assert_array_equal(vout.to_numpy()[0], [3, 6, 9])
    np.testing.assert_array_equal(mout.to_numpy()[0], [[4, 0], [1, 16]])


def test_func_returning_tuple(fp):
    x = ti.field(fp, shape=2)
    out = ti.field(fp, shape=2)
    x.from_numpy(np.array([5.0, -2.0]))
    k_func_tuple(x, out)
    assert out.to_numpy().tolist() == [-2.0, 5.0]


# --------------------------------------------------------------------------- compile-time Python

@ti.kernel
def k_globals(out: ti.template()):
    out[0] = SCALE * 2
    if ti.static(FLAG_ON):
        out[1] = 1
    else:
        out[1] = this_name_does_not_exist_anywhere  # noqa: F821  (never compiled)
    if ti.static(not FLAG_ON):
        out[2] = this_name_does_not_exist_either  # noqa: F821
    else:
        out[2] = 2


def make_scaler(k):
    @ti.kernel
    def scaler(x: ti.template()):
        for i in x:
            x[i] = i * k
    return scaler


@ti.kernel
def k_static_loops(x: ti.template(), y: ti.template(), out: ti.template()):
    v = ti.Vector([1.0, 2.0, 3.0])
    s = 0.0
    for i in ti.static(range(3)):
        s += v[i] * (i + 1)
    out[0] = s
    t = 0.0
    for c in ti.static(OFFSETS):
        t += c
    out[1] = t
    u = 0.0
    for c in ti.static([10, 20, 30]):
        u = u * 2 + c
    out[2] = u
    for f in ti.static([x, y]):
        for I in ti.grouped(f):
            f[I] = f[I] + 1


@ti.kernel
def k_static_mode(out: ti.template(), mode: ti.template()):
    if ti.static(mode == 1):
        out[None] = 100
    elif ti.static(mode == 2):
        out[None] = 200
    else:
        out[None] = -1


@ti.kernel
def k_static_range_template(out: ti.template(), n: ti.template()):
    for i in ti.static(range(n)):
        out[i] = i * i


def test_globals_and_static_if():
    out = ti.field(ti.i32, shape=3)
    k_globals(out)
    assert out.to_numpy().tolist() == [6, 1, 2]


def test_closures():
    k2 = make_scaler(2)
    k5 = make_scaler(5)
    x = ti.field(ti.i32, shape=4)
    k2(x)
    assert x.to_numpy().tolist() == [0, 2, 4, 6]
    k5(x)
    assert x.to_numpy().tolist() == [0, 5, 10, 15]


def test_static_loops(fp):
    x = ti.field(fp, shape=4)
    y = ti.field(fp, shape=(2, 3))
    out = ti.field(fp, shape=3)
    k_static_loops(x, y, out)
    assert out.to_numpy().tolist() == [14.0, 7.5, 110.0]
    np.testing.assert_array_equal(x.to_numpy(), 1)
    np.testing.assert_array_equal(y.to_numpy(), 1)


def test_static_mode_template():
    out = ti.field(ti.i32, shape=())
    k_static_mode(out, 1)
    assert out[None] == 100
    k_static_mode(out, 2)
    assert out[None] == 200
    k_static_mode(out, 3)
    assert out[None] == -1
    arr = ti.field(ti.i32, shape=6)
    k_static_range_template(arr, 4)
    assert arr.to_numpy().tolist() == [0, 1, 4, 9, 0, 0]


# --------------------------------------------------------------------------- statements and branches

@ti.kernel
def k_branches(x: ti.template(), out: ti.template()):
    for i in x:
        v = x[i]
        r = 0
        if v < 0:
            r = -1
        elif v == 0:
            r = 0
        elif v < 4:
            r = 1
        else:
            r = 2
        out[i, 0] = r
        out[i, 1] = 10 if v > 2 else 20
        flag_and = 0
        if v > 0 and v < 3:
            flag_and = 1
        out[i, 2] = flag_and
        flag_or = 0
        if v < -1 or v > 4:
            flag_or = 1
        out[i, 3] = flag_or
        flag_not = 0
        if not v > 0:
            flag_not = 1
        out[i, 4] = flag_not
        chain = 0
        if 0 < v < 5:
            chain = 1
        out[i, 5] = chain
        chain3 = 0
        if -2 < v <= 3 < 10:
            chain3 = 1
        out[i, 6] = chain3
        truth = 0
        if v:
            truth = 1
        out[i, 7] = truth
        out[i, 8] = 1 if (v >= 2 and not v == 5) or v == -3 else 0


@ti.kernel
def k_tuple_assign(out: ti.template()):
    a, b = 1, 2
    a, b = b, a
    out[0] = a
    out[1] = b
    c, d, e = 3, 4, 5
    out[2] = c * 100 + d * 10 + e


def test_if_elif_else_ternary_boolean_ops():
    vals = [-3, -1, 0, 1, 2, 3, 4, 5, 7]
    x = ti.field(ti.i32, shape=len(vals))
    out = ti.field(ti.i32, shape=(len(vals), 9))
    x.from_numpy(np.array(vals, dtype=np.int32))
    k_branches(x, out)
    r = out.to_numpy()
    for row, v in zip(r, vals):
        expected = [
            -1 if v < 0 else 0 if v == 0 else 1 if v < 4 else 2,
            10 if v > 2 else 20,
            int(0 < v < 3),
            int(v < -1 or v > 4),
            int(not v > 0),
            int(0 < v < 5),
            int(-2 < v <= 3 < 10),
            int(bool(v)),
            int((v >= 2 and not v == 5) or v == -3),
        ]
        assert row.tolist() == expected, v


def test_tuple_unpacking():
    out = ti.field(ti.i32, shape=3)
    k_tuple_assign(out)
    assert out.to_numpy().tolist() == [2, 1, 345]


# --------------------------------------------------------------------------- loops

@ti.kernel
def k_range_forms(a: ti.template(), b: ti.template(), n: ti.i32):
    for i in range(n):
        a[i] = 1
    for i in range(2, n - 1):
        b[i] = i


@ti.kernel
def k_range_step_outer(a: ti.template()):
    for i in range(1, 10, 3):
        a[i] = i + 100


@ti.kernel
def k_range_step_inner(out: ti.template(), lo: ti.i32, hi: ti.i32):
    for _ in range(1):              # the stepped loops below are inner (serial) loops
        s = 0
        for i in range(lo, hi, 3):
            s += i
        out[0] = s
        t = 0
        cnt = 0
        for i in range(hi, lo, -3):
            t += i
            cnt += 1
        out[1] = t
        out[2] = cnt


@ti.kernel
def k_ndrange(a: ti.template(), b: ti.template(), c: ti.template(), cnt: ti.template()):
    for i, j in ti.ndrange(4, 5):
        a[i, j] = i * 10 + j
    for i, j in ti.ndrange((1, 4), 5):
        b[i, j] = 1
    for I in ti.grouped(ti.ndrange(3, 4)):
        c[I] = I[0] * 100 + I[1]
    for i, j, k in ti.ndrange((1, 3), (-1, 2), 4):
        cnt[None] += 1 + 0 * (i + j + k)


@ti.kernel
def k_grouped_field(x: ti.template()):
    for I in ti.grouped(x):
        x[I] = I[0] * 100 + I[1] * 10 + I[2]


@ti.kernel
def k_struct_for_2d(x: ti.template()):
    for i, j in x:
        x[i, j] = i - 2 * j


@ti.kernel
def k_triangle(a: ti.template(), out: ti.template()):
    for i in a:                    # parallel
        s = 0
        for j in range(i + 1):     # serial, bound depends on the parallel index
            s += a[j]
        out[i] = s


@ti.kernel
def k_serial_dependency(out: ti.template()):
    for i in out:
        acc = 0
        for j in range(i):
            acc = acc * 2 + j      # order-dependent recurrence
        out[i] = acc


@ti.kernel
def k_while_break_continue(out: ti.template()):
    for i in range(out.shape[0]):
        # Collatz steps with a while loop
        n = i + 1
        steps = 0
        while n != 1:
            if n % 2 == 0:
                n = n // 2
            else:
                n = 3 * n + 1
            steps += 1
        out[i, 0] = steps
        # sum of odd j < 10, stopping at the first j with j * j > i
        s = 0
        for j in range(10):
            if j * j > i:
                break
            if j % 2 == 0:
                continue
            s += j
        out[i, 1] = s
        # while True with break
        k = 0
        while True:
            k += 1
            if k >= i:
                break
        out[i, 2] = k
        # nested loops: break only leaves the inner loop
        cnt = 0
        for a in range(4):
            for b in range(4):
                if b > a:
                    break
                cnt += 1
        out[i, 3] = cnt


@ti.kernel
def k_sequential_top_loops(a: ti.template(), b: ti.template()):
    n = a.shape[0]
    for i in a:
        a[i] = i * i
    for i in b:
        b[i] = a[n - 1 - i] + a[(i + 1) % n]
    a[0] = -1


@ti.kernel
def k_top_level_serial(out: ti.template()):
    acc = 0
    for _ in ti.static(range(1)):
        acc = 5
    out[0] = acc
    if out[1] == 0:
        for i in range(3):              # not outermost at kernel level: serial
            out[1] = out[1] * 10 + i + 1


def test_range_forms():
    a = ti.field(ti.i32, shape=8)
    b = ti.field(ti.i32, shape=8)
    k_range_forms(a, b, 6)
    assert a.to_numpy().tolist() == [1, 1, 1, 1, 1, 1, 0, 0]
    assert b.to_numpy().tolist() == [0, 0, 2, 3, 4, 0, 0, 0]


def test_range_with_step_outermost():
    a = ti.field(ti.i32, shape=12)
    k_range_step_outer(a)
    expected = [0] * 12
    for i in range(1, 10, 3):
        expected[i] = i + 100
    assert a.to_numpy().tolist() == expected


def test_range_with_step_inner():
    out = ti.field(ti.i32, shape=3)
    k_range_step_inner(out, 1, 11)
    assert out.to_numpy().tolist() == [sum(range(1, 11, 3)), sum(range(11, 1, -3)), len(range(11, 1, -3))]
    k_range_step_inner(out, 5, 5)
    assert out.to_numpy().tolist() == [0, 0, 0]


def test_ndrange_and_grouped():
    a = ti.field(ti.i32, shape=(4, 5))
    b = ti.field(ti.i32, shape=(4, 5))
    c = ti.field(ti.i32, shape=(3, 4))
    cnt = ti.field(ti.i32, shape=())
    k_ndrange(a, b, c, cnt)
    i, j = np.indices((4, 5))
    np.testing.assert_array_equal(a.to_numpy(), i * 10 + j)
    expected_b = np.zeros((4, 5), dtype=np.int32)
    expected_b[1:4, :] = 1
    np.testing.assert_array_equal(b.to_numpy(), expected_b)
    i, j = np.indices((3, 4))
    np.testing.assert_array_equal(c.to_numpy(), i * 100 + j)
    assert cnt[None] == 2 * 3 * 4


def test_grouped_field_and_struct_for():
    x = ti.field(ti.i32, shape=(2, 3, 4))
    k_grouped_field(x)
    i, j, k = np.indices((2, 3, 4))
    np.testing.assert_array_equal(x.to_numpy(), i * 100 + j * 10 + k)
    y = ti.field(ti.i32, shape=(5, 3))
    k_struct_for_2d(y)
    i, j = np.indices((5, 3))
    np.testing.assert_array_equal(y.to_numpy(), i - 2 * j)


def test_inner_loops_serial():
    a = ti.field(ti.i32, shape=50)
    out = ti.field(ti.i32, shape=50)
    a.from_numpy(np.arange(50, dtype=np.int32) % 7)
    k_triangle(a, out)
    np.testing.assert_array_equal(out.to_numpy(), np.cumsum(np.arange(50) % 7))
    rec = ti.field(ti.i64, shape=20)
    k_serial_dependency(rec)
    expected = []
    for i in range(20):
        acc = 0
        for j in range(i):
            acc = acc * 2 + j
        expected.append(acc)
    assert rec.to_numpy().tolist() == expected


def test_while_break_continue():
    n = 12
    out = ti.field(ti.i32, shape=(n, 4))
    k_while_break_continue(out)
    r = out.to_numpy()
    for i in range(n):
        m, steps = i + 1, 0
        while m != 1:
            m = m // 2 if m % 2 == 0 else 3 * m + 1
            steps += 1
        s = 0
        for j in range(10):
            if j * j > i:
                break
            if j % 2 == 0:
                continue
            s += j
        assert r[i].tolist() == [steps, s, max(i, 1), 10], i


def test_top_level_loops_run_in_order():
    a = ti.field(ti.i32, shape=1000)
    b = ti.field(ti.i32, shape=1000)
    k_sequential_top_loops(a, b)
    sq = np.arange(1000) ** 2
    np.testing.assert_array_equal(b.to_numpy(), sq[::-1] + np.roll(sq, -1))
    assert a[0] == -1 and a[1] == 1


def test_loops_under_if_are_serial():
    out = ti.field(ti.i32, shape=2)
    k_top_level_serial(out)
    assert out.to_numpy().tolist() == [5, 123]


# --------------------------------------------------------------------------- fields as globals, instantiation

G = None          # a module-level field, re-created by the tests after ti.init


@ti.kernel
def k_uses_global(v: ti.i32):
    for i in G:
        G[i] = v + i


@ti.kernel
def k_add_into(src: ti.template(), dst: ti.template()):
    for i in src:
        dst[i] += src[i]


def test_kernel_reads_module_global_field():
    global G
    G = ti.field(ti.i32, shape=3)
    k_uses_global(10)
    assert G.to_numpy().tolist() == [10, 11, 12]
    ti.init(arch=ti.cpu)
    G = ti.field(ti.i32, shape=5)        # a new field after ti.init: the kernel is rebuilt for it
    k_uses_global(20)
    assert G.to_numpy().tolist() == [20, 21, 22, 23, 24]


def test_kernel_captures_fields_by_closure():
    a = ti.field(ti.f32, shape=4)
    b = ti.Vector.field(2, ti.f32, shape=4)

    @ti.kernel
    def fill(s: ti.f32):
        for i in a:
            a[i] = s * i
            b[i] = ti.Vector([a[i], -a[i]])

    fill(0.5)
    assert a.to_numpy().tolist() == [0.0, 0.5, 1.0, 1.5]
    np.testing.assert_array_equal(b.to_numpy()[:, 1], [0.0, -0.5, -1.0, -1.5])


def test_template_instantiated_per_field():
    x = ti.field(ti.i32, shape=3)
    y = ti.field(ti.i32, shape=3)
    z = ti.field(ti.i32, shape=3)
    x.from_numpy(np.array([1, 2, 3], dtype=np.int32))
    y.from_numpy(np.array([10, 20, 30], dtype=np.int32))
    k_add_into(x, z)
    k_add_into(y, z)
    k_add_into(x, y)
    assert z.to_numpy().tolist() == [11, 22, 33]
    assert y.to_numpy().tolist() == [11, 22, 33]
    assert x.to_numpy().tolist() == [1, 2, 3]


# --------------------------------------------------------------------------- more control flow

@ti.kernel
def k_outer_continue(x: ti.template()):
    for i in x:
        if i % 3 == 0:
            continue
        x[i] = 1


@ti.kernel
def k_top_level_while(out: ti.template(), limit: ti.i32):
    k = 0
    total = 0
    while True:
        if k >= limit:
            break
        total += k
        k += 1
    out[None] = total


@ti.kernel
def k_local_type_fixed(out: ti.template(), x: ti.f32):
    a = 0              # i32 local: later float assignments are cast to i32
    a = x
    out[0] = a
    s = 0
    s += x
    s += x
    out[1] = s
    f = 0.0            # float local: stays float
    f += 1
    out[2] = f * 10


def test_continue_in_outermost_loop():
    x = ti.field(ti.i32, shape=10)
    k_outer_continue(x)
    assert x.to_numpy().tolist() == [0 if i % 3 == 0 else 1 for i in range(10)]


def test_top_level_while_loop():
    out = ti.field(ti.i32, shape=())
    k_top_level_while(out, 10)
    assert out[None] == 45
    k_top_level_while(out, 0)
    assert out[None] == 0


def test_local_variable_type_is_fixed_by_first_assignment():
    out = ti.field(ti.f32, shape=3)
    k_local_type_fixed(out, 2.7)
    assert out.to_numpy().tolist() == [2.0, 4.0, 10.0]     # int(2.7) = 2; int(int(0 + 2.7) + 2.7) = 4


# --------------------------------------------------------------------------- values flowing into parallel loops

@ti.kernel
def k_captured_locals(x: ti.template(), v: ti.template(), s: ti.f32):
    scale = x[0] * 2 + s                      # kernel-scope scalar read inside the loop
    g = ti.Vector([0.0, -9.5])                # kernel-scope vector read inside the loop
    m = ti.Matrix([[1.0, s], [0.0, 1.0]])
    for i in v:
        v[i] = m @ (v[i] + g * scale) + ti.Vector([i, 0.0])


@ti.kernel
def k_ndrange_runtime(out: ti.template(), n: ti.i32, m: ti.i32, lo: ti.i32):
    for i, j in ti.ndrange((lo, n), m):
        out[i, j] = i * 10 + j + 1


@ti.kernel
def k_while_bool_cond(x: ti.template(), out: ti.template()):
    for r in range(x.shape[0]):
        i = 0
        while i < x.shape[1] and x[r, i] > 0:
            i += 1
        out[r] = i
        f = x[r, 0] * 0.5
        t = 0
        if f != 0:                            # (Taichi rejects `if f:` for a float f)
            t = 1
        out[r] += t * 100


def test_kernel_scope_values_read_in_parallel_loop():
    x = ti.field(ti.f32, shape=1)
    x[0] = 1.5
    v = ti.Vector.field(2, ti.f32, shape=3)
    v.from_numpy(np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32))
    k_captured_locals(x, v, 0.5)
    scale = 1.5 * 2 + 0.5
    m = np.array([[1.0, 0.5], [0.0, 1.0]])
    base = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float64)
    expected = (base + np.array([0.0, -9.5]) * scale) @ m.T + np.stack([np.arange(3), np.zeros(3)], axis=1)
    np.testing.assert_allclose(v.to_numpy(), expected, rtol=1e-6)


def test_ndrange_runtime_bounds_and_empty_ranges():
    out = ti.field(ti.i32, shape=(5, 4))
    k_ndrange_runtime(out, 4, 3, 2)
    expected = np.zeros((5, 4), dtype=np.int32)
    for i in range(2, 4):
        for j in range(3):
            expected[i, j] = i * 10 + j + 1
    np.testing.assert_array_equal(out.to_numpy(), expected)
    k_ndrange_runtime(out, 2, 3, 2)          # empty: begin == end
    k_ndrange_runtime(out, 5, 0, 0)          # empty: second extent 0
    np.testing.assert_array_equal(out.to_numpy(), expected)
    a = ti.field(ti.i32, shape=8)
    b = ti.field(ti.i32, shape=8)
    k_range_forms(a, b, 0)                   # range(0) and range(2, -1) run no iteration
    assert a.to_numpy().tolist() == [0] * 8
    assert b.to_numpy().tolist() == [0] * 8


def test_while_with_boolean_condition():
    x = ti.field(ti.f32, shape=(4, 5))
    x.from_numpy(np.array([[1, 1, 0, 1, 1], [1, 1, 1, 1, 1], [0, 1, 1, 1, 1], [2, 3, -1, 1, 1]], dtype=np.float32))
    out = ti.field(ti.i32, shape=4)
    k_while_bool_cond(x, out)
    assert out.to_numpy().tolist() == [102, 105, 0, 102]


def test_ndrange_with_an_end_before_its_begin_runs_no_iteration():
    # Taichi < 1.0.1 ran (b - a) * (d - c) iterations, positive for two reversed axes
    count = ti.field(ti.i32, shape=())

    @ti.kernel
    def run(a: ti.i32, b: ti.i32, c: ti.i32, d: ti.i32):
        for i, j in ti.ndrange((a, b), (c, d)):
            count[None] += 1

    for bounds, expected in (((1, 0, 1, 0), 0), ((1, -2, 1, -3), 0), ((0, 3, 0, 4), 12), ((2, 5, 3, 3), 0)):
        count[None] = 0
        run(*bounds)
        assert count[None] == expected, bounds
