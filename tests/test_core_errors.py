"""Errors: each names the problem and points at the user's file and line.

Offending source lines carry a `#@name` marker; `line_of('name')` finds their line numbers.
"""
import os
import re

import numpy as np
import pytest

import engine as ti

pytestmark = pytest.mark.usefixtures('ti_init')

FILE = os.path.basename(__file__)


def line_of(marker):
    tag = '#@' + marker
    with open(__file__) as f:
        hits = [n for n, line in enumerate(f, 1) if re.search(re.escape(tag) + r'(\s|$)', line)]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


def has_number(msg, n):
    return re.search(rf'(?<!\d){n}(?!\d)', msg) is not None


def assert_points_at(exc, *markers):
    """str(exc) names this file and the line of one of the marked lines."""
    msg = str(exc)
    assert FILE in msg, msg
    lines = [line_of(m) for m in markers]
    assert any(has_number(msg, n) for n in lines), (lines, msg)


def norm(msg):
    return msg.lower().replace(' ', '').replace('_', '')


# --------------------------------------------------------------------------- unsupported syntax
# Kernels are built by factories called inside `pytest.raises`, so the tests hold whether
# the engine parses a kernel when it is decorated or when it is first called.

def make_try():
    @ti.kernel
    def k_try(x: ti.template()):
        try:  #@try
            x[None] = 1
        except Exception:
            pass
    return k_try


def make_lambda():
    @ti.kernel
    def k_lambda(x: ti.template()):
        f = lambda a: a + 1  #@lambda
        x[None] = f(1)
    return k_lambda


def make_with():
    @ti.kernel
    def k_with(x: ti.template()):
        with open('nothing') as fh:  #@with
            x[None] = 1
    return k_with


def make_class():
    @ti.kernel
    def k_class(x: ti.template()):
        class Local:  #@class
            pass
        x[None] = 1
    return k_class


def make_yield():
    @ti.kernel
    def k_yield(x: ti.template()):
        x[None] = 1
        yield 1  #@yield
    return k_yield


def make_setcomp():
    @ti.kernel
    def k_setcomp(x: ti.template()):
        s = {i for i in range(3)}  #@setcomp
        x[None] = 1
    return k_setcomp


def make_dictcomp():
    @ti.kernel
    def k_dictcomp(x: ti.template()):
        d = {i: i for i in range(3)}  #@dictcomp
        x[None] = 1
    return k_dictcomp


def make_global():
    @ti.kernel
    def k_global(x: ti.template()):
        global SOME_GLOBAL_NAME  #@global
        x[None] = 1
    return k_global


def make_outer_break():
    @ti.kernel
    def k_outer_break(x: ti.template()):
        for i in x:
            if i > 2:
                break  #@outerbreak
            x[i] = 1
    return k_outer_break


SYNTAX_CASES = [
    (make_try, 'try', ['try']),
    (make_lambda, 'lambda', ['lambda']),
    (make_with, 'with', ['with']),
    (make_class, 'class', ['class']),
    (make_yield, 'yield', ['yield']),
    (make_setcomp, 'setcomp', ['setcomp']),
    (make_dictcomp, 'dictcomp', ['dictcomp']),
    (make_global, 'global', ['global']),
]


@pytest.mark.parametrize('make,marker,words', SYNTAX_CASES, ids=[c[1] for c in SYNTAX_CASES])
def test_unsupported_syntax(make, marker, words):
    x = ti.field(ti.i32, shape=())
    with pytest.raises(ti.TaichiSyntaxError) as e:
        make()(x)
    msg = str(e.value)
    assert any(w in norm(msg) for w in words), msg
    assert_points_at(e.value, marker)
    assert x[None] == 0


def test_syntax_error_is_syntax_error_subclass():
    assert issubclass(ti.TaichiSyntaxError, SyntaxError)
    x = ti.field(ti.i32, shape=())
    with pytest.raises(SyntaxError):
        make_try()(x)


