"""Compound types: kernels returning vectors, matrices, tuples and structs; struct types
(ti.types.struct, ti.Struct, @ti.dataclass) as locals, arguments, return types and field
dtypes; gradients through struct fields; struct-for over ndarray arguments."""
import numpy as np
import pytest

import engine as ti
from ad_helpers import f64, fd_check, set_field  # noqa: F401  (f64 is a fixture)

pytestmark = pytest.mark.usefixtures('ti_init')

vec2, vec3 = ti.math.vec2, ti.math.vec3
Particle = ti.types.struct(pos=ti.types.vector(2, float), mass=float, id=ti.i32)


@ti.dataclass
class Sphere:
    center: vec3
    radius: ti.f32

    @ti.func
    def area(self):
        return 4.0 * self.radius * self.radius

    @ti.func
    def grow(self, k):
        self.radius *= k

    def is_point(self):
        return self.radius == 0.0


# --------------------------------------------------------------------------- return values

def test_kernels_return_vectors_matrices_and_tuples_as_python_values():
    @ti.kernel
    def v() -> ti.types.vector(3, float):
        return ti.Vector([1.0, 2.0, 3.0])

    @ti.kernel
    def v2(x: ti.f32) -> vec2:
        return vec2(x, 2 * x)

    @ti.kernel
    def m() -> ti.types.matrix(2, 2, ti.i32):
        return ti.Matrix([[1, 2], [3, 4]])

    @ti.kernel
    def t() -> (ti.i32, ti.f32):
        return 3, 4.5

    @ti.kernel
    def t2(x: ti.f32) -> tuple[ti.i32, vec2]:
        return 7, vec2(x)

    assert isinstance(v(), ti.Matrix) and v().to_list() == [1.0, 2.0, 3.0]
    assert (np.asarray(v2(1.5)) == [1.5, 3.0]).all() and v2(1.5).x == 1.5
    assert m().to_list() == [[1, 2], [3, 4]] and isinstance(m()[1, 0], int)
    assert t() == (3, 4.5)
    count, vector = t2(0.5)
    assert count == 7 and vector.to_list() == [0.5, 0.5]


def test_a_kernel_returns_a_struct_and_takes_struct_and_vector_arguments():
    @ti.kernel
    def make(x: ti.f32) -> Particle:
        p = Particle(pos=vec2(x, 1.0), mass=2.0)
        p.mass += x
        p.pos[1] = 7.0
        p.id = 3
        return p

    @ti.kernel
    def weigh(p: Particle, v: vec3) -> ti.f32:
        p.mass *= 2         # arguments are mutable locals
        return p.mass + p.pos.y + v.sum()

    p = make(1.5)
    assert p.to_dict() == {'pos': [1.5, 7.0], 'mass': 3.5, 'id': 3}
    assert weigh(p, [1, 1, 1]) == pytest.approx(17.0)
    assert weigh({'pos': [0.0, 1.0], 'mass': 1.0, 'id': 0}, vec3(0)) == pytest.approx(3.0)
    with pytest.raises(ti.TaichiTypeError, match="argument 'p' of kernel weigh.*members pos, mass, id"):
        weigh({'mass': 1.0}, vec3(0))
    with pytest.raises(ti.TaichiTypeError, match='expected a vector3'):
        weigh(p, [1, 2])


def test_interpreted_kernels_return_compound_values():
    ti.init(arch=ti.cpu, interpret=True)

    @ti.kernel
    def f(x: ti.f32) -> (ti.i32, vec2):
        return 7, vec2(x, 2 * x)

    assert f(1.5)[0] == 7 and f(1.5)[1].to_list() == [1.5, 3.0]


# --------------------------------------------------------------------------- struct values

def test_struct_types_cast_members_and_zero_the_rest():
    p = Particle(mass=2)
    assert p.to_dict() == {'pos': [0.0, 0.0], 'mass': 2.0, 'id': 0}
    assert Particle(vec2(1, 2), 3.0, 4).pos.to_list() == [1, 2]
    p.mass = 5
    assert p.mass == 5.0 and isinstance(p.mass, float)
    s = ti.Struct(a=1, v=ti.Vector([1.0, 2.0]))
    assert s.keys == ['a', 'v'] and s.v.y == 2.0
    with pytest.raises(TypeError, match="no member 'velocity'"):
        Particle(velocity=1.0)
    with pytest.raises(AttributeError, match="no member 'velocity'"):
        p.velocity = 1.0


