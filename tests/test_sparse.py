"""Sparse layouts (pointer, bitmasked, dynamic): activation by writes from kernels and
from Python, struct-fors over active cells only, the explicit activity API, zeros after
deactivation, gradients through active cells on a tape whose kernels change the activity
between them, lists built the same on any number of threads, and the errors."""
import numpy as np
import pytest

import engine as ti
from test_taichi_compat import engine_run


def test_a_program_using_sparse_layouts_runs_unchanged():
    lines = engine_run('sparse_layouts.py')[0].splitlines()
    assert lines == ['pointer blocks 4 cells 64 total 6.0',
                     'after deactivate_all 0 0 0.0',
                     'python write 1 16 2.0',
                     'activity 1 1 1 0 pixels 2',
                     'rescale [1 0] [3 1] [1 0]',
                     'after deactivate 1 0 0',
                     'lists 1234 210 [30, 31, 32, 33, 0, 0, 0, 0]',
                     'cleared 1030 63']


def _pointer_field(dtype=ti.f32):
    x = ti.field(dtype, needs_grad=True)
    blocks = ti.root.pointer(ti.i, 4)
    blocks.dense(ti.i, 2).place(x)
    return x, blocks


def test_python_scope_writes_activate_and_fill_writes_active_cells_only():
    ti.init(arch=ti.cpu)
    x, blocks = _pointer_field()
    x[5] = 1.0
    assert blocks.activity.to_numpy().tolist() == [0, 0, 1, 0]
    x.fill(3.0)
    assert x.to_numpy().tolist() == [0, 0, 0, 0, 3, 3, 0, 0]
    x.grad.fill(1.0)                        # a gradient fills every cell: none keeps a stale value
    assert x.grad.to_numpy().tolist() == [1] * 8
    x.from_numpy(np.arange(8.0))            # every element written: every block active
    assert blocks.activity.to_numpy().tolist() == [1, 1, 1, 1]
    ti.deactivate_all_snodes()
    assert x.to_numpy().tolist() == [0] * 8 and blocks.activity.to_numpy().tolist() == [0] * 4


def test_a_struct_for_that_writes_its_own_cells_stays_parallel_and_activates_nothing_new():
    ti.init(arch=ti.cpu)
    x, blocks = _pointer_field()
    y = ti.field(ti.f32)
    ti.root.bitmasked(ti.i, 8).place(y)

    @ti.kernel
    def double():
        for i in x:
            x[i] = x[i] * 2 + 1
            y[i] = x[i]

    x[2] = 1.0
    double()
    assert x.to_numpy().tolist() == [0, 0, 3, 1, 0, 0, 0, 0]
    assert blocks.activity.to_numpy().tolist() == [0, 1, 0, 0]
    assert y.parent().activity.to_numpy().tolist() == [0, 0, 1, 1, 0, 0, 0, 0]


def test_deactivated_cells_read_zero_and_come_back_zeroed():
    ti.init(arch=ti.cpu)
    x, blocks = _pointer_field()

    @ti.kernel
    def drop(b: ti.i32):
        ti.deactivate(blocks, [b])

    @ti.kernel
    def bump():
        for i in range(8):
            if i % 3 == 0:
                x[i] += 1.0

    bump()
    bump()
    drop(1)
    assert x.to_numpy().tolist() == [2, 0, 0, 0, 0, 0, 2, 0]
    bump()
    assert x.to_numpy().tolist() == [3, 0, 0, 1, 0, 0, 3, 0]


