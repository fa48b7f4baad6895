"""Vectors and matrices in kernels, in f32 and f64 (the `fp` fixture sets default_fp and the field dtype)."""
import numpy as np
import pytest

import engine as ti

pytestmark = pytest.mark.usefixtures('ti_init')

def npdt(dt):
    return np.float32 if dt == ti.f32 else np.float64


def tol(dt):
    return dict(rtol=1e-5, atol=1e-5) if dt == ti.f32 else dict(rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- kernels

@ti.kernel
def k_vector_ops(va: ti.template(), vo: ti.template(), s: ti.template(), mo: ti.template(), dt: ti.template()):
    a = va[0]
    b = va[1]
    vo[0] = a + b
    vo[1] = a - b
    vo[2] = a * b
    vo[3] = a / b
    vo[4] = a * 2.0
    vo[5] = 3.0 * a
    vo[6] = a / 4.0
    vo[7] = -a
    vo[8] = a.cross(b)
    vo[9] = a.normalized()
    vo[10] = a + 1
    vo[11] = 1.0 - a
    vo[12] = 2.0 / a
    vo[13] = ti.Vector([a.z, a.x, b.y])
    vo[14] = ti.Vector.zero(dt, 3) + ti.Vector([1.0, 2.0, 3.0])
    vo[15] = a ** 2
    s[0] = a.dot(b)
    s[1] = a.norm()
    s[2] = a.norm(0.5)
    s[3] = a.norm_sqr()
    s[4] = a.sum()
    s[5] = a.max()
    s[6] = a.min()
    s[7] = a.x + 10 * a.y + 100 * a.z
    s[8] = a[1]
    s[9] = ti.Vector([a.x, a.y]).cross(ti.Vector([b.x, b.y]))
    s[10] = ti.Vector([a.x, a.y, a.z, b.x]).w
    s[11] = (a * b).sum()
    s[12] = ti.Vector([0.1, 0.2, 0.3]).dot(a)       # literal entries take default_fp precision
    mo[0] = a.outer_product(b)


@ti.kernel
def k_matrix_ops(ma: ti.template(), v: ti.template(), mo: ti.template(), vo: ti.template(),
                 s: ti.template(), m2o: ti.template(), dt: ti.template()):
    A = ma[0]
    B = ma[1]
    x = v[0]
    mo[0] = A + B
    mo[1] = A - B
    mo[2] = A * B
    mo[3] = A / B
    mo[4] = A * 2.0 - 1
    mo[5] = A @ B
    mo[6] = A.transpose()
    mo[7] = A.inverse()
    mo[8] = ti.Matrix.identity(dt, 3)
    mo[9] = ti.Matrix.diag(3, 2.0)
    mo[10] = A + ti.Matrix.zero(dt, 3, 3)
    mo[11] = -A
    mo[12] = A @ B @ A.transpose()
    vo[0] = A @ x
    vo[1] = ti.Vector.zero(dt, 3) + x
    vo[2] = A.transpose() @ (A @ x)
    s[0] = A.determinant()
    s[1] = A.trace()
    s[2] = A.sum()
    s[3] = A.max()
    s[4] = A.min()
    s[5] = A[1, 0]
    s[6] = A[2, 1]
    C = ti.Matrix([[A[0, 0], A[0, 1]], [A[1, 0], A[1, 1]]])
    s[7] = C.determinant()
    s[8] = x.dot(A @ x)
    m2o[0] = C.inverse()
    m2o[1] = C @ C
    m2o[2] = C.transpose()


@ti.kernel
def k_int_matrix(out: ti.template()):
    m = ti.Matrix([[1, 2], [3, 4]])
    out[0] = m.determinant()
    out[1] = (m @ m)[1, 1]
    out[2] = m.trace()
    out[3] = (m @ ti.Vector([1, -1]))[0]
    out[4] = m.transpose()[0, 1]
    out[5] = ti.Matrix.identity(ti.i32, 2).sum()


@ti.kernel
def k_local_assign(vo: ti.template(), mo: ti.template(), dt: ti.template()):
    v = ti.Vector([0.0, 0.0, 0.0])
    v[0] = 1.0
    v[2] = v[0] + 2.0
    v[1] += 5.0
    vo[0] = v
    m = ti.Matrix.zero(dt, 2, 2)
    m[1, 0] = 5.0
    m[0, 1] = m[1, 0] * 2
    m[0, 0] -= 1.5
    mo[0] = m
    w = ti.Vector([1.0, 2.0, 3.0])
    w = w * 2
    w += ti.Vector([1.0, 1.0, 1.0])
    w *= 2
    vo[1] = w


@ti.kernel
def k_field_elements(vf: ti.template(), mf: ti.template(), s: ti.template()):
    for i in vf:
        vf[i] += ti.Vector([1.0, 2.0, 3.0])
        s[i, 0] = vf[i][1] + mf[i][0, 1]
        s[i, 1] = vf[i].x + vf[i].z
        mf[i] = mf[i].transpose()
        vf[i] = vf[i] * 2.0


@ti.kernel
def k_field_component_write(vf: ti.template(), mf: ti.template()):
    for i in vf:
        vf[i][1] = 100.0 + i
        mf[i][1, 0] = -1.0


@ti.kernel
def k_dynamic_read(vf: ti.template(), out: ti.template()):
    for i in vf:
        s = 0.0
        for k in range(3):
            s += vf[i][k] * (k + 1)
        out[i] = s


@ti.kernel
def k_decompose(A: ti.template(), U: ti.template(), S: ti.template(), V: ti.template(),
                R: ti.template(), P: ti.template()):
    for i in A:
        u, s, v = ti.svd(A[i])
        U[i] = u
        S[i] = s
        V[i] = v
        r, p = ti.polar_decompose(A[i])
        R[i] = r
        P[i] = p


# --------------------------------------------------------------------------- tests

def test_vector_ops(fp):
    dt = npdt(fp)
    va = ti.Vector.field(3, fp, shape=2)
    vo = ti.Vector.field(3, fp, shape=16)
    s = ti.field(fp, shape=13)
    mo = ti.Matrix.field(3, 3, fp, shape=1)
    a = np.array([1.5, -2.0, 3.25], dtype=dt)
    b = np.array([-0.5, 4.0, 2.0], dtype=dt)
    va.from_numpy(np.stack([a, b]))
    k_vector_ops(va, vo, s, mo, fp)
    a, b = a.astype(np.float64), b.astype(np.float64)
    t = tol(fp)
    expected_v = [a + b, a - b, a * b, a / b, a * 2, 3 * a, a / 4, -a, np.cross(a, b),
                  a / np.linalg.norm(a), a + 1, 1 - a, 2 / a, [a[2], a[0], b[1]], [1, 2, 3], a ** 2]
    got_v = vo.to_numpy()
    for k, e in enumerate(expected_v):
        np.testing.assert_allclose(got_v[k], e, **t, err_msg=f'vo[{k}]')
    expected_s = [a @ b, np.linalg.norm(a), np.sqrt(a @ a + 0.5), a @ a, a.sum(), a.max(), a.min(),
                  a[0] + 10 * a[1] + 100 * a[2], a[1], a[0] * b[1] - a[1] * b[0], b[0], a @ b,
                  np.array([0.1, 0.2, 0.3]) @ a]
    got_s = s.to_numpy()
    for k, e in enumerate(expected_s):
        np.testing.assert_allclose(got_s[k], e, **t, err_msg=f's[{k}]')
    np.testing.assert_allclose(mo.to_numpy()[0], np.outer(a, b), **t)


def test_matrix_ops(fp):
    dt = npdt(fp)
    rng = np.random.RandomState(3)
    A = (rng.rand(3, 3) * 2 - 1 + np.eye(3) * 2).astype(dt)
    B = (rng.rand(3, 3) + 0.5).astype(dt)
    x = np.array([0.5, -1.0, 2.0], dtype=dt)
    ma = ti.Matrix.field(3, 3, fp, shape=2)
    v = ti.Vector.field(3, fp, shape=1)
    mo = ti.Matrix.field(3, 3, fp, shape=13)
    vo = ti.Vector.field(3, fp, shape=3)
    s = ti.field(fp, shape=9)
    m2o = ti.Matrix.field(2, 2, fp, shape=3)
    ma.from_numpy(np.stack([A, B]))
    v.from_numpy(x[None])
    k_matrix_ops(ma, v, mo, vo, s, m2o, fp)
    A, B, x = A.astype(np.float64), B.astype(np.float64), x.astype(np.float64)
    t = tol(fp)
    expected_m = [A + B, A - B, A * B, A / B, A * 2 - 1, A @ B, A.T, np.linalg.inv(A), np.eye(3),
                  np.eye(3) * 2, A, -A, A @ B @ A.T]
    got_m = mo.to_numpy()
    for k, e in enumerate(expected_m):
        np.testing.assert_allclose(got_m[k], e, **t, err_msg=f'mo[{k}]')
    got_v = vo.to_numpy()
    for k, e in enumerate([A @ x, x, A.T @ (A @ x)]):
        np.testing.assert_allclose(got_v[k], e, **t, err_msg=f'vo[{k}]')
    C = A[:2, :2]
    expected_s = [np.linalg.det(A), np.trace(A), A.sum(), A.max(), A.min(), A[1, 0], A[2, 1],
                  np.linalg.det(C), x @ A @ x]
    got_s = s.to_numpy()
    for k, e in enumerate(expected_s):
        np.testing.assert_allclose(got_s[k], e, **t, err_msg=f's[{k}]')
    got_m2 = m2o.to_numpy()
    for k, e in enumerate([np.linalg.inv(C), C @ C, C.T]):
        np.testing.assert_allclose(got_m2[k], e, **t, err_msg=f'm2o[{k}]')


def test_integer_matrix_literal():
    out = ti.field(ti.i32, shape=6)
    k_int_matrix(out)
    assert out.to_numpy().tolist() == [-2, 22, 5, -1, 3, 2]


def test_local_component_assignment(fp):
    vo = ti.Vector.field(3, fp, shape=2)
    mo = ti.Matrix.field(2, 2, fp, shape=1)
    k_local_assign(vo, mo, fp)
    np.testing.assert_array_equal(vo.to_numpy()[0], [1.0, 5.0, 3.0])
    np.testing.assert_array_equal(mo.to_numpy()[0], [[-1.5, 10.0], [5.0, 0.0]])
    np.testing.assert_array_equal(vo.to_numpy()[1], [6.0, 10.0, 14.0])


def test_field_element_vectors(fp):
    n = 4
    vf = ti.Vector.field(3, fp, shape=n)
    mf = ti.Matrix.field(2, 2, fp, shape=n)
    s = ti.field(fp, shape=(n, 2))
    vdata = np.arange(n * 3).reshape(n, 3).astype(npdt(fp))
    mdata = np.arange(n * 4).reshape(n, 2, 2).astype(npdt(fp)) * 0.5
    vf.from_numpy(vdata)
    mf.from_numpy(mdata)
    k_field_elements(vf, mf, s)
    vplus = vdata + [1, 2, 3]
    np.testing.assert_array_equal(s.to_numpy()[:, 0], vplus[:, 1] + mdata[:, 0, 1])
    np.testing.assert_array_equal(s.to_numpy()[:, 1], vplus[:, 0] + vplus[:, 2])
    np.testing.assert_array_equal(vf.to_numpy(), vplus * 2)
    np.testing.assert_array_equal(mf.to_numpy(), np.transpose(mdata, (0, 2, 1)))


def test_field_element_component_write_in_kernel():
    vf = ti.Vector.field(3, ti.f32, shape=3)
    mf = ti.Matrix.field(2, 2, ti.f32, shape=3)
    vf.fill(1.0)
    mf.fill(2.0)
    k_field_component_write(vf, mf)
    np.testing.assert_array_equal(vf.to_numpy(), [[1, 100, 1], [1, 101, 1], [1, 102, 1]])
    np.testing.assert_array_equal(mf.to_numpy(), [[[2, 2], [-1, 2]]] * 3)


def test_vector_dynamic_index_read():
    vf = ti.Vector.field(3, ti.f32, shape=2)
    out = ti.field(ti.f32, shape=2)
    vf.from_numpy(np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32))
    k_dynamic_read(vf, out)
    assert out.to_numpy().tolist() == [14.0, 32.0]


