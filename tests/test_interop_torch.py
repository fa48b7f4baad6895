"""engine.torch: wrapped kernels and functions pass torch.autograd.gradcheck and
gradgradcheck (float64), calls are independent (reentrant), tensors cross without copies
where they can, and bad input is refused clearly."""
import numpy as np
import pytest

import engine as ti
from engine.core.context import ctx
from interop_support import (custom_gradient_program, field_program, matrix_kernel, optional,
                             rollout_program)

torch = optional('torch')
import engine.torch as tt  # noqa: E402  (needs torch)
gradcheck, gradgradcheck = torch.autograd.gradcheck, torch.autograd.gradgradcheck


@pytest.fixture(params=[1, 2], ids=['1-thread', '2-threads'])
def f64(request):
    ti.init(default_fp=ti.f64, cpu_max_num_threads=request.param)
    yield
    ti.reset()


def _randn(*shape, scale=1.0):
    return (torch.randn(shape, dtype=torch.float64) * scale).requires_grad_()


def test_fields_with_vectors_and_several_outputs(f64):
    run, inputs, outputs = field_program()
    f = tt.function(run, inputs, outputs)
    X, W = _randn(4, 3), torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    y, loss = f(X, W)
    assert y.shape == (4,) and loss.shape == ()
    assert torch.allclose(loss, (y ** 2).sum())
    assert gradcheck(f, (X, W))
    assert gradgradcheck(f, (X, W))


def test_ndarray_kernel_with_vectors_and_matrices(f64):
    kernel, outputs = matrix_kernel()
    g = tt.kernel(kernel, outputs=outputs)
    A, M = _randn(4, 3), _randn(4, 2, 2)
    b, c = g(A, M, 1.5)
    assert b.shape == (4,) and c.shape == (4, 2)
    assert gradcheck(lambda a, m: g(a, m, 1.5), (A, M))
    assert gradgradcheck(lambda a, m: g(a, m, 1.5), (A, M))
    assert not A.grad_fn and A.grad is None     # the kernel worked on copies


def test_custom_gradients(f64):
    run, inputs, outputs = custom_gradient_program()
    f = tt.function(run, inputs, outputs)
    X = _randn(3)
    assert gradcheck(f, (X,))
    assert gradgradcheck(f, (X,))


def test_one_function_called_twice_in_a_graph(f64):
    """The second call overwrites the fields the first one's backward pass needs."""
    run, inputs, outputs = custom_gradient_program()
    f = tt.function(run, inputs, outputs)

    def product(a, b):
        return f(a)[0] * f(b)[0] + f(a)[1].sum()
    assert gradcheck(product, (_randn(3), _randn(3)))
    assert gradgradcheck(product, (_randn(3), _randn(3)))


def test_backward_passes_in_any_order(f64):
    p = rollout_program()
    f = tt.function(p['rollout'], [(p['x'], 0), p['p']], [p['loss']])
    x1, x2, P = _randn(3), _randn(3), _randn(3, scale=0.5)
    l1, l2 = f(x1, P), f(x2, P)
    g2 = torch.autograd.grad(l2, (x2, P))
    g1 = torch.autograd.grad(l1, (x1, P))
    for x0, (gx, gp) in ((x1, g1), (x2, g2)):
        again = f(x0, P)
        ex, ep = torch.autograd.grad(again, (x0, P))
        assert torch.allclose(gx, ex) and torch.allclose(gp, ep)


def test_a_rollout_as_a_chain_of_steps(f64):
    """One wrapped function per time step, the state passed as tensors (field rows)."""
    p = rollout_program()
    x, steps = p['x'], p['steps']
    step_fns = [tt.function(lambda t=t: p['step'](t), [(x, t), p['p']], [(x, t + 1)]) for t in range(steps - 1)]
    loss_fn = tt.function(p['total'], [(x, steps - 1)], [p['loss']])

    def chain(x0, P):
        state = x0
        for step in step_fns:
            state = step(state, P) * 1.1
        return loss_fn(state)
    assert gradcheck(chain, (_randn(3), _randn(3)))
    assert gradgradcheck(chain, (_randn(3), _randn(3)))


def test_a_second_backward_pass_runs_the_forward_pass_again(f64):
    run, inputs, outputs = field_program()
    f = tt.function(run, inputs, outputs)
    X, W = _randn(4, 3), torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    loss = f(X, W)[1]
    first = torch.autograd.grad(loss, X, retain_graph=True)[0]
    f(X * 2, W)             # other values in the fields meanwhile
    second = torch.autograd.grad(loss, X)[0]
    assert torch.allclose(first, second)