def test_dynamic_lists_from_kernels_and_python():
    ti.init(arch=ti.cpu)
    items = ti.Vector.field(2, ti.f32)
    node = ti.root.dense(ti.i, 3).dynamic(ti.j, 4)
    node.place(items)

    @ti.kernel
    def fill() -> ti.i32:
        last = 0
        ti.loop_config(serialize=True)
        for i in range(3):
            for k in range(i):
                last = ti.append(node, i, ti.Vector([i, k]))
        return last

    @ti.kernel
    def lengths() -> ti.types.vector(3, ti.i32):
        return ti.Vector([ti.length(node, 0), ti.length(node, 1), items[2].length()])

    assert fill() == 1
    assert lengths().to_list() == [0, 1, 2]
    items[0, 2] = [7, 7]                    # a write past the end makes the list that long
    assert lengths().to_list() == [3, 1, 2]
    assert items.to_numpy()[2].tolist() == [[2, 0], [2, 1], [0, 0], [0, 0]]


def test_lists_appended_in_a_parallel_loop_come_out_the_same_on_two_threads():
    results = []
    for _ in range(3):
        ti.init(arch=ti.cpu, cpu_max_num_threads=2)
        hits = ti.field(ti.i32)
        ti.root.dense(ti.i, 4).dynamic(ti.j, 2048).place(hits)

        @ti.kernel
        def scatter():
            for k in range(4000):
                ti.append(hits.parent(), (k * 7919) % 4, k)

        scatter()
        results.append(hits.to_numpy())
    assert all((r == results[0]).all() for r in results)
    assert results[0][1, :3].tolist() == sorted(results[0][1, :3].tolist())      # in loop order


def test_gradients_through_cells_whose_activity_changes_between_kernels_match_finite_differences():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(ti.f64, shape=8, needs_grad=True)
    y = ti.field(ti.f64)
    ti.root.bitmasked(ti.i, 8).place(y, y.grad)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def even():
        for i in range(8):
            if i % 2 == 0:
                y[i] = ti.sin(x[i]) * x[i]

    @ti.kernel
    def one_more():
        y[3] = x[3] * 2 + y[2]            # activates y[3] after the first sum read y

    @ti.kernel
    def weighted_sum():
        for i in y:
            loss[None] += y[i] * (i + 1)

    def run():
        y.parent().deactivate_all()
        loss[None] = 0
        with ti.ad.Tape(loss):
            even()
            weighted_sum()
            one_more()
            weighted_sum()

    x.from_numpy(np.linspace(0.2, 1.0, 8))
    run()
    grad = x.grad.to_numpy()
    base, fd = x.to_numpy(), np.zeros(8)
    for i in range(8):
        values = []
        for h in (1e-6, -1e-6):
            moved = base.copy()
            moved[i] += h
            x.from_numpy(moved)
            run()
            values.append(loss[None])
        fd[i] = (values[0] - values[1]) / 2e-6
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)
    assert grad[1] == 0 and grad[3] == 8


def test_errors_name_what_is_wrong():
    ti.init(arch=ti.cpu)
    x, blocks = _pointer_field()
    dense = ti.field(ti.f32)
    row = ti.root.dense(ti.i, 4)
    row.place(dense)

    @ti.kernel
    def deactivate_dense():
        ti.deactivate(row, [0])

    @ti.kernel
    def append_to_pointer():
        ti.append(blocks, [0], 1.0)

    with pytest.raises(ti.TaichiSyntaxError, match='not sparse'):
        deactivate_dense()
    with pytest.raises(ti.TaichiSyntaxError, match='needs a dynamic node'):
        append_to_pointer()
    with pytest.raises(ti.TaichiSyntaxError, match='in a kernel'):
        ti.is_active(blocks, [0])
    with pytest.raises(ti.TaichiRuntimeError, match='nothing but fields'):
        ti.root.dynamic(ti.k, 8).dense(ti.i, 2)


