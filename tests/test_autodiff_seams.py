"""Gradients where features meet, from the adversarial review of the seams (each test a
class of silently wrong gradient it found): copies on a tape, numpy arrays and torch
tensors as ndarray arguments (their identity is their memory, not the Python object),
a refused sequence checked again, custom gradients under forward mode, and a kernel's
return value written from Python. All in float64 against exact derivatives."""
import numpy as np
import pytest

import engine as ti

torch = pytest.importorskip('torch')
P0 = np.array([0.5, -1.0, 1.5])


@pytest.fixture
def prog():
    ti.init(arch=ti.cpu, default_fp=ti.f64, offline_cache=False, ad_validation=True)   # not 'always': the memo too
    p = ti.field(float, shape=3, needs_grad=True)
    x = ti.field(float, shape=3, needs_grad=True)
    y = ti.field(float, shape=3, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def square_into(a: ti.types.ndarray()):
        for i in p:
            a[i] = p[i] ** 2

    @ti.kernel
    def add_times_p(a: ti.types.ndarray()):
        for i in p:
            loss[None] += a[i] * p[i]

    @ti.kernel
    def square():
        for i in p:
            x[i] = p[i] ** 2

    @ti.kernel
    def y_times_p():
        for i in p:
            loss[None] += y[i] * p[i]

    @ti.kernel
    def overwrite(a: ti.types.ndarray()):
        for i in p:
            a[i] = 10.0

    p.from_numpy(P0)
    return dict(p=p, x=x, y=y, loss=loss, square_into=square_into, add_times_p=add_times_p,
                square=square, y_times_p=y_times_p, overwrite=overwrite)


def test_copy_from_on_a_tape_and_in_forward_mode_carries_the_derivative(prog):
    p, loss = prog['p'], prog['loss']

    def run():
        prog['square']()
        prog['y'].copy_from(prog['x'])     # loss = sum p^3
        prog['y_times_p']()
    with ti.ad.Tape(loss):
        run()
    np.testing.assert_allclose(p.grad.to_numpy(), 3 * P0 ** 2, rtol=1e-14)
    with ti.ad.FwdMode(loss=loss, param=p, seed=[1.0, 2.0, 3.0]):
        run()
    assert loss.dual[None] == pytest.approx(3 * P0 ** 2 @ [1.0, 2.0, 3.0], rel=1e-14)
    with pytest.raises(ValueError, match='copy_from'):
        prog['y'].copy_from(ti.field(float, shape=4))


def test_ndarray_copy_from_on_a_tape(prog):
    p, loss = prog['p'], prog['loss']
    a, b = ti.ndarray(float, 3, needs_grad=True), ti.ndarray(float, 3, needs_grad=True)
    with ti.ad.Tape(loss):
        prog['square_into'](a)
        b.copy_from(a)
        prog['add_times_p'](b)
    np.testing.assert_allclose(p.grad.to_numpy(), 3 * P0 ** 2, rtol=1e-14)


ARRAYS = {'numpy': lambda: np.ones(3), 'torch': lambda: torch.ones(3, dtype=torch.float64),
          'torch_requires_grad': lambda: torch.ones(3, dtype=torch.float64, requires_grad=True)}


@pytest.mark.parametrize('kind', list(ARRAYS))
def test_an_array_argument_overwritten_by_a_later_launch_is_saved(prog, kind):
    """A numpy array's .data is a new memoryview at every access and a tensor is viewed
    anew at every launch: the tape knew neither again, and never saved the elements."""
    p, loss, a = prog['p'], prog['loss'], ARRAYS[kind]()
    with ti.ad.Tape(loss):
        with torch.no_grad():
            prog['add_times_p'](a)       # loss = sum a p, a = 1
            prog['overwrite'](a)
    np.testing.assert_allclose(p.grad.to_numpy(), np.ones(3), rtol=1e-14)


@pytest.mark.parametrize('kind', ['numpy', 'torch'])
def test_an_array_without_gradient_between_differentiable_values_is_refused(prog, kind):
    a = ARRAYS[kind]()
    with pytest.raises(ti.ad.AutodiffRuleError, match='the gradient would be lost'):
        with ti.ad.Tape(prog['loss']):
            prog['square_into'](a)
            prog['add_times_p'](a)


@pytest.mark.parametrize('views', ['numpy_slice', 'torch_view', 'torch_twice'])
def test_two_views_of_one_memory_are_one_array_to_the_rules(prog, views):
    @ti.kernel
    def scale(src: ti.types.ndarray(), dst: ti.types.ndarray()):
        for i in range(3):
            dst[i] = src[i] * prog['p'][i]
    base = np.ones(3) if views == 'numpy_slice' else torch.ones(3, dtype=torch.float64)
    other = {'numpy_slice': lambda: base[:], 'torch_view': lambda: base.view(-1), 'torch_twice': lambda: base}[views]()
    with pytest.raises(ti.ad.AutodiffRuleError, match='rule 1'):
        with ti.ad.Tape(prog['loss']):
            scale(base, other)


def test_a_refused_sequence_is_checked_again_on_the_next_tape():
    ti.init(arch=ti.cpu, default_fp=ti.f64, ad_validation=True)     # the suite checks every launch: not here
    x, y = ti.field(float, shape=4, needs_grad=True), ti.field(float, shape=4, needs_grad=True)
    idx, loss = ti.field(ti.i32, shape=4), ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def gather_add():
        for i in x:
            y[idx[i]] += x[i] * y[i]        # idx the identity: y[i] read, then modified

    @ti.kernel
    def total():
        for i in y:
            loss[None] += y[i] ** 2
    idx.from_numpy(np.arange(4, dtype=np.int32))
    for attempt in range(3):
        y.fill(1.0)
        with pytest.raises(ti.ad.AutodiffRuleError, match='rule 1'):
            with ti.ad.Tape(loss):
                gather_add()
                total()


def test_forward_mode_refuses_a_replaced_gradient_and_hvp_a_gradient_written_from_python(prog):
    p, x, loss = prog['p'], prog['x'], prog['loss']

    @ti.ad.grad_replaced
    def unit():
        prog['square']()

    @ti.ad.grad_for(unit)
    def unit_grad():
        for i in range(3):
            p.grad[i] += x.grad[i]          # straight through, from Python

    @ti.kernel
    def total():
        for i in x:
            loss[None] += x[i] ** 2

    def run():
        unit()
        total()
    with pytest.raises(ti.ad.AutodiffError, match='FwdMode cannot differentiate the grad_replaced'):
        with ti.ad.FwdMode(loss=loss, param=p, seed=[1.0, 0.0, 0.0]):
            run()
    with pytest.raises(ti.ad.AutodiffError, match='writes p.grad from Python'):
        ti.ad.hvp(run, loss, p, np.ones(3))
    with ti.ad.Tape(loss):
        run()
    np.testing.assert_allclose(p.grad.to_numpy(), 2 * P0 ** 2, rtol=1e-14)


def test_a_kernel_return_value_written_from_python_on_a_tape_is_refused(prog):
    p, y = prog['p'], prog['y']

    @ti.kernel
    def first_squared() -> float:
        return p[0] ** 2
    for write in (lambda s: y.__setitem__(0, s), lambda s: y.fill(s * 2.0)):
        with pytest.raises(ti.ad.AutodiffError, match='returned inside this ti.ad.Tape'):
            with ti.ad.Tape(prog['loss']):
                write(first_squared())
                prog['y_times_p']()
    with ti.ad.Tape(prog['loss']):
        y[0] = float(first_squared())       # meant as a constant
        prog['y_times_p']()
    assert p.grad[0] == pytest.approx(P0[0] ** 2)
