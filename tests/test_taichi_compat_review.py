"""What the adversarial review of this round's language items found, kept fixed: a
per-iteration local keeps the type it was declared with, a real function converts its
result and runs its loops serially, a ti.func may not return from inside the kernel's
parallel loop, slices with run-time indices and slice writes, popcnt/clz of numpy
integers, and GUI.contour's colours."""
import numpy as np
import pytest

import engine as ti


def test_a_per_iteration_local_keeps_its_declared_type_and_shape():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    out = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def truncate():
        r = 0                       # an i32: each iteration's copy truncates as the original would
        for i in range(4):
            r = x[i] * 3
            out[i] = r

    @ti.kernel
    def total():
        for i in out:
            loss[None] += out[i]

    @ti.kernel
    def wrong_shape():
        v = ti.Vector([0.0, 0.0])
        for i in range(4):
            v = ti.Vector([x[i], x[i], x[i]])
            out[i] = v[0]

    x.from_numpy(np.array([0.5, 1.5, 2.5, 3.5]))
    with ti.ad.Tape(loss):
        truncate()
        total()
    assert out.to_numpy().tolist() == [1, 4, 7, 10] and x.grad.to_numpy().tolist() == [0, 0, 0, 0]
    with pytest.raises(ti.TaichiTypeError):
        wrong_shape()


def test_a_real_function_converts_its_result_and_its_loops_are_serial():
    ti.init(arch=ti.cpu, default_fp=ti.f64)

    @ti.real_func
    def truncated(a: ti.f64) -> ti.i32:
        return a * 1.5

    @ti.real_func
    def first_square_above(n: ti.i32) -> ti.i32:
        for k in range(100):        # serial: its return leaves the loop
            if k * k > n:
                return k
        return -1

    @ti.real_func
    def fib(n: ti.i32) -> ti.i32:
        a, b = 0, 1
        for _ in range(n):
            a, b = b, a + b
        return a

    @ti.kernel
    def calls() -> ti.types.vector(3, ti.i32):
        return ti.Vector([truncated(2.9), first_square_above(10), fib(10)])

    assert calls().to_list() == [4, 4, 55]


def test_a_func_may_not_return_from_inside_the_kernels_parallel_loop():
    ti.init(arch=ti.cpu)

    @ti.func
    def first_square_above(n):
        for k in range(100):
            if k * k > n:
                return k
        return -1

    @ti.kernel
    def top() -> ti.i32:
        return first_square_above(10)

    with pytest.raises(ti.TaichiSyntaxError, match='parallel loop'):
        top()


def test_slices_take_run_time_indices_and_can_be_written():
    ti.init(arch=ti.cpu)

    @ti.kernel
    def column(j: ti.i32) -> ti.types.vector(2, ti.i32):
        m = ti.Matrix([[1, 2, 3], [4, 5, 6]])
        return m[:, j]

    @ti.kernel
    def first_column() -> ti.types.matrix(3, 2, ti.i32):
        m = ti.Matrix([[0, 0], [0, 0], [0, 0]])
        m[:, 0] = ti.Vector([1, 2, 3])
        return m

    assert column(1).to_list() == [2, 5]
    assert first_column().to_list() == [[1, 0], [2, 0], [3, 0]]
    f = ti.Matrix.field(2, 3, ti.f32, shape=())
    f[None][1, :] = ti.Vector([9.0, 9.0, 9.0])      # from Python: writes the field
    assert f.to_numpy().tolist() == [[0, 0, 0], [9, 9, 9]]


def test_popcnt_and_clz_of_numpy_integers_count_in_their_width():
    assert ti.math.popcnt(np.int8(-1)) == 8 and ti.math.clz(np.uint32(1)) == 31
    assert ti.math.clz(np.int64(1)) == 63 and ti.math.popcnt(np.uint8(3)) == 2


def test_contour_draws_matplotlibs_plasma_at_the_windows_size(recwarn):
    ti.init(arch=ti.cpu)
    gui = ti.GUI('contour', res=(4, 4), show_gui=False)
    gui.contour(np.array([[0.0, 1.0], [0.5, 1.0]]), normalize=True)
    image = gui.get_image()
    assert image.shape[:2] == (4, 4)
    np.testing.assert_allclose(image[0, 0, :3], [0.050, 0.030, 0.528], atol=0.01)    # plasma(0)
    np.testing.assert_allclose(image[3, 3, :3], [0.940, 0.975, 0.131], atol=0.01)    # plasma(1)
