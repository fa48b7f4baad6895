"""Forward mode (ti.ad.FwdMode), second order (hvp, hessian) and function transforms.

* every op with a derivative rule, in forward mode, against finite differences
  (the specs of test_autodiff_ops, so a new op needs no second spec);
* constructs: branches, local mutation, serial loops, while/break/continue
  (forward mode follows the primal's path), atomics, several kernels in a row;
* forward and reverse Jacobians agree on randomly composed kernels;
* the seed documents' two examples return 4.0 and [3, 8, -3];
* Hessian-vector products agree with finite differences of gradients on the
  gravity potential and on the DiffTaichi spring triangle's loss.
"""
import math
import zlib

import numpy as np
import pytest

import engine as ti
from engine.core.errors import AutodiffError
from engine.ir.nodes import walk

from ad_helpers import assert_grad_close, f64  # noqa: F401
from test_autodiff_ops import CASES, SPECS, N, _inputs, elementwise_fd
from test_autodiff_sims import _triangle


# --------------------------------------------------------------------------- ops

@pytest.mark.parametrize('name,variant', CASES, ids=[f'{n}-{k}' for n, k in CASES])
def test_op_tangents_match_finite_differences(name, variant):
    spec = SPECS[name][variant]
    ti.init(default_fp=ti.f64)
    rng = np.random.default_rng(zlib.crc32(f'fwd/{name}/{variant}'.encode()))
    names = ('a', 'b', 'c')
    fields = {n: ti.field(spec.dtypes.get(n, ti.f64), shape=N) for n in names}
    a, b, c = fields['a'], fields['b'], fields['c']
    y = ti.field(spec.out_dtype or ti.f64, shape=N)
    fn = spec.fn

    @ti.kernel
    def k():
        for i in range(N):
            y[i] = fn(a[i], b[i], c[i])

    for n, v in zip(names, _inputs(spec, rng)):
        fields[n].from_numpy(np.asarray(v, dtype=fields[n].dtype.np))
    stored = {n: fields[n].to_numpy().astype(np.float64) for n in names}
    expected = spec.expected(*(stored[n] for n in names)) if spec.expected else None
    for slot, n in enumerate(names):
        with ti.ad.FwdMode(loss=y, param=fields[n], seed=np.ones(N)):
            k()
        tangent = y.dual.to_numpy().astype(np.float64)
        if expected is not None:
            assert_grad_close(tangent, np.asarray(expected[slot], np.float64), f'd{name}/d{n}')
            continue
        assert_grad_close(tangent, elementwise_fd(k, fields[n], y, spec.eps), f'forward d{name}/d{n}',
                          rtol=spec.rtol)


# --------------------------------------------------------------------------- constructs

def _fd_jvp(run, param, out, seed, eps=1e-6):
    base = param.to_numpy()
    param.from_numpy(base + eps * seed.reshape(base.shape))
    run()
    hi = out.to_numpy().astype(np.float64)
    param.from_numpy(base - eps * seed.reshape(base.shape))
    run()
    lo = out.to_numpy().astype(np.float64)
    param.from_numpy(base)
    return (hi - lo) / (2 * eps)


def _check_jvp(run, param, out, seed):
    with ti.ad.FwdMode(loss=out, param=param, seed=seed):
        run()
    tangent = out.dual.to_numpy().astype(np.float64)
    assert_grad_close(tangent, _fd_jvp(run, param, out, np.asarray(seed, float)), 'jvp')
    assert np.abs(tangent).max() > 0
    return tangent


def test_branches_loops_and_mutation(f64):
    x = ti.field(float, shape=6)
    y = ti.field(float, shape=6)

    @ti.kernel
    def k():
        for i in x:
            v = x[i]
            acc = 0.0
            for j in range(3):                  # serial loop carrying locals
                acc = acc * v + ti.sin(v * j)
            if v > 0:
                acc = acc * acc
            else:
                acc -= ti.exp(v)
            y[i] = acc

    x.from_numpy(np.array([-0.7, -0.2, 0.3, 0.5, 0.9, 1.3]))
    _check_jvp(k, x, y, np.linspace(-1, 1, 6))


def test_while_break_continue(f64):
    x = ti.field(float, shape=5)
    y = ti.field(float, shape=5)

    @ti.kernel
    def k():
        for i in x:
            v = x[i]
            s = 0.0
            n = 0
            while True:
                n += 1
                if n % 2 == 0:
                    continue
                s += v ** n / n
                if s > 2.0 or n > 9:
                    break
            y[i] = s

    x.from_numpy(np.array([0.3, 0.8, 1.1, 1.5, 2.2]))
    _check_jvp(k, x, y, np.ones(5))


