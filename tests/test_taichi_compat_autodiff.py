"""Autodiff behaviours that follow Taichi 1.7 (found by running Taichi's own autodiff tests):
a loss ndarray of one element, `.grad` of grad_replaced and no_grad functions, grad_for's
error, the seed of FwdMode cleared at exit, a broken rule as a TaichiAssertionError,
ndarrays' gradients in kernels and ti.types.ndarray(needs_grad=False), integer ndarrays
without gradients, Python-scope broadcasting of vectors against matrices, Tape.calls.
Every gradient is checked against central differences in float64."""
import numpy as np
import pytest

import engine as ti
from tests.ad_helpers import assert_grad_close, f64, fd_check  # noqa: F401  (f64 is a fixture)

pytestmark = pytest.mark.usefixtures('ti_init')
EPS = 1e-6


def ndarray_fd(array, evaluate):
    """Central differences of the scalar `evaluate()` w.r.t. each entry of a ti.ndarray."""
    base = array.to_numpy()
    fd = np.zeros(base.shape)
    for idx in np.ndindex(*base.shape):
        values = []
        for step in (EPS, -EPS):
            moved = base.copy()
            moved[idx] += step
            array.from_numpy(moved)
            values.append(evaluate())
        fd[idx] = (values[0] - values[1]) / (2 * EPS)
    array.from_numpy(base)
    return fd


# --- a loss ndarray of one element --------------------------------------------------------

