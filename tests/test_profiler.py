"""ti.profiler: launch counts and times per kernel with ti.init(kernel_profiler=True)."""
import numpy as np
import pytest

import engine as ti


@pytest.fixture
def profiled():
    ti.init(arch=ti.cpu, kernel_profiler=True)
    yield
    ti.init()


def _kernels():
    x = ti.field(ti.f32, shape=8, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def fill(s: ti.f32):
        for i in x:
            x[i] = i * s

    @ti.kernel
    def total():
        for i in x:
            loss[None] += x[i] ** 2

    return x, loss, fill, total


def test_counts_and_times_per_kernel(profiled):
    x, loss, fill, total = _kernels()
    for _ in range(5):
        fill(1.0)
    with ti.ad.Tape(loss=loss):
        total()
        total()
    fill_info = ti.profiler.query_kernel_profiler_info('fill')
    assert fill_info.counter == 5
    assert 0 < fill_info.min <= fill_info.avg <= fill_info.max
    assert ti.profiler.query_kernel_profiler_info('total').counter == 2
    assert ti.profiler.query_kernel_profiler_info('total.grad').counter == 2     # adjoints: own name
    assert ti.profiler.query_kernel_profiler_info('nothing').counter == 0
    infos = [ti.profiler.query_kernel_profiler_info(k) for k in ('fill', 'total', 'total.grad')]
    total_ms = sum(i.avg * i.counter for i in infos)
    assert ti.profiler.get_kernel_profiler_total_time() == pytest.approx(total_ms / 1e3)
    ti.profiler.clear_kernel_profiler_info()
    assert ti.profiler.get_kernel_profiler_total_time() == 0
    assert ti.profiler.query_kernel_profiler_info('fill').counter == 0
    fill.grad(1.0)
    assert ti.profiler.query_kernel_profiler_info('fill.grad').counter == 1


def test_print_count_and_trace_modes(profiled, capsys):
    _, _, fill, total = _kernels()
    fill(2.0)
    fill(2.0)
    total()
    ti.profiler.print_kernel_profiler_info()
    table = capsys.readouterr().out.splitlines()
    assert 'count' in table[0] and '3 launches' in table[0]
    rows = {line.split()[-1]: line.split() for line in table[2:]}
    assert rows['fill'][2] == '2' and rows['total'][2] == '1'
    ti.profiler.print_kernel_profiler_info('trace')
    trace = capsys.readouterr().out.splitlines()
    assert [line.split()[-1] for line in trace[2:]] == ['fill', 'fill', 'total']
    with pytest.raises(ValueError):
        ti.profiler.print_kernel_profiler_info('sideways')


def test_native_replays_count_each_launch(profiled):
    x, loss, fill, total = _kernels()
    step = ti.capture(lambda: [fill(1.0), total()] and None)
    step()                              # captured
    step()                              # replayed natively
    assert ti.profiler.query_kernel_profiler_info('fill').counter == 2
    with ti.ad.Tape(loss=loss):         # three adjoints in the tape's native loop
        total()
        total()
        total()
    assert ti.profiler.query_kernel_profiler_info('total.grad').counter == 3
    assert x.grad.to_numpy()[3] == pytest.approx(3 * 2 * 3.0)


def test_interpreted_kernels_are_counted():
    ti.init(kernel_profiler=True, interpret=True)
    _, _, fill, _ = _kernels()
    fill(1.0)
    assert ti.profiler.query_kernel_profiler_info('fill').counter == 1
    ti.init()


def test_without_the_profiler_launches_are_untouched(capsys):
    ti.init()
    x, _, fill, _ = _kernels()
    fill(1.0)
    compiled = next(iter(fill._cache.values()))
    assert type(compiled.cfunc).__name__ != 'function'        # the ctypes entry point itself
    assert ti.profiler.query_kernel_profiler_info('fill').counter == 0
    ti.profiler.print_kernel_profiler_info()
    assert 'kernel_profiler=True' in capsys.readouterr().out
    assert np.allclose(x.to_numpy(), np.arange(8))


def test_a_new_init_starts_empty(profiled):
    _, _, fill, _ = _kernels()
    fill(1.0)
    ti.init(kernel_profiler=True)
    assert ti.profiler.query_kernel_profiler_info('fill').counter == 0
    assert ti.profiler.set_kernel_profiler_toolkit('default')


def test_launches_after_a_clear_are_counted(profiled):
    """DiffTaichi's diffmpm_benchmark clears the records after warming up, then times:
    the kernels compiled before the clear must count into the new records."""
    x, loss, fill, total = _kernels()
    fill(1.0)
    ti.profiler.clear_kernel_profiler_info()
    assert ti.profiler.query_kernel_profiler_info('fill').counter == 0
    for _ in range(3):
        fill(2.0)
    assert ti.profiler.query_kernel_profiler_info('fill').counter == 3
