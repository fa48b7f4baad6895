"""Fields (scalar / vector / matrix, shaped or placed through ti.root), gradients, and ndarrays."""
import re

import numpy as np
import pytest

import engine as ti

pytestmark = pytest.mark.usefixtures('ti_init')


# --------------------------------------------------------------------------- kernels

@ti.kernel
def k_write_1d(x: ti.template()):
    for i in x:
        x[i] = i * 2 + 1


@ti.kernel
def k_write_2d(x: ti.template()):
    for i, j in x:
        x[i, j] = i * 10 + j


@ti.kernel
def k_write_3d(x: ti.template()):
    for i, j, k in x:
        x[i, j, k] = i * 100 + j * 10 + k


@ti.kernel
def k_write_4d(x: ti.template()):
    for I in ti.grouped(x):
        x[I] = I[0] * 1000 + I[1] * 100 + I[2] * 10 + I[3]


@ti.kernel
def k_scalar0d(s: ti.template(), v: ti.f32):
    s[None] = s[None] * 2 + v


@ti.kernel
def k_double(x: ti.template()):
    for I in ti.grouped(x):
        x[I] = x[I] * 2


@ti.kernel
def k_grad_write(x: ti.template()):
    for i in x:
        x.grad[i] = x[i] + 1


@ti.kernel
def k_vec_write(v: ti.template()):
    for i in v:
        v[i] = ti.Vector([i, i * 2, i * 3])


@ti.kernel
def k_mat_write(m: ti.template()):
    for i in m:
        m[i] = ti.Matrix([[i, i + 1], [i + 2, i + 3]])


@ti.kernel
def k_arr_scale(a: ti.types.ndarray(), b: ti.types.ndarray(), s: ti.f32):
    for i in range(a.shape[0]):
        b[i] = a[i] * s + 1


@ti.kernel
def k_arr_2d(a: ti.types.ndarray()):
    for i, j in ti.ndrange(a.shape[0], a.shape[1]):
        a[i, j] = a[i, j] + i * 10 + j


@ti.kernel
def k_arr_sum(a: ti.types.ndarray()) -> ti.f64:
    s = 0.0
    for i in range(a.shape[0]):     # parallel; reduction into a local var is a Taichi reduction
        s += a[i]
    return s


@ti.kernel
def k_arr_vec(v: ti.types.ndarray(), out: ti.types.ndarray()):
    for i in range(v.shape[0]):
        out[i] = v[i][0] + v[i][1] * 10 + v[i][2] * 100
        v[i] = ti.Vector([v[i][2], v[i][1], v[i][0]])


@ti.kernel
def k_arr_mat(m: ti.types.ndarray()):
    for i in range(m.shape[0]):
        m[i] = m[i].transpose() * 2


@ti.kernel
def k_arr_int(a: ti.types.ndarray()):
    for i in range(a.shape[0]):
        a[i] = a[i] * a[i] - 1


# --------------------------------------------------------------------------- shaped fields

def test_field_shape_dtype_initial_zero():
    x = ti.field(ti.f32, shape=5)
    y = ti.field(ti.i32, shape=(3, 4))
    assert x.shape == (5,)
    assert y.shape == (3, 4)
    assert x.dtype == ti.f32
    assert y.dtype == ti.i32
    a = x.to_numpy()
    assert a.shape == (5,) and a.dtype == np.float32
    np.testing.assert_array_equal(a, 0)
    b = y.to_numpy()
    assert b.shape == (3, 4) and b.dtype == np.int32
    np.testing.assert_array_equal(b, 0)


