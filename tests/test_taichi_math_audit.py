"""ti.math and the Matrix/Vector methods against the values Taichi's documentation gives
(or its definitions imply), in Python scope and in a kernel, and, for the differentiable
ones, their gradients in a kernel against central finite differences (float64).

Each case is a function of a flat list of scalars, so that one kernel evaluates every
case on run-time values (loaded from a field: nothing folds at compile time) and one tape
gives every gradient: case c's outputs depend on row c of the inputs only.
"""
import math
from collections import namedtuple

import numpy as np
import pytest

import engine as ti
from test_linalg_python import _rot3    # the rotation about axis 0, 1 or 2 (numpy)

tm = ti.math
PI = math.pi
Case = namedtuple('Case', 'name inputs fn expected grad')


def case(name, inputs, fn, expected, grad=True):
    return Case(name, [float(x) for x in inputs], fn, expected, grad)


def vec(xs):
    return ti.Vector(list(xs))


def mat(xs, n, m=None):
    m = m or n
    return ti.Matrix([[xs[i * m + j] for j in range(m)] for i in range(n)])


def rows3(m):
    return [[m[i, j] for j in range(3)] for i in range(3)]


def homogeneous(r):
    out = np.eye(4)
    out[:3, :3] = r
    return out


def rodrigues_transposed(axis, a):
    """Taichi's rot_by_axis: the transpose of Rodrigues' rotation about the unit axis."""
    k = np.array(axis) / np.linalg.norm(axis)
    cross = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return homogeneous((np.eye(3) + math.sin(a) * cross + (1 - math.cos(a)) * cross @ cross).T)


M_ROT3D = [[0.05048351, -0.61339645, -0.78816002, 0.0], [0.65833154, 0.61388511, -0.4355969, 0.0],
           [0.75103329, -0.49688014, 0.4348093, 0.0], [0.0, 0.0, 0.0, 1.0]]
INF, NAN = math.inf, math.nan

