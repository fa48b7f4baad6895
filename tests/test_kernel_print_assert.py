"""Run-time `print` and `assert` in kernels (engine/language/printing.py).

Native code records what a launch prints and Python writes the text to sys.stdout after
the launch, so capsys sees it like any print from Python.
"""
import numpy as np
import pytest

import engine as ti
from engine.language import printing
from engine.core import program


def lines(capsys):
    return capsys.readouterr().out.splitlines()


def test_each_launch_prints_its_own_values_and_compiling_prints_nothing(capsys):
    ti.init(arch=ti.cpu)

    @ti.kernel
    def show(a: ti.i32, b: ti.f32):
        print('a =', a, 'b =', b, 'sum', a + b)

    show.compiled((1, 0.5))
    assert lines(capsys) == []
    show(3, 0.25)
    show(-7, 1e20)
    assert lines(capsys) == ['a = 3 b = 0.25 sum 3.25', 'a = -7 b = 1e+20 sum 1e+20']


def test_fstrings_with_format_specs_and_constants(capsys):
    ti.init(arch=ti.cpu, default_fp=ti.f64)

    @ti.kernel
    def show(i: ti.i32, x: float):
        y = x / 3
        print(f'x = {x}, y = {y:.3f}, i = {i:04d}, hex {i:x}, {"const"!r} {2.5:.2f}')
        print(f'only constants {1 + 1}')

    show(42, 1.0)
    assert lines(capsys) == ["x = 1.0, y = 0.333, i = 0042, hex 2a, 'const' 2.50", 'only constants 2']


def test_a_format_spec_the_type_cannot_take_is_a_compile_error():
    ti.init(arch=ti.cpu)

    @ti.kernel
    def bad(x: ti.f32):
        print(f'{x:d}')

    with pytest.raises(ti.TaichiTypeError, match="format code 'd'"):
        bad(1.0)


def test_vectors_matrices_sep_and_end(capsys):
    ti.init(arch=ti.cpu)
    v = ti.Vector.field(2, ti.f32, shape=2)

    @ti.kernel
    def show(a: ti.i32):
        v[1] = [1.0, 2.5]
        print('v =', v[1], sep='')
        print('m =', ti.Matrix([[2, 3], [a, a * 2]]), end='; ')
        print(f'{v[1] * 2:.1f}', 'done', sep=' | ')

    show(5)
    assert lines(capsys) == ['v =[1.0, 2.5]', 'm = [[2, 3], [5, 10]]; [2.0, 5.0] | done']


def test_print_in_a_func_and_in_a_serial_loop(capsys):
    ti.init(arch=ti.cpu)

    @ti.func
    def report(k, value):
        print('step', k, 'value', value)

    @ti.kernel
    def steps(n: ti.i32):
        total = 0
        for _ in range(1):
            for k in range(n):
                total += k
                report(k, total)

    steps(3)
    assert lines(capsys) == ['step 0 value 0', 'step 1 value 1', 'step 2 value 3']


def test_prints_of_a_parallel_loop_on_two_threads_are_whole_and_all_there(capsys):
    ti.init(arch=ti.cpu, cpu_max_num_threads=2)
    x = ti.field(ti.f32, shape=64)

    @ti.kernel
    def work():
        for i in range(64):
            s = 0.0
            for j in range(3000):       # enough work that the pool splits the loop
                s += ti.sin(s + j)
            x[i] = s
            print('iteration', i, 'of', 64, f'{i * 0.5:.1f}')

    for _ in range(3):
        work()
        out = lines(capsys)
        assert sorted(out) == sorted(f'iteration {i} of 64 {i * 0.5:.1f}' for i in range(64))