def test_nested_in_checkpoint_and_in_another_backward(f64):
    run, inputs, outputs = custom_gradient_program()
    f = tt.function(run, inputs, outputs)
    X = _randn(3)
    checkpointed = torch.utils.checkpoint.checkpoint(lambda a: f(a)[0], X, use_reentrant=False)
    assert torch.allclose(torch.autograd.grad(checkpointed, X)[0], torch.autograd.grad(f(X)[0], X)[0])

    inner = []

    class Outer(torch.autograd.Function):
        """A wrapped function's forward and backward passes run inside this backward pass."""
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a.clone()

        @staticmethod
        def backward(ctx, grad):
            (a,) = ctx.saved_tensors
            with torch.enable_grad():
                b = a.detach().requires_grad_()
                inner.append(torch.autograd.grad(f(b)[0], b)[0])
            return grad
    Outer.apply(X).sum().backward()
    assert torch.allclose(inner[0], torch.autograd.grad(f(X)[0], X)[0])


def test_reading_a_pending_calls_result_through_a_field_is_refused(f64):
    p = rollout_program()
    x = p['x']
    first = tt.function(lambda: p['step'](0), [(x, 0), p['p']], [(x, 1)], name='first')
    second = tt.function(lambda: p['step'](1), [p['p']], [(x, 2)], name='second')
    P = _randn(3)
    kept = first(_randn(3), P)         # its graph alive: its backward pass is pending
    with pytest.raises(ti.ad.AutodiffError, match=r'uses field .*\[1, :\].*pending call of first'):
        second(P)
    del kept


def test_two_simulators_in_one_graph(f64):
    """Two spring triangles (one program) and one of them twice, against their own tapes."""
    from sims.mass_spring import MassSpring
    cfg = MassSpring.config(scene='triangle', steps=40, fp='f64')
    a, b = MassSpring(cfg), MassSpring(cfg)
    rest = a.initial_rest
    expected = {}
    for sim, scale in ((a, 1.0), (b, 1.1), (a, 0.9)):
        sim.rest.from_numpy(rest * scale)
        expected[scale] = (sim.loss_and_grad(), sim.rest.grad.to_numpy().copy())
    fa = tt.function(a.rollout_forward, [a.rest], [a.loss])
    fb = tt.function(b.rollout_forward, [b.rest], [b.loss])
    r1, r2, r3 = (torch.tensor(rest * s, requires_grad=True) for s in (1.0, 1.1, 0.9))
    total = fa(r1) + 2 * fb(r2) + 3 * fa(r3)
    total.backward()
    for r, scale, weight in ((r1, 1.0, 1), (r2, 1.1, 2), (r3, 0.9, 3)):
        assert np.allclose(r.grad.numpy(), weight * expected[scale][1], rtol=1e-10, atol=1e-14)
    assert np.isclose(total.item(), expected[1.0][0] + 2 * expected[1.1][0] + 3 * expected[0.9][0])


def test_module_with_parameters_trains_with_torch_optim(f64):
    p = rollout_program()
    layer = tt.Module(p['rollout'], inputs=[(p['x'], 0), p['p']], outputs=[p['loss']], parameters=[p['p']])
    assert [tuple(q.shape) for q in layer.parameters()] == [(3,)]
    opt = torch.optim.SGD(layer.parameters(), lr=0.01)
    x0 = torch.full((3,), 0.5, dtype=torch.float64)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = layer(x0)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_without_gradients_nothing_is_kept(f64):
    run, inputs, outputs = field_program()
    f = tt.function(run, inputs, outputs)
    with torch.no_grad():
        y, loss = f(_randn(4, 3), torch.tensor(0.5, dtype=torch.float64))
    assert loss.grad_fn is None and ctx.watch is None
    y, loss = f(_randn(4, 3), torch.tensor(0.5, dtype=torch.float64, requires_grad=True))
    loss.backward()
    assert ctx.watch is None        # consumed: no launch pays for the watch any more