CASES = [
    # --- ti.math, with the examples of Taichi's docstrings -------------------------------
    case('clamp', [0, 0.5, 1.0, 1.5], lambda x: tm.clamp(vec(x), 0.5, 1.0), [0.5, 0.5, 1.0, 1.0], grad=False),
    case('clamp_matrix_bounds', [0, 1, -2, 2],
         lambda x: tm.clamp(mat(x, 2), 0.5, ti.Matrix([[1.0, 2.0], [1.0, 2.0]])), [[0.5, 1.0], [0.5, 2.0]],
         grad=False),
    case('clamp_inside', [0.3, 0.7], lambda x: tm.clamp(vec(x), 0.0, 1.0), [0.3, 0.7]),
    case('mix', [1, 1, 1, 2, 2, 2, 1, 0, 0], lambda x: tm.mix(vec(x[:3]), vec(x[3:6]), vec(x[6:])), [2, 1, 1]),
    case('mix_matrix', [1, 2, 2, 3, 3, 5, 4, 5], lambda x: tm.mix(mat(x[:4], 2), mat(x[4:], 2), 0.5),
         [[2.0, 3.5], [3.0, 4.0]]),
    case('step', [0, 1, 2, 3], lambda x: tm.step(mat(x, 2), 1.0), [[1, 1], [0, 0]], grad=False),
    case('step_nan', [NAN], lambda x: tm.step(0.0, x[0]), 0.0, grad=False),     # Taichi: cast(x >= edge)
    case('smoothstep', [0, 1, 2, 0.5, 1.5, 2.5], lambda x: tm.smoothstep(vec(x[:3]), 1.0, vec(x[3:])),
         [0.5, 1.0, 0.0], grad=False),       # 1.0: (1.5 - 1) / (1 - 1) is +inf, clamped
    case('smoothstep_inside', [0.25, 0.5], lambda x: tm.smoothstep(0.0, 1.0, vec(x)), [0.15625, 0.5]),
    case('fract', [-1.2, -0.7, 0.3, 1.2], lambda x: tm.fract(vec(x)), [0.8, 0.3, 0.3, 0.2]),
    case('sign', [-1.0, 0.0, 1.0, NAN], lambda x: tm.sign(vec(x)), [-1.0, 0.0, 1.0, 0.0], grad=False),
    case('length', [1, 1, 1], lambda x: tm.length(vec(x)), math.sqrt(3)),
    case('distance', [0, 0, 0, 1, 1, 1], lambda x: tm.distance(vec(x[:3]), vec(x[3:])), math.sqrt(3)),
    case('dot', [1, 1, 0, 0, 1, 1], lambda x: tm.dot(vec(x[:3]), vec(x[3:])), 1.0),
    case('cross', [1, 0, 0, 0, 1, 0], lambda x: tm.cross(vec(x[:3]), vec(x[3:])), [0, 0, 1]),
    case('normalize', [1, 2, 3], lambda x: tm.normalize(vec(x)), np.array([1, 2, 3]) / math.sqrt(14)),
    case('reflect', [1, 2, 3, 0, 1, 0], lambda x: tm.reflect(vec(x[:3]), vec(x[3:])), [1, -2, 3]),
    case('refract', [1, 1, 1, 0, 1, 0], lambda x: tm.refract(vec(x[:3]), vec(x[3:]), 2.0), [2, -1, 2]),
    case('refract_total_reflection', [1, 0.1, 0, 0, 1, 0], lambda x: tm.refract(vec(x[:3]), vec(x[3:]), 2.0),
         [0, 0, 0]),
    case('log2', [1, 2, 3], lambda x: tm.log2(vec(x)), [0.0, 1.0, math.log2(3)]),
    case('degrees', [-PI / 2, PI / 2], lambda x: tm.degrees(vec(x)), [-90.0, 90.0]),
    case('radians', [-90, 45, 90], lambda x: tm.radians(vec(x)) / PI, [-0.5, 0.25, 0.5]),
    case('mod', [-0.5, 0.5, 1.0], lambda x: tm.mod(vec(x), 1.0), [0.5, 0.5, 0.0], grad=False),  # 1.0: a jump
    case('mod_inside', [-0.3, 0.6, 1.7], lambda x: tm.mod(vec(x), 1.0), [0.7, 0.6, 0.7]),
    case('isinf', [INF, -INF, NAN, 1], lambda x: tm.isinf(tm.vec4(*x)), [1, 1, 0, 0], grad=False),
    case('isnan', [NAN, -NAN, INF, 1], lambda x: tm.isnan(tm.vec4(*x)), [1, 1, 0, 0], grad=False),
    case('eye', [], lambda x: tm.eye(3), np.eye(3), grad=False),
    case('determinant', [1, 1, 0, 0, 1, 1, 0, 0, 1], lambda x: tm.determinant(mat(x, 3)), 1.0),
    case('inverse', [1, 1, 0, 0, 1, 1, 0, 0, 1], lambda x: tm.inverse(tm.mat3(*x)),
         [[1, -1, 1], [0, 1, -1], [0, 0, 1]]),
    case('rotation2d', [30], lambda x: tm.rotation2d(tm.radians(x[0])),
         [[0.8660254, -0.5], [0.5, 0.8660254]]),
    case('rotation3d', [0.52, -0.785, 1.046], lambda x: tm.rotation3d(*x), M_ROT3D),
    case('rot_yaw_pitch_roll', [1.046, 0.52, -0.785], lambda x: tm.rot_yaw_pitch_roll(*x), M_ROT3D),
    case('rot_yaw_pitch_roll_order', [0.3, -0.4, 0.5], lambda x: tm.rot_yaw_pitch_roll(*x),
         homogeneous((_rot3(1, 0.3) @ _rot3(0, -0.4) @ _rot3(2, 0.5)).T)),
    case('rot_by_axis', [1, 2, 2, 0.7], lambda x: tm.rot_by_axis(vec(x[:3]), x[3]),
         rodrigues_transposed([1, 2, 2], 0.7)),
    case('translate', [1, 2, 3], lambda x: tm.translate(*x),
         [[1, 0, 0, 1], [0, 1, 0, 2], [0, 0, 1, 3], [0, 0, 0, 1]]),
    case('scale', [1, 2, 3], lambda x: tm.scale(*x), np.diag([1, 2, 3, 1])),
    case('vdir', [PI / 2], lambda x: tm.vdir(x[0]), [0.0, 1.0]),
    case('cmul', [1, 1, 0, 1], lambda x: tm.cmul(tm.vec2(x[0], x[1]), tm.vec2(x[2], x[3])), [-1, 1]),
    case('cconj', [1, 2], lambda x: tm.cconj(tm.vec2(*x)), [1, -2]),
    case('cdiv', [1, 1, 0, 1], lambda x: tm.cdiv(tm.vec2(x[0], x[1]), tm.vec2(x[2], x[3])), [1, -1]),
    case('csqrt', [-1, 0], lambda x: tm.csqrt(tm.vec2(*x)), [0, 1], grad=False),   # on the branch cut
    case('csqrt_smooth', [3, 4], lambda x: tm.csqrt(tm.vec2(*x)), [2, 1]),
    case('cinv', [1, 1], lambda x: tm.cinv(tm.vec2(*x)), [0.5, -0.5]),
    case('cpow', [1, 1], lambda x: tm.cpow(tm.vec2(*x), 3), [-2, 2]),
    case('cexp', [1, 1], lambda x: tm.cexp(tm.vec2(*x)), [1.4686939, 2.2873553]),
    case('clog', [1, 1], lambda x: tm.clog(tm.vec2(*x)), [0.3465736, 0.7853982]),
    # --- Matrix / Vector methods ----------------------------------------------------------
    case('norm', [3, 4], lambda x: vec(x).norm(), 5.0),
    case('norm_eps', [3, 4], lambda x: vec(x).norm(11.0), 6.0),                  # sqrt(|v|^2 + eps)
    case('norm_sqr', [3, 4], lambda x: vec(x).norm_sqr(), 25.0),
    case('norm_inv', [3, 4], lambda x: vec(x).norm_inv(), 0.2),
    case('norm_inv_eps', [3, 4], lambda x: vec(x).norm_inv(75.0), 0.1),          # 1 / sqrt(|v|^2 + eps)
    case('normalized', [3, 4], lambda x: vec(x).normalized(), [0.6, 0.8]),
    case('normalized_eps', [3, 4], lambda x: vec(x).normalized(1.0), [0.5, 2 / 3]),     # v / (|v| + eps)
    case('dot_method', [1, 2, 3, 4], lambda x: vec(x[:2]).dot(vec(x[2:])), 11.0),
    case('cross_2d', [1, 2, 3, 4], lambda x: vec(x[:2]).cross(vec(x[2:])), -2.0),
    case('outer_product', [1, 2, 3, 4, 5], lambda x: vec(x[:2]).outer_product(vec(x[2:])),
         [[3, 4, 5], [6, 8, 10]]),
    case('transpose', [0, 1, 2, 3], lambda x: mat(x, 2).transpose(), [[0, 2], [1, 3]]),
    case('trace', [1, 2, 3, 4], lambda x: mat(x, 2).trace(), 5.0),
    case('determinant_2x2', [1, 2, 3, 4], lambda x: mat(x, 2).determinant(), -2.0),
    case('determinant_4x4', [2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 4, 0, 1, 0, 0, 5],
         lambda x: mat(x, 4).determinant(), 120.0),
    case('inverse_2x2', [1, 2, 3, 4], lambda x: mat(x, 2).inverse(), [[-2, 1], [1.5, -0.5]]),
    case('inverse_4x4', [2, 0, 0, 0, 0, 4, 0, 0, 0, 0, 5, 0, 1, 0, 0, 1], lambda x: mat(x, 4).inverse(),
         [[0.5, 0, 0, 0], [0, 0.25, 0, 0], [0, 0, 0.2, 0], [-0.5, 0, 0, 1]]),
    case('sum', [1, 2, 3, 4], lambda x: mat(x, 2).sum(), 10.0),
    case('max', [1, 5, 3], lambda x: vec(x).max(), 5.0, grad=False),
    case('min', [1, 5, 3], lambda x: vec(x).min(), 1.0, grad=False),
    case('any', [0, 0, 1], lambda x: vec(x).any(), 1, grad=False),
    case('all', [0, 0, 1], lambda x: vec(x).all(), 0, grad=False),
    case('cast', [0, 1.5, 2], lambda x: vec(x).cast(ti.i32).cast(ti.f32), [0.0, 1.0, 2.0], grad=False),
    case('matmul', [1, 2, 3, 4, 5, 6], lambda x: mat(x[:4], 2) @ vec(x[4:]), [17, 39]),
    case('rows', [1, 2, 3, 4, 5, 6], lambda x: ti.Matrix.rows([vec(x[:3]), vec(x[3:])]),
         [[1, 2, 3], [4, 5, 6]]),
    case('cols', [1, 2, 3, 4], lambda x: ti.Matrix.cols([vec(x[:2]), vec(x[2:])]), [[1, 3], [2, 4]]),
    case('identity', [], lambda x: ti.Matrix.identity(ti.f64, 2), [[1, 0], [0, 1]], grad=False),
    case('zero', [], lambda x: ti.Matrix.zero(ti.f64, 2, 3), np.zeros((2, 3)), grad=False),
    case('one', [], lambda x: ti.Vector.one(ti.f64, 3), [1, 1, 1], grad=False),
    case('unit', [], lambda x: ti.Vector.unit(3, 1), [0, 1, 0], grad=False),
    case('diag', [2.5], lambda x: ti.Matrix.diag(2, x[0]), [[2.5, 0], [0, 2.5]]),
    case('bit_ops', [], lambda x: (ti.Vector([12, 10]) & ti.Vector([10, 6])) | (ti.Vector([1, 1]) << 4),
         [24, 18], grad=False),
]
MAX_OUT = 16