def test_dataclass_methods_run_in_their_scope():
    s = Sphere(center=vec3(0.0), radius=1.0)
    assert not s.is_point() and Sphere(radius=0.0).is_point()
    spheres = Sphere.field(shape=2)

    @ti.kernel
    def total() -> ti.f32:
        area = 0.0
        for i in range(2):
            sphere = Sphere(center=vec3(i), radius=i + 1.0)
            sphere.grow(2.0)            # a ti.func method updates the local
            spheres[i] = sphere
            area += sphere.area()
        return area

    assert total() == pytest.approx(4.0 * (4 + 16))
    assert spheres.radius.to_numpy().tolist() == [2.0, 4.0]
    assert spheres[1].center.to_list() == [1.0, 1.0, 1.0]


def test_struct_locals_in_funcs_and_returns_from_control_flow():
    @ti.func
    def pick(x):
        if x > 0:
            return x, Particle(mass=x)
        return -x, Particle(mass=1.0, id=1)

    @ti.kernel
    def run(x: ti.f32) -> (ti.f32, ti.f32, ti.i32):
        a, p = pick(x)
        q = p               # a copy
        q.mass = 100.0
        return a, p.mass, p.id

    assert run(2.0) == (2.0, 2.0, 0)
    assert run(-3.0) == (3.0, 1.0, 1)


# --------------------------------------------------------------------------- struct fields

def test_struct_fields_are_a_struct_of_arrays_in_kernels_and_python():
    f = Particle.field(shape=4)
    assert f.keys == ['pos', 'mass', 'id'] and f.shape == (4,) and f.pos.shape == (4,)

    @ti.kernel
    def fill():
        for i in f:                     # a struct-for over the struct field
            f[i].mass = i * 1.0
            f[i].pos = vec2(i, 0.0)
            f.pos[i][1] += 10.0
            f[i].pos.x += 0.5
            f[i].id = i
        f[3] = Particle(pos=vec2(-1.0), mass=9.0, id=-1)

    top = ti.field(ti.f32, shape=())

    @ti.kernel
    def bump():
        for i in f:
            ti.atomic_add(f[i].mass, 1.0)
            ti.atomic_add(f[i].pos[1], 2.0)

    @ti.kernel
    def heaviest() -> ti.f32:
        for i in ti.grouped(f):
            p = f[i]
            ti.atomic_max(top[None], p.mass)
        return top[None]

    fill()
    arrays = f.to_numpy()
    assert arrays['mass'].tolist() == [0, 1, 2, 9] and arrays['id'].tolist() == [0, 1, 2, -1]
    assert arrays['pos'].tolist() == [[0.5, 10], [1.5, 10], [2.5, 10], [-1, -1]]
    assert f[1].mass == 1.0 and f.mass[1] == 1.0 and f[2].pos.to_list() == [2.5, 10.0]
    f[0].mass = 42.0                    # writes the field
    f[1] = {'pos': [5, 6], 'mass': 7, 'id': 8}
    assert f.mass.to_numpy()[:2].tolist() == [42, 7] and f.id[1] == 8 and heaviest() == 42.0
    bump()
    assert f.mass[0] == 43.0 and f[1].pos.y == 8.0
    f.fill(1)
    assert f.to_numpy()['pos'].tolist() == [[1, 1]] * 4
    g = ti.field(Particle, shape=2)            # a struct type as a field dtype
    assert isinstance(g, ti.StructField) and g.mass.shape == (2,)


def test_struct_field_of_members_dict_nested_structs_and_placement():
    inner = ti.types.struct(p=vec2, m=ti.f32)
    outer = ti.types.struct(inner=inner, w=ti.f32)
    g = ti.Struct.field({'a': ti.f32, 'v': vec3}, shape=3)
    o = outer.field()
    ti.root.dense(ti.i, 3).place(o)

    @ti.kernel
    def run():
        for i in o:
            o[i].inner.p[1] = 2.0
            o[i].inner.m += i
            g[i].v = vec3(i)
            g[i].a = o[i].inner.m + o[i].inner.p.y

    run()
    assert o.to_numpy()['inner']['m'].tolist() == [0, 1, 2]
    assert g.a.to_numpy().tolist() == [2, 3, 4] and g[2].v.to_list() == [2, 2, 2]
    o[1].inner = inner(p=vec2(5.0, 6.0), m=7.0)
    assert o.inner.p[1].to_list() == [5.0, 6.0] and o[1].inner.m == 7.0


