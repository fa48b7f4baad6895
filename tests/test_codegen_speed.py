"""What the compiler does for speed, shown on the LLVM IR it emits, and that none of it
changes a value or a gradient: constants stay constants in a parallel loop's task (LLVM
then knows an inner loop's trip count), a struct-for's indices in 64 bits (the loop
vectorizer then sees consecutive elements: `wide_indices`), field accesses that alias no
other field (`field_noalias`), loops of gathers kept out of the vectorizer
(`scalar_gathers`), a struct-for's adjoint adding into the elements its
iteration owns without atomics, and ti.init(fast_math=True). Each optional pass is shown
off and on, on values and gradients, on two threads with chunks small enough to split
every loop."""
import re

import numpy as np
import pytest

import engine as ti
from engine.backend.cpu import jit, ordering

VECTOR = re.compile(r'<\d+ x (float|double)>')
CONSECUTIVE = re.compile(r'load <\d+ x (float|double)>')     # a vector load of neighbouring elements


@pytest.fixture
def llvm_ir(monkeypatch):
    """{kernel name: its module's LLVM IR after O3}, for the kernels compiled in the test."""
    modules, compile_ir = {}, jit.compile_ir

    def spy(text):
        name = re.search(r'define void @"?(\w+?)_\d+_main', text)
        if name:
            modules[name.group(1)] = jit.optimized_ir(text)
        return compile_ir(text)
    monkeypatch.setattr(jit, 'compile_ir', spy)
    return modules


def _init(**options):
    ti.init(arch=ti.cpu, offline_cache=False, cpu_max_num_threads=2, **options)


def _stencil():
    p = ti.field(ti.f32, shape=(64, 64), needs_grad=True)
    q = ti.field(ti.f32, shape=(64, 64), needs_grad=True)

    @ti.kernel
    def scale():
        for i, j in q:
            q[i, j] = 2 * p[i, j] + ti.sqrt(p[i, j] + 1.0)
    return p, q, scale


@pytest.mark.parametrize('disabled', [(), ('wide_indices',)])
def test_a_struct_for_over_a_2d_field_loads_consecutive_elements(llvm_ir, disabled):
    _init(disable_passes=disabled)
    p, q, scale = _stencil()
    p.from_numpy(np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 100)
    scale()
    assert bool(CONSECUTIVE.search(llvm_ir['scale'])) == (not disabled)
    expected = 2 * p.to_numpy() + np.sqrt(p.to_numpy() + np.float32(1))
    np.testing.assert_array_equal(q.to_numpy(), expected)


@pytest.mark.parametrize('disabled', [(), ('field_noalias',)])
def test_a_gather_loop_is_vectorized_where_fields_do_not_alias(llvm_ir, disabled):
    # scalar_gathers would keep this loop of gathers scalar (faster on this machine): off
    _init(disable_passes=disabled + ('scalar_gathers',), check_bounds=False)
    x = ti.field(ti.i32, shape=256)
    grid = ti.field(ti.f32, shape=64)
    y = ti.field(ti.f32, shape=256)

    @ti.kernel
    def gather():
        for k in x:
            y[k] = grid[x[k]] * 0.5 + grid[(x[k] + 1) % 64]
    x.from_numpy((np.arange(256) * 7 % 64).astype(np.int32))
    grid.from_numpy(np.linspace(0, 1, 64, dtype=np.float32))
    gather()
    assert bool(VECTOR.search(llvm_ir['gather'])) == (not disabled)
    g, i = grid.to_numpy(), x.to_numpy()
    np.testing.assert_array_equal(y.to_numpy(), g[i] * np.float32(0.5) + g[(i + 1) % 64])


def test_an_inner_loop_of_constant_length_unrolls_in_the_task(llvm_ir):
    """The loop's bounds were kernel-scope constants passed to the task by value: LLVM
    could not count its iterations, so the outer loop was not vectorized either."""
    _init()
    centre = ti.Vector.field(2, ti.f32, shape=4)
    pos = ti.Vector.field(2, ti.f32, shape=1000)
    out = ti.field(ti.f32, shape=1000)

    @ti.kernel
    def potential():
        for i in pos:
            s = 0.0
            for k in range(4):
                r = pos[i] - centre[k]
                s += ti.exp(-r.dot(r)) / ti.sqrt(r.dot(r) + 0.1)
            out[i] = s
    rng = np.random.default_rng(1)
    pos.from_numpy(rng.random((1000, 2), dtype=np.float32))
    centre.from_numpy(rng.random((4, 2), dtype=np.float32))
    potential()
    assert VECTOR.search(llvm_ir['potential'])
    r = pos.to_numpy()[:, None, :] - centre.to_numpy()[None, :, :]
    d = (r * r).sum(-1)
    np.testing.assert_allclose(out.to_numpy(), (np.exp(-d) / np.sqrt(d + 0.1)).sum(1), rtol=1e-5)