def flat(value):
    if isinstance(value, ti.Matrix):
        return list(value.entries)
    return [value]


def expected_flat(expected):
    return np.asarray(expected, dtype=np.float64).ravel()


@pytest.fixture(scope='module')
def kernel_results():
    """Every case evaluated in one kernel, and d(sum_k w_k out_k)/d inputs from one tape."""
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = len(CASES)
    inputs = ti.field(ti.f64, shape=(n, MAX_OUT), needs_grad=True)
    out = ti.field(ti.f64, shape=(n, MAX_OUT))
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    weights = np.random.default_rng(7).uniform(0.5, 1.5, (n, MAX_OUT))
    rows = np.zeros((n, MAX_OUT))
    for c, cs in enumerate(CASES):
        rows[c, :len(cs.inputs)] = cs.inputs
    inputs.from_numpy(rows)

    @ti.kernel
    def evaluate():
        for c in ti.static(range(n)):
            result = flat(CASES[c].fn([inputs[c, k] for k in ti.static(range(len(CASES[c].inputs)))]))
            for k in ti.static(range(len(result))):
                out[c, k] = result[k]
                if ti.static(CASES[c].grad):
                    loss[None] += weights[c, k] * result[k]

    with ti.ad.Tape(loss):
        evaluate()
    return out.to_numpy(), inputs.grad.to_numpy(), weights