def test_break_in_outermost_parallel_loop():
    x = ti.field(ti.i32, shape=8)
    with pytest.raises(ti.TaichiSyntaxError) as e:
        make_outer_break()(x)
    assert 'break' in str(e.value).lower()
    assert_points_at(e.value, 'outerbreak')


# --------------------------------------------------------------------------- names

@ti.kernel
def k_undefined(x: ti.template()):
    x[None] = 1
    x[None] = undefined_name_q + 1  #@undefined


@ti.func
def f_undefined(a):
    return a + another_undefined_name  #@funcundefined


@ti.kernel
def k_calls_bad_func(x: ti.template()):
    x[None] = f_undefined(2)  #@callbadfunc


def test_undefined_name():
    x = ti.field(ti.i32, shape=())
    with pytest.raises(ti.TaichiNameError) as e:
        k_undefined(x)
    assert 'undefined_name_q' in str(e.value)
    assert_points_at(e.value, 'undefined')
    assert isinstance(e.value, NameError)


def test_undefined_name_inside_func():
    x = ti.field(ti.i32, shape=())
    with pytest.raises(ti.TaichiNameError) as e:
        k_calls_bad_func(x)
    assert 'another_undefined_name' in str(e.value)
    assert_points_at(e.value, 'funcundefined')


# --------------------------------------------------------------------------- argument types

@ti.kernel  #@argdeco
def k_args(x: ti.f32, n: ti.i32) -> ti.f32:  #@argdef
    return x * n


def test_type_error_is_type_error():
    assert issubclass(ti.TaichiTypeError, TypeError)


def test_wrong_argument_count():
    assert k_args(2.0, 3) == 6.0
    with pytest.raises(ti.TaichiTypeError) as e:
        k_args(1.0)  #@argfew
    assert_points_at(e.value, 'argfew', 'argdef', 'argdeco')
    with pytest.raises(ti.TaichiTypeError) as e:
        k_args(1.0, 2, 3)  #@argmany
    assert_points_at(e.value, 'argmany', 'argdef', 'argdeco')


def test_field_passed_to_scalar_arg():
    f = ti.field(ti.f32, shape=4)
    with pytest.raises(ti.TaichiTypeError) as e:
        k_args(f, 3)  #@argfield
    assert_points_at(e.value, 'argfield', 'argdef', 'argdeco')


def test_string_passed_to_int_arg():
    with pytest.raises(ti.TaichiTypeError) as e:
        k_args(1.0, 'three')  #@argstr
    assert_points_at(e.value, 'argstr', 'argdef', 'argdeco')
    with pytest.raises(TypeError):
        k_args('x', 1)


# --------------------------------------------------------------------------- unplaced fields

def test_unplaced_field_in_kernel():
    lonely = ti.field(ti.f32, name='lonely')

    @ti.kernel
    def use():
        lonely[0] = 1.0  #@unplaced

    with pytest.raises(RuntimeError) as e:
        use()
    assert 'lonely' in str(e.value)
    assert_points_at(e.value, 'unplaced')


def test_unplaced_field_from_python():
    lonely = ti.field(ti.f32, name='lonely')
    with pytest.raises(RuntimeError) as e:
        lonely[0] = 1.0
    assert 'lonely' in str(e.value)
    with pytest.raises(RuntimeError) as e:
        lonely.to_numpy()
    assert 'lonely' in str(e.value)


def test_runtime_error_class():
    assert issubclass(ti.TaichiRuntimeError, RuntimeError)


# --------------------------------------------------------------------------- from_numpy

def test_from_numpy_shape_mismatch():
    x = ti.field(ti.f32, shape=(3, 5))
    with pytest.raises(ValueError):
        x.from_numpy(np.zeros(15, dtype=np.float32))
    a = ti.ndarray(ti.f32, shape=(4,))
    with pytest.raises(ValueError):
        a.from_numpy(np.zeros(5, dtype=np.float32))


