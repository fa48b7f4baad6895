"""No program crashes the process: indices are checked by default (primal, adjoint and
tangent kernels, fields and ndarrays), casts and integer arithmetic have defined results,
and running out of a resource is a Python exception. The generated crash test is
tests/test_crash_generated.py."""
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import engine as ti
from engine.backend import bounds, cache


def run_script(tmp_path, source, env=None, timeout=300):
    path = tmp_path / 'program.py'
    path.write_text(textwrap.dedent(source))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


# --- 1. index checks, on by default ------------------------------------------------------

def test_an_index_out_of_range_raises_naming_field_index_shape_kernel_and_line(ti_init):
    x = ti.field(ti.f32, shape=8)
    index = ti.field(ti.i32, shape=4)

    @ti.kernel
    def gather():
        for i in range(4):
            x[index[i]] += 1.0

    index.from_numpy(np.array([0, 1, 100_000_000, 3], dtype=np.int32))
    with pytest.raises(IndexError) as caught:
        gather()
    message = str(caught.value)
    for part in ('field x', '(100000000,)', 'shape (8,)', 'kernel gather', 'x[index[i]] += 1.0'):
        assert part in message, message
    assert x.to_numpy()[2:].sum() == 0         # the launch stopped at the bad iteration (serial: small loop)
    index.from_numpy(np.array([0, 1, 2, 3], dtype=np.int32))
    gather()                                    # the kernel and the fields are fine afterwards
    assert x.to_numpy()[:4].tolist() == [2.0, 2.0, 1.0, 1.0]


def test_negative_and_huge_indices_of_an_ndarray_raise_and_nothing_outside_it_is_written(ti_init):
    memory = np.zeros(20, dtype=np.float32)
    view = memory[:10]                          # what lies after the ndarray must stay untouched

    @ti.kernel
    def fill(a: ti.types.ndarray(), shift: ti.i32):
        for i in range(10):
            a[i + shift] = 7.0

    for shift in (3, -1, 2 ** 30):
        memory[:] = 0
        with pytest.raises(IndexError, match=r'ndarray argument a'):
            fill(view, shift)
        assert not memory[10:].any()


def test_index_checks_cover_adjoint_and_tangent_kernels(ti_init):
    x = ti.field(float, shape=4, needs_grad=True, needs_dual=True)
    y = ti.field(float, shape=4, needs_grad=True, needs_dual=True)
    index = ti.field(ti.i32, shape=4)

    @ti.kernel
    def gather():
        for i in range(4):
            y[i] = x[index[i]] * 2.0

    index.from_numpy(np.arange(4, dtype=np.int32))
    gather()
    index.from_numpy(np.array([0, 1, 2, -7], dtype=np.int32))     # changed before the backward pass
    y.grad.fill(1.0)
    with pytest.raises(IndexError, match=r'\(-7,\).*x'):
        gather.grad()
    with pytest.raises(IndexError, match=r'\(-7,\)'):
        with ti.ad.FwdMode(loss=y, param=x, seed=[1.0, 0.0, 0.0, 0.0]):
            gather()


def test_indices_proven_in_range_are_not_checked(ti_init):
    n = 16
    x = ti.field(ti.f32, shape=(n, n))
    c = ti.field(ti.f32, shape=n)
    data = ti.field(ti.i32, shape=n)

    def checked(kernel, *args):
        kernel(*args)
        return bounds.checks_indices(kernel.compiled(args).body)

    @ti.kernel
    def own_shape():                 # loop indices over the field's own shape, ndrange, shifts
        for i, j in x:
            x[i, j] += 1.0
        for i, j in ti.ndrange((1, n - 1), n):
            x[i + 1, j] += x[i - 1, j]

    @ti.kernel
    def clamped():                   # min/max clamps, modulo, masks of unknown values
        for i in range(n):
            c[ti.max(0, ti.min(data[i], n - 1))] += 1.0
            c[data[i] % n] += 1.0
            c[data[i] & 15] += 1.0

    @ti.kernel
    def through_locals(t: ti.i32):  # locals stored once or more, selects bounded by their condition
        for i in range(n):
            ip = (i + 1) % n
            k = ti.cast(c[i], ti.i32) % n
            up = ti.select(k == n - 1, 0, k + 1)
            down = k - 1 if k > 0 else n - 1
            step = ip
            if data[i] > 0:
                step = i
            c[ip] += c[up] + c[down] + c[step]

    @ti.kernel
    def unknown():
        for i in range(n):
            c[data[i]] += 1.0

    @ti.kernel
    def counted():                   # a local changed in a loop may grow: checked
        for i in range(n - 3):
            k = i
            for _ in range(3):
                k += 1
            c[k] += 1.0

    @ti.kernel
    def own_extent(a: ti.types.ndarray()):
        for i in range(a.shape[0]):
            a[i] += 1.0

    assert not checked(own_shape)
    assert not checked(clamped)
    assert not checked(through_locals, 0)
    assert checked(unknown) and checked(counted)
    assert not checked(own_extent, np.zeros(5, dtype=np.float32))