def _ids(cases):
    return [c.name for c in cases]


@pytest.mark.parametrize('cs', CASES, ids=_ids(CASES))
def test_python_scope(cs):
    got = np.asarray([float(v) for v in flat(cs.fn(list(cs.inputs)))])
    np.testing.assert_allclose(got, expected_flat(cs.expected), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize('cs', CASES, ids=_ids(CASES))
def test_kernel_scope(cs, kernel_results):
    out = kernel_results[0][CASES.index(cs)]
    expected = expected_flat(cs.expected)
    np.testing.assert_allclose(out[:len(expected)], expected, rtol=1e-6, atol=1e-7)


GRAD_CASES = [c for c in CASES if c.grad and c.inputs]


@pytest.mark.parametrize('cs', GRAD_CASES, ids=_ids(GRAD_CASES))
def test_gradient_matches_finite_differences(cs, kernel_results):
    c = CASES.index(cs)
    weights = kernel_results[2][c]

    def objective(xs):
        return sum(w * float(v) for w, v in zip(weights, flat(cs.fn(list(xs)))))

    h = 1e-6
    numeric = []
    for j in range(len(cs.inputs)):
        up, down = list(cs.inputs), list(cs.inputs)
        up[j] += h
        down[j] -= h
        numeric.append((objective(up) - objective(down)) / (2 * h))
    analytic = kernel_results[1][c][:len(cs.inputs)]
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-6)