def test_field_1d_2d_3d_4d_kernel_writes():
    x1 = ti.field(ti.i32, shape=7)
    x2 = ti.field(ti.i32, shape=(3, 5))
    x3 = ti.field(ti.i32, shape=(2, 3, 4))
    x4 = ti.field(ti.i32, shape=(2, 3, 2, 3))
    k_write_1d(x1)
    k_write_2d(x2)
    k_write_3d(x3)
    k_write_4d(x4)
    np.testing.assert_array_equal(x1.to_numpy(), np.arange(7) * 2 + 1)
    i, j = np.indices((3, 5))
    np.testing.assert_array_equal(x2.to_numpy(), i * 10 + j)
    i, j, k = np.indices((2, 3, 4))
    np.testing.assert_array_equal(x3.to_numpy(), i * 100 + j * 10 + k)
    i, j, k, l = np.indices((2, 3, 2, 3))
    np.testing.assert_array_equal(x4.to_numpy(), i * 1000 + j * 100 + k * 10 + l)
    assert x4.shape == (2, 3, 2, 3)


def test_positional_shape_arguments():
    x = ti.field(ti.f32, 5)
    v = ti.Vector.field(2, ti.f32, 3)
    m = ti.Matrix.field(2, 3, ti.f64, (4, 2))
    assert x.shape == (5,)
    assert v.shape == (3,) and v.to_numpy().shape == (3, 2)
    assert m.shape == (4, 2) and m.to_numpy().shape == (4, 2, 2, 3)
    assert m.dtype == ti.f64


def test_field_0d():
    s = ti.field(ti.f32, shape=())
    assert s.shape == ()
    assert s[None] == 0.0
    s[None] = 1.5
    assert s[None] == 1.5
    k_scalar0d(s, 0.25)
    assert s[None] == 3.25
    a = s.to_numpy()
    assert a.shape == ()
    assert float(a) == 3.25
    s.from_numpy(np.array(4.0, dtype=np.float32))
    assert s[None] == 4.0


@ti.kernel
def k_0d_vectors(v: ti.template(), m: ti.template(), loss: ti.template()):
    v[None] += ti.Vector([1.0, 1.0, 1.0])
    m[None] = m[None] @ m[None]
    loss[None] = v[None].norm_sqr()
    loss.grad[None] = 1.0
    v.grad[None] = v[None] * 2


def test_0d_vector_matrix_fields_and_grads():
    v = ti.Vector.field(3, ti.f32, shape=(), needs_grad=True)
    m = ti.Matrix.field(2, 2, ti.f32, shape=())
    loss = ti.field(ti.f32, shape=(), needs_grad=True)
    assert v.shape == () and v.to_numpy().shape == (3,)
    assert m.to_numpy().shape == (2, 2)
    v[None] = [1.0, 2.0, 3.0]
    m[None] = [[1.0, 2.0], [3.0, 4.0]]
    k_0d_vectors(v, m, loss)
    np.testing.assert_array_equal(np.array(v[None]), [2.0, 3.0, 4.0])
    np.testing.assert_array_equal(m.to_numpy(), [[7.0, 10.0], [15.0, 22.0]])
    assert loss[None] == 29.0
    assert loss.grad[None] == 1.0
    np.testing.assert_array_equal(v.grad.to_numpy(), [4.0, 6.0, 8.0])


def test_python_scope_get_set():
    x = ti.field(ti.f64, shape=(3, 4))
    x[1, 2] = 5.5
    x[2, 3] = -1.25
    assert x[1, 2] == 5.5
    assert x[2, 3] == -1.25
    assert x[0, 0] == 0.0
    expected = np.zeros((3, 4))
    expected[1, 2], expected[2, 3] = 5.5, -1.25
    np.testing.assert_array_equal(x.to_numpy(), expected)
    k_double(x)
    assert x[1, 2] == 11.0
    y = ti.field(ti.i32, shape=4)
    y[3] = 7
    assert y[3] == 7
    assert isinstance(y[3], (int, np.integer))