def _grid_update(disabled, fast_math=False):
    """A grid-update-shaped struct-for and its gradient, float64, on two threads."""
    _init(disable_passes=disabled, default_fp=ti.f64, fast_math=fast_math)
    m = ti.field(ti.f64, shape=(24, 20), needs_grad=True)
    v = ti.Vector.field(2, ti.f64, shape=(24, 20), needs_grad=True)
    out = ti.Vector.field(2, ti.f64, shape=(24, 20), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def update():
        for i, j in m:
            u = v[i, j] / (m[i, j] + 1.0)
            if i < 3 and u[0] < 0:
                u[0] = 0.0
            if j > 16:
                u *= ti.exp(-u.norm())
            out[i, j] = u

    @ti.kernel
    def total():
        for i, j in out:
            loss[None] += (out[i, j] ** 2).sum() * (1 + i % 3)
    rng = np.random.default_rng(2)
    m.from_numpy(rng.random((24, 20)) + 0.5)
    v.from_numpy(rng.standard_normal((24, 20, 2)))

    def run():
        loss[None] = 0
        update()
        total()
        return loss[None]
    with ti.ad.Tape(loss):
        update()
        total()
    return run, m, v, out.to_numpy(), v.grad.to_numpy(), m.grad.to_numpy()


@pytest.mark.parametrize('disabled', [('owned_adjoints',), ('wide_indices',), ('field_noalias',)])
def test_passes_change_no_value_and_no_gradient(monkeypatch, disabled):
    """A struct-for's adjoint adds into the elements its iteration owns without atomics
    (owned_adjoints now proves (i // n, i % n) owned): the same bits with each pass off."""
    monkeypatch.setattr(ordering, 'CHUNK_MIN', 7)  # read at codegen, not from the environment
    *_, out_on, vg_on, mg_on = _grid_update(())
    *_, out_off, vg_off, mg_off = _grid_update(disabled)
    np.testing.assert_array_equal(out_on, out_off)
    np.testing.assert_array_equal(vg_on, vg_off)
    np.testing.assert_array_equal(mg_on, mg_off)


@pytest.mark.parametrize('fast_math', [False, True])
def test_struct_for_gradient_matches_finite_differences(fast_math):
    run, m, v, _, v_grad, m_grad = _grid_update((), fast_math=fast_math)
    for field, grad, index in ((v, v_grad, (5, 17, 1)), (v, v_grad, (1, 2, 0)), (m, m_grad, (7, 18))):
        base = field.to_numpy()
        moved = []
        for h in (1e-6, -1e-6):
            shifted = base.copy()
            shifted[index] += h
            field.from_numpy(shifted)
            moved.append(run())
        field.from_numpy(base)
        assert grad[index] == pytest.approx((moved[0] - moved[1]) / 2e-6, rel=1e-6, abs=1e-9)


def test_fast_math_keeps_nan_and_inf_and_changes_values_by_rounding_only():
    def once(fast_math):
        _init(fast_math=fast_math)
        a = ti.field(ti.f32, shape=4096)
        out = ti.field(ti.f32, shape=4096)
        flags = ti.field(ti.i32, shape=4096)

        @ti.kernel
        def mix():
            for i in a:
                s = 0.0
                for k in range(8):
                    s += a[(i + k) % 4096] / (k + 1.0)
                out[i] = ti.exp(-s) + ti.sqrt(ti.abs(s)) * 0.25
                flags[i] = ti.math.isnan(a[i] / a[i]) + 2 * ti.math.isinf(1.0 / a[i])
        values = np.linspace(-2, 2, 4096).astype(np.float32)
        values[::512] = 0
        a.from_numpy(values)
        mix()
        return out.to_numpy(), flags.to_numpy()
    exact, exact_flags = once(False)
    fast, fast_flags = once(True)
    np.testing.assert_array_equal(fast_flags, exact_flags)
    assert (exact_flags[::512] == 3).all()
    np.testing.assert_allclose(fast, exact, rtol=1e-5)


def test_fast_math_is_part_of_the_cache_key(tmp_path):
    results = []
    for fast_math in (False, True, False):
        ti.init(arch=ti.cpu, offline_cache_file_path=str(tmp_path), fast_math=fast_math)
        x = ti.field(ti.f32, shape=8)

        @ti.kernel
        def fill():
            for i in x:
                x[i] = (i + 0.1) / 3.0
        fill()
        results.append(x.to_numpy())
    np.testing.assert_array_equal(results[0], results[2])
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6)


