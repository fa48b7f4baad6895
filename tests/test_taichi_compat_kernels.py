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


# --- ti.template() parameters of a ti.func are passed by reference -----------------------

@ti.func
def _add_one(x: ti.template()):
    x = x + 1


@ti.func
def _add_ten(x: ti.template()):
    x += 10


@ti.func
def _set_first(v: ti.template()):
    v[0] = 100


@ti.func
def _by_value(x):
    x += 100


def test_template_parameter_changes_the_callers_local():
    @ti.kernel
    def k() -> ti.types.vector(4, ti.i32):
        a, b, c = 24, 1, 5
        _add_one(a)
        _add_ten(b)
        _by_value(c)            # a plain parameter stays a copy
        v = ti.Vector([1, 2])
        _set_first(v)
        return ti.Vector([a, b, c, v[0]])

    assert k().to_numpy().tolist() == [25, 11, 5, 100]


def test_template_parameter_bound_to_a_field_element_writes_it():
    f = ti.field(ti.i32, shape=3)
    v = ti.Vector.field(2, ti.i32, shape=2)

    @ti.kernel
    def k():
        for i in f:
            _add_one(f[i])
            _add_ten(f[i])
        _set_first(v[1])

    k()
    assert f.to_numpy().tolist() == [11, 11, 11]
    assert v.to_numpy().tolist() == [[0, 0], [100, 0]]


def test_template_parameter_bound_to_an_entry_or_a_component():
    f = ti.Vector.field(3, ti.i32, shape=2)
    m = ti.Matrix.field(2, 2, ti.i32, shape=1)

    @ti.kernel
    def k() -> ti.types.vector(3, ti.i32):
        v = ti.Vector([1, 2, 3])
        _add_ten(v[0])
        _add_ten(v.z)
        _add_ten(f[1].y)
        _add_ten(f[0][2])
        _add_ten(m[0][1, 0])
        for i in ti.static(range(2)):
            _add_one(v[i])
        return v

    assert k().to_numpy().tolist() == [12, 3, 13]
    assert f.to_numpy().tolist() == [[0, 0, 10], [0, 10, 0]]
    assert m.to_numpy().tolist() == [[[0, 0], [10, 0]]]


def test_template_parameter_bound_to_an_expression_cannot_be_assigned():
    @ti.kernel
    def k(a: ti.i32):
        _add_ten(a + 1)

    with pytest.raises(ti.TaichiSyntaxError, match='bound to an expression'):
        k(1)