def test_from_numpy_to_numpy_roundtrip():
    x = ti.field(ti.f32, shape=(4, 3))
    data = np.arange(12, dtype=np.float32).reshape(4, 3) / 4
    x.from_numpy(data)
    np.testing.assert_array_equal(x.to_numpy(), data)
    k_double(x)
    np.testing.assert_array_equal(x.to_numpy(), data * 2)
    # the returned array is a copy: modifying it does not change the field
    a = x.to_numpy()
    a[:] = 0
    np.testing.assert_array_equal(x.to_numpy(), data * 2)


def test_numpy_integer_indices_and_non_contiguous_input():
    x = ti.field(ti.f32, shape=(3, 4))
    x[np.int64(1), np.int32(2)] = 3.5
    assert x[np.int64(1), 2] == 3.5
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    x.from_numpy(data.T)                        # a transposed (non-contiguous) view
    np.testing.assert_array_equal(x.to_numpy(), data.T)
    y = ti.field(ti.f64, shape=5)
    y.from_numpy(np.arange(10, dtype=np.float64)[::2])   # strided view
    assert y.to_numpy().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]


def test_from_numpy_converts_dtype():
    x = ti.field(ti.f32, shape=3)
    x.from_numpy(np.array([1.5, 2.25, -3.0], dtype=np.float64))
    np.testing.assert_array_equal(x.to_numpy(), np.array([1.5, 2.25, -3.0], dtype=np.float32))
    y = ti.field(ti.f64, shape=3)
    y.from_numpy(np.array([1, -2, 3], dtype=np.int64))
    assert y.to_numpy().tolist() == [1.0, -2.0, 3.0]
    z = ti.field(ti.i32, shape=2)
    z.from_numpy(np.array([4, 5], dtype=np.int64))
    assert z.to_numpy().tolist() == [4, 5]


def _mentions_shape(msg, shape):
    return re.search(r'[\(\[]\s*' + r'\s*,\s*'.join(str(s) for s in shape) + r'\s*,?\s*[\)\]]', msg)


def test_from_numpy_shape_mismatch_raises_value_error():
    x = ti.field(ti.f32, shape=(3, 5))
    with pytest.raises(ValueError) as e:
        x.from_numpy(np.zeros((5, 3), dtype=np.float32))
    msg = str(e.value)
    assert _mentions_shape(msg, (3, 5)), msg
    assert _mentions_shape(msg, (5, 3)), msg
    # the field is untouched
    np.testing.assert_array_equal(x.to_numpy(), 0)


def test_from_numpy_shape_mismatch_vector_field():
    v = ti.Vector.field(3, ti.f32, shape=4)
    with pytest.raises(ValueError):
        v.from_numpy(np.zeros((4, 2), dtype=np.float32))
    with pytest.raises(ValueError):
        v.from_numpy(np.zeros((4,), dtype=np.float32))


def test_fill():
    x = ti.field(ti.f32, shape=(2, 3))
    x.fill(2.5)
    np.testing.assert_array_equal(x.to_numpy(), np.full((2, 3), 2.5, dtype=np.float32))
    v = ti.Vector.field(3, ti.i32, shape=4)
    v.fill(7)
    np.testing.assert_array_equal(v.to_numpy(), np.full((4, 3), 7))
    m = ti.Matrix.field(2, 2, ti.f64, shape=2)
    m.fill(-1.0)
    np.testing.assert_array_equal(m.to_numpy(), np.full((2, 2, 2), -1.0))


# --------------------------------------------------------------------------- vector / matrix fields

def test_vector_field_numpy_layout():
    v = ti.Vector.field(3, ti.f32, shape=(4, 2))
    assert v.shape == (4, 2)
    a = v.to_numpy()
    assert a.shape == (4, 2, 3) and a.dtype == np.float32
    data = np.random.RandomState(0).rand(4, 2, 3).astype(np.float32)
    v.from_numpy(data)
    np.testing.assert_array_equal(v.to_numpy(), data)
    k_double(v)
    np.testing.assert_array_equal(v.to_numpy(), data * 2)