def test_on_a_tape_parallel_loops_that_activate_are_accepted_and_differentiate():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    a = ti.field(ti.f64, shape=8, needs_grad=True)
    g = ti.field(ti.f64, needs_grad=True)
    blocks = ti.root.pointer(ti.i, 2)
    blocks.bitmasked(ti.i, 2).place(g, g.grad)
    x = ti.field(ti.f64, needs_grad=True)
    ti.root.pointer(ti.i, 4).bitmasked(ti.i, 4).place(x, x.grad)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def scatter():              # many iterations activate one block: the activations commute
        for p in range(8):
            g[p // 2] += a[p]

    @ti.kernel
    def per_block():            # a loop over blocks writing its own block's cells
        for b in blocks:
            for k in range(8):
                x[b * 8 + k] = g[b * 2 + k % 2] ** 2

    @ti.kernel
    def total():
        for i in x:
            loss[None] += x[i]

    a.from_numpy(np.arange(8.0))
    with ti.ad.Tape(loss, validation=True):
        scatter()
        per_block()
        total()
    sums = np.arange(8.0).reshape(4, 2).sum(1)          # g
    np.testing.assert_allclose(a.grad.to_numpy(), np.repeat(4 * 2 * sums, 2))


def test_a_kernel_that_deactivates_cells_its_struct_for_visits_is_refused_on_a_tape():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(ti.f64, needs_grad=True)
    cells = ti.root.bitmasked(ti.i, 8)
    cells.place(x, x.grad)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def cull():
        for i in x:
            if x[i] > 1:
                ti.deactivate(cells, [i])

    @ti.kernel
    def total():
        for i in x:
            loss[None] += x[i]

    x.from_numpy(np.linspace(0, 2, 8))
    with pytest.raises(ti.ad.AutodiffRuleError, match='changes which cells .* are active'):
        with ti.ad.Tape(loss, validation=True):
            cull()
            total()


def test_a_full_list_stops_the_append_and_keeps_its_length():
    ti.init(arch=ti.cpu)
    x = ti.field(ti.i32)
    ti.root.dynamic(ti.i, 4).place(x)

    @ti.kernel
    def push(n: ti.i32):
        for i in range(n):
            x.append(i)

    @ti.kernel
    def size() -> ti.i32:
        return x.length()

    with pytest.raises(ti.TaichiAssertionError, match='is full'):
        push(6)
    assert size() == 4 and x.to_numpy().tolist() == [0, 1, 2, 3]


def test_layouts_taichi_does_not_allow_or_the_engine_cannot_keep_are_refused():
    ti.init(arch=ti.cpu)
    y = ti.field(ti.f32)
    ti.root.pointer(ti.i, 4).dense(ti.i, 2).place(y)
    with pytest.raises(ti.TaichiRuntimeError, match='must go in the node of y'):
        ti.root.bitmasked(ti.i, 8).place(y.grad)
    with pytest.raises(ti.TaichiRuntimeError, match='offsets are not supported'):
        ti.root.pointer(ti.i, 2).place(ti.field(ti.f32), offset=(-1,))
    with pytest.raises(ti.TaichiRuntimeError, match='must come after'):
        ti.root.dense(ti.j, 4).dynamic(ti.i, 8)


def test_activation_by_a_parallel_scatter_is_the_same_on_two_threads_and_matches_numpy():
    points = np.random.default_rng(3).random((4000, 2))
    runs = []
    for _ in range(2):
        ti.init(arch=ti.cpu, cpu_max_num_threads=2)
        mass = ti.field(ti.f32)
        blocks = ti.root.pointer(ti.ij, 8)
        blocks.dense(ti.ij, 4).place(mass)
        p = ti.Vector.field(2, ti.f32, shape=4000)
        p.from_numpy(points.astype(np.float32) * 0.5)        # a quarter of the grid

        @ti.kernel
        def scatter():
            for k in p:
                mass[ti.cast(p[k] * 32, ti.i32)] += 1.0      # activations skipped on active cells

        scatter()
        runs.append((blocks.activity.to_numpy(), mass.to_numpy()))
    cells = (points * 0.5 * 32).astype(int)
    expected = np.zeros((8, 8), dtype=np.int32)
    expected[cells[:, 0] // 4, cells[:, 1] // 4] = 1
    assert (runs[0][0] == expected).all() and (runs[1][0] == expected).all()
    assert (runs[0][1] == runs[1][1]).all() and runs[0][1].sum() == 4000
