"""Seams between features that gave silently wrong derivatives: writes from Python inside
ti.ad.FwdMode (and under hvp/hessian and engine.torch's second order), clearing gradients
inside a tape, a kernel's return value passed to a later kernel on a tape, and writes of one
component of a vector/matrix element while a tape records. Every derivative is checked
against central finite differences of the whole sequence, in float64."""
import pickle

import numpy as np
import pytest

import engine as ti

N = 3
X0 = np.array([0.7, -0.4, 1.1])
DIRECTION = np.array([0.3, -0.5, 0.8])
H = 1e-6


class Program:
    """One program for the module: fields, ndarrays and kernels compiled once."""

    def __init__(self):
        ti.init(default_fp=ti.f64)
        self.x = ti.field(float, shape=N, needs_grad=True)
        self.y = ti.field(float, shape=N, needs_grad=True)
        self.c = ti.field(float, shape=N)
        self.v = ti.Vector.field(2, float, shape=N, needs_grad=True)
        self.m = ti.Matrix.field(2, 2, float, shape=N, needs_grad=True)
        self.s = ti.Vector.field(2, float, shape=(), needs_grad=True)
        self.out = ti.field(float, shape=(), needs_grad=True)
        self.a = ti.ndarray(float, N, needs_grad=True, needs_dual=True)
        self.av = ti.Vector.ndarray(2, float, N, needs_grad=True, needs_dual=True)
        x, y, v, m, s, out = self.x, self.y, self.v, self.m, self.s, self.out

        @ti.kernel
        def first(a: ti.types.ndarray(), av: ti.types.ndarray()):
            for i in range(N):
                y[i] = ti.sin(x[i]) * (i + 1)
                v[i] = ti.Vector([x[i] ** 2, ti.cos(x[i])])
                m[i] = ti.Matrix([[x[i], 2 * x[i]], [x[i] ** 3, 1.0]])
                a[i] = ti.exp(0.3 * x[i])
                av[i] = ti.Vector([x[i] * x[i], 1.0 - x[i]])
            s[None] = ti.Vector([x[0] * x[1], x[2]])

        @ti.kernel
        def second(a: ti.types.ndarray(), av: ti.types.ndarray()):
            for i in range(N):
                out[None] += (y[i] * x[i] + v[i].dot(v[i]) * x[i] + (m[i] @ m[i]).sum() * x[i]
                              + a[i] * x[i] + av[i].dot(av[i]) * x[i])
            out[None] += s[None].dot(s[None]) * x[1]

        @ti.kernel
        def scale() -> ti.f64:
            return x[0] * x[1] + x[2]

        @ti.kernel
        def use(k: ti.f64):
            for i in range(N):
                out[None] += k * x[i] ** 2

        @ti.ad.no_grad
        @ti.kernel
        def use_without_gradient(k: ti.f64):
            for i in range(N):
                y[i] = k * x[i] ** 2

        @ti.kernel
        def count() -> ti.f64:
            return 2.5

        self.first, self.second, self.scale, self.use = first, second, scale, use
        self.use_without_gradient, self.count = use_without_gradient, count

    def reset(self, values=X0):
        self.x.from_numpy(np.asarray(values, dtype=np.float64))
        self.c.from_numpy(np.array([0.25, -1.5, 2.0]))
        self.a.dual.fill(0)
        self.av.dual.fill(0)

    def sequence(self, write):
        """first(); a write from Python; second(): out as a function of x."""
        self.out[None] = 0
        self.first(self.a, self.av)
        write(self)
        self.second(self.a, self.av)

    def fd_directional(self, run, direction=DIRECTION, at=X0):
        values = []
        for sign in (1, -1):
            self.reset(at + sign * H * direction)
            run()
            values.append(self.out[None])
        self.reset(at)
        return (values[0] - values[1]) / (2 * H)

    def gradient(self, run):
        with ti.ad.Tape(self.out):
            run()
        return self.x.grad.to_numpy()


