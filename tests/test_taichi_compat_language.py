"""Language items Taichi accepts: bit operations on integer vectors and matrices, vector
components written at run-time indices (with their gradients), `fill`, `ti.ndrange` in
Python scope, the walrus operator, a serial loop nest's locals, the scalar components of
a 0-D vector field, and what a plain Python function called in a kernel may do."""
import numpy as np
import pytest

import engine as ti
from test_taichi_compat import engine_run


def test_a_program_using_them_runs_unchanged():
    lines = engine_run('language_items.py')[0].splitlines()
    assert 'masks [[1, 1, 4], [1, 2, 4], [2, 4, 4], [2, 5, 4]]' in lines
    assert 'ramp [3.0, 3.25, 3.5]' in lines
    assert 'tallest 4.25' in lines
    assert 'halvings 5' in lines
    assert 'cells [(0, 1), (0, 2), (1, 1), (1, 2)]' in lines
    assert 'center [1.5, 3.0]' in lines


def finite_difference(run, field, loss, h=1e-6):
    """d loss / d field by central differences, `run()` recomputing loss."""
    base = field.to_numpy()
    grad = np.zeros_like(base)
    for index in np.ndindex(base.shape):
        values = []
        for step in (h, -h):
            moved = base.copy()
            moved[index] += step
            field.from_numpy(moved)
            run()
            values.append(loss[None])
        grad[index] = (values[0] - values[1]) / (2 * h)
    field.from_numpy(base)
    return grad


# --------------------------------------------------------------------------- bit operations

def test_bit_operations_on_integer_vectors_in_python_scope():
    ti.init(arch=ti.cpu)
    a, b = ti.Vector([12, 10, -3]), ti.Vector([10, 6, 5])
    na, nb = np.array([12, 10, -3]), np.array([10, 6, 5])
    for got, want in [(a & b, na & nb), (a | b, na | nb), (a ^ b, na ^ nb), (~a, ~na), (a << 2, na << 2),
                      (a >> 1, na >> 1), (6 & a, 6 & na), (1 << b, 1 << nb)]:
        assert got.to_list() == want.tolist()
    m = ti.Matrix([[1, 2], [4, 8]])
    assert (m ^ 3).to_list() == [[2, 1], [7, 11]] and (~m).to_list() == [[-2, -3], [-5, -9]]


def test_bit_operations_on_integer_vectors_in_kernels():
    ti.init(arch=ti.cpu)
    out = ti.Vector.field(3, ti.i32, shape=8)
    mout = ti.Matrix.field(2, 2, ti.i32, shape=2)

    @ti.kernel
    def bits(a: ti.types.vector(3, ti.i32), b: ti.types.vector(3, ti.i32)):
        out[0], out[1], out[2], out[3] = a & b, a | b, a ^ b, ~a
        out[4], out[5], out[6] = a << 2, a >> 1, 6 & a
        c = a
        c &= b
        c |= 16
        c ^= 1
        out[7] = c
        m = ti.Matrix([[a[0], a[1]], [b[0], b[1]]])
        mout[0] = m >> 1
        mout[1] = m ^ ti.Matrix([[1, 1], [0, 0]])

    na, nb = np.array([12, 10, -3]), np.array([10, 6, 5])
    bits(ti.Vector(na.tolist()), ti.Vector(nb.tolist()))
    want = [na & nb, na | nb, na ^ nb, ~na, na << 2, na >> 1, 6 & na, ((na & nb) | 16) ^ 1]
    np.testing.assert_array_equal(out.to_numpy(), want)
    m = np.array([[12, 10], [10, 6]])
    np.testing.assert_array_equal(mout.to_numpy(), [m >> 1, m ^ [[1, 1], [0, 0]]])


def test_bit_operations_need_integers():
    ti.init(arch=ti.cpu)

    @ti.kernel
    def float_bits(a: ti.types.vector(2, ti.f32)) -> ti.types.vector(2, ti.f32):
        return a & 1

    with pytest.raises(ti.TaichiTypeError, match='integer'):
        float_bits(ti.Vector([1.0, 2.0]))


