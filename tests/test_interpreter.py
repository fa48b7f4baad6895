"""The IR interpreter (`ti.init(interpret=True)`, engine/backend/interpret.py) against native code.

Each scenario builds its fields and kernels from scratch and returns named arrays
(values, gradients from ti.ad.Tape and kernel.grad, Jacobians from ti.ad.jacobian);
it runs once natively and once interpreted, and the two must agree to rounding
(float64; atomics make the native summation order vary, hence rtol 1e-12)."""
import numpy as np
import pytest

import engine as ti
from engine.backend import interpret
from engine.runtime import pipeline
from engine.ir.nodes import Block, Stmt

N = 3


def both(scenario):
    """Run `scenario()` natively and interpreted; return the interpreted results."""
    results = []
    for interpreted in (False, True):
        ti.init(default_fp=ti.f64, interpret=interpreted)
        compiled = pipeline.compile_count
        results.append({k: np.asarray(v, dtype=np.float64) for k, v in scenario().items()})
        if interpreted:
            assert pipeline.compile_count == compiled, 'interpret=True compiled native code'
    native, interpreted = results
    assert native.keys() == interpreted.keys()
    for key in native:
        np.testing.assert_allclose(interpreted[key], native[key], rtol=1e-12, atol=1e-13, err_msg=key)
    return interpreted


def _inputs(*fields, seed=0):
    rng = np.random.default_rng(seed)
    for f in fields:
        f.from_numpy(rng.uniform(-1.2, 1.2, f.data.shape))