def _check_decompositions(fp, mats):
    n = mats.shape[1]
    m = len(mats)
    A = ti.Matrix.field(n, n, fp, shape=m)
    U, S, V, R, P = (ti.Matrix.field(n, n, fp, shape=m) for _ in range(5))
    A.from_numpy(mats.astype(npdt(fp)))
    k_decompose(A, U, S, V, R, P)
    a = A.to_numpy().astype(np.float64)
    u, s, v, r, p = (f.to_numpy().astype(np.float64) for f in (U, S, V, R, P))
    eps = 1e-5 if fp == ti.f32 else 1e-12
    # reconstruction: Taichi's own 3x3 f64 SVD (fixed Jacobi sweeps) reaches ~3e-11, so allow 1e-10
    rec = 4e-5 if fp == ti.f32 else 1e-10
    eye = np.eye(n)
    for k in range(m):
        scale = max(1.0, np.abs(a[k]).max())
        # SVD: A = U S V^T with U, V orthogonal and S diagonal
        np.testing.assert_allclose(u[k] @ s[k] @ v[k].T, a[k], rtol=0, atol=rec * scale, err_msg=f'svd #{k}')
        np.testing.assert_allclose(u[k] @ u[k].T, eye, rtol=0, atol=eps * 4, err_msg=f'U #{k}')
        np.testing.assert_allclose(v[k] @ v[k].T, eye, rtol=0, atol=eps * 4, err_msg=f'V #{k}')
        np.testing.assert_allclose(s[k] - np.diag(np.diag(s[k])), 0, rtol=0, atol=eps * scale, err_msg=f'S #{k}')
        np.testing.assert_allclose(np.sort(np.abs(np.diag(s[k]))), np.sort(np.linalg.svd(a[k], compute_uv=False)),
                                   rtol=0, atol=eps * scale * 4, err_msg=f'singular values #{k}')
        # polar: A = R P with R orthogonal and P symmetric
        np.testing.assert_allclose(r[k] @ p[k], a[k], rtol=0, atol=rec * scale, err_msg=f'polar #{k}')
        np.testing.assert_allclose(r[k] @ r[k].T, eye, rtol=0, atol=eps * 4, err_msg=f'R #{k}')
        np.testing.assert_allclose(p[k], p[k].T, rtol=0, atol=eps * scale * 4, err_msg=f'P #{k}')
        if np.linalg.det(a[k]) > 0:
            assert np.linalg.det(r[k]) > 0
            assert np.all(np.linalg.eigvalsh((p[k] + p[k].T) / 2) > 0)


def test_svd_polar_2d(fp):
    rng = np.random.RandomState(7)
    mats = [np.array([[1, 1], [9, -3]]), np.array([[2, 0.5], [0.3, 1.5]]), np.eye(2),
            np.array([[3, 0], [0, 1]]), np.array([[0.5, -2], [1.25, 0.75]])]
    mats += list(rng.rand(6, 2, 2) * 4 - 2)
    _check_decompositions(fp, np.array(mats, dtype=np.float64))


def test_svd_polar_3d(fp):
    rng = np.random.RandomState(11)
    mats = [np.array([[1, 1, 3], [9, -3, 2], [-3, 4, 2]]), np.eye(3),
            np.diag([3.0, 2.0, 1.0]), np.array([[1.0, 0.2, 0.0], [0.1, 1.1, 0.3], [0.0, -0.2, 0.9]])]
    mats += list(rng.rand(6, 3, 3) * 4 - 2)
    _check_decompositions(fp, np.array(mats, dtype=np.float64))