def test_check_bounds_false_compiles_no_checks():
    ti.init(check_bounds=False)
    c = ti.field(ti.f32, shape=4)
    data = ti.field(ti.i32, shape=4)

    @ti.kernel
    def unknown():
        for i in range(4):
            c[data[i]] += 1.0

    unknown()
    assert not unknown.compiled(()).check_errors
    assert c.to_numpy()[0] == 4.0
    ti.init()


# --- 2. defined results where C's are undefined --------------------------------------------

@pytest.mark.parametrize('interpret', [False, True])
def test_float_to_int_casts_saturate_and_nan_gives_zero(interpret):
    ti.init(interpret=interpret)
    y = ti.field(ti.f32, shape=7)
    as_i32 = ti.field(ti.i32, shape=7)
    as_u8 = ti.field(ti.u8, shape=7)
    as_i64 = ti.field(ti.i64, shape=7)
    x = ti.field(ti.f32, shape=3)

    @ti.kernel
    def cast():
        for i in range(7):
            as_i32[i] = ti.cast(y[i], ti.i32)
            as_u8[i] = ti.cast(y[i], ti.u8)
            as_i64[i] = ti.cast(y[i], ti.i64)
            # the index from a NaN: defined, so in range after the clamp
            x[ti.min(ti.cast(ti.abs(ti.sin(y[i])) * 3.0, ti.i32), 2)] += 1.0

    y.from_numpy(np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, -2.7, 300.5], dtype=np.float32))
    cast()
    assert as_i32.to_numpy().tolist() == [0, 2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1, -2 ** 31, -2, 300]
    assert as_u8.to_numpy().tolist() == [0, 255, 0, 255, 0, 0, 255]
    assert as_i64.to_numpy().tolist() == [0, 2 ** 63 - 1, -2 ** 63, 3_000_000_000, -3_000_000_000, -2, 300]
    assert x.to_numpy().sum() == 7
    ti.init()


@pytest.mark.parametrize('interpret', [False, True])
def test_integer_division_by_zero_and_overflow_and_wide_shifts_are_defined(interpret):
    ti.init(interpret=interpret)
    a = ti.field(ti.i32, shape=4)
    b = ti.field(ti.i32, shape=4)
    out = ti.field(ti.i32, shape=(4, 4))

    @ti.kernel
    def arithmetic():
        for i in range(4):
            out[i, 0] = a[i] // b[i]
            out[i, 1] = a[i] % b[i]
            out[i, 2] = a[i] << b[i]
            out[i, 3] = a[i] >> b[i]

    a.from_numpy(np.array([7, -2 ** 31, 5, -8], dtype=np.int32))
    b.from_numpy(np.array([0, -1, 33, 35], dtype=np.int32))
    arithmetic()
    got = out.to_numpy()
    assert got[0, :2].tolist() == [7, 0]                    # x // 0 is x, x % 0 is 0: division by 1
    assert got[1, :2].tolist() == [-2 ** 31, 0]             # INT_MIN // -1 wraps (x86 would trap)
    assert got[2, 2:].tolist() == [10, 2]                   # shifts by the amount modulo 32
    assert got[3, 2:].tolist() == [-64, -1]
    ti.init()


def test_integer_division_by_zero_raises_in_debug_mode():
    ti.init(debug=True)
    a = ti.field(ti.i32, shape=2)

    @ti.kernel
    def divide(d: ti.i32):
        for i in range(2):
            a[i] = 10 // d

    with pytest.raises(ZeroDivisionError, match='divide'):
        divide(0)
    ti.init()