def test_vector_field_kernel_write():
    v = ti.Vector.field(3, ti.i32, shape=5)
    k_vec_write(v)
    i = np.arange(5)
    np.testing.assert_array_equal(v.to_numpy(), np.stack([i, 2 * i, 3 * i], axis=1))


def test_matrix_field_numpy_layout():
    m = ti.Matrix.field(2, 3, ti.f64, shape=4)
    assert m.shape == (4,)
    a = m.to_numpy()
    assert a.shape == (4, 2, 3) and a.dtype == np.float64
    data = np.random.RandomState(1).rand(4, 2, 3)
    m.from_numpy(data)
    np.testing.assert_array_equal(m.to_numpy(), data)


def test_matrix_field_kernel_write():
    m = ti.Matrix.field(2, 2, ti.f32, shape=3)
    k_mat_write(m)
    for i in range(3):
        np.testing.assert_array_equal(m.to_numpy()[i], [[i, i + 1], [i + 2, i + 3]])


def test_vector_field_python_scope_access():
    v = ti.Vector.field(3, ti.f32, shape=4)
    v[1] = [1, 2, 3]
    v[2] = ti.Vector([4.0, 5.0, 6.0])
    v[3] = np.array([7.0, 8.0, 9.0])
    e = v[1]
    assert isinstance(e, ti.Matrix)
    assert e[0] == 1 and e[1] == 2 and e[2] == 3
    assert v[2][1] == 5.0
    np.testing.assert_array_equal(np.array(v[3]), [7.0, 8.0, 9.0])
    np.testing.assert_array_equal(v.to_numpy(), [[0, 0, 0], [1, 2, 3], [4, 5, 6], [7, 8, 9]])
    # the element object supports vector arithmetic in Python scope
    np.testing.assert_array_equal(np.array(v[1] + v[2]), [5.0, 7.0, 9.0])


def test_matrix_field_python_scope_access():
    m = ti.Matrix.field(2, 2, ti.f32, shape=3)
    m[0] = [[1, 2], [3, 4]]
    m[2] = ti.Matrix([[5.0, 6.0], [7.0, 8.0]])
    assert isinstance(m[0], ti.Matrix)
    assert m[0][0, 1] == 2
    assert m[0][1, 0] == 3
    assert m[2][1, 1] == 8.0
    np.testing.assert_array_equal(np.array(m[2]), [[5, 6], [7, 8]])
    np.testing.assert_array_equal(m.to_numpy()[1], [[0, 0], [0, 0]])


# --------------------------------------------------------------------------- ti.root placement

def test_root_dense_place_1d():
    x = ti.field(ti.i32)
    ti.root.dense(ti.i, 8).place(x)
    assert x.shape == (8,)
    k_write_1d(x)
    np.testing.assert_array_equal(x.to_numpy(), np.arange(8) * 2 + 1)
    x[3] = 100
    assert x[3] == 100


def test_root_dense_place_two_fields_2d():
    x = ti.field(ti.f32)
    y = ti.field(ti.i32)
    ti.root.dense(ti.ij, (4, 4)).place(x, y)
    assert x.shape == (4, 4) and y.shape == (4, 4)
    assert x.dtype == ti.f32 and y.dtype == ti.i32
    k_write_2d(x)
    k_write_2d(y)
    i, j = np.indices((4, 4))
    np.testing.assert_array_equal(x.to_numpy(), i * 10 + j)
    np.testing.assert_array_equal(y.to_numpy(), i * 10 + j)
    y.from_numpy(np.ones((4, 4), dtype=np.int32))
    np.testing.assert_array_equal(x.to_numpy(), i * 10 + j)   # x is independent of y


def test_root_nested_dense_same_axis():
    z = ti.field(ti.f32)
    ti.root.dense(ti.i, 4).dense(ti.i, 2).place(z)
    assert z.shape == (8,)
    k_write_1d(z)
    np.testing.assert_array_equal(z.to_numpy(), np.arange(8) * 2 + 1)
    data = np.arange(8, dtype=np.float32) ** 2
    z.from_numpy(data)
    np.testing.assert_array_equal(z.to_numpy(), data)
    assert z[5] == 25.0