@pytest.mark.parametrize('loss_shape', [(1,), (1, 1)])
def test_tape_takes_a_loss_ndarray_of_one_element(f64, loss_shape):
    x = ti.ndarray(float, shape=3, needs_grad=True)
    loss = ti.ndarray(float, shape=loss_shape, needs_grad=True)
    first = (0,) * len(loss_shape)

    @ti.kernel
    def energy(x: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in range(3):
            loss[first] += ti.sin(x[i]) * x[i] ** 2

    def evaluate():
        loss.fill(0)
        energy(x, loss)
        return loss[first]

    x.from_numpy(np.array([0.3, -1.2, 2.0]))
    with ti.ad.Tape(loss=loss):
        energy(x, loss)
    assert loss.grad[first] == 1.0              # the tape's seed, in the one element
    assert_grad_close(x.grad.to_numpy(), ndarray_fd(x, evaluate))


def test_tape_refuses_a_loss_of_several_elements_and_a_field_of_shape_one():
    with pytest.raises(ValueError, match=r'ti.ndarray of one element .*got shape \(2, 1\)'):
        ti.ad.Tape(loss=ti.ndarray(ti.f32, shape=(2, 1), needs_grad=True)).__enter__()
    with pytest.raises(ValueError, match=r'0-D field \(shape \(\)\), got shape \(1,\)'):
        ti.ad.Tape(loss=ti.field(ti.f32, shape=1, needs_grad=True)).__enter__()     # as Taichi


# --- .grad of grad_replaced and no_grad functions; grad_for's error -------------------------

def _sum_of_squares():
    x = ti.field(float, shape=4, needs_grad=True)
    total = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def accumulate(scale: float):
        for i in x:
            total[None] += scale * x[i] ** 2

    x.from_numpy(np.array([0.5, -1.0, 1.5, 2.0]))
    return x, total, accumulate


def test_grad_replaced_function_grad_runs_its_backward(f64):
    x, total, accumulate = _sum_of_squares()

    @ti.ad.grad_replaced
    def forward(scale):
        accumulate(scale)

    @ti.ad.grad_for(forward)
    def backward(scale):
        accumulate.grad(scale)

    forward(3.0)
    total.grad[None] = 1.0
    forward.grad(3.0)           # what the tape runs at forward's unit
    by_grad = x.grad.to_numpy()
    (on_tape,) = fd_check(total, [x], lambda: forward(3.0))       # the tape's, against differences
    assert_grad_close(by_grad, on_tape)
    assert_grad_close(by_grad, 6.0 * x.to_numpy())


def test_grad_replaced_method_grad_takes_the_instance(f64):
    x, total, accumulate = _sum_of_squares()

    @ti.data_oriented
    class Step:
        def __init__(self, scale):
            self.scale = scale

        @ti.ad.grad_replaced
        def run(self):
            accumulate(self.scale)

        @ti.ad.grad_for(run)
        def run_grad(self):
            accumulate.grad(self.scale)

    step = Step(0.5)
    step.run()
    total.grad[None] = 1.0
    step.run.grad()
    assert_grad_close(x.grad.to_numpy(), 1.0 * x.to_numpy())


def test_no_grad_function_grad_adds_nothing(f64):
    x, total, accumulate = _sum_of_squares()

    @ti.ad.no_grad
    def frozen(scale):
        accumulate(scale)

    frozen(2.0)
    total.grad[None] = 1.0
    frozen.grad(2.0)
    assert x.grad.to_numpy().tolist() == [0.0] * 4


def test_grad_for_needs_a_grad_replaced_function():
    x, total, accumulate = _sum_of_squares()
    with pytest.raises(RuntimeError, match='accumulate is a kernel, whose gradient is accumulate.grad'):
        ti.ad.grad_for(accumulate)
    with pytest.raises(TypeError, match='decorated with ti.ad.grad_replaced, got plain'):
        def plain(scale):
            accumulate(scale)
        ti.ad.grad_for(plain)


# --- FwdMode zeroes its seed at exit --------------------------------------------------------

def test_forward_mode_seed_is_cleared_at_exit(f64):
    a = ti.field(float, shape=3)
    p = ti.field(float, shape=3)
    ti.root.lazy_dual()

    @ti.kernel
    def cubes():
        for i in a:
            p[i] = a[i] ** 3

    a.from_numpy(np.array([1.0, 2.0, -0.5]))
    with ti.ad.FwdMode(loss=p, param=a, seed=[1.0, 1.0, 1.0]):
        cubes()
        assert a.dual.to_numpy().tolist() == [1.0, 1.0, 1.0]
    assert a.dual.to_numpy().tolist() == [0.0, 0.0, 0.0]
    assert_grad_close(p.dual.to_numpy(), 3 * a.to_numpy() ** 2)
    with ti.ad.FwdMode(loss=p, param=a, seed=[1.0, 0.0, 0.0], clear_gradients=False):
        pass                    # nothing launched: the tangents computed before stay
    assert_grad_close(p.dual.to_numpy(), 3 * a.to_numpy() ** 2)


# --- a broken rule is also a TaichiAssertionError --------------------------------------------

def test_broken_rule_is_a_taichi_assertion_error():
    x = ti.field(ti.f32, shape=4, needs_grad=True)
    b = ti.field(ti.f32, shape=(), needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def read_then_accumulate():
        loss[None] = x[1] * b[None]
        b[None] += 100

    with pytest.raises(ti.TaichiAssertionError, match='rule 1 is broken') as caught:
        with ti.ad.Tape(loss=loss, validation=True):
            read_then_accumulate()
    assert isinstance(caught.value, ti.ad.AutodiffRuleError)


# --- ndarrays: integer ones have no gradient; .grad in kernels; needs_grad=False ------------

def test_integer_ndarray_with_a_gradient_is_refused():
    with pytest.raises(ti.TaichiRuntimeError, match='i32 is not supported for ndarray with needs_grad=True'):
        ti.ndarray(ti.i32, shape=3, needs_grad=True)


def test_kernel_reads_and_writes_an_ndarray_gradient(f64):
    x = ti.ndarray(float, shape=3, needs_grad=True)

    @ti.kernel
    def descend(x: ti.types.ndarray(), rate: float):
        for i in x:
            x[i] -= rate * x.grad[i]
            x.grad[i] = 0.0

    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    x.grad.from_numpy(np.array([0.5, -1.0, 2.0]))
    descend(x, 0.1)
    assert_grad_close(x.to_numpy(), [0.95, 2.1, 2.8])
    assert x.grad.to_numpy().tolist() == [0.0, 0.0, 0.0]


def test_differentiating_through_an_ndarray_gradient_is_refused(f64):
    x = ti.ndarray(float, shape=3, needs_grad=True)
    s = ti.ndarray(float, shape=(), needs_grad=True)

    @ti.kernel
    def sum_gradients(x: ti.types.ndarray(), s: ti.types.ndarray()):
        for i in x:
            s[None] += x.grad[i]

    x.grad.fill(2.0)
    sum_gradients(x, s)
    assert s[None] == 6.0
    with pytest.raises(RuntimeError, match='Cannot automatically differentiate through a grad tensor'):
        sum_gradients.grad(x, s)
    with pytest.raises(RuntimeError, match='x.grad, the gradient of an ndarray argument'):
        with ti.ad.Tape(loss=s):
            sum_gradients(x, s)


def test_ndarray_argument_declared_without_gradient_is_a_constant(f64):
    x = ti.ndarray(float, shape=3, needs_grad=True)
    w = ti.ndarray(float, shape=3, needs_grad=True)
    loss = ti.ndarray(float, shape=1, needs_grad=True)

    @ti.kernel
    def weighted(x: ti.types.ndarray(needs_grad=False), w: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in range(3):
            loss[0] += w[i] * x[i] ** 2

    def evaluate():
        loss.fill(0)
        weighted(x, w, loss)
        return loss[0]

    x.from_numpy(np.array([0.5, -1.5, 2.0]))
    w.from_numpy(np.array([1.0, 2.0, -0.5]))
    x.grad.fill(7.0)                      # not the kernel's: neither cleared nor accumulated into
    with ti.ad.Tape(loss=loss):
        weighted(x, w, loss)
    assert x.grad.to_numpy().tolist() == [7.0, 7.0, 7.0]
    assert_grad_close(w.grad.to_numpy(), ndarray_fd(w, evaluate))
    loss.grad.fill(1.0)
    weighted.grad(x, w, loss)
    assert x.grad.to_numpy().tolist() == [7.0, 7.0, 7.0]


# --- Python-scope matrices broadcast as numpy does; kernels refuse mixed shapes --------------

def test_python_scope_vector_broadcasts_against_a_matrix():
    v = ti.Vector([1.0, 2.0])
    m = ti.Matrix([[10.0, 20.0], [30.0, 40.0]])
    assert (v + m).to_numpy().tolist() == [[11.0, 22.0], [31.0, 42.0]]
    assert (m - v).to_numpy().tolist() == [[9.0, 18.0], [29.0, 38.0]]
    assert (v == [[1.0, 0.0], [1.0, 2.0]]).to_numpy().tolist() == [[True, False], [True, True]]
    with pytest.raises(ti.TaichiTypeError, match=r'shape mismatch: \(2,\) and \(3,\)'):
        v + ti.Vector([1.0, 2.0, 3.0])


def test_kernel_refuses_a_vector_plus_a_matrix():
    @ti.kernel
    def mixed() -> float:
        c = ti.Vector([1.0, 2.0]) + ti.Matrix([[1.0, 2.0], [3.0, 4.0]])
        return c[0, 0]

    with pytest.raises(ti.TaichiTypeError, match=r'shape mismatch: \(2,\) and \(2, 2\)'):
        mixed()


# --- Tape.calls --------------------------------------------------------------------------

def test_tape_calls_lists_the_recorded_launches(f64):
    x, total, accumulate = _sum_of_squares()

    @ti.ad.no_grad
    @ti.kernel
    def log():
        pass

    with ti.ad.Tape(loss=total) as tape:
        accumulate(1.0)
        log()
        accumulate(2.0)
        assert [(kernel.name, args) for kernel, args in tape.calls] == [('accumulate', (1.0,)),
                                                                        ('accumulate', (2.0,))]
    assert_grad_close(x.grad.to_numpy(), 6.0 * x.to_numpy())