def test_fields_to_and_from_torch(f64):
    v = ti.Vector.field(2, float, shape=3)
    v.from_torch(torch.arange(6, dtype=torch.float64).reshape(3, 2))
    assert v.to_torch().tolist() == [[0, 1], [2, 3], [4, 5]]
    assert v.to_torch(keep_dims=True).shape == (3, 2, 1)
    view = tt.as_tensor(v)
    view[0, 0] = 7.0            # shares the field's memory
    assert v[0][0] == 7.0
    s = ti.Struct.field({'a': ti.f64, 'b': ti.i32}, shape=2)
    s.from_torch({'a': torch.tensor([1.5, 2.5], dtype=torch.float64), 'b': torch.tensor([3, 4], dtype=torch.int32)})
    assert s.to_torch()['b'].tolist() == [3, 4]


def test_tensors_are_ndarray_arguments_in_place(f64):
    """As in Taichi: a kernel writes the tensor itself, and kernel.grad its .grad."""
    @ti.kernel
    def cube(a: ti.types.ndarray(), b: ti.types.ndarray()):
        for i in a:
            b[i] = a[i] ** 3
    a = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    b = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    cube(a, b)
    assert b.tolist() == [1.0, 8.0]
    b.grad = torch.ones(2, dtype=torch.float64)
    cube.grad(a, b)
    assert a.grad.tolist() == [3.0, 12.0]
    with pytest.raises(ti.TaichiTypeError, match='cannot be a kernel argument'):
        cube(torch.zeros(2, device='meta'), b)


def test_bad_input_is_refused(f64):
    run, inputs, outputs = field_program()
    f = tt.function(run, inputs, outputs)
    with pytest.raises(ValueError, match=r'has shape \(4, 3\), the value given has shape \(4, 2\)'):
        f(_randn(4, 2), _randn())
    with pytest.raises(TypeError, match='takes 2 input'):
        f(_randn(4, 3))
    plain = ti.field(float, shape=3)
    with pytest.raises(ValueError, match='needs a gradient'):
        tt.function(run, [plain], outputs)
    kernel, outputs = matrix_kernel()
    with pytest.raises(ValueError, match='is not a parameter of the kernel'):
        tt.kernel(kernel, outputs={'nope': (3,)})


def test_a_wrapped_diffmpm_iteration_takes_little_more_memory():
    """Fields plus the peak traced during an iteration (scripts/interop_memory.py): the
    wrapped iteration keeps no second copy of the simulation state."""
    import scripts.interop_memory as memory
    assert memory.main(['--quick', '--iters', '1']) < 1.2


def test_ti_init_between_forward_and_backward_is_an_error(f64):
    run, inputs, outputs = field_program()
    f = tt.function(run, inputs, outputs)
    loss = f(_randn(4, 3), torch.tensor(0.5, dtype=torch.float64, requires_grad=True))[1]
    ti.init(default_fp=ti.f64)
    with pytest.raises(RuntimeError, match='ti.init ran after'):
        loss.backward()
    kernel, outputs = matrix_kernel()       # a kernel's arrays are its own: it runs again
    g = tt.kernel(kernel, outputs=outputs)
    A = _randn(2, 3)
    b = g(A, _randn(2, 2, 2), 1.0)[0]
    ti.init(default_fp=ti.f64)
    b.sum().backward()
    assert A.grad is not None and torch.isfinite(A.grad).all()


def test_ports_naming_the_same_elements_are_refused(f64):
    x = ti.field(float, shape=(3, 2), needs_grad=True)
    y = ti.field(float, shape=(3, 2), needs_grad=True)

    @ti.kernel
    def run():
        for i, j in y:
            y[i, j] = x[i, j] ** 2
    for inputs, outputs in (([x], [y, y]), ([x], [y, (y, 0)]), ([(x, 0)], [x]), ([x, (x, -1)], [y]),
                            ([(x, [1, 1])], [y]), ([(x, 0)], [(x, (0, slice(None)))])):
        with pytest.raises(ValueError, match='name the same elements'):
            tt.function(run, inputs, outputs)
    assert tt.function(run, [(x, 0), (x, 1)], [(y, 0), y.grad and (y, 2)])     # disjoint: fine
    tt.function(run, [x], [x, y])       # the same port in and out: updated in place


def test_single_elements_as_ports(f64):
    x = ti.field(float, shape=(2, 3), needs_grad=True)
    y = ti.field(float, shape=3, needs_grad=True)

    @ti.kernel
    def run():
        for j in y:
            y[j] = x[0, j] * x[1, j] + x[0, 1] ** 2
    f = tt.function(run, [(x, (0, 1)), (x, 1)], [(y, 1), (y, 2)])
    assert gradcheck(f, (_randn(), _randn(3)))
    assert gradgradcheck(f, (_randn(), _randn(3)))