def test_root_nested_dense_2d_blocks():
    w = ti.field(ti.i32)
    ti.root.dense(ti.ij, (2, 2)).dense(ti.ij, (3, 3)).place(w)
    assert w.shape == (6, 6)
    k_write_2d(w)
    i, j = np.indices((6, 6))
    np.testing.assert_array_equal(w.to_numpy(), i * 10 + j)
    data = (np.arange(36).reshape(6, 6) * 7).astype(np.int32)
    w.from_numpy(data)
    np.testing.assert_array_equal(w.to_numpy(), data)
    assert w[4, 1] == data[4, 1]
    k_double(w)
    np.testing.assert_array_equal(w.to_numpy(), data * 2)


def test_root_dense_different_axes_nested():
    b = ti.field(ti.i32)
    ti.root.dense(ti.i, 3).dense(ti.j, 4).place(b)
    assert b.shape == (3, 4)
    k_write_2d(b)
    i, j = np.indices((3, 4))
    np.testing.assert_array_equal(b.to_numpy(), i * 10 + j)


def test_root_dense_ijk_ijkl():
    a = ti.field(ti.i32)
    c = ti.field(ti.i32)
    ti.root.dense(ti.ijk, (2, 3, 4)).place(a)
    ti.root.dense(ti.ijkl, (2, 3, 2, 3)).place(c)
    assert a.shape == (2, 3, 4)
    assert c.shape == (2, 3, 2, 3)
    k_write_3d(a)
    k_write_4d(c)
    i, j, k = np.indices((2, 3, 4))
    np.testing.assert_array_equal(a.to_numpy(), i * 100 + j * 10 + k)
    i, j, k, l = np.indices((2, 3, 2, 3))
    np.testing.assert_array_equal(c.to_numpy(), i * 1000 + j * 100 + k * 10 + l)


def test_root_dense_axes_k_j():
    a = ti.field(ti.i32)
    ti.root.dense(ti.i, 2).dense(ti.j, 3).dense(ti.k, 4).place(a)
    assert a.shape == (2, 3, 4)
    k_write_3d(a)
    i, j, k = np.indices((2, 3, 4))
    np.testing.assert_array_equal(a.to_numpy(), i * 100 + j * 10 + k)


def test_root_place_0d():
    s = ti.field(ti.f32)
    ti.root.place(s)
    assert s.shape == ()
    s[None] = 2.0
    k_scalar0d(s, 1.0)
    assert s[None] == 5.0


def test_root_place_vector_field():
    v = ti.Vector.field(3, ti.i32)
    ti.root.dense(ti.i, 5).place(v)
    assert v.shape == (5,)
    k_vec_write(v)
    i = np.arange(5)
    np.testing.assert_array_equal(v.to_numpy(), np.stack([i, 2 * i, 3 * i], axis=1))


# --------------------------------------------------------------------------- gradients

def test_needs_grad_allocates_grad():
    x = ti.field(ti.f32, shape=4, needs_grad=True)
    assert x.grad is not None
    assert x.grad.shape == (4,)
    assert x.grad.dtype == ti.f32
    np.testing.assert_array_equal(x.grad.to_numpy(), 0)
    x.from_numpy(np.array([1, 2, 3, 4], dtype=np.float32))
    k_grad_write(x)
    np.testing.assert_array_equal(x.grad.to_numpy(), [2, 3, 4, 5])
    np.testing.assert_array_equal(x.to_numpy(), [1, 2, 3, 4])
    x.grad.fill(0)
    np.testing.assert_array_equal(x.grad.to_numpy(), 0)