def test_template_parameter_accumulating_into_the_loss_differentiates(f64):
    x = ti.field(float, shape=4, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.func
    def accumulate(total: ti.template(), value):
        total += value

    @ti.kernel
    def forward():
        for i in x:
            accumulate(loss[None], ti.sin(x[i]) * x[i])
        s = 0.0
        ti.loop_config(serialize=True)
        for j in range(4):
            accumulate(s, x[j] ** 2)
        loss[None] += s

    x.from_numpy(np.array([0.3, -1.2, 2.0, 0.7]))
    fd_check(loss, [x], forward)


# --- atomics on locals and on components ---------------------------------------------

def test_atomic_on_a_local_returns_the_old_value():
    @ti.kernel
    def k() -> ti.types.vector(4, ti.i32):
        a = 0
        for i in range(10):
            ti.atomic_add(a, i)
        old = ti.atomic_max(a, 100)
        v = ti.Vector([1, 2])
        old_v = ti.atomic_sub(v[1], 5)
        ti.atomic_min(v.x, -3)
        return ti.Vector([a + old, old_v, v[0], v[1]])

    assert k().to_numpy().tolist() == [145, 2, -3, -3]


def test_atomic_on_a_shared_local_in_a_parallel_loop():
    @ti.kernel
    def k() -> ti.i32:
        total = 0
        for i in range(100):
            ti.atomic_add(total, i)
        return total

    assert k() == 4950


def test_atomic_on_a_component_of_a_field_element():
    acc = ti.Vector.field(2, ti.f32, shape=2)

    @ti.kernel
    def k():
        for i in range(10):
            ti.atomic_add(acc[0].x, 1.0)
            ti.atomic_add(acc[1], ti.Vector([1.0, 2.0]))

    k()
    assert acc.to_numpy().tolist() == [[10.0, 0.0], [10.0, 20.0]]


def test_atomic_on_locals_differentiates(f64):
    x = ti.field(float, shape=3, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def forward():
        for i in x:
            s = 0.0
            ti.atomic_add(s, x[i] * x[i])
            ti.atomic_sub(s, ti.cos(x[i]))
            loss[None] += s

    x.from_numpy(np.array([0.5, -1.5, 2.0]))
    fd_check(loss, [x], forward)


# --- a return type without a return statement ------------------------------------------

def test_kernel_with_a_return_type_but_no_return_is_an_error():
    @ti.kernel
    def forgot() -> ti.f32:
        x = 1.5  # noqa: F841

    with pytest.raises(ti.TaichiSyntaxError, match='kernel forgot has a return type but does not have a return'):
        forgot()


def test_func_with_a_return_type_but_no_return_is_an_error():
    @ti.func
    def half(x) -> ti.f32:
        y = x * 2  # noqa: F841

    @ti.kernel
    def k() -> ti.f32:
        return half(1.0)

    with pytest.raises(ti.TaichiSyntaxError, match='ti.func half has a return type but does not have a return'):
        k()


# --- str.format and %-formatting with run-time values -------------------------------------

def test_str_format_in_print(capsys):
    width = 7

    @ti.kernel
    def show(a: ti.i32, b: ti.f32):
        v = ti.Vector([a, a + 1])
        print('a={} b={}'.format(a, b))
        msg = 'sum is {}'.format(a + 1)
        print(msg)
        print('{:.3f}|{:>{w}}|{v.x}|{v[1]}|{name}'.format(b, a, v=v, name='n', w=width))
        print('{1}-{0}'.format(a, b))
        print('{} {}'.format(v, 'const'))
        print('a is ' + str(a), str(b) + '!')

    show(3, 1.5)
    assert capsys.readouterr().out.splitlines() == [
        'a=3 b=1.5', 'sum is 4', '1.500|      3|3|4|n', '1.5-3', '[3, 4] const', 'a is 3 1.5!']


def test_percent_format_in_print_and_assert(capsys):
    ti.init(arch=ti.cpu, debug=True)
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def show(i: ti.i32, y: ti.f32):
        print('%d|%5.2f|%-4d|%05d|%x|%s|%d%%|%e' % (i, y, i, i, 255, y, y, y))
        print('one %s' % i)

    @ti.kernel
    def check():
        for i in x:
            assert x[i] >= 0, 'negative x[%d] = %f' % (i, x[i])

    show(7, -2.5)
    assert capsys.readouterr().out.splitlines() == [
        '7|-2.50|7   |00007|ff|-2.5|-2%|-2.500000e+00', 'one 7']
    x[1] = -2.5
    with pytest.raises(ti.TaichiAssertionError, match=r'negative x\[1\] = -2\.500000'):
        check()


def test_percent_format_errors_name_the_line():
    @ti.kernel
    def too_few(i: ti.i32):
        print('%d %d' % (i,))

    @ti.kernel
    def char(i: ti.i32):
        print('%c' % i)

    with pytest.raises(ti.TaichiTypeError, match='not enough arguments'):
        too_few(1)
    with pytest.raises(ti.TaichiTypeError, match='%c'):
        char(1)


# --- floor, ceil and round with a dtype ------------------------------------------------

def test_floor_ceil_round_with_a_dtype():
    @ti.kernel
    def k(x: ti.f32) -> ti.types.vector(3, ti.i32):
        return ti.Vector([ti.floor(x, ti.i32), ti.ceil(x, dtype=ti.i32), ti.round(x, ti.i32)])

    @ti.kernel
    def vec(x: ti.f32) -> ti.types.vector(2, ti.i64):
        return ti.floor(ti.Vector([x, -x]), ti.i64)

    assert k(-2.7).to_numpy().tolist() == [-3, -2, -3]
    assert vec(1.5).to_numpy().tolist() == [1, -2]
    assert ti.floor(2.7, ti.i32) == 2


def test_round_with_digits_is_a_clear_error():
    @ti.kernel
    def k(x: ti.f32) -> ti.f32:
        return round(x, 2)

    with pytest.raises(ti.TaichiTypeError, match='2 is not a data type'):
        k(1.0)


# --- ndarray arguments are checked against their annotation -------------------------------

@ti.kernel
def _fill_f32(a: ti.types.ndarray(dtype=ti.f32, ndim=1)):
    for i in a:
        a[i] = 0.1


def test_ndarray_of_another_element_type_is_refused_not_converted():
    b = np.zeros(3, np.float64)
    with pytest.raises(TypeError, match='required element type f32, but the array has element type f64'):
        _fill_f32(b)
    assert b.tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(TypeError, match='element type i32'):
        _fill_f32(np.zeros(3, np.int32))
    c = np.zeros(3, np.float32)
    _fill_f32(c)
    assert c.tolist() == [np.float32(0.1)] * 3


def test_ndarray_dimensions_must_match_the_annotation():
    @ti.kernel
    def vec(a: ti.types.ndarray(dtype=ti.math.vec3, ndim=1)):
        for i in a:
            a[i] = a[i] * 2

    with pytest.raises(TypeError, match='argument mismatch: ndim=1 is required, the array has 2'):
        _fill_f32(np.zeros((2, 2), np.float32))
    with pytest.raises(TypeError, match=r'elements of shape \(3,\) are required'):
        vec(np.zeros((4, 2), np.float32))
    with pytest.raises(TypeError, match='required element type f32'):
        vec(np.zeros((4, 3)))
    a = np.ones((4, 3), np.float32)
    vec(a)
    assert (a == 2).all()


# --- ti.ad.Tape with a 0-D ndarray loss ------------------------------------------------

def test_tape_with_an_ndarray_loss(f64):
    x = ti.ndarray(ti.f64, shape=3, needs_grad=True)
    loss = ti.ndarray(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def f(x: ti.types.ndarray(), out: ti.types.ndarray()):
        for i in x:
            out[None] += ti.sin(x[i]) * x[i] ** 2

    def value(values):
        x.from_numpy(values)
        loss[None] = 0
        f(x, loss)
        return loss[None]

    base = np.array([0.4, -1.1, 2.3])
    eps = 1e-6
    fd = [(value(base + eps * e) - value(base - eps * e)) / (2 * eps) for e in np.eye(3)]
    x.from_numpy(base)
    with ti.ad.Tape(loss=loss):
        f(x, loss)
    assert_grad_close(x.grad.to_numpy(), np.array(fd))
    assert loss[None] == pytest.approx(value(base))


def test_tape_loss_must_be_a_scalar_with_a_gradient():
    with pytest.raises(ValueError, match='needs_grad=True'):
        ti.ad.Tape(loss=ti.ndarray(ti.f32, shape=())).__enter__()
    with pytest.raises(ValueError, match=r'ti.ndarray of one element \(shape \(\) or \(1,\)\), got shape \(2,\)'):
        ti.ad.Tape(loss=ti.ndarray(ti.f32, shape=2, needs_grad=True)).__enter__()
    with pytest.raises(TypeError, match='got ndarray'):
        ti.ad.Tape(loss=np.zeros(())).__enter__()


# --- default argument values; components a vector does not have ----------------------------

def test_kernel_default_argument_values():
    @ti.kernel
    def k(a: ti.i32, b: ti.i32 = 2, c: ti.f32 = 0.5) -> ti.f32:
        return a * 10 + b + c

    assert (k(1), k(1, 3), k(a=4), k(1, c=0.25)) == (12.5, 13.5, 42.5, 12.25)
    with pytest.raises(ti.TaichiTypeError, match='too many positional arguments'):
        k(1, 2, 3.0, 4)


def test_a_component_past_the_end_of_a_vector_names_the_line():
    f = ti.Vector.field(3, ti.f32, shape=2)

    @ti.kernel
    def read() -> ti.f32:
        a = ti.Vector([1.0, 2.0, 3.0])
        return a.w

    @ti.kernel
    def write_local():
        a = ti.Vector([1.0, 2.0, 3.0])
        a.w = 1.0

    @ti.kernel
    def write_field():
        f[0].w = 5.0

    for kernel in (read, write_local, write_field):     # a field element's swizzle is a local's
        with pytest.raises(ti.TaichiTypeError, match=r'\.w needs a vector of at least 4 entries; this one has 3'):
            kernel()
    assert f.to_numpy().tolist() == [[0.0] * 3] * 2


def test_any_all_and_colour_and_texture_components_of_vectors_in_kernels():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    v = ti.Vector.field(3, float, shape=2)

    @ti.kernel
    def k() -> ti.types.vector(5, float):
        a = ti.Vector([1.0, 0.0, 3.0])
        a.r = 5.0
        ti.atomic_add(a.b, 1.0)
        v[0].g = 2.0
        return ti.Vector([a.r, a.b, any(a > 4), all(a > 0), a.s + a.p])

    assert k().to_list() == [5.0, 4.0, 1.0, 0.0, 9.0]
    assert v[0].to_list() == [0.0, 2.0, 0.0]