def test_third_order_and_hvp_are_refused_vhp_works(f64):
    run, inputs, outputs = custom_gradient_program()
    f = tt.function(run, inputs, outputs)
    X, v = _randn(3), torch.randn(3, dtype=torch.float64)
    first = lambda a: f(a)[0]    # noqa: E731
    hessian = torch.autograd.functional.hessian(first, X)
    _, vhp = torch.autograd.functional.vhp(first, X, v)
    assert torch.allclose(vhp, hessian @ v)
    with pytest.raises(RuntimeError, match='derivative of a second-order gradient is not supported'):
        torch.autograd.functional.hvp(first, X, v)
    g = torch.autograd.grad(first(X), X, create_graph=True)[0]
    g2 = torch.autograd.grad(g.sum(), X, create_graph=True)[0]
    with pytest.raises(RuntimeError, match='not supported'):
        torch.autograd.grad(g2.sum(), X)


def test_forward_mode_ad(f64):
    import torch.autograd.forward_ad as fwAD
    run, inputs, outputs = field_program()
    f = tt.function(run, inputs, outputs)
    X, W = _randn(4, 3), torch.tensor(0.7, dtype=torch.float64)
    direction = torch.randn(4, 3, dtype=torch.float64)
    with fwAD.dual_level():
        y, loss = f(fwAD.make_dual(X.detach(), direction), W)
        tangent = fwAD.unpack_dual(loss).tangent
    (grad,) = torch.autograd.grad(f(X, W)[1], X)
    assert torch.allclose(tangent, (grad * direction).sum())
    assert gradcheck(lambda a: f(a, W), (X,), check_forward_ad=True)
    with pytest.raises((TypeError, RuntimeError), match='functorch|torch.func'):     # refused, not zero
        torch.func.grad(lambda a: f(a, W)[1])(X.detach())
    with pytest.raises(TypeError, match='vectorize'):
        torch.autograd.functional.jacobian(lambda a: f(a, W)[1], X, vectorize=True)


def test_hidden_state_changed_before_a_second_backward_is_refused(f64):
    x = ti.field(float, shape=2, needs_grad=True)
    y = ti.field(float, shape=2, needs_grad=True)
    c = ti.field(float, shape=2)

    @ti.kernel
    def run():
        for i in range(2):
            y[i] = c[i] * x[i] + x[i] ** 3
    f = tt.function(run, [x], [y])
    c.fill(1.0)
    X = torch.zeros(2, dtype=torch.float64, requires_grad=True)     # y does not depend on c here
    out = f(X)
    torch.autograd.grad(out.sum(), X, retain_graph=True)
    c.fill(5.0)
    with pytest.raises(ti.ad.AutodiffError, match='the state it reads besides its inputs changed'):
        torch.autograd.grad(out.sum(), X)


def test_accumulating_into_a_pending_calls_result_is_refused(f64):
    x = ti.field(float, shape=2, needs_grad=True)
    scratch = ti.field(float, shape=2, needs_grad=True)
    y = ti.field(float, shape=2, needs_grad=True)

    @ti.kernel
    def write():
        for i in range(2):
            scratch[i] = x[i]

    @ti.kernel
    def accumulate():
        for i in range(2):
            scratch[i] += x[i]

    @ti.kernel
    def read():
        for i in range(2):
            y[i] = scratch[i] ** 2
    first = tt.function(lambda: (write(), read()), [x], [y], name='first')
    second = tt.function(lambda: (accumulate(), read()), [x], [y], name='second')
    kept = first(_randn(2))
    with pytest.raises(ti.ad.AutodiffError, match='uses field scratch'):
        second(_randn(2))
    del kept


def test_tensor_arguments_taichi_style_edge_cases(f64):
    @ti.kernel
    def square(a: ti.types.ndarray(), b: ti.types.ndarray()):
        for i in a:
            b[i] = a[i] ** 2
    leaf = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    not_leaf, b = leaf * 1.0, torch.zeros(2, dtype=torch.float64, requires_grad=True)
    b.grad = torch.ones(2, dtype=torch.float64)
    with pytest.raises(ti.TaichiTypeError, match='not a leaf'):
        square.grad(not_leaf, b)
    saved = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    product = saved * saved.detach().clone().requires_grad_()
    holder = torch.zeros(2, dtype=torch.float64)
    used = holder * saved          # autograd saves holder
    square(leaf.detach(), holder)  # the kernel changes it in place: its version moves
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        used.sum().backward()
    del product
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def total(a: ti.types.ndarray()):
        for i in a:
            loss[None] += a[i] ** 2
    with ti.ad.Tape(loss):          # a tensor with a gradient, on the engine's own tape
        total(leaf)
    assert leaf.grad.tolist() == [2.0, 4.0]