def test_needs_grad_vector_field():
    v = ti.Vector.field(2, ti.f64, shape=(3, 2), needs_grad=True)
    assert v.grad.shape == (3, 2)
    assert v.grad.dtype == ti.f64
    assert v.grad.to_numpy().shape == (3, 2, 2)
    np.testing.assert_array_equal(v.grad.to_numpy(), 0)


def test_lazy_grad():
    x = ti.field(ti.f32)
    y = ti.field(ti.f64)
    ti.root.dense(ti.i, 4).place(x)
    ti.root.dense(ti.ij, (2, 3)).place(y)
    ti.root.lazy_grad()
    assert x.grad.shape == (4,) and x.grad.dtype == ti.f32
    assert y.grad.shape == (2, 3) and y.grad.dtype == ti.f64
    np.testing.assert_array_equal(x.grad.to_numpy(), 0)
    np.testing.assert_array_equal(y.grad.to_numpy(), 0)
    x.from_numpy(np.array([1, 2, 3, 4], dtype=np.float32))
    k_grad_write(x)
    np.testing.assert_array_equal(x.grad.to_numpy(), [2, 3, 4, 5])


# --------------------------------------------------------------------------- ndarrays

def test_ndarray_basics():
    a = ti.ndarray(ti.f32, shape=(4,))
    assert a.shape == (4,)
    np.testing.assert_array_equal(a.to_numpy(), 0)
    a[1] = 2.5
    assert a[1] == 2.5
    a.from_numpy(np.array([1, 2, 3, 4], dtype=np.float32))
    assert a.to_numpy().dtype == np.float32
    np.testing.assert_array_equal(a.to_numpy(), [1, 2, 3, 4])
    b = ti.ndarray(ti.i32, shape=(2, 3))
    assert b.shape == (2, 3)
    b[1, 2] = 9
    assert b[1, 2] == 9
    assert b.to_numpy()[1, 2] == 9


def test_vector_and_matrix_ndarray_layout():
    v = ti.Vector.ndarray(3, ti.f32, shape=(5,))
    assert v.shape == (5,)
    assert v.to_numpy().shape == (5, 3)
    m = ti.Matrix.ndarray(2, 2, ti.f64, shape=(5,))
    assert m.shape == (5,)
    assert m.to_numpy().shape == (5, 2, 2)
    data = np.arange(15, dtype=np.float32).reshape(5, 3)
    v.from_numpy(data)
    np.testing.assert_array_equal(v.to_numpy(), data)
    v[2] = [1, 1, 1]
    np.testing.assert_array_equal(np.array(v[2]), [1, 1, 1])


def test_kernel_with_ti_ndarray():
    a = ti.ndarray(ti.f32, shape=(6,))
    b = ti.ndarray(ti.f32, shape=(6,))
    a.from_numpy(np.arange(6, dtype=np.float32))
    k_arr_scale(a, b, 2.0)
    np.testing.assert_array_equal(b.to_numpy(), np.arange(6) * 2 + 1)


def test_kernel_with_numpy_arrays_writes_back():
    a = np.arange(10, dtype=np.float32)
    b = np.zeros(10, dtype=np.float32)
    k_arr_scale(a, b, 0.5)
    np.testing.assert_array_equal(b, np.arange(10) * 0.5 + 1)
    np.testing.assert_array_equal(a, np.arange(10))
    # a different length reuses the kernel: shape is a runtime property
    a2 = np.ones(3, dtype=np.float32)
    b2 = np.zeros(3, dtype=np.float32)
    k_arr_scale(a2, b2, 3.0)
    np.testing.assert_array_equal(b2, [4, 4, 4])


def test_kernel_with_numpy_f64_and_int_arrays():
    a = np.linspace(0, 1, 7)
    b = np.zeros(7)
    k_arr_scale(a, b, 3.0)
    np.testing.assert_allclose(b, a * 3 + 1, rtol=1e-7)
    n = np.array([1, 2, 3, -4], dtype=np.int32)
    k_arr_int(n)
    assert n.tolist() == [0, 3, 8, 15]
    n64 = np.array([3, 2 ** 20], dtype=np.int64)
    k_arr_int(n64)
    assert n64.tolist() == [8, 2 ** 40 - 1]