@pytest.fixture(scope='module')
def P():
    program = Program()
    yield program
    ti.reset()


def _set_vector_component(P):
    P.v[1][0] = 10.0


def _set_swizzle(P):
    P.v[1].x = 10.0


def _set_matrix_component(P):
    P.m[1][1, 0] = 2.0


def _set_0d_vector_component(P):
    P.s[None][1] = -0.5


def _set_ndarray_vector_component(P):
    P.av[1][0] = 3.0


def _two_component_writes(P):
    P.v[2][1] = 0.5
    P.m[0][0, 1] = -1.0


# writes of constants from Python between the two kernels
WRITES = {
    'setitem': lambda P: P.y.__setitem__(0, 1.0),
    'fill': lambda P: P.y.fill(0.5),
    'from_numpy': lambda P: P.y.from_numpy(np.array([1.0, -2.0, 0.5])),
    'copy_from': lambda P: P.y.copy_from(P.c),
    'vector_fill': lambda P: P.v.fill(0.25),
    'vector_component': _set_vector_component,
    'swizzle': _set_swizzle,
    'matrix_component': _set_matrix_component,
    '0d_vector_component': _set_0d_vector_component,
    'two_component_writes': _two_component_writes,
    'ndarray_fill': lambda P: P.a.fill(2.0),
    'ndarray_element': lambda P: P.a.__setitem__(1, -3.0),
    'ndarray_from_numpy': lambda P: P.a.from_numpy(np.array([1.0, 2.0, 3.0])),
    'ndarray_vector_component': _set_ndarray_vector_component,
}
COMPONENT_WRITES = ['vector_component', 'swizzle', 'matrix_component', '0d_vector_component',
                    'two_component_writes', 'ndarray_vector_component']


# --- 1. forward mode and writes from Python ------------------------------------------------