def test_atomics_and_a_chain_of_kernels(f64):
    n = 8
    x = ti.Vector.field(2, float, shape=n, needs_grad=True)
    mid = ti.field(float, shape=n, needs_grad=True)
    total = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def first():
        for i in x:
            mid[i] = x[i].norm() * ti.tanh(x[i][0])

    @ti.kernel
    def second():
        total[None] = 0
        for i in mid:
            total[None] += mid[i] ** 2 + ti.cos(mid[(i + 1) % n])

    def run():
        first()
        second()

    x.from_numpy(np.random.default_rng(1).uniform(-1, 1, (n, 2)))
    tangent = _check_jvp(run, x, total, np.random.default_rng(2).uniform(-1, 1, 2 * n))
    # forward and reverse agree on the same directional derivative
    seed = np.random.default_rng(2).uniform(-1, 1, 2 * n)
    g = ti.ad.value_and_grad(run, inputs=[x], output=total)()[1][0]
    assert float(tangent) == pytest.approx(float(g.reshape(-1) @ seed), rel=1e-10)


def test_matrices_svd_and_polar(f64):
    F = ti.Matrix.field(2, 2, float, shape=3)
    out = ti.field(float, shape=3)

    @ti.kernel
    def k():
        for i in F:
            R, S = ti.polar_decompose(F[i])
            U, sig, V = ti.svd(F[i])
            out[i] = (R @ S).trace() + sig[0, 0] * 2 + sig[1, 1] + F[i].determinant()

    F.from_numpy(np.random.default_rng(3).uniform(-1, 1, (3, 2, 2)) + 2 * np.eye(2))
    _check_jvp(k, F, out, np.random.default_rng(4).uniform(-1, 1, 12))


def test_0d_param_without_seed_and_clear(f64):
    x = ti.field(float, shape=())
    y = ti.field(float, shape=())

    @ti.kernel
    def k():
        y[None] = x[None] ** 3

    x[None] = 2.0
    with ti.ad.FwdMode(loss=y, param=x):
        k()
    assert y.dual[None] == pytest.approx(12.0)
    with ti.ad.FwdMode(loss=y, param=x, seed=[0.5]):
        k()
    assert y.dual[None] == pytest.approx(6.0)


def test_needs_dual_and_lazy_dual(f64):
    x = ti.field(float, shape=2, needs_dual=True)
    assert x.dual.placed
    y = ti.field(float)
    ti.root.dense(ti.i, 2).place(y)
    ti.root.lazy_dual()
    assert y.dual.placed and not y.grad.placed


def test_forward_mode_errors(f64):
    x = ti.field(float, shape=3)
    y = ti.field(float, shape=())
    with pytest.raises(ValueError, match='seed has 2 entries'):
        with ti.ad.FwdMode(loss=y, param=x, seed=[1, 2]):
            pass
    with pytest.raises(ValueError, match='needs a seed'):
        with ti.ad.FwdMode(loss=y, param=x):
            pass
    with ti.ad.FwdMode(loss=y, param=x, seed=[1, 0, 0]):
        with pytest.raises(RuntimeError, match='nested'):
            with ti.ad.FwdMode(loss=y, param=x, seed=[1, 0, 0]):
                pass


def test_new_field_after_fwdmode_started_is_not_silently_dropped(f64):
    x = ti.field(float, shape=2)
    y = ti.field(float, shape=2)

    @ti.kernel
    def k():
        for i in x:
            y[i] = 3 * x[i]

    x.from_numpy(np.array([1.0, 2.0]))
    with ti.ad.FwdMode(loss=y, param=x, seed=[1, 1]):
        k()
        z = ti.field(float, shape=2)   # placed after the duals were allocated

        @ti.kernel
        def copy():
            for i in y:
                z[i] = y[i]

        with pytest.raises(AutodiffError, match='has no .dual'):
            copy()
    with ti.ad.FwdMode(loss=z, param=x, seed=[1, 1]):   # a new FwdMode allocates it
        k()
        copy()
    np.testing.assert_allclose(z.dual.to_numpy(), [3, 3])


# --------------------------------------------------------------------------- Jacobians

_UNARY = [ti.sin, ti.cos, ti.tanh, lambda u: ti.sqrt(u * u + 1.0), lambda u: ti.exp(-u * u),
          lambda u: u * u, lambda u: ti.atan2(u, 2.0)]
_BINARY = [lambda u, v: u + v, lambda u, v: u - v, lambda u, v: u * v,
           lambda u, v: u / (v * v + 1.0), ti.max, lambda u, v: ti.select(u > v, u * v, u - v)]