# --------------------------------------------------------------------------- run-time components

def test_components_written_at_run_time_indices():
    ti.init(arch=ti.cpu)
    v = ti.Vector.field(3, ti.f32, shape=4)
    m = ti.Matrix.field(2, 3, ti.f32, shape=2)
    old = ti.field(ti.f32, shape=4)

    @ti.kernel
    def write(a: ti.types.ndarray(dtype=ti.math.vec2, ndim=1)):
        for k in v:
            for i in range(3):
                v[k][i] = 10 * k + i             # i is a loop variable, not static
            j = k % 3
            v[k][j] += 100
            old[k] = ti.atomic_add(v[k][2 - j], 0.5)
        for k in m:
            for i, j in ti.ndrange(2, 3):
                m[k][i, j] = k + 0.1 * i + 0.01 * j
        for k in a:
            a[k][k % 2] = -1.0

    arr = ti.ndarray(ti.math.vec2, shape=3)
    write(arr)
    want = np.arange(4)[:, None] * 10 + np.arange(3.0)
    want[np.arange(4), np.arange(4) % 3] += 100
    before = want[np.arange(4), 2 - np.arange(4) % 3].copy()
    want[np.arange(4), 2 - np.arange(4) % 3] += 0.5
    np.testing.assert_allclose(v.to_numpy(), want)
    np.testing.assert_allclose(old.to_numpy(), before)
    np.testing.assert_allclose(m.to_numpy()[1], 1 + 0.1 * np.arange(2)[:, None] + 0.01 * np.arange(3))
    assert arr.to_numpy().tolist() == [[-1, 0], [0, -1], [-1, 0]]


def test_local_components_written_at_run_time_indices():
    ti.init(arch=ti.cpu)

    @ti.kernel
    def local(n: ti.i32) -> ti.types.matrix(3, 3, ti.i32):
        m = ti.Matrix.zero(ti.i32, 3, 3)
        v = ti.Vector([0, 0, 0])
        for _ in range(1):
            for i in range(n):
                v[i] = i + 1
                m[i, (i + 1) % 3] = 10 * v[i]
            m[n - 1] = v                         # a row, at a run-time index
        return m

    assert local(3).to_list() == [[0, 10, 0], [0, 0, 20], [1, 2, 3]]


def test_a_run_time_component_out_of_range_is_an_index_error():
    ti.init(arch=ti.cpu)
    v = ti.Vector.field(3, ti.f32, shape=2)

    @ti.kernel
    def past(n: ti.i32):
        for k in v:
            v[k][n] = 1.0

    with pytest.raises(IndexError):
        past(3)


