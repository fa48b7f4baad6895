"""Forward mode (ti.ad.FwdMode) and forward over reverse (ti.ad.hvp) with ndarray arguments.

A ti.ndarray created with needs_dual=True has a .dual (and, with needs_grad=True, its .grad
has one too); kernels launched in forward mode read and write the tangents there. Checked
in float64 against central differences or analytic values, natively (the default thread
pool and 2 threads) and in the interpreter.
"""
import numpy as np
import pytest

import engine as ti
from engine.core.errors import AutodiffError

from ad_helpers import assert_grad_close

X = np.array([0.5, -1.0, 2.0, 1.5])
W = np.array([1.0, 2.0, -0.5, 3.0])
SEED = np.array([1.0, 0.5, -2.0, 0.25])
EPS = 1e-6


@pytest.fixture(params=['native', 'threads2', 'interpret'])
def run_mode(request):
    options = {'native': {}, 'threads2': {'cpu_max_num_threads': 2},
               'interpret': {'interpret': True}}[request.param]
    ti.init(arch=ti.cpu, default_fp=ti.f64, **options)
    yield request.param
    ti.init()


def central_difference(fn, array, seed):
    """(fn(x + eps seed) - fn(x - eps seed)) / 2 eps, for fn reading the ndarray `array`."""
    x = array.to_numpy()
    results = []
    for sign in (1, -1):
        array.from_numpy(x + sign * EPS * seed)
        results.append(np.asarray(fn(), dtype=np.float64))
    array.from_numpy(x)
    return (results[0] - results[1]) / (2 * EPS)


def test_jvp_reads_an_ndarray_with_a_dual_into_a_field(run_mode):
    x = ti.ndarray(float, 4, needs_dual=True)
    c = ti.ndarray(float, 4)            # no dual: a constant, its tangent is zero
    y = ti.field(float, shape=4)

    @ti.kernel
    def f(x: ti.types.ndarray(), c: ti.types.ndarray()):
        for i in range(x.shape[0]):
            y[i] = ti.sin(x[i]) * x[i] + c[i] * x[i] ** 2

    x.from_numpy(X)
    c.from_numpy(W)
    with ti.ad.FwdMode(loss=y, param=x, seed=SEED):
        f(x, c)
    np.testing.assert_allclose(y.to_numpy(), np.sin(X) * X + W * X ** 2)

    def values():
        f(x, c)
        return y.to_numpy()
    assert_grad_close(y.dual.to_numpy(), central_difference(values, x, SEED), 'y.dual')


def test_jvp_writes_an_ndarray_with_a_dual(run_mode):
    k = ti.field(float, shape=())
    x = ti.ndarray(float, 4, needs_dual=True)
    out = ti.ndarray(float, 4, needs_dual=True)
    total = ti.ndarray(float, (), needs_dual=True)

    @ti.kernel
    def f(x: ti.types.ndarray(), out: ti.types.ndarray(), total: ti.types.ndarray()):
        for i in range(x.shape[0]):
            out[i] = k[None] * x[i] ** 2
            total[None] += ti.exp(k[None] * x[i])     # an atomic add writes its dual too

    k[None] = 0.7
    x.from_numpy(X)
    with ti.ad.FwdMode(loss=out, param=k):      # tangents along k; x.dual is the user's: zero
        f(x, out, total)
    np.testing.assert_allclose(out.dual.to_numpy(), X ** 2)
    np.testing.assert_allclose(total.dual[None], np.sum(X * np.exp(0.7 * X)))

    total.fill(0)
    total.dual.fill(0)
    with ti.ad.FwdMode(loss=out, param=x, seed=SEED):
        f(x, out, total)
    np.testing.assert_allclose(out.dual.to_numpy(), 2 * 0.7 * X * SEED)
    np.testing.assert_allclose(total.dual[None], np.sum(0.7 * np.exp(0.7 * X) * SEED))


def test_jvp_of_an_ndarray_of_vectors(run_mode):
    n = 3
    v = ti.ndarray(ti.math.vec3, n, needs_dual=True)
    u = ti.Vector.ndarray(3, float, n, needs_dual=True)
    norms = ti.field(float, shape=n)
    rng = np.random.default_rng(1)
    values, seed = rng.normal(size=(n, 3)), rng.normal(size=(n, 3))

    @ti.kernel
    def f(v: ti.types.ndarray(dtype=ti.math.vec3, ndim=1), u: ti.types.ndarray(dtype=ti.math.vec3, ndim=1)):
        for i in v:
            norms[i] = v[i].norm()
            u[i] = v[i].cross(ti.Vector([1.0, 2.0, 3.0])) * v[i][0]

    v.from_numpy(values)
    with ti.ad.FwdMode(loss=norms, param=v, seed=seed):
        f(v, u)

    def outputs():
        f(v, u)
        return np.concatenate([norms.to_numpy(), u.to_numpy().ravel()])
    tangents = np.concatenate([norms.dual.to_numpy(), u.dual.to_numpy().ravel()])
    assert_grad_close(tangents, central_difference(outputs, v, seed), 'norms.dual, u.dual')