def test_unsupported_tensors_and_arguments_are_refused(f64):
    run, inputs, outputs = field_program()
    f = tt.function(run, inputs, outputs)
    for bad in (torch.zeros(4, 3, dtype=torch.bfloat16), torch.zeros(4, 3, dtype=torch.complex128)):
        with pytest.raises(TypeError, match='not supported'):
            f(bad, _randn())
    counter = ti.field(ti.i32, shape=4)
    g = tt.function(run, [counter] + inputs, outputs)
    with pytest.raises(TypeError, match='holds int32 values; the value given is float64'):
        g(torch.full((4,), 1.5, dtype=torch.float64), _randn(4, 3), _randn())
    layer = tt.Module(run, inputs, outputs, parameters=[inputs[1]])
    with pytest.raises(TypeError, match='takes 1 tensor'):
        layer(_randn(4, 3), _randn(4, 3))
    kernel, outputs = matrix_kernel()
    with pytest.raises(TypeError, match="'s' is a scalar, which gets no gradient"):
        tt.kernel(kernel, outputs)(_randn(4, 3), _randn(4, 2, 2), torch.tensor(1.0, requires_grad=True))
    b, c = tt.kernel(kernel, outputs)(_randn(4, 3), _randn(4, 2, 2), torch.tensor(2.0))    # a 0-d tensor: a number
    with pytest.raises(ValueError, match='shape of output'):
        tt.kernel(kernel, {'b': 4, 'c': (4, 2)})
    with pytest.raises(TypeError, match='expected a @ti.kernel'):
        tt.kernel(lambda: None, {'b': (4,)})


def _state_program():
    """x -> sum((s + tanh(x))^2) where s, a field that is no port, is updated in place, and
    an input element overwritten from Python in the function when `overwrite`."""
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    s = ti.field(ti.f64, shape=3, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def update():
        for i in s:
            s[i] += ti.tanh(x[i])

    @ti.kernel
    def total():
        for i in s:
            loss[None] += s[i] ** 2
    return x, s, loss, update, total


def test_forward_ad_of_a_function_that_updates_its_state_from_one_run(f64):
    """The tangents come from the forward run itself: a second run (as before) started from
    the state the first left, and was refused."""
    import torch.autograd.forward_ad as fwad
    x, s, loss, update, total = _state_program()

    def fn():
        update()
        total()
    f = tt.function(fn, inputs=[x], outputs=[loss])
    start, direction = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64), torch.tensor([1.0, 0.5, -2.0],
                                                                                         dtype=torch.float64)
    s.from_numpy(np.full(3, 0.25))
    with fwad.dual_level():
        out = f(fwad.make_dual(start, direction))
        value, tangent = fwad.unpack_dual(out)
    expected = 2 * (0.25 + np.tanh(start.numpy())) / np.cosh(start.numpy()) ** 2
    assert np.isclose(tangent.item(), expected @ direction.numpy(), rtol=1e-12)
    assert np.isclose(value.item(), ((0.25 + np.tanh(start.numpy())) ** 2).sum(), rtol=1e-12)
    np.testing.assert_allclose(s.to_numpy(), 0.25 + np.tanh(start.numpy()), rtol=1e-12)   # updated once


def test_an_input_overwritten_from_python_in_the_function_has_no_gradient(f64):
    """Inputs are loaded before the function runs: its own write over one replaces the
    input (the output no longer depends on it), not sets it (docs/interop.md)."""
    import torch.autograd.forward_ad as fwad
    x, s, loss, update, total = _state_program()

    def fn():
        x[0] = 0.75
        s.fill(0)
        update()
        total()
    f = tt.function(fn, inputs=[x], outputs=[loss])
    start = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64, requires_grad=True)
    f(start).backward()
    expected = 2 * np.tanh(start.detach().numpy()) / np.cosh(start.detach().numpy()) ** 2
    expected[0] = 0.0
    np.testing.assert_allclose(start.grad.numpy(), expected, rtol=1e-12)
    with fwad.dual_level():
        out = f(fwad.make_dual(start.detach(), torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)))
        assert fwad.unpack_dual(out).tangent.item() == 0.0