def test_gradients_flow_through_struct_fields(f64):
    f = Particle.field(shape=3, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    assert f.id.grad is None and f.mass.grad is not None        # integer members have none

    @ti.kernel
    def energy():
        for i in f:
            p = f[i]
            loss[None] += p.mass * p.pos.norm_sqr() + ti.sin(f[i].pos.x) * f.mass[i]

    set_field(f.mass, [1.0, 2.0, 0.5])
    set_field(f.pos, [[0.3, -0.2], [0.1, 0.7], [-0.4, 0.5]])
    grads = fd_check(loss, [f.mass, f.pos], energy)
    f.mass.grad.fill(0)
    f.pos.grad.fill(0)
    loss.grad[None] = 1.0
    energy.grad()
    np.testing.assert_allclose(f.mass.grad.to_numpy(), grads[0])
    np.testing.assert_allclose(f.pos.grad.to_numpy(), grads[1])


# --------------------------------------------------------------------------- ndarrays

def test_struct_for_over_ndarray_arguments():
    @ti.kernel
    def index(a: ti.types.ndarray()):
        for i, j in a:
            a[i, j] = i * 10 + j

    @ti.kernel
    def lengths(v: ti.types.ndarray(dtype=vec3, ndim=1), out: ti.types.ndarray()):
        for i in v:
            out[i] = v[i].norm()

    a = np.zeros((2, 3), np.float32)
    index(a)
    assert a.tolist() == [[0, 1, 2], [10, 11, 12]]
    v = ti.ndarray(vec3, shape=2)               # a vector type as an ndarray dtype
    v.from_numpy(np.array([[3, 4, 0], [0, 0, 2]]))
    out = np.zeros(2, np.float32)
    lengths(v, out)
    assert out.tolist() == [5, 2]


def test_vector_ndarray_gradients_under_tape_and_kernel_grad(f64):
    x = ti.Vector.ndarray(3, ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def energy(a: ti.types.ndarray(dtype=vec3, ndim=1)):
        for i in a:
            loss[None] += ti.sin(a[i].dot(vec3(1.0, 2.0, 3.0))) * (i + 1)

    values = np.linspace(-0.5, 0.5, 12).reshape(4, 3)
    x.from_numpy(values)
    with ti.ad.Tape(loss=loss):
        energy(x)
    tape_grad = x.grad.to_numpy()
    expected = np.cos(values @ [1, 2, 3])[:, None] * np.arange(1, 5)[:, None] * [1, 2, 3]
    np.testing.assert_allclose(tape_grad, expected, rtol=1e-12)
    x.grad.fill(0)
    loss.grad[None] = 1.0
    energy.grad(x)
    np.testing.assert_allclose(x.grad.to_numpy(), expected, rtol=1e-12)


# --------------------------------------------------------------------------- errors

def test_struct_misuse_is_a_clear_error_at_the_users_line():
    f = Particle.field(shape=2)

    @ti.kernel
    def unknown_member() -> ti.f32:
        p = Particle(mass=1.0)
        return p.velocity

    @ti.kernel
    def unknown_field_member():
        f[0].velocity = 1.0

    @ti.kernel
    def chooses(x: ti.f32):
        for i in f:
            q = f[i] if f[i].mass > x else Particle()
            f[i] = q

    @ti.kernel
    def wrong_shape() -> vec2:
        return vec3(0)

    with pytest.raises(ti.TaichiTypeError, match="struct p has no member 'velocity'") as info:
        unknown_member()
    assert 'return p.velocity' in str(info.value)
    with pytest.raises(ti.TaichiTypeError, match="struct field f has no member 'velocity'"):
        unknown_field_member()
    with pytest.raises(ti.TaichiTypeError, match='cannot choose between structs'):
        chooses(0.0)
    with pytest.raises(ti.TaichiTypeError, match=r'returns vector2\(f32\): expected a vector2\(f32\), got shape'):
        wrong_shape()
    @ti.kernel
    def adds():
        for i in f:
            f[i] += Particle(mass=1.0)

    with pytest.raises(ti.TaichiTypeError, match='structs have no arithmetic') as info:
        adds()
    assert 'f[i] += Particle(mass=1.0)' in str(info.value)
    with pytest.raises(ti.TaichiTypeError, match='ndarrays of structs are not supported'):
        ti.types.ndarray(dtype=Particle)
    with pytest.raises(ti.TaichiTypeError, match='tuples are return types only'):
        @ti.kernel
        def tuple_argument(t: (ti.i32, ti.f32)):
            pass
