"""engine/ir/simplify.py (merge_common): repeated reads and values merged before differentiation, and only where exact."""
import numpy as np
import pytest

import engine as ti
from ad_helpers import fd_check, set_field
from engine.ir.nodes import walk


@pytest.fixture
def f64():
    ti.init(arch=ti.cpu, default_fp=ti.f64)


def _ops(kernel, args=()):
    return [s.op for s in walk(kernel.compiled(args).body)]


def test_stencil_reads_through_a_func_merge_and_differentiate(f64):
    q = ti.field(float, shape=(2, 6, 6), needs_grad=True)
    p = ti.field(float, shape=(4, 6, 6), needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.func
    def lap(t, i, j):
        return p[t, i - 1, j] + p[t, i + 1, j] + p[t, i, j - 1] + p[t, i, j + 1] - 4 * p[t, i, j]

    @ti.kernel
    def step(t: ti.i32):
        for i, j in ti.ndrange((1, 5), (1, 5)):
            p[t, i, j] = 2 * p[t - 1, i, j] - p[t - 2, i, j] + 0.1 * lap(t - 1, i, j)

    @ti.kernel
    def start():
        for t, i, j in q:
            p[t, i, j] = q[t, i, j]

    @ti.kernel
    def total():
        for i, j in ti.ndrange(6, 6):
            loss[None] += p[3, i, j] ** 2

    # p[t-1, i, j] is read once: 5 reads of p[t-1], 1 of p[t-2]
    assert _ops(step, (2,)).count('global_load') == 6
    set_field(q, np.random.default_rng(0).normal(size=(2, 6, 6)))

    def forward():
        start()
        step(2)
        step(3)
        total()
    fd_check(loss, [q], forward)


def test_a_write_between_two_reads_keeps_both(f64):
    x = ti.field(float, shape=4)

    @ti.kernel
    def k() -> float:
        a = x[1]
        x[1] = 5.0
        b = x[1]
        ti.atomic_add(x[1], 1.0)
        return a + b * 10 + x[1] * 100

    x[1] = 2.0
    assert k() == 2.0 + 50 + 600


def test_a_write_in_a_nested_block_between_two_reads_keeps_both(f64):
    x = ti.field(float, shape=4)

    @ti.kernel
    def k(flag: ti.i32) -> float:
        a = x[0]
        if flag:
            x[0] = 7.0
        return a + x[0] * 10

    x[0] = 1.0
    assert k(1) == 71.0


def test_ndarray_arguments_that_are_one_array_see_each_others_writes(f64):
    @ti.kernel
    def k(a: ti.types.ndarray(), b: ti.types.ndarray()) -> float:
        first = a[0]
        b[0] = 9.0
        return first + a[0] * 10

    arr = np.array([1.0, 0.0])
    assert k(arr, arr) == 91.0


def test_a_local_changed_in_a_loop_is_read_fresh_each_iteration(f64):
    @ti.kernel
    def k(n: ti.i32) -> float:
        v = 1.0
        total = 0.0
        ti.loop_config(serialize=True)
        for _ in range(n):
            total += v
            v = v * 2
        w = v
        v += 1
        return total + w * 100 + v * 10000

    assert k(4) == 15.0 + 1600 + 170000


def test_a_local_written_by_a_later_statement_of_a_loop_body(f64):
    out = ti.field(float, shape=3)

    @ti.kernel
    def k():
        for i in range(3):
            prev = 0.0
            cur = 1.0
            for _ in range(i + 2):
                cur, prev = cur + prev, cur
            out[i] = cur

    k()
    np.testing.assert_array_equal(out.to_numpy(), [2.0, 3.0, 5.0])


def test_interpreter_runs_the_unmerged_ir():
    ti.init(arch=ti.cpu, interpret=True)
    x = ti.field(float, shape=3)

    @ti.kernel
    def k() -> float:
        return x[0] + x[0]

    x[0] = 1.5
    assert k() == 3.0
    assert _ops(k).count('global_load') == 2


def test_a_write_through_a_fields_data_as_an_ndarray_is_seen_by_its_reads(f64):
    x = ti.field(float, shape=5)

    @ti.kernel
    def through_array(a: ti.types.ndarray()) -> ti.types.vector(2, float):
        r1 = x[3]
        a[3] = 4.0
        return ti.Vector([r1, x[3]])

    @ti.kernel
    def through_field(a: ti.types.ndarray()) -> ti.types.vector(2, float):
        r1 = a[3]
        x[3] = 6.0
        return ti.Vector([r1, a[3]])

    x[3] = 1.0
    assert list(through_array(x.data)) == [1.0, 4.0]
    assert list(through_field(x.data)) == [4.0, 6.0]


def test_debug_mode_names_the_line_of_each_repeated_expression():
    ti.init(arch=ti.cpu, default_fp=ti.f64, debug=True)
    x = ti.field(float, shape=1)
    y = ti.field(float, shape=2)

    @ti.kernel
    def k():
        y[0] = ti.select(x[0] > 0, ti.sqrt(x[0]), 0.0)
        y[1] = ti.sqrt(x[0])  # the unguarded one

    x[0] = -1.0
    with pytest.raises(FloatingPointError, match='unguarded'):
        k()