@pytest.mark.parametrize('name', list(WRITES))
def test_forward_mode_python_write_sets_the_tangent_to_zero(P, name):
    write = WRITES[name]
    P.reset()
    with ti.ad.FwdMode(loss=P.out, param=P.x, seed=DIRECTION):
        P.sequence(write)
    derivative = P.out.dual[None]
    fd = P.fd_directional(lambda: P.sequence(write))
    assert derivative == pytest.approx(fd, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize('name', ['setitem', 'fill', 'vector_component', 'ndarray_element'])
def test_hvp_and_hessian_with_a_python_write(P, name):
    write = WRITES[name]

    def run():
        P.sequence(write)
    P.reset()
    hessian = ti.ad.hessian(run, P.out, P.x)
    fd = np.zeros((N, N))
    for j in range(N):
        e = np.eye(N)[j]
        P.reset(X0 + H * e)
        plus = P.gradient(run)
        P.reset(X0 - H * e)
        minus = P.gradient(run)
        fd[:, j] = (plus - minus) / (2 * H)
    P.reset()
    assert np.allclose(hessian, fd, rtol=1e-5, atol=1e-6)
    assert np.allclose(ti.ad.hvp(run, P.out, P.x, DIRECTION), fd @ DIRECTION, rtol=1e-5, atol=1e-6)


def test_torch_second_order_with_a_python_write(P):
    torch = pytest.importorskip('torch')
    import engine.torch as tt

    def run():
        P.first(P.a, P.av)
        P.y[0] = 1.0
        P.v[1][0] = 10.0
        P.second(P.a, P.av)
    f = tt.function(run, [P.x], [P.out])
    X = torch.tensor(X0, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(f, (X,))
    assert torch.autograd.gradgradcheck(f, (X,))


def test_forward_mode_param_written_from_python(P):
    """Before a launch used them, the param's elements written from Python are inputs being
    set (their tangent is the seed, as a tape takes them); after, constants (tangent 0)."""
    values = np.array([0.2, 0.9, -0.6])
    P.reset()
    with ti.ad.FwdMode(loss=P.out, param=P.x, seed=DIRECTION):
        P.x.from_numpy(values)
        P.sequence(lambda P: None)
    assert P.out.dual[None] == pytest.approx(
        P.fd_directional(lambda: P.sequence(lambda P: None), at=values), rel=1e-6)

    def overwrite(P):
        P.x.from_numpy(values)
    P.reset()
    with ti.ad.FwdMode(loss=P.out, param=P.x, seed=DIRECTION):
        P.sequence(overwrite)
    assert P.out.dual[None] == pytest.approx(P.fd_directional(lambda: P.sequence(overwrite)), rel=1e-6)
    P.reset()
    assert P.gradient(lambda: P.sequence(overwrite)) @ DIRECTION == pytest.approx(P.out.dual[None], rel=1e-6)


def test_forward_mode_treats_a_no_grad_kernels_results_as_constants(P):
    """ti.ad.no_grad results are constants to both modes (as jax.lax.stop_gradient): the
    tangent is the tape's gradient times the seed, and hvp the derivative of that gradient
    with the no_grad results held fixed (finite differences of a run that writes them from
    the unperturbed values)."""
    def run():
        P.out[None] = 0
        P.first(P.a, P.av)
        P.use_without_gradient(0.5)
        P.second(P.a, P.av)
    P.reset()
    gradient = P.gradient(run)
    P.reset()
    with ti.ad.FwdMode(loss=P.out, param=P.x, seed=DIRECTION):
        run()
    assert P.out.dual[None] == pytest.approx(gradient @ DIRECTION, rel=1e-12)
    P.reset()
    P.use_without_gradient(0.5)
    frozen = P.y.to_numpy()

    def run_frozen():
        P.out[None] = 0
        P.first(P.a, P.av)
        P.y.from_numpy(frozen)
        P.second(P.a, P.av)
    P.reset()
    with ti.ad.FwdMode(loss=P.out, param=P.x, seed=DIRECTION):
        run()
    assert P.out.dual[None] == pytest.approx(P.fd_directional(run_frozen), rel=1e-6)
    P.reset()
    hvp = ti.ad.hvp(run, P.out, P.x, DIRECTION)
    P.reset()
    assert np.allclose(hvp, ti.ad.hvp(run_frozen, P.out, P.x, DIRECTION), rtol=1e-9, atol=1e-12)


# --- 2. clearing gradients inside a tape ------------------------------------------------------

CLEARS = {
    'clear_all_gradients': lambda P: ti.ad.clear_all_gradients(),
    'loss_grad_fill': lambda P: P.out.grad.fill(0),
    'loss_grad_setitem': lambda P: P.out.grad.__setitem__(None, 0.0),
    'x_grad_fill': lambda P: P.x.grad.fill(0),
    'y_grad_from_numpy': lambda P: P.y.grad.from_numpy(np.zeros(N)),
}


@pytest.mark.parametrize('where', ['before', 'between', 'after'])
@pytest.mark.parametrize('name', list(CLEARS))
def test_tape_clearing_gradients_keeps_the_seed(P, name, where):
    clear = CLEARS[name]

    def run():
        if where == 'before':
            clear(P)
        P.first(P.a, P.av)
        if where == 'between':
            clear(P)
        P.second(P.a, P.av)
        if where == 'after':
            clear(P)
    P.reset()
    want = P.gradient(lambda: P.sequence(lambda P: None))
    P.reset()
    assert np.allclose(P.gradient(run), want, rtol=1e-12)
    fd = P.fd_directional(lambda: P.sequence(lambda P: None))
    assert want @ DIRECTION == pytest.approx(fd, rel=1e-6)
    P.reset()       # forward over reverse: the same with the seed's tangent
    assert np.allclose(ti.ad.hvp(run, P.out, P.x, DIRECTION),
                       ti.ad.hvp(lambda: P.sequence(lambda P: None), P.out, P.x, DIRECTION), rtol=1e-10)


def test_tape_refuses_another_seed_written_to_the_loss_gradient(P):
    P.reset()
    with pytest.raises(ValueError, match=r'seeds self.out.grad = 1 on entry'):
        with ti.ad.Tape(P.out):
            P.first(P.a, P.av)
            P.out.grad[None] = 2.0
    assert P.out.grad[None] == 1.0


def test_tape_with_an_ndarray_loss_cleared_inside(P):
    loss = ti.ndarray(float, (), needs_grad=True)

    @ti.kernel
    def total(loss: ti.types.ndarray()):
        for i in range(N):
            loss[None] += P.x[i] ** 3

    P.reset()
    with ti.ad.Tape(loss):
        loss.grad.fill(0)
        total(loss)
    assert np.allclose(P.x.grad.to_numpy(), 3 * X0 ** 2)


# --- 3. a kernel's return value as a later kernel's argument --------------------------------

def test_tape_refuses_a_kernel_return_value_as_an_argument(P):
    P.reset()
    for make in (lambda s: s, lambda s: 2.0 * s + 1.0, lambda s: -s / 3.0, lambda s: ti.Vector([s, 1.0])[0]):
        with pytest.raises(ti.ad.AutodiffError, match=r"kernel use\(\) gets argument 'k'.*kernel scale\(\).*0-D field"):
            with ti.ad.Tape(P.out):
                s = P.scale()
                P.use(make(s))
    with pytest.raises(ti.ad.AutodiffError, match='its tangent would be lost'):
        with ti.ad.FwdMode(loss=P.out, param=P.x, seed=DIRECTION):
            P.use(P.scale())


def test_kernel_return_value_outside_a_tape_or_meant_as_a_constant(P):
    P.reset()
    s = P.scale()
    assert type(s) is float
    with ti.ad.Tape(P.out):
        t = P.scale()
        k = P.count()                   # reads no field with a gradient: a plain float
        assert type(k) is float and t == pytest.approx(s)
        assert pickle.loads(pickle.dumps(t)) == t and repr(t) == repr(s)
        P.use_without_gradient(t)       # no_grad: its results are constants anyway
        P.use(float(t) + k)             # float(): a constant, on purpose

    def constant_k():
        P.out[None] = 0
        P.use(s + 2.5)
    grad = P.x.grad.to_numpy()
    assert grad @ DIRECTION == pytest.approx(P.fd_directional(constant_k), rel=1e-6)


# --- 4. one component of an element written from Python while a tape records ---------------

@pytest.mark.parametrize('name', COMPONENT_WRITES)
def test_tape_component_write_cuts_the_component(P, name):
    write = WRITES[name]
    P.reset()
    grad = P.gradient(lambda: P.sequence(write))
    fd = P.fd_directional(lambda: P.sequence(write))
    assert grad @ DIRECTION == pytest.approx(fd, rel=1e-6, abs=1e-8)
    for j in range(N):      # every entry, not one direction
        e = np.eye(N)[j]
        assert grad[j] == pytest.approx(P.fd_directional(lambda: P.sequence(write), direction=e),
                                        rel=1e-6, abs=1e-8)


def test_tape_component_writes_before_launches_set_inputs(P):
    """Writes from Python over elements no launch used set inputs, also component by
    component and twice: .grad is the gradient with respect to the last value written."""
    v = ti.Vector.field(2, float, shape=N, needs_grad=True)

    @ti.kernel
    def energy():
        for i in range(N):
            P.out[None] += v[i].dot(v[i]) * P.x[i] + v[i][0] * v[i][1]

    P.reset()
    v.from_numpy(np.ones((N, 2)))
    with ti.ad.Tape(P.out):
        v[1][0] = 4.0
        v[1][1] = 2.0
        v[1][1] = 3.0
        P.x[2] = 0.5
        P.x[2] = 0.25
        energy()
    want_v = 2 * v.to_numpy() * P.x.to_numpy()[:, None] + v.to_numpy()[:, ::-1]
    assert np.allclose(v.grad.to_numpy(), want_v)
    assert np.allclose(P.x.grad.to_numpy(), (v.to_numpy() ** 2).sum(1))