def test_hessian_vector_product_with_an_ndarray_param(run_mode):
    x = ti.ndarray(float, 4, needs_grad=True, needs_dual=True)
    w = ti.ndarray(float, 4)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def cubic(x: ti.types.ndarray(), w: ti.types.ndarray()):
        for i in range(x.shape[0]):
            loss[None] += x[i] ** 3 * w[i]

    x.from_numpy(X)
    w.from_numpy(W)
    for _ in range(2):          # FwdMode zeroes x.grad.dual: a second product does not accumulate
        hv = ti.ad.hvp(lambda: cubic(x, w), loss, x, SEED)
        np.testing.assert_allclose(hv, 6 * X * W * SEED)
    np.testing.assert_allclose(x.grad.to_numpy(), 3 * X ** 2 * W)
    np.testing.assert_allclose(ti.ad.hessian(lambda: cubic(x, w), loss, x), np.diag(6 * X * W))


def test_writing_a_float_ndarray_without_a_dual_is_refused(run_mode):
    x = ti.field(float, shape=4)
    out = ti.ndarray(float, 4)

    @ti.kernel
    def f(out: ti.types.ndarray()):
        for i in x:
            out[i] = x[i] * 2

    with pytest.raises(AutodiffError, match=r'ndarray argument out has no \.dual.*needs_dual=True'):
        with ti.ad.FwdMode(loss=x, param=x, seed=np.ones(4)):
            f(out)
    with pytest.raises(AutodiffError, match='needs_dual=True'):
        with ti.ad.FwdMode(loss=x, param=x, seed=np.ones(4)):
            f(np.zeros(4))                          # a numpy array has no dual
    with pytest.raises(TypeError, match='needs_dual=True'):
        with ti.ad.FwdMode(loss=x, param=out, seed=np.ones(4)):
            pass
    with pytest.raises(ti.TaichiRuntimeError, match='needs_dual=True needs a floating-point'):
        ti.ndarray(ti.i32, 4, needs_dual=True)


def test_a_kernel_compiled_without_duals_is_compiled_again_with_them(run_mode):
    loss = ti.field(float, shape=())
    plain = ti.ndarray(float, 4)
    with_dual = ti.ndarray(float, 4, needs_dual=True)

    @ti.kernel
    def f(x: ti.types.ndarray()):
        for i in range(x.shape[0]):
            loss[None] += x[i] ** 2

    for array in (plain, with_dual):
        array.from_numpy(X)
    f(plain)                                        # compiled without a dual slot
    with ti.ad.FwdMode(loss=loss, param=with_dual, seed=SEED):
        f(with_dual)                                # new code: the argument has a dual
    np.testing.assert_allclose(loss.dual[None], np.sum(2 * X * SEED))
    with ti.ad.FwdMode(loss=loss, param=with_dual, seed=SEED):
        f(plain)                                    # the first code again: a constant input
    assert loss.dual[None] == 0
    assert len(f._cache) == 2


def test_the_tape_puts_back_the_tangents_of_an_overwritten_ndarray(run_mode):
    # loss = sum(x^5) through y = x^2, which a later launch overwrites: the backward pass
    # of the launch that read y needs y's values and its tangents as they were
    x = ti.ndarray(float, 3, needs_grad=True, needs_dual=True)
    y = ti.ndarray(float, 3, needs_grad=True, needs_dual=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def square(x: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in range(x.shape[0]):
            y[i] = x[i] ** 2

    @ti.kernel
    def accumulate(x: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in range(x.shape[0]):
            loss[None] += y[i] ** 2 * x[i]

    @ti.kernel
    def overwrite(y: ti.types.ndarray()):
        for i in range(y.shape[0]):
            y[i] = 0.5

    def forward():
        square(x, y)
        accumulate(x, y)
        overwrite(y)

    x.from_numpy(X[:3])
    hv = ti.ad.hvp(forward, loss, x, SEED[:3])
    np.testing.assert_allclose(hv, 20 * X[:3] ** 3 * SEED[:3])
    np.testing.assert_allclose(x.grad.to_numpy(), 5 * X[:3] ** 4)