def test_kernel_numpy_2d_array():
    a = np.zeros((3, 4), dtype=np.float64)
    k_arr_2d(a)
    i, j = np.indices((3, 4))
    np.testing.assert_array_equal(a, i * 10 + j)
    k_arr_2d(a)
    np.testing.assert_array_equal(a, 2 * (i * 10 + j))


def test_kernel_ndarray_return_reduction():
    a = np.arange(1000, dtype=np.float64)
    assert k_arr_sum(a) == pytest.approx(999 * 1000 / 2, rel=1e-12)


def test_kernel_vector_ndarray():
    v = ti.Vector.ndarray(3, ti.f32, shape=(4,))
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    v.from_numpy(data)
    out = ti.ndarray(ti.f32, shape=(4,))
    k_arr_vec(v, out)
    np.testing.assert_array_equal(out.to_numpy(), data[:, 0] + data[:, 1] * 10 + data[:, 2] * 100)
    np.testing.assert_array_equal(v.to_numpy(), data[:, ::-1])


def test_kernel_matrix_ndarray():
    m = ti.Matrix.ndarray(2, 2, ti.f64, shape=(3,))
    data = np.arange(12, dtype=np.float64).reshape(3, 2, 2)
    m.from_numpy(data)
    k_arr_mat(m)
    np.testing.assert_array_equal(m.to_numpy(), np.transpose(data, (0, 2, 1)) * 2)


def test_root_place_mixed_dtypes_together():
    a = ti.field(ti.f64)
    b = ti.field(ti.i8)
    c = ti.field(ti.f32)
    d = ti.Vector.field(3, ti.i16)
    e = ti.field(ti.u64)
    ti.root.dense(ti.i, 5).place(a, b, c, d, e)
    n = np.arange(5)
    a.from_numpy(n * 1.5)
    b.from_numpy((n - 2).astype(np.int8))
    c.from_numpy((n * 0.25).astype(np.float32))
    d.from_numpy(np.stack([n, -n, n * 100], axis=1).astype(np.int16))
    e.from_numpy((n.astype(np.uint64) << np.uint64(40)) + np.uint64(7))
    k_double(a)
    k_double(b)
    k_double(c)
    k_double(d)
    k_double(e)
    np.testing.assert_array_equal(a.to_numpy(), n * 3.0)
    np.testing.assert_array_equal(b.to_numpy(), (n - 2) * 2)
    np.testing.assert_array_equal(c.to_numpy(), n * 0.5)
    np.testing.assert_array_equal(d.to_numpy(), np.stack([n, -n, n * 100], axis=1) * 2)
    np.testing.assert_array_equal(e.to_numpy(), ((n.astype(np.uint64) << np.uint64(40)) + np.uint64(7)) * np.uint64(2))
    b[4] = -128
    assert b[4] == -128 and a[4] == 12.0 and c[4] == 2.0


def test_setting_an_entry_of_an_element_read_from_python_writes_it_to_the_field():
    x = ti.Vector.field(2, ti.f64, shape=())
    m = ti.Matrix.field(2, 2, ti.f64, shape=3)
    S = ti.types.struct(v=ti.math.vec2, a=float)
    s = S.field(shape=2)
    x[None] = [0.1, 0.5]
    x[None][1] -= 0.25                # DiffTaichi's billiards updates its parameters so
    m[1][0, 1] = 7.0
    s[1].v[0] = 3.0
    copy = x[None] * 2                # arithmetic gives plain values
    copy[0] = 9.0
    assert x[None].to_list() == [0.1, 0.25]
    assert m[1].to_list() == [[0.0, 7.0], [0.0, 0.0]]
    assert s.v[1].to_list() == [3.0, 0.0]
