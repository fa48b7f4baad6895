"""Atomics and parallel outermost loops, with 1 and 2 CPU threads."""
import numpy as np
import pytest

import engine as ti

pytestmark = pytest.mark.usefixtures('ti_init')

THREADS = [pytest.param(1, id='1thread'), pytest.param(2, id='2threads')]
N = 1_000_000


# --------------------------------------------------------------------------- kernels

@ti.kernel
def k_reduce(x: ti.template(), cnt: ti.template(), cnt2: ti.template(), s32: ti.template(), s64: ti.template()):
    for i in x:
        v = x[i]
        if v > 0.5:
            cnt[None] += 1
            ti.atomic_add(cnt2[None], 1)
        s32[None] += v
        s64[None] += v


@ti.kernel
def k_histogram(x: ti.template(), hist: ti.template(), neg: ti.template()):
    for i in x:
        hist[x[i] % 10] += 1
        neg[x[i] % 3] -= 2


@ti.kernel
def k_minmax_bits(x: ti.template(), mn: ti.template(), mx: ti.template(), band: ti.template(), bor: ti.template()):
    for i in x:
        ti.atomic_min(mn[None], x[i])
        ti.atomic_max(mx[None], x[i])
        ti.atomic_and(band[None], x[i])
        ti.atomic_or(bor[None], x[i])


@ti.kernel
def k_float_minmax(x: ti.template(), mn: ti.template(), mx: ti.template()):
    for i in x:
        ti.atomic_min(mn[None], x[i])
        ti.atomic_max(mx[None], x[i])


@ti.kernel
def k_slots(counter: ti.template(), out: ti.template()):
    for i in out:
        idx = ti.atomic_add(counter[None], 1)
        out[idx] = i


@ti.kernel
def k_atomic_returns(x: ti.template(), old: ti.template()):
    old[0] = ti.atomic_add(x[0], 5)
    old[1] = ti.atomic_sub(x[1], 3)
    old[2] = ti.atomic_min(x[2], 4)
    old[3] = ti.atomic_max(x[3], 20)
    old[4] = ti.atomic_and(x[4], 6)
    old[5] = ti.atomic_or(x[5], 3)
    old[6] = ti.atomic_add(x[0], 1)


@ti.kernel
def k_atomic_returns_float(x: ti.template(), old: ti.template()):
    old[0] = ti.atomic_add(x[0], 0.5)
    old[1] = ti.atomic_sub(x[1], 0.25)
    old[2] = ti.atomic_min(x[2], -1.5)
    old[3] = ti.atomic_max(x[3], 7.25)
    old[4] = ti.atomic_add(x[0], 1.0)


@ti.kernel
def k_vector_accumulate(acc: ti.template(), n: ti.i32):
    for i in range(n):
        acc[i % 4] += ti.Vector([1, i])


@ti.kernel
def k_elementwise(x: ti.template(), y: ti.template()):
    for i in x:
        y[i] = x[i] * 2 + i


# --------------------------------------------------------------------------- tests

@pytest.mark.parametrize('threads', THREADS)
def test_parallel_reduction_1e6(threads):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    data = np.random.RandomState(42).rand(N).astype(np.float32)
    x = ti.field(ti.f32, shape=N)
    cnt = ti.field(ti.i32, shape=())
    cnt2 = ti.field(ti.i32, shape=())
    s32 = ti.field(ti.f32, shape=())
    s64 = ti.field(ti.f64, shape=())
    x.from_numpy(data)
    k_reduce(x, cnt, cnt2, s32, s64)
    expected_count = int(np.sum(data > 0.5))
    expected_sum = float(np.sum(data.astype(np.float64)))
    assert cnt[None] == expected_count
    assert cnt2[None] == expected_count
    assert s64[None] == pytest.approx(expected_sum, rel=1e-10)
    assert s32[None] == pytest.approx(expected_sum, rel=2e-3)
    # run again: accumulates on top
    k_reduce(x, cnt, cnt2, s32, s64)
    assert cnt[None] == 2 * expected_count
    assert s64[None] == pytest.approx(2 * expected_sum, rel=1e-10)


@pytest.mark.parametrize('threads', THREADS)
def test_parallel_histogram_and_sub(threads):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    data = np.random.RandomState(5).randint(0, 1000, size=N).astype(np.int32)
    x = ti.field(ti.i32, shape=N)
    hist = ti.field(ti.i32, shape=10)
    neg = ti.field(ti.i32, shape=3)
    x.from_numpy(data)
    k_histogram(x, hist, neg)
    np.testing.assert_array_equal(hist.to_numpy(), np.bincount(data % 10, minlength=10))
    np.testing.assert_array_equal(neg.to_numpy(), -2 * np.bincount(data % 3, minlength=3))