def test_normalized_eps_is_added_to_the_norm():
    """Taichi: `ti.Vector([3.0, 4.0]).normalized(1.0)` is v / (|v| + 1) = [0.5, 0.6667],
    not v / sqrt(|v|^2 + 1)."""
    np.testing.assert_allclose(ti.Vector([3.0, 4.0]).normalized(1.0).to_numpy(), [0.5, 2 / 3])


def test_vector_and_matrix_types():
    ti.init(arch=ti.cpu)
    assert tm.vec3(1, 2, 3).to_list() == [1.0, 2.0, 3.0]
    assert all(isinstance(v, float) for v in tm.vec3(1, 2, 3).to_list())
    assert tm.ivec2(1.7, 2).to_list() == [1, 2]
    assert tm.uvec3(1, 2, 3).to_list() == [1, 2, 3] and tm.uvec3[2] == ti.u32
    assert tm.mat2(1, 2, 3, 4).to_list() == [[1.0, 2.0], [3.0, 4.0]]             # n * n scalars, by rows
    assert tm.mat2(tm.vec2(1, 2), tm.vec2(3, 4)).to_list() == [[1.0, 2.0], [3.0, 4.0]]   # row vectors
    assert tm.vec3(tm.vec2(1, 2), 3).to_list() == [1.0, 2.0, 3.0]
    assert (tm.pi, tm.e, tm.inf) == (math.pi, math.e, math.inf) and math.isnan(tm.nan)


def test_transpose_of_a_vector_is_the_vector_as_in_taichi():
    assert ti.Vector([1.0, 2.0]).transpose().to_list() == [1.0, 2.0]
    assert ti.Matrix([[1.0], [2.0]]).transpose().to_list() == [[1.0, 2.0]]


def test_mix_and_step_give_floats():
    """Taichi computes mix as x * (1.0 - a) + y * a and step as a float cast of x >= edge."""
    assert tm.mix(1, 2, 0) == 1.0 and isinstance(tm.mix(1, 2, 0), float)
    assert tm.step(1, 2) == 1.0 and isinstance(tm.step(1, 2), float)


def test_fill_and_to_list_in_python_scope():
    ti.init(arch=ti.cpu)
    a = ti.Vector([0, 1, 2, 3])
    a.fill(-1)
    assert a.to_list() == [-1, -1, -1, -1]
    m = ti.Matrix([[1, 2], [3, 4]])
    m.fill(7)
    assert m.to_list() == [[7, 7], [7, 7]] and m.to_numpy().shape == (2, 2)
    x = ti.Vector.field(3, ti.f32, shape=2)
    x[1].fill(5.0)                  # an element read in Python scope writes through
    assert x.to_numpy()[1].tolist() == [5.0, 5.0, 5.0]


def test_comparisons_are_entry_by_entry():
    ti.init(arch=ti.cpu)
    a, b = ti.Vector([1, 2, 3]), ti.Vector([1, 5, 3])
    assert (a == b).to_list() == [True, False, True] and (a != b).to_list() == [False, True, False]
    assert {a: 1}[a] == 1                      # still hashable, by identity

    @ti.kernel
    def equal(u: ti.types.vector(3, ti.i32), v: ti.types.vector(3, ti.i32)) -> ti.types.vector(3, ti.i32):
        return u == v

    assert equal(a, b).to_list() == [1, 0, 1]