def test_a_vectorized_loop_gives_the_same_bits_on_one_and_two_threads(llvm_ir):
    """The vector body and the scalar iterations around it compute each element alike
    (math functions are called per lane, division and sqrt are exact), so where a
    thread's chunk begins does not change a bit."""
    results = []
    for threads in (1, 2, 1):
        ti.init(arch=ti.cpu, offline_cache=False, cpu_max_num_threads=threads)
        a = ti.field(ti.f32, shape=(37, 29))
        out = ti.field(ti.f32, shape=(37, 29))

        @ti.kernel
        def mix():
            for i, j in a:
                s = a[i, j]
                out[i, j] = ti.exp(-s * s) / (1.0 + ti.sqrt(ti.abs(s))) + ti.sin(s) * ti.log(2.0 + s * s)
        a.from_numpy(np.random.default_rng(3).standard_normal((37, 29)).astype(np.float32))
        for _ in range(50):      # long enough for the pool to split the loop
            mix()
        assert VECTOR.search(llvm_ir['mix'])
        results.append(out.to_numpy())
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])


def test_an_atomic_into_the_iterations_own_element_is_a_plain_add(llvm_ir, monkeypatch):
    """`force[i] += f` in an inner loop: no other iteration touches force[i], so no atomic
    instruction (ordering.Plan.plain), and LLVM keeps the sum in a register. Another
    iteration's element (`force[(i + 1) % n]`) is added through the chunks' buffers."""
    monkeypatch.setattr(ordering, 'CHUNK_MIN', 16)  # read at codegen, not from the environment
    for shared in (False, True):
        _init()
        n = 200
        pos = ti.field(ti.f32, shape=n)
        force = ti.field(ti.f32, shape=n)

        @ti.kernel
        def pull():
            for i in pos:
                for j in range(n):
                    d = pos[j] - pos[i]
                    if ti.static(shared):
                        force[(i + 1) % n] += d / (d * d + 0.01)
                    else:
                        force[i] += d / (d * d + 0.01)
        p = np.random.default_rng(4).random(n).astype(np.float32)
        pos.from_numpy(p)
        pull()
        if not shared:
            assert not re.search(r'atomicrmw|cmpxchg', llvm_ir['pull'].split('_task1(')[1])
        d = p[None, :] - p[:, None]
        expected = (d / (d * d + np.float32(0.01))).sum(1, dtype=np.float64)
        got = force.to_numpy()
        np.testing.assert_allclose(np.roll(got, -1) if shared else got, expected, rtol=1e-4, atol=1e-3)