# --- 3. resource errors are errors -------------------------------------------------------

def test_a_field_too_large_for_memory_raises_and_the_others_survive(ti_init):
    kept = ti.field(ti.f32, shape=3)
    kept.fill(2.0)
    with pytest.raises(MemoryError, match=r'field huge of shape \(1000000, 1000000\) needs'):
        huge = ti.field(ti.f32, shape=(10 ** 6, 10 ** 6))   # noqa: F841
    with pytest.raises(MemoryError, match='ti.ndarray'):
        ti.ndarray(ti.f64, (10 ** 6, 10 ** 6))
    with pytest.raises(ValueError, match='below 2'):
        ti.field(ti.f32, shape=(2 ** 31,))

    @ti.kernel
    def double():
        for i in kept:
            kept[i] *= 2.0

    double()
    assert kept.to_numpy().tolist() == [4.0, 4.0, 4.0]


def test_an_autodiff_stack_that_cannot_grow_raises_memory_error(tmp_path):
    # address space capped in a child process: the stack of a long serial loop's carried
    # local (8 bytes per iteration) cannot grow past the cap; the process lives on
    done = run_script(tmp_path, """
        import resource
        import numpy as np
        import engine as ti
        ti.init(default_fp=ti.f64, offline_cache=False)
        x = ti.field(float, shape=(), needs_grad=True)
        y = ti.field(float, shape=(), needs_grad=True)

        @ti.kernel
        def long_loop(n: ti.i32):
            for _ in range(1):
                v = x[None]
                for k in range(n):
                    v = ti.sin(v) + 0.5
                y[None] = v

        x[None] = 0.3
        with ti.ad.Tape(y):
            long_loop(10)
        small = x.grad[None]
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        used = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (used + 300 * 2 ** 20, hard))
        try:
            with ti.ad.Tape(y):
                long_loop(200_000_000)
            print('no error')
        except MemoryError as error:
            print('MemoryError:', error)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        with ti.ad.Tape(y):
            long_loop(10)
        print('again', x.grad[None] == small)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'MemoryError: kernel long_loop' in done.stdout and 'autodiff stack' in done.stdout, done.stdout
    assert 'again True' in done.stdout


def test_deep_ti_func_nesting_and_deep_expressions_are_clear_errors(tmp_path):
    chain = ['@ti.func\ndef f0(v):\n    return v + 1.0\n']
    chain += [f'@ti.func\ndef f{k}(v):\n    return f{k - 1}(v) * 1.0\n' for k in range(1, 200)]
    terms = ' + '.join(['x[i]'] * 900)
    done = run_script(tmp_path, 'import engine as ti\nti.init()\nx = ti.field(ti.f32, shape=4)\n'
                      + '\n'.join(chain) + textwrap.dedent(f"""
        @ti.kernel
        def nested():
            for i in range(4):
                x[i] = f199(1.0)

        @ti.kernel
        def long_sum():
            for i in range(4):
                x[i] = {terms}

        for kernel in (nested, long_sum):
            try:
                kernel()
            except ti.TaichiSyntaxError as error:
                print(type(error).__name__, str(error).splitlines()[-1])
        x.fill(1.0)
        print('alive', x.to_numpy().sum())
    """))
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'calls nest more than 64 deep' in done.stdout and 'flatten' in done.stdout, done.stdout
    assert 'kernel long_sum nests too deeply to compile' in done.stdout, done.stdout
    assert 'alive 4.0' in done.stdout


def test_a_cache_that_cannot_be_written_warns_and_the_kernel_runs(tmp_path, monkeypatch):
    blocker = tmp_path / 'not_a_directory'
    blocker.write_text('')
    ti.init(offline_cache_file_path=str(blocker / 'cache'))
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def fill():
        for i in x:
            x[i] = 3.0

    with pytest.warns(RuntimeWarning, match='could not be written'):
        fill()
    assert x.to_numpy().tolist() == [3.0] * 4

    def full_disk(*args, **kwargs):      # the write itself fails: no partial file is left
        raise OSError(28, 'No space left on device')
    target = tmp_path / 'full'
    target.mkdir()
    monkeypatch.setattr(cache.os, 'fdopen', full_disk)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        cache.store(target, 'k' * 64, b'object code')
    assert any('No space left' in str(w.message) for w in caught)
    assert list(target.iterdir()) == []
    ti.init()


# --- findings of the adversarial review -----------------------------------------------------

@pytest.mark.parametrize('interpret', [False, True])
def test_64_bit_indices_are_checked_whole(interpret):
    ti.init(interpret=interpret)
    x = ti.field(ti.f32, shape=300)

    @ti.kernel
    def write(i: ti.i64):
        x[i] = 1.0

    @ti.kernel
    def write_unsigned(i: ti.u32):
        x[i] = 1.0

    for index in (2 ** 32, 2 ** 32 + 7, -2 ** 63, 2 ** 31):        # were cut to 0, 7, 0 and -2**31
        with pytest.raises(IndexError, match=rf'index \({index},\)'):
            write(index)
    with pytest.raises(IndexError, match=r'index \(4294967295,\)'):
        write_unsigned(2 ** 32 - 1)
    write(299)
    assert x.to_numpy().sum() == 1.0
    ti.init()


@pytest.mark.parametrize('interpret', [False, True])
def test_run_time_component_indices_out_of_range_raise(interpret):
    ti.init(interpret=interpret)
    m = ti.Matrix.field(2, 3, ti.f32, shape=2)
    m.from_numpy(np.arange(12, dtype=np.float32).reshape(2, 2, 3))

    @ti.kernel
    def entry(i: ti.i32, a: ti.i32, b: ti.i32) -> ti.f32:
        return m[i][a, b]

    @ti.kernel
    def local(k: ti.i32) -> ti.f32:
        w = ti.Vector([10.0, 20.0, 30.0])
        w[k] = 5.0
        return w[0] + w[1] + w[2]

    assert entry(1, 1, 2) == 11.0
    for a, b in ((0, 3), (2, 0), (-1, 0)):     # (0, 3) was read as entry (1, 0)
        with pytest.raises(IndexError, match='component index'):
            entry(1, a, b)
    assert local(1) == 45.0
    with pytest.raises(IndexError, match='component index 3'):
        local(3)
    ti.init()


def test_integer_literals_fold_as_the_kernel_computes(ti_init):
    @ti.kernel
    def folded() -> ti.i32:
        return (255 << 33) + (7 // 0) * 10 + (7 % 0) + (1 << -31)

    @ti.kernel
    def computed(s: ti.i32, z: ti.i32) -> ti.i32:
        return (255 << s) + (7 // z) * 10 + (7 % z) + (1 << -31 + 0 * s)

    assert folded() == computed(33, 0) == 510 + 70 + 0 + 2


def test_fields_created_on_one_line_are_named_each(ti_init):
    p = ti.field(ti.f32, shape=3); q = ti.field(ti.f32, shape=4)    # noqa: E702

    @ti.kernel
    def touch(i: ti.i32):
        q[i] = 1.0

    assert (p.name, q.name) == ('p', 'q')
    with pytest.raises(IndexError, match='field q of shape'):
        touch(4)


def test_a_stencil_is_checked_once_and_reports_the_index_out_of_range(ti_init):
    # bounds.grouped_checks: grid[base + o] for o in 0..2 is one check of base .. base + 2
    grid = ti.field(ti.f32, shape=(8, 8))
    flag = ti.field(ti.i32, shape=4)

    @ti.kernel
    def scatter(b0: ti.i32, b1: ti.i32):
        for _ in range(1):
            base = ti.Vector([b0, b1])
            for a in ti.static(range(3)):
                for c in ti.static(range(3)):
                    grid[base + ti.Vector([a, c])] += 1.0

    @ti.kernel
    def stops_early(k: ti.i32) -> ti.f32:
        total = 0.0
        ti.loop_config(serialize=True)
        for i in range(4):
            total += grid[k, 0]
            if flag[i] > 0:
                break
            total += grid[k + 5, 0]      # not reached when flag[i] > 0: no error then
        return total

    scatter(5, 5)
    assert grid.to_numpy().sum() == 9
    with pytest.raises(IndexError, match=r'index \(8, 5\)'):       # base + (2, 0) is out
        scatter(6, 5)
    assert grid.to_numpy().sum() == 9                              # stopped before any add
    flag.fill(1)
    assert stops_early(4) == 0.0
    flag.fill(0)
    with pytest.raises(IndexError, match=r'index \(9, 0\)'):
        stops_early(4)