def test_gradients_through_run_time_components():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.Vector.field(3, float, shape=3, needs_grad=True)
    y = ti.Vector.field(3, float, shape=3, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def spread():
        for k in x:
            local = ti.Vector.zero(float, 3)
            for i in range(3):
                local[(i + k) % 3] = x[k][i] ** 2
            for i in range(3):
                y[k][(i + 1) % 3] = local[i] * x[k][(2 * i) % 3]
                y[k][i] += ti.sin(x[k][i])

    @ti.kernel
    def total():
        for k in y:
            loss[None] += (y[k] * ti.Vector([1.0, 2.0, 3.0])).sum() * (k + 1)

    def run():
        y.fill(0)
        loss[None] = 0
        spread()
        total()

    x.from_numpy(np.random.default_rng(1).uniform(-1, 1, (3, 3)))
    with ti.ad.Tape(loss):
        spread()
        total()
    analytic = x.grad.to_numpy()
    np.testing.assert_allclose(analytic, finite_difference(run, x, loss), rtol=1e-6, atol=1e-8)


# --------------------------------------------------------------------------- fill

def test_fill_of_locals_elements_and_fields_in_kernels():
    ti.init(arch=ti.cpu)
    v = ti.Vector.field(2, ti.f32, shape=3)
    s = ti.field(ti.f32, shape=3)

    @ti.kernel
    def fills() -> ti.types.matrix(2, 2, ti.f32):
        m = ti.Matrix([[1.0, 2.0], [3.0, 4.0]])
        m.fill(7.0)
        for i in v:
            v[i].fill(i)
        return m

    @ti.kernel
    def field_fill(a: ti.f32):
        s.fill(a)                   # a loop over the field, here: the next loop sees it
        for i in s:
            s[i] += i
        v.fill(ti.Vector([a, -a]))
        v.get_scalar_field(1).fill(5)

    assert fills().to_list() == [[7, 7], [7, 7]]
    assert v.to_numpy().tolist() == [[0, 0], [1, 1], [2, 2]]
    field_fill(2.0)
    assert s.to_numpy().tolist() == [2, 3, 4] and v.to_numpy().tolist() == [[2, 5]] * 3


# --------------------------------------------------------------------------- ndrange, walrus

def test_ndrange_iterates_in_python_scope():
    assert list(ti.ndrange(2, 2)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert list(ti.ndrange((1, 3))) == [(1,), (2,)]
    assert list(ti.ndrange(2, 0)) == []
    assert [i.to_list() for i in ti.grouped(ti.ndrange(1, (4, 6)))] == [[0, 4], [0, 5]]
    total = 0
    for i, j in ti.ndrange(3, 4):
        total += i * 4 + j
    assert total == sum(range(12))


def test_the_walrus_operator_in_kernels():
    ti.init(arch=ti.cpu)
    x = ti.field(ti.i32, shape=6)

    @ti.func
    def clipped(a):
        return b if (b := a * 2) < 7 else 7

    @ti.kernel
    def walrus() -> ti.i32:
        for i in x:
            if (doubled := clipped(i)) > 4:
                x[i] = doubled
        n, steps = 100, 0
        while (n := n // 3) > 0:
            steps += 1
        return steps

    assert walrus() == 4
    assert x.to_numpy().tolist() == [0, 0, 0, 6, 7, 7]


# --------------------------------------------------------------------------- serial loop nests

def test_a_local_updated_in_a_serial_loop_nest():
    """`for _ in range(1):` around a loop nest is Taichi's idiom for a serial loop: a
    kernel-scope local updated inside it is one local, read after it."""
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    f = ti.field(float, shape=8, needs_grad=True)
    result = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def softest_max():
        best = f[0]
        total = 0.0
        for _ in range(1):
            for i in range(8):
                if best < f[i]:
                    best = f[i]
                total += ti.exp(f[i] - best)
        result[None] = best + ti.log(total)

    f.from_numpy(np.array([0.3, -1.0, 0.9, 0.2, 0.85, -0.5, 0.1, 0.6]))
    softest_max()
    with ti.ad.Tape(result):
        softest_max()
    np.testing.assert_allclose(f.grad.to_numpy(), finite_difference(softest_max, f, result), rtol=1e-6,
                               atol=1e-9)

    @ti.kernel
    def largest() -> ti.f64:
        best = f[0]
        ti.loop_config(serialize=True)
        for i in range(8):
            best = ti.max(best, f[i])
        return best

    assert largest() == 0.9


def test_a_parallel_loop_still_may_not_assign_a_shared_local():
    ti.init(arch=ti.cpu)
    f = ti.field(ti.f32, shape=8)

    @ti.kernel
    def racy() -> ti.f32:
        best = f[0]
        for i in range(8):
            best = ti.max(best, f[i])
        return best

    with pytest.raises(ti.TaichiSyntaxError, match=r'all threads share it.*serialize=True'):
        racy()


def test_a_shared_local_assigned_first_in_each_iteration_is_the_iterations_own():
    ti.init(arch=ti.cpu)
    x = ti.Vector.field(2, ti.f32, shape=8)
    out = ti.Vector.field(2, ti.f32, shape=8)

    @ti.kernel
    def spread():
        r = x[0] * 2                # Taichi's comet example: assigned again before any read
        for i in range(8):
            r = x[i]
            r += ti.Vector([i, 1.0])
            out[i] = r

    @ti.kernel
    def read_after() -> ti.f32:
        r = x[0] * 2
        for i in range(8):
            r = x[i]
            out[i] = r
        return r[0]

    x.fill(1.0)
    spread()
    assert out.to_numpy()[:, 0].tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
    with pytest.raises(ti.TaichiSyntaxError, match='assigned in every iteration of the parallel loop'):
        read_after()


# --------------------------------------------------------------------------- scalar fields of a vector field

def test_scalar_components_of_a_0d_vector_field():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    c = ti.Vector.field(2, float, shape=(), needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)
    first, second = c.get_scalar_field(0), c.get_scalar_field(1)
    first[None] = 1.5
    second[None] = first[None] * 2
    assert c[None].to_list() == [1.5, 3.0] and first.shape == () and first.dtype == ti.f64

    @ti.kernel
    def energy():
        first[None] += 1.0
        loss[None] = first[None] ** 2 + second[None]

    energy()
    assert first[None] == 2.5 and loss[None] == 2.5 ** 2 + 3.0
    first.fill(0.5)
    with ti.ad.Tape(loss):
        energy()
    assert first.grad[None] == 2 * 1.5 and c.grad[None].to_list() == [3.0, 1.0]
    np.testing.assert_array_equal(second.to_numpy(), 3.0)


# --------------------------------------------------------------------------- plain Python functions

def test_a_plain_python_function_runs_when_the_kernel_compiles():
    """As in Taichi, a plain function called in a kernel is not inlined as a ti.func: it runs
    as Python when the kernel compiles (Taichi warns that its body is not transformed), so
    it may compute with the kernel's values but not touch a field (Taichi's field access
    from it fails too, as Python-scope access inside a kernel)."""
    ti.init(arch=ti.cpu)
    x = ti.field(ti.f32, shape=4)

    def twice_plus_one(v):
        return 2 * v + 1

    def bump(i):
        x[i] += 1.0

    @ti.kernel
    def arithmetic():
        for i in x:
            x[i] = twice_plus_one(i)

    @ti.kernel
    def touches_a_field():
        for i in x:
            bump(i)

    arithmetic()
    assert x.to_numpy().tolist() == [1, 3, 5, 7]
    with pytest.raises(ti.TaichiSyntaxError, match='make it a @ti.func'):
        touches_a_field()


def test_a_matrix_row_read_at_a_run_time_index_with_its_gradient():
    ti.init(default_fp=ti.f64)
    a = ti.field(ti.f64, shape=6, needs_grad=True)
    k = ti.field(ti.i32, shape=())
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def f():
        m = ti.Matrix([[a[0], a[1]], [a[2], a[3]], [a[4], a[5]]])
        for _ in range(1):
            row = m[k[None]]
            loss[None] += row[0] * row[0] + 3 * row[1]

    def run(x):
        a.from_numpy(x)
        with ti.ad.Tape(loss):
            f()
        return loss[None]
    x = np.linspace(0.1, 0.6, 6)
    for r in range(3):
        k[None] = r
        assert run(x) == pytest.approx(x[2 * r] ** 2 + 3 * x[2 * r + 1])
        grad = a.grad.to_numpy().copy()
        fd = [(run(x + e) - run(x - e)) / 2e-6 for e in np.eye(6) * 1e-6]
        assert np.allclose(grad, fd, atol=1e-8)


def test_get_scalar_field_checks_its_component_at_once():
    ti.init()
    v = ti.Vector.field(3, ti.f32, shape=4)
    v.get_scalar_field(-1).fill(2.0)        # the last component, as a Python index
    assert v.to_numpy()[:, 2].tolist() == [2.0] * 4
    for bad in (3, -4, 1.0):
        with pytest.raises(IndexError, match='get_scalar_field'):
            v.get_scalar_field(bad)


# --------------------------------------------------------------------------- popcnt, clz

@pytest.mark.parametrize('interpret', [False, True])
def test_popcnt_and_clz_count_in_the_operands_own_width(interpret):
    ti.init(arch=ti.cpu, interpret=interpret)

    @ti.kernel
    def bits(a: ti.i32, b: ti.i64, c: ti.u8) -> ti.types.vector(6, ti.i32):
        return ti.Vector([ti.math.popcnt(a), ti.math.clz(a), ti.math.popcnt(b), ti.math.clz(b),
                          ti.math.popcnt(c), ti.math.clz(c)])

    assert bits(-1, 5, 3).to_list() == [32, 0, 2, 61, 2, 6]
    assert bits(0, -1, 128).to_list() == [0, 32, 64, 0, 1, 0]
    assert bits(1 << 20, 1 << 40, 0).to_list() == [1, 11, 1, 23, 0, 8]
    assert ti.math.popcnt(ti.Vector([1, 3, 7])).to_list() == [1, 2, 3] and ti.math.clz(1) == 31
    with pytest.raises(ti.TaichiTypeError, match='takes an integer'):
        ti.math.popcnt(1.5)


def test_a_chained_comparison_of_vectors_holds_entry_by_entry():
    ti.init(arch=ti.cpu, default_fp=ti.f64)

    @ti.kernel
    def inside(a: ti.f64, b: ti.f64) -> ti.i32:
        v = ti.Vector([a, b])
        return all(-0.1 <= v <= 1.1)        # (-0.1 <= v) & (v <= 1.1), as Taichi

    assert inside(0.2, 0.5) == 1 and inside(0.2, -0.109) == 0 and inside(1.2, 0.5) == 0


def test_real_functions_are_typed_calls_that_return_early_at_compile_time():
    ti.init(arch=ti.cpu)
    arr = ti.Vector.ndarray(2, ti.f32, shape=4)

    @ti.real_func
    def index_of(u: int, scale: float) -> float:        # u: int truncates, as a typed call does
        return u * scale

    @ti.func
    def pick(a: ti.template(), i):
        if ti.static(a.element_shape() == [2]):        # Taichi's ndarray element_shape()
            return a[i][0] + a[i][1]
        ti.static_assert(False)                          # never compiled: the func returned above
        return 0.0

    @ti.kernel
    def run(a: ti.types.ndarray(dtype=ti.math.vec2, ndim=1)) -> ti.f32:
        return index_of(2.9, 1.5) + pick(a, 1)

    arr.from_numpy(np.array([[0, 0], [1, 2], [0, 0], [0, 0]], dtype=np.float32))
    assert run(arr) == 3.0 + 3.0
    assert ti.experimental.real_func is ti.real_func

    @ti.real_func
    def countdown(n: int) -> int:
        return countdown(n - 1)

    @ti.kernel
    def recurse() -> ti.i32:
        return countdown(3)

    with pytest.raises(ti.TaichiSyntaxError, match='calls itself'):
        recurse()


def test_vectors_and_matrices_slice_at_compile_time():
    ti.init(arch=ti.cpu)

    @ti.kernel
    def parts(a: ti.f32) -> ti.types.vector(4, ti.f32):
        v = ti.Vector([a, 2 * a, 3 * a])
        m = ti.Matrix([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        head = v[:2]                            # Taichi's eulerfluid2d: force[:2]
        return ti.Vector([head[1], v[1:][1], m[1, :][2], m[:, 2][0]])

    assert parts(1.0).to_list() == [2.0, 3.0, 6.0, 3.0]
    assert ti.Matrix([[1, 2], [3, 4]])[:, 0].to_list() == [1, 3]