def test_ownership_of_mixed_radix_indices_and_a_modulus_of_one(monkeypatch):
    """(i % 3, i // 3) names one element per iteration, its adjoint adds without atomics;
    `i % 1` is no digit (it once sent the proof into an endless loop), and `x[i % 1]`
    is shared by every iteration, whose adjoint adds must all arrive."""
    monkeypatch.setattr(ordering, 'CHUNK_MIN', 2)  # read at codegen, not from the environment
    _init(default_fp=ti.f64)
    x = ti.field(ti.f64, shape=(1, 3, 4), needs_grad=True)
    y = ti.field(ti.f64, shape=(1, 3, 4), needs_grad=True)
    s = ti.field(ti.f64, shape=1, needs_grad=True)

    @ti.kernel
    def spread():
        for i in range(12):
            y[i % 1, i % 3, i // 3] = x[i % 1, i % 3, i // 3] ** 2
            s[i % 1] += x[i % 1, i % 3, i // 3]
    x.from_numpy(np.arange(12, dtype=np.float64).reshape(1, 4, 3).transpose(0, 2, 1))
    spread()
    y.grad.fill(1.0)
    s.grad.fill(2.0)
    spread.grad()
    np.testing.assert_array_equal(x.grad.to_numpy(), 2 * x.to_numpy() + 2.0)


def _advection(disabled):
    """A semi-Lagrangian step (positions traced back, four clamped samples) and a Jacobi
    sweep of clamped neighbours: loops of gathers. float64 values and gradients."""
    _init(disable_passes=disabled, default_fp=ti.f64)
    n = 24
    q = ti.field(ti.f64, shape=(n, n), needs_grad=True)
    vel = ti.Vector.field(2, ti.f64, shape=(n, n), needs_grad=True)
    out = ti.field(ti.f64, shape=(n, n), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.func
    def sample(f, u, v):
        return f[ti.max(0, ti.min(n - 1, int(u))), ti.max(0, ti.min(n - 1, int(v)))]

    @ti.kernel
    def advect():
        for i, j in q:
            p = ti.Vector([i + 0.5, j + 0.5]) - 3.0 * vel[i, j]
            s, t = p[0] - 0.5, p[1] - 0.5
            iu, iv = ti.floor(s), ti.floor(t)
            fu, fv = s - iu, t - iv
            a, b = sample(q, iu, iv), sample(q, iu + 1, iv)
            c, d = sample(q, iu, iv + 1), sample(q, iu + 1, iv + 1)
            out[i, j] = (a + fu * (b - a)) * (1 - fv) + (c + fu * (d - c)) * fv

    @ti.kernel
    def jacobi():
        for i, j in out:
            loss[None] += (sample(out, i - 1, j) + sample(out, i + 1, j) + sample(out, i, j - 1)
                           + sample(out, i, j + 1) - out[i, j]) ** 2
    rng = np.random.default_rng(3)
    q.from_numpy(rng.random((n, n)))
    vel.from_numpy(rng.standard_normal((n, n, 2)))
    with ti.ad.Tape(loss):
        advect()
        jacobi()
    return out.to_numpy(), loss[None], q.grad.to_numpy(), vel.grad.to_numpy()


def test_loops_of_gathers_stay_scalar_and_change_nothing(llvm_ir, monkeypatch):
    """Mostly-gather loops carry `llvm.loop.vectorize.width 1` (the widened body spilled and
    ran 25-40% slower); the same bits with the pass off, on two threads in small chunks."""
    monkeypatch.setattr(ordering, 'CHUNK_MIN', 7)  # read at codegen, not from the environment
    on = _advection(())
    for name in ('advect', 'jacobi', 'advect_grad', 'jacobi_grad'):
        assert 'llvm.loop.vectorize.width' in llvm_ir[name], name
    off = _advection(('scalar_gathers',))
    assert 'llvm.loop.vectorize.width' not in llvm_ir['advect']
    for a, b in zip(on, off):
        np.testing.assert_array_equal(a, b)


def test_a_loop_of_consecutive_loads_is_still_widened(llvm_ir):
    _init()
    p, q, scale = _stencil()
    scale()
    assert 'llvm.loop.vectorize.width' not in llvm_ir['scale'] and CONSECUTIVE.search(llvm_ir['scale'])


@pytest.mark.parametrize('n', [5, 200])
def test_chunks_of_constant_bounds_are_planned_at_compile_time(llvm_ir, monkeypatch, n):
    """A buffered loop over range(200) is cut into its chunks when compiled (its task holds
    one kind of add only); over range(m), m an argument, at run time: the same bits either
    way, on two threads, one chunk (n = 5) or several."""
    monkeypatch.setattr(ordering, 'CHUNK_MIN', 16)  # read at codegen, not from the environment
    _init()
    w = ti.field(ti.f32, shape=n)
    to = ti.field(ti.i32, shape=n)
    fixed, given = ti.field(ti.f32, shape=7), ti.field(ti.f32, shape=7)

    @ti.kernel
    def scatter_fixed():
        for i in range(n):
            fixed[to[i]] += w[i]

    @ti.kernel
    def scatter_given(m: ti.i32):
        for i in range(m):
            given[to[i]] += w[i]
    rng = np.random.default_rng(5)
    w.from_numpy(rng.standard_normal(n).astype(np.float32) * 10 ** rng.integers(-3, 4, n).astype(np.float32))
    to.from_numpy(rng.integers(0, 7, n).astype(np.int32))
    scatter_fixed()
    scatter_given(n)
    np.testing.assert_array_equal(fixed.to_numpy(), given.to_numpy())
    task = llvm_ir['scatter_fixed'].split('_task1(')[1]
    assert ('_buffers' in task) == (n > 16)