# --------------------------------------------------------------------------- debug bounds checks

@ti.kernel
def k_oob_1d(x: ti.template()):
    for i in range(7):
        if i == 6:
            x[i + 3] = 1.0  #@oob1


@ti.kernel
def k_oob_read(x: ti.template(), out: ti.template()):
    for i in range(7):
        out[i] = x[i + 1]  #@oobread


@ti.kernel
def k_oob_2d(x: ti.template()):
    for i, j in ti.ndrange(3, 4):
        if i == 1 and j == 3:
            x[i, j + 6] = 1  #@oob2


@ti.kernel
def k_oob_negative(x: ti.template()):
    for i in range(7):
        if i == 0:
            x[i - 1] = 1.0  #@oobneg


@ti.kernel
def k_in_bounds(x: ti.template()):
    for i in range(7):
        x[i] = i


def test_debug_out_of_bounds_write():
    ti.init(arch=ti.cpu, debug=True)
    bounded = ti.field(ti.f32, shape=7, name='bounded')
    with pytest.raises(IndexError) as e:
        k_oob_1d(bounded)
    msg = str(e.value)
    assert 'bounded' in msg, msg
    assert has_number(msg, 9), msg


def test_debug_out_of_bounds_location():
    ti.init(arch=ti.cpu, debug=True)
    bounded = ti.field(ti.f32, shape=7, name='bounded')
    with pytest.raises(IndexError) as e:
        k_oob_1d(bounded)
    assert_points_at(e.value, 'oob1')


def test_debug_out_of_bounds_read():
    ti.init(arch=ti.cpu, debug=True)
    reader_src = ti.field(ti.f32, shape=7, name='reader_src')
    out = ti.field(ti.f32, shape=7, name='writer_dst')
    with pytest.raises(IndexError) as e:
        k_oob_read(reader_src, out)
    msg = str(e.value)
    assert 'reader_src' in msg, msg
    assert has_number(msg, 7), msg


def test_debug_out_of_bounds_2d():
    ti.init(arch=ti.cpu, debug=True)
    grid2d = ti.field(ti.i32, shape=(3, 4), name='grid2d')
    with pytest.raises(IndexError) as e:
        k_oob_2d(grid2d)
    msg = str(e.value)
    assert 'grid2d' in msg, msg
    assert has_number(msg, 9), msg


def test_debug_mode_in_bounds_runs():
    ti.init(arch=ti.cpu, debug=True)
    x = ti.field(ti.i32, shape=7)
    k_in_bounds(x)
    assert x.to_numpy().tolist() == list(range(7))


def test_debug_negative_index():
    ti.init(arch=ti.cpu, debug=True)
    neg_field = ti.field(ti.f32, shape=7, name='neg_field')
    with pytest.raises(IndexError) as e:
        k_oob_negative(neg_field)
    msg = str(e.value)
    assert 'neg_field' in msg, msg
    assert has_number(msg, -1), msg
    assert_points_at(e.value, 'oobneg')


def test_field_of_an_earlier_program_is_an_error():
    ti.init()
    a = ti.field(ti.f32, shape=4)

    @ti.kernel
    def fill():
        for i in range(4):
            a[i] = 7

    ti.init()
    b = ti.field(ti.f32, shape=4)
    with pytest.raises(ti.TaichiSyntaxError, match='earlier ti.init'):
        fill()
    assert np.all(b.to_numpy() == 0)


def test_an_index_out_of_range_in_a_group_of_stencil_reads_names_its_own_line(ti_init):
    # reads x[i], x[i - 4] share one range check (bounds.grouped_checks): the error names
    # the read that is out of range, not the first of the group
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def k(i: ti.i32) -> ti.f32:
        a = x[i] * 2.0
        return a + x[i - 4]

    with pytest.raises(ti.TaichiIndexError) as info:
        k(3)
    assert 'return a + x[i - 4]' in str(info.value) and 'index (-1,)' in str(info.value)