def test_arithmetic_math_and_casts():
    def scenario():
        x = ti.field(ti.f64, shape=N, needs_grad=True)
        y = ti.field(ti.f64, shape=(7, N), needs_grad=True)
        k = ti.field(ti.i32, shape=(6, N))
        loss = ti.field(ti.f64, shape=(), needs_grad=True)

        @ti.kernel
        def f():
            for i in range(N):
                a, b = x[i], x[(i + 1) % N]
                y[0, i] = ti.sin(a) * ti.cos(b) + ti.tan(0.3 * a) - ti.tanh(b) + ti.math.atan(a)
                y[1, i] = ti.exp(0.5 * a) / (1.0 + ti.log(b * b + 1.0)) + ti.rsqrt(a * a + 1.0)
                y[2, i] = ti.sqrt(a * a + 0.5) + ti.atan2(a, b) + ti.asin(0.4 * ti.tanh(a)) + \
                    ti.acos(0.3 * b)
                y[3, i] = a ** 3 - 2.0 * a ** -2 + ti.abs(a) ** b + ti.pow(b * b + 1.0, 0.7)
                y[4, i] = ti.max(a, b) - ti.min(a, 0.2) + ti.select(a > b, a * b, a - b) - (-a)
                y[5, i] = a % 0.7 + (a // 0.3) + ti.floor(a * 3) + ti.ceil(b * 2) + ti.round(a * 5)
                y[6, i] = ti.cast(ti.cast(a * 10, ti.i32), ti.f64) + \
                    ti.cast(ti.cast(a, ti.f32), ti.f64) * ti.stop_grad(b)
                n, m = ti.cast(a * 100, ti.i32), ti.cast(b * 7, ti.i32) - i
                k[0, i] = n // m + n // (i - 1)          # by zero: native code divides by 1
                k[1, i] = n % m + n % (i - 1)
                k[2, i] = (n & 0xFF) ^ (m | 3)
                k[3, i] = (n << 3) >> 2
                k[4, i] = ~n + ti.max(n, m) - ti.min(n, -m) + ti.abs(m)
                k[5, i] = n * 1000003 * 1000003            # wraps around
                for c in ti.static(range(7)):
                    loss[None] += y[c, i]

        _inputs(x)
        with ti.ad.Tape(loss):
            f()
        return {'y': y.to_numpy(), 'k': k.to_numpy(), 'loss': loss[None], 'dx': x.grad.to_numpy(),
                'J': ti.ad.jacobian(f, [x], [y], mode='forward')}
    both(scenario)


def test_branches_serial_loops_while_break_continue():
    def scenario():
        x = ti.field(ti.f64, shape=N, needs_grad=True)
        y = ti.field(ti.f64, shape=(4, N), needs_grad=True)

        @ti.func
        def smooth(u, v):
            return u * ti.tanh(v) + 0.5

        @ti.kernel
        def f():
            for i in range(N):
                a, b = x[i], x[(i + 1) % N]
                v = a
                for j in range(4):
                    if v > 0.5:
                        v = v * 0.9 + ti.sin(b)
                    else:
                        v += a * b
                    if j == 2:
                        continue
                    v = v * 0.8 + 0.1 * j
                w, u = 0, b
                while w < 5:
                    w += 1
                    u = ti.tanh(u) + a * 0.3
                    if u > 0.6:
                        break
                s = 0.0
                for j in range(3):
                    t = ti.cast(j, ti.f64)
                    if a * t > 0.2:
                        continue
                    s += ti.exp(-t * a)
                    if s > 2.5:
                        break
                y[0, i] = v
                y[1, i] = u * ti.cast(w, ti.f64)
                y[2, i] = smooth(s, a)

        @ti.kernel
        def running():                   # a top-level serial loop carrying a local
            acc = 0.0
            ti.loop_config(serialize=True)
            for i in range(N):
                acc = acc * ti.sin(x[i]) + x[i]
                y[3, i] = acc

        def both_kernels():
            f()
            running()

        _inputs(x)
        f()
        running()
        return {'y': y.to_numpy(),
                'Jr': ti.ad.jacobian(both_kernels, [x], [y], mode='reverse'),
                'Jf': ti.ad.jacobian(both_kernels, [x], [y], mode='forward')}
    both(scenario)


def test_vectors_matrices_and_2d_fields():
    def scenario():
        v = ti.Vector.field(3, ti.f64, shape=N, needs_grad=True)
        M = ti.Matrix.field(2, 2, ti.f64, shape=(N, 2), needs_grad=True)
        out = ti.field(ti.f64, shape=(N, 2), needs_grad=True)
        loss = ti.field(ti.f64, shape=(), needs_grad=True)

        @ti.kernel
        def f():
            for i, j in ti.ndrange(N, 2):
                a, m = v[i], M[i, j]
                w = ti.Vector([a[0] + a[1], a[2] * a[0]])
                r = m @ w + m.transpose() @ w
                c = a.cross(ti.Vector([1.0, a[1], 0.5]))
                out[i, j] = r.norm() + a.dot(a) * m.determinant() + c.sum() + m.inverse()[0, 1] * 0.1
                loss[None] += out[i, j] ** 2

        _inputs(v, M)
        for f_ in (v, M):
            f_.data[...] += 2.0 * np.sign(f_.data)        # keep the matrices invertible
        with ti.ad.Tape(loss):
            f()
        return {'out': out.to_numpy(), 'dv': v.grad.to_numpy(), 'dM': M.grad.to_numpy(),
                'J': ti.ad.jacobian(f, [v, M], [out], mode='forward')}
    both(scenario)


def test_atomics_shared_locals_and_return_value():
    def scenario():
        x = ti.field(ti.f64, shape=N)
        z = ti.field(ti.f64, shape=N)
        old = ti.field(ti.f64, shape=N)
        c = ti.field(ti.i32, shape=4)
        hist = ti.field(ti.i32, shape=2)

        @ti.kernel
        def f(bias: ti.f64) -> ti.f64:
            c[1] = 1000
            total = 0.0
            for i in range(N):
                old[i] = ti.atomic_add(z[i], x[i])        # the old value
                ti.atomic_max(c[0], ti.cast(x[i] * 100, ti.i32))
                ti.atomic_min(c[1], ti.cast(x[i] * 100, ti.i32))
                ti.atomic_xor(c[2], i + 5)
                ti.atomic_sub(c[3], i)
                hist[i % 2] += 1
                total += x[i] * x[i]
            return total + bias + c[0]

        _inputs(x)
        z.fill(0.5)
        r1, r2 = f(0.25), f(-1.0)
        return {'z': z.to_numpy(), 'old': old.to_numpy(), 'c': c.to_numpy(), 'hist': hist.to_numpy(),
                'ret': [r1, r2]}
    both(scenario)


def test_ndarray_arguments_and_kernel_grad():
    def scenario():
        @ti.kernel
        def f(a: ti.types.ndarray(), b: ti.types.ndarray(), scale: ti.f64):
            for i in range(a.shape[0]):
                b[i] = ti.sin(a[i]) * scale + a[(i + 1) % a.shape[0]] ** 2

        @ti.kernel
        def rows(m: ti.types.ndarray(), out: ti.types.ndarray()):
            for i, j in ti.ndrange(m.shape[0], m.shape[1]):
                out[i] += m[i, j] * (j + 1)

        a, b = ti.ndarray(ti.f64, N, needs_grad=True), ti.ndarray(ti.f64, N, needs_grad=True)
        a.from_numpy(np.linspace(-1, 1, N))
        f(a, b, 1.5)
        b.grad.from_numpy(np.array([1.0, -2.0, 0.5]))
        f.grad(a, b, 1.5)
        m, out = np.arange(6.0).reshape(3, 2), np.zeros(3)
        rows(m, out)
        return {'b': b.to_numpy(), 'da': a.grad.to_numpy(), 'out': out}
    both(scenario)


def test_second_order_random_and_capture():
    def scenario():
        x = ti.field(ti.f64, shape=N, needs_grad=True)
        r = ti.field(ti.f64, shape=N)
        k = ti.field(ti.i32, shape=N)
        loss = ti.field(ti.f64, shape=(), needs_grad=True)

        @ti.kernel
        def energy():
            for i in range(N):
                v = x[i]
                for _ in range(3):
                    v = ti.sin(v) * x[(i + 1) % N] + v
                loss[None] += v * v

        @ti.kernel
        def draw():
            for i in range(N):
                r[i] = ti.random()
                k[i] = ti.random(ti.i32)

        @ti.kernel
        def shift():
            for i in range(N):
                x[i] += 0.1

        _inputs(x)
        h = ti.ad.hvp(energy, loss, x, np.array([1.0, -0.5, 2.0]))
        draw()
        draws = [r.to_numpy(), k.to_numpy()]
        draw()
        captured = ti.capture(shift)
        for _ in range(3):
            captured()
        return {'hvp': h, 'r1': draws[0], 'k1': draws[1], 'r2': r.to_numpy(), 'x': x.to_numpy()}
    both(scenario)


# --- interpreter-only checks --------------------------------------------------------

def _interpreted_kernel():
    ti.init(default_fp=ti.f64, interpret=True)
    x = ti.field(ti.f64, shape=N)

    @ti.kernel
    def f(i: ti.i32):
        x[i] = 1.0

    f(0)
    return f, f.compiled((0,))


def test_out_of_range_index_raises():
    f, compiled = _interpreted_kernel()
    assert isinstance(compiled, interpret.InterpretedKernel)
    with pytest.raises(ti.TaichiIndexError, match=r'index \(3,\) is out of range'):
        f(3)


def test_unknown_op_and_undefined_reads_are_errors():
    _, compiled = _interpreted_kernel()
    compiler = interpret._Compiler(compiled)
    with pytest.raises(NotImplementedError, match='bogus'):
        compiler.block(Block([Stmt('bogus')]))
    cell, copy = Stmt('alloca', (), ti.f64), Stmt('alloca', (), ti.f64)
    load = Stmt('local_load', [cell], ti.f64)
    copied = [cell, copy, load, Stmt('local_store', [copy, load])]      # copying undef is fine
    interpret._run(compiler.block(Block(copied)), {})
    code = compiler.block(Block(copied + [Stmt('add', [load, load], ti.f64)]))
    with pytest.raises(interpret.IRError, match='used before any store'):
        interpret._run(code, {})
    code = compiler.block(Block([Stmt('stack_pop', (), ti.f64, stack=object())]))
    with pytest.raises(interpret.IRError, match='empty autodiff stack'):
        interpret._run(code, {interpret.STACKS: {}})


@pytest.mark.parametrize('interpreted', [False, True])
def test_debug_mode_errors_are_the_native_ones(interpreted):
    ti.init(default_fp=ti.f64, debug=True, interpret=interpreted)
    x = ti.field(ti.f64, shape=N)

    @ti.kernel
    def div(a: ti.i32, b: ti.i32) -> ti.i32:
        return a // b

    @ti.kernel
    def log(i: ti.i32):
        x[i] = ti.log(x[i])

    with pytest.raises(ti.TaichiRuntimeError, match='division or modulo by zero'):
        div(1, 0)
    with pytest.raises(ti.TaichiRuntimeError, match='NaN or Inf produced from finite operands'):
        log(0)
    with pytest.raises(ti.TaichiIndexError, match='out of range'):
        log(N)
