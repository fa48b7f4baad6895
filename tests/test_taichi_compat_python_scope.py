"""Taichi's Python-scope API as Taichi 1.7 documents it: layouts, field and vector
elements, swizzles, struct gradients, names and submodules, field helpers, the GUI's
drawing calls and the VideoManager's frames. Features the engine lacks fail saying so."""
import pytest

import engine as ti

pytestmark = pytest.mark.usefixtures('ti_init')


# --- sparse SNodes: refused, never allocated densely -------------------------------------

@pytest.mark.parametrize('build', [lambda: ti.root.pointer(ti.i, 4),
                                   lambda: ti.root.dense(ti.i, 2).bitmasked(ti.j, 8),
                                   lambda: ti.root.dense(ti.i, 2).dynamic(ti.j, 16, chunk_size=4)])
def test_sparse_snodes_are_refused_naming_the_line(build):
    with pytest.raises(ti.TaichiNotImplementedError, match=r'test_taichi_compat_python_scope.py:\d+: sparse'):
        build()
    assert issubclass(ti.TaichiNotImplementedError, (ti.TaichiRuntimeError, NotImplementedError))


# --- Python-scope element writes, swizzles, any/all ----------------------------------------

def test_swizzle_setters_write_through_field_elements():
    v = ti.Vector.field(3, ti.f32, shape=2)
    v[0].x = 1
    v[1].zy = [4, 5]
    v[1].y += 1
    assert v.to_numpy().tolist() == [[1, 0, 0], [0, 6, 4]]
    a = ti.Vector([1.0, 2.0, 3.0])
    a.x, a.b = 5, 9
    assert a.to_list() == [5, 2, 9]


def test_swizzles_read_in_python_scope_and_refuse_missing_entries():
    a = ti.math.vec3(1, 2, 3)
    assert a.to_list() == [1.0, 2.0, 3.0] and isinstance(a[0], float)
    assert (a.zyx.to_list(), a.rgb.to_list(), a.xxx.to_list(), a.ts.to_list()) == \
        ([3, 2, 1], [1, 2, 3], [1, 1, 1], [2, 1])
    with pytest.raises(AttributeError, match="3-vector has no entry 'w'"):
        a.w
    with pytest.raises(AttributeError, match='swizzles name entries of vectors'):
        ti.Matrix([[1, 2], [3, 4]]).x
    assert not hasattr(a, 'grad')


def test_swizzles_in_a_kernel_differentiate():
    x = ti.Vector.field(3, ti.f32, shape=(), needs_grad=True)
    y = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def f():
        b = x[None].zxy * ti.Vector([1.0, 2.0, 3.0])
        y[None] = b.x + b.yz.dot(ti.Vector([10.0, 100.0])) + x[None].rg.sum()

    x[None] = [1, 2, 3]
    with ti.ad.Tape(y):
        f()
    assert y[None] == 3 + 20 + 600 + 3
    assert x.grad.to_numpy().tolist() == [21, 301, 1]


def test_matrix_any_and_all_in_python_scope_and_kernels():
    @ti.kernel
    def k() -> ti.types.vector(4, ti.i32):
        a = ti.math.vec3(1, 2, 3)
        return ti.Vector([(a > 2.5).any(), (a > 0.5).all(), (a < 0).any(), (a < 2.5).all()])

    assert k().to_list() == [1, 1, 0, 0]
    assert (ti.Vector([0, 0.5]).any(), ti.Vector([0, 0.5]).all()) == (1, 0)


# --- a struct field's gradient and dual -----------------------------------------------------

def test_struct_field_grad_is_a_struct_field_of_the_members_gradients():
    inner = ti.types.struct(p=ti.f32, q=ti.math.vec2)
    s = ti.types.struct(a=ti.f32, n=ti.i32, inner=inner).field(shape=2, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def f():
        for i in s:
            loss[None] += s[i].a * 3 + s[i].inner.q.dot(ti.Vector([1.0, 2.0])) + s[i].n

    @ti.kernel
    def read() -> ti.f32:
        return s.grad.a[0] + s.grad[1].inner.q.y

    with ti.ad.Tape(loss):
        f()
    assert s.grad.keys == ['a', 'inner'] and s.grad is s.grad      # integers have no gradient
    assert s.grad.a.to_numpy().tolist() == [3, 3]
    assert s.grad.inner.q.to_numpy().tolist() == [[1, 2], [1, 2]]
    assert read() == 5
    assert s.dual.a is s.a.dual and s.grad.dual.inner.p is s.inner.p.grad.dual