def test_a_kernel_that_prints_differentiates_and_its_adjoint_prints_nothing(capsys):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(float, shape=3, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def energy():
        for i in x:
            print('x', i, x[i])
            loss[None] += x[i] ** 2

    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    with ti.ad.Tape(loss):
        energy()
    assert sorted(lines(capsys)) == ['x 0 1.0', 'x 1 2.0', 'x 2 3.0']
    assert np.allclose(x.grad.to_numpy(), [2.0, 4.0, 6.0])
    energy.grad()
    assert lines(capsys) == []


def test_forward_mode_prints_once_per_launch(capsys):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(float, shape=(), needs_grad=True)
    y = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def square():
        print('x', x[None])
        y[None] = x[None] ** 2

    x[None] = 3.0
    with ti.ad.FwdMode(loss=y, param=x):
        square()
    assert lines(capsys) == ['x 3.0'] and y.dual[None] == 6.0


def test_a_transformed_func_prints_once_not_once_per_direction(capsys):
    ti.init(arch=ti.cpu, default_fp=ti.f64)

    @ti.func
    def norm2(v):
        print('norm2 of', v)
        r = v.dot(v)
        if r > 1:
            print('outside the unit ball')
        return r

    @ti.kernel
    def slope() -> float:
        g = ti.ad.grad(norm2)(ti.Vector([1.0, 2.0]))
        return g[0] + g[1]

    assert slope() == 6.0
    assert lines(capsys) == ['norm2 of [1.0, 2.0]', 'outside the unit ball']


def test_kernels_without_prints_do_not_look_for_them():
    ti.init(arch=ti.cpu)
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def plain(s: ti.f32):
        for i in x:
            x[i] = s

    compiled = plain.compiled((1.0,))
    assert compiled.print_formats == [] and not compiled.check_errors
    assert program.current().prints is None          # no buffer until a kernel prints


def test_a_replayed_capture_prints_each_replay(capsys):
    ti.init(arch=ti.cpu)

    @ti.kernel
    def step(k: ti.i32):
        print('step', k)

    @ti.kernel
    def quiet():
        pass

    rollout = ti.capture(lambda: [step(1), quiet(), step(2)] and None)
    rollout()
    rollout()
    assert lines(capsys) == ['step 1', 'step 2'] * 2


def test_prints_before_an_error_come_out_before_it_is_raised(capsys):
    ti.init(arch=ti.cpu)
    x = ti.field(ti.i32, shape=4)

    @ti.kernel
    def walk(n: ti.i32):
        for _ in range(1):
            for i in range(n):
                print('at', i)
                x[i] = i

    with pytest.raises(IndexError, match='kernel walk'):
        walk(6)
    assert lines(capsys) == ['at 0', 'at 1', 'at 2', 'at 3', 'at 4']


def test_a_full_print_buffer_drops_prints_and_says_how_many(capsys, monkeypatch):
    monkeypatch.setattr(printing, 'CAPACITY', 64)          # 32 records of one value
    ti.init(arch=ti.cpu)

    @ti.kernel
    def chatty():
        for _ in range(1):
            for i in range(100):
                print(i)

    chatty()
    out = lines(capsys)
    assert out[:32] == [str(i) for i in range(32)]
    assert out[32:] == ['... 68 prints dropped: the print buffer (64 words) was full; print less per launch']
    chatty()
    assert len(lines(capsys)) == 33                        # the next launch starts empty


def _print_program():
    x = ti.field(ti.f32, shape=3)
    v = ti.Vector.field(2, ti.i32, shape=())

    @ti.func
    def half(a):
        print(f'half of {a} is {a / 2:.2f}', end='!\n')

    @ti.kernel
    def show(k: ti.i32) -> ti.i32:
        v[None] = [k, -k]
        for i in x:
            x[i] = i * 0.1
        for _ in range(1):
            for i in range(3):
                print('x', i, x[i], v[None], sep=', ')
                half(x[i] + k)
        return k

    show(2)


def test_the_interpreter_prints_the_same(capsys):
    ti.init(arch=ti.cpu)
    _print_program()
    native = capsys.readouterr().out
    ti.init(arch=ti.cpu, interpret=True)
    _print_program()
    assert capsys.readouterr().out == native and native.count('\n') == 6


# --- assert ---------------------------------------------------------------------------------
def _positive_kernel():
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def check(n: ti.i32):
        for i in x:
            assert x[i] >= 0, f'x[{i}] = {x[i]} is negative (n = {n})'
            x[i] += n

    return x, check


@pytest.mark.parametrize('interpret', [False, True])
def test_a_failed_assert_raises_with_its_message_the_kernel_and_the_line(interpret):
    ti.init(arch=ti.cpu, debug=True, interpret=interpret)
    x, check = _positive_kernel()
    check(1)
    x[2] = -0.5
    with pytest.raises(AssertionError) as info:
        check(7)
    message = str(info.value)
    assert isinstance(info.value, ti.TaichiAssertionError)
    assert 'in kernel check: x[2] = -0.5 is negative (n = 7)' in message
    assert "assert x[i] >= 0, f'x[{i}]" in message and 'test_kernel_print_assert.py' in message


def test_an_assert_without_a_message_shows_its_condition():
    ti.init(arch=ti.cpu, debug=True)

    @ti.kernel
    def need(a: ti.i32):
        assert a * 2 < 10

    need(4)
    with pytest.raises(AssertionError, match=r'in kernel need: assertion failed: a \* 2 < 10'):
        need(5)


def test_asserts_are_not_compiled_outside_debug_mode():
    ti.init(arch=ti.cpu)
    x, check = _positive_kernel()
    x[0] = -1.0
    check(1)                                # no error: the assert is not even evaluated
    assert x[0] == 0.0
    y = ti.field(ti.f32, shape=2)

    @ti.kernel
    def far():
        for i in y:
            assert y[i + 100] == 0          # would be an index out of range if evaluated

    far()


def test_an_assert_false_at_compile_time_is_a_compile_error():
    ti.init(arch=ti.cpu)

    @ti.kernel
    def wrong():
        assert 1 + 1 == 3

    with pytest.raises(ti.TaichiCompilationError, match='false at compile time'):
        wrong()

    @ti.kernel
    def wrong_with_a_message():
        assert ti.static(2 > 3), 'two is not more than three'

    with pytest.raises(ti.TaichiCompilationError, match='compile time: two is not more than three'):
        wrong_with_a_message()


def test_an_assert_in_a_parallel_loop_stops_the_launch(capsys):
    ti.init(arch=ti.cpu, debug=True, cpu_max_num_threads=2)
    x = ti.field(ti.i32, shape=256)

    @ti.kernel
    def fill(bad: ti.i32):
        for i in x:
            assert i != bad, f'reached {i}'
            x[i] = 1

    fill(-1)
    assert x.to_numpy().sum() == 256
    with pytest.raises(ti.TaichiAssertionError, match='in kernel fill: reached 100'):
        fill(100)
    fill(-1)                                # the error was reported once, and cleared