@pytest.mark.parametrize('threads', THREADS)
def test_parallel_atomic_min_max_and_or(threads):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    rng = np.random.RandomState(9)
    data = rng.randint(-10 ** 6, 10 ** 6, size=100_000).astype(np.int32)
    x = ti.field(ti.i32, shape=len(data))
    mn, mx, band, bor = (ti.field(ti.i32, shape=()) for _ in range(4))
    x.from_numpy(data)
    mn[None] = 2 ** 31 - 1
    mx[None] = -2 ** 31
    band[None] = -1
    bor[None] = 0
    k_minmax_bits(x, mn, mx, band, bor)
    assert mn[None] == data.min()
    assert mx[None] == data.max()
    assert band[None] == np.bitwise_and.reduce(data)
    assert bor[None] == np.bitwise_or.reduce(data)
    f = ti.field(ti.f64, shape=len(data))
    f.from_numpy(data / 7.0)
    fmn, fmx = ti.field(ti.f64, shape=()), ti.field(ti.f64, shape=())
    fmn[None] = 1e30
    fmx[None] = -1e30
    k_float_minmax(f, fmn, fmx)
    assert fmn[None] == (data / 7.0).min()
    assert fmx[None] == (data / 7.0).max()


@pytest.mark.parametrize('threads', THREADS)
def test_atomic_add_return_value_gives_unique_slots(threads):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    n = 200_000
    counter = ti.field(ti.i32, shape=())
    out = ti.field(ti.i32, shape=n)
    out.fill(-1)
    k_slots(counter, out)
    assert counter[None] == n
    np.testing.assert_array_equal(np.sort(out.to_numpy()), np.arange(n))


def test_atomic_ops_return_old_value_int():
    x = ti.field(ti.i32, shape=6)
    old = ti.field(ti.i32, shape=7)
    x.from_numpy(np.array([10, 10, 10, 10, 12, 12], dtype=np.int32))
    k_atomic_returns(x, old)
    assert old.to_numpy().tolist() == [10, 10, 10, 10, 12, 12, 15]
    assert x.to_numpy().tolist() == [16, 7, 4, 20, 4, 15]


def test_atomic_ops_return_old_value_float(fp):
    x = ti.field(fp, shape=4)
    old = ti.field(fp, shape=5)
    x.from_numpy(np.array([1.0, 1.0, 1.0, 1.0]))
    k_atomic_returns_float(x, old)
    assert old.to_numpy().tolist() == [1.0, 1.0, 1.0, 1.0, 1.5]
    assert x.to_numpy().tolist() == [2.5, 0.75, -1.5, 7.25]


@pytest.mark.parametrize('threads', THREADS)
def test_vector_atomic_accumulate(threads):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    n = 100_000
    acc = ti.Vector.field(2, ti.i64, shape=4)
    k_vector_accumulate(acc, n)
    i = np.arange(n)
    expected = np.stack([np.bincount(i % 4), np.bincount(i % 4, weights=i).astype(np.int64)], axis=1)
    np.testing.assert_array_equal(acc.to_numpy(), expected)


@pytest.mark.parametrize('threads', THREADS)
def test_parallel_elementwise_large(threads):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    x = ti.field(ti.f64, shape=N)
    y = ti.field(ti.f64, shape=N)
    data = np.random.RandomState(1).rand(N)
    x.from_numpy(data)
    k_elementwise(x, y)
    np.testing.assert_array_equal(y.to_numpy(), data * 2 + np.arange(N))


@ti.kernel
def k_fill_2d(y: ti.template()):
    for i, j in ti.ndrange(y.shape[0], y.shape[1]):
        y[i, j] = i * 1000 + j


@ti.kernel
def k_struct_for_2d_sum(y: ti.template(), total: ti.template()):
    for i, j in y:
        total[None] += y[i, j] % 7


@pytest.mark.parametrize('threads', THREADS)
def test_parallel_2d_loops(threads):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    y = ti.field(ti.i64, shape=(1000, 1000))
    total = ti.field(ti.i64, shape=())
    k_fill_2d(y)
    i, j = np.indices((1000, 1000))
    expected = i * 1000 + j
    np.testing.assert_array_equal(y.to_numpy(), expected)
    k_struct_for_2d_sum(y, total)
    assert total[None] == int(np.sum(expected % 7))


def test_entries_of_a_kernel_scope_vector_accumulate_atomically_in_a_parallel_loop():
    n = 10
    x = ti.field(ti.f64, shape=n)
    x.from_numpy(np.arange(1.0, n + 1))

    @ti.kernel
    def sums() -> ti.f64:
        acc = ti.Vector([0.0, 0.0])
        for i in x:
            acc[0] += x[i]
            acc[1] -= 2 * x[i]
        return acc[0] * 1000 + acc[1]

    assert sums() == 55 * 1000 - 110


def test_a_kernel_scope_vector_written_at_a_run_time_entry_in_a_parallel_loop_is_refused():
    x = ti.field(ti.f64, shape=10)

    @ti.kernel
    def by_parity() -> ti.f64:
        acc = ti.Vector([0.0, 0.0])
        for i in x:
            acc[i % 2] += x[i]
        return acc[0]

    @ti.kernel
    def overwrite() -> ti.f64:
        acc = ti.Vector([0.0, 0.0])
        for i in x:
            acc[0] = x[i]
        return acc[0]

    with pytest.raises(ti.TaichiSyntaxError, match='run-time index'):
        by_parity()
    with pytest.raises(ti.TaichiSyntaxError, match='all threads share'):
        overwrite()