def _random_expression(rng, depth):
    """A Python function of two kernel values built from a random tree of ops."""
    if depth == 0:
        leaf = rng.integers(3)
        weight = float(rng.uniform(-1.5, 1.5))
        return (lambda u, v: u * weight) if leaf == 0 else (lambda u, v: v * weight) if leaf == 1 else (lambda u, v: weight)
    if rng.random() < 0.4:
        f, inner = _UNARY[rng.integers(len(_UNARY))], _random_expression(rng, depth - 1)
        return lambda u, v: f(inner(u, v))
    g = _BINARY[rng.integers(len(_BINARY))]
    left, right = _random_expression(rng, depth - 1), _random_expression(rng, depth - 1)
    return lambda u, v: g(left(u, v), right(u, v))


@pytest.mark.parametrize('seed', range(12))
def test_forward_and_reverse_jacobians_agree_on_random_kernels(seed):
    ti.init(default_fp=ti.f64)
    rng = np.random.default_rng(seed)
    e1, e2 = _random_expression(rng, 3), _random_expression(rng, 3)
    a = ti.field(float, shape=3, needs_grad=True)
    b = ti.field(float, shape=2, needs_grad=True)
    y = ti.field(float, shape=3, needs_grad=True)
    s = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in y:
            y[i] = e1(a[i], b[i % 2]) + e2(b[(i + 1) % 2], a[(i + 2) % 3])
        s[None] = 0
        for i in y:
            s[None] += e2(y[i], a[i])

    a.from_numpy(rng.uniform(-1, 1, 3))
    b.from_numpy(rng.uniform(-1, 1, 2))
    forward = ti.ad.jacobian(k, [a, b], [y, s], mode='forward')
    reverse = ti.ad.jacobian(k, [a, b], [y, s], mode='reverse')
    assert forward.shape == (4, 5)
    np.testing.assert_allclose(forward, reverse, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- the seed examples

@ti.func
def _cubic(x):
    return x ** 3 + 2 * x ** 2 - 3 * x + 1


def test_seed_example_derivative_of_a_func_in_a_kernel(f64):
    dfdx = ti.ad.grad(_cubic)

    @ti.kernel
    def k() -> float:
        return dfdx(1.0)

    assert k() == 4.0


def test_seed_example_three_inputs(f64):
    x1, x2, x3 = (ti.field(float, shape=(), needs_grad=True) for _ in range(3))
    y = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def f():
        y[None] += x1[None] ** 3 + 2 * x2[None] ** 2 - 3 * x3[None] + 1

    value, grads = ti.ad.value_and_grad(f, inputs=[x1, x2, x3], output=y)(1.0, 2.0, 3.0)
    assert value == 1.0 and grads == [3.0, 8.0, -3.0]


# --------------------------------------------------------------------------- transforms in kernels

@ti.func
def _energy(p, q):
    d = p - q
    return d.norm_sqr() * ti.sin(p[0]) + ti.exp(q[1]) * p[1]


@ti.func
def _vector_fn(p, q):
    return ti.Vector([p.dot(q), p[0] * q[1] ** 2, ti.tanh(p[1] - q[0])])


def test_grad_jvp_vjp_of_funcs_match_finite_differences(f64):
    grad_p = ti.ad.grad(_energy)
    grad_q = ti.ad.grad(_energy, argnums=1)
    jvp, vjp = ti.ad.jvp(_vector_fn), ti.ad.vjp(_vector_fn)
    out = ti.field(float, shape=12)
    inp = ti.field(float, shape=8)

    @ti.kernel
    def k():
        p = ti.Vector([inp[0], inp[1]])
        q = ti.Vector([inp[2], inp[3]])
        dp, dq = grad_p(p, q), grad_q(p, q)
        value, tangent = jvp((p, q), (ti.Vector([inp[4], inp[5]]), ti.Vector([inp[6], inp[7]])))
        _, (cp, cq) = vjp((p, q), ti.Vector([1.0, -2.0, 0.5]))
        for c in ti.static(range(2)):
            out[c], out[2 + c], out[4 + c], out[8 + c], out[10 + c] = dp[c], dq[c], tangent[c], cp[c], cq[c]
        out[6], out[7] = tangent[2], value[2]

    rng = np.random.default_rng(5)
    vals = rng.uniform(-1, 1, 8)
    inp.from_numpy(vals)
    k()
    got = out.to_numpy()
    p, q, tp, tq = vals[0:2], vals[2:4], vals[4:6], vals[6:8]

    def energy(p, q):
        return np.sum((p - q) ** 2) * np.sin(p[0]) + np.exp(q[1]) * p[1]

    def vec(p, q):
        return np.array([p @ q, p[0] * q[1] ** 2, np.tanh(p[1] - q[0])])

    def num_grad(f, x, eps=1e-6):
        return np.array([(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(len(x))])

    np.testing.assert_allclose(got[0:2], num_grad(lambda x: energy(x, q), p), rtol=1e-6)
    np.testing.assert_allclose(got[2:4], num_grad(lambda x: energy(p, x), q), rtol=1e-6)
    jp = num_grad(lambda x: vec(x, q), p).T          # 3 x 2
    jq = num_grad(lambda x: vec(p, x), q).T
    np.testing.assert_allclose(got[[4, 5, 6]], jp @ tp + jq @ tq, rtol=1e-6)
    assert got[7] == pytest.approx(vec(p, q)[2])
    u = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(got[8:10], u @ jp, rtol=1e-6)
    np.testing.assert_allclose(got[10:12], u @ jq, rtol=1e-6)


def test_transform_errors(f64):
    x = ti.field(float, shape=())

    @ti.func
    def writes(v):
        x[None] = v
        return v * 2

    bad = ti.ad.grad(writes)

    @ti.kernel
    def k() -> float:
        return bad(1.0)

    with pytest.raises(ti.TaichiSyntaxError, match='pure function'):
        k()

    vector_grad = ti.ad.grad(_vector_fn)

    @ti.kernel
    def k2() -> float:
        g = vector_grad(ti.Vector([1.0, 2.0]), ti.Vector([1.0, 2.0]))
        return g[0]

    with pytest.raises(ti.TaichiSyntaxError, match='scalar-valued'):
        k2()
    with pytest.raises(TypeError, match='ti.func'):
        ti.ad.grad(lambda v: v)
    with pytest.raises(ti.TaichiSyntaxError, match='only be called from a kernel'):
        ti.ad.grad(_cubic)(1.0)


# --------------------------------------------------------------------------- second order

def _fd_hessian_columns(forward_fn, loss, param, vector, eps=1e-5):
    """(grad(p + eps v) - grad(p - eps v)) / 2 eps, the finite-difference Hessian-vector product."""
    base = param.to_numpy()
    grads = []
    for sign in (1, -1):
        param.from_numpy(base + sign * eps * vector.reshape(base.shape))
        with ti.ad.Tape(loss):
            forward_fn()
        grads.append(param.grad.to_numpy().astype(np.float64))
    param.from_numpy(base)
    return (grads[0] - grads[1]) / (2 * eps)


def test_hvp_of_the_gravity_potential(f64):
    n = 5
    x = ti.Vector.field(2, float, shape=n, needs_grad=True)
    U = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def potential():
        for i, j in ti.ndrange(n, n):
            r = x[i] - x[j]
            U[None] += -1 / r.norm(1e-2)

    x.from_numpy(np.random.default_rng(7).uniform(0, 1, (n, 2)))
    v = np.random.default_rng(8).uniform(-1, 1, 2 * n)
    hv = ti.ad.hvp(potential, U, x, v)
    assert_grad_close(hv, _fd_hessian_columns(potential, U, x, v), 'gravity Hv', rtol=1e-5, atol=1e-6)
    H = ti.ad.hessian(potential, U, x)
    np.testing.assert_allclose(H, H.T, rtol=1e-9, atol=1e-9)          # symmetric
    np.testing.assert_allclose(H @ v, hv.reshape(-1), rtol=1e-9)
    np.testing.assert_allclose(H.sum(axis=1).reshape(n, 2).sum(axis=0), 0, atol=1e-6)  # translation invariance


def test_hvp_of_the_spring_triangle_loss():
    forward, loss, x, force, spring_length, steps = _triangle(ti.f64)

    def run():
        force.fill(0)
        forward()

    v = np.array([0.3, -0.5, 0.8])
    hv = ti.ad.hvp(run, loss, spring_length, v)
    fd = _fd_hessian_columns(run, loss, spring_length, v, eps=1e-6)
    assert_grad_close(hv, fd, 'triangle Hv', rtol=1e-4, atol=1e-9)
    assert np.abs(hv).max() > 1e-3


@ti.func
def _det(m):
    return m.determinant()


def test_grad_of_a_matrix_function_is_the_cofactor_matrix(f64):
    d_det = ti.ad.grad(_det)
    out = ti.Matrix.field(3, 3, float, shape=())
    m = ti.Matrix.field(3, 3, float, shape=())

    @ti.kernel
    def k():
        out[None] = d_det(m[None])

    M = np.random.default_rng(9).uniform(-1, 1, (3, 3))
    m.from_numpy(M)
    k()
    np.testing.assert_allclose(out.to_numpy(), np.linalg.det(M) * np.linalg.inv(M).T, rtol=1e-10)
