"""`@ti.data_oriented` classes: kernel and ti.func methods on `self`'s fields, gradients
through them (Tape, obj.method.grad(), grad_replaced methods), code compiled per
instance, and instances as ti.template() arguments."""
import numpy as np
import pytest

import engine as ti
from engine.language import abi
from ad_helpers import f64, fd_check, set_field  # noqa: F401  (f64 is a fixture)

pytestmark = pytest.mark.usefixtures('ti_init')


@ti.data_oriented
class Springs:
    def __init__(self, n, k):
        self.n, self.k = n, k
        self.x = ti.field(ti.f64, shape=n, needs_grad=True)
        self.loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.func
    def energy(self, i):
        return self.k * ti.sin(self.x[i]) * self.x[i]

    @ti.kernel
    def compute(self):
        for i in self.x:
            self.loss[None] += self.energy(i)

    @ti.kernel
    def scaled(self, s: ti.f64) -> ti.f64:
        return self.k * s + ti.static(self.n)

    @ti.ad.grad_replaced
    def step(self, scale):
        self.double(scale)

    @ti.ad.grad_for(step)
    def step_grad(self, scale):
        self.double.grad(scale)

    @ti.kernel
    def double(self, scale: ti.f64):
        for i in self.x:
            self.loss[None] += scale * self.x[i] ** 2


def test_kernel_methods_compile_per_instance(f64):
    a, b = Springs(3, 1.0), Springs(4, 2.0)
    assert (a.scaled(2.0), b.scaled(2.0), a.scaled(1.0)) == (5.0, 8.0, 4.0)
    assert len(Springs.scaled._cache) == 2          # one compiled kernel per instance
    assert Springs.compute.name == 'compute' and a.compute.name == 'compute'


def test_gradients_through_kernel_methods_under_a_tape_and_method_grad(f64):
    a, b = Springs(3, 1.0), Springs(4, 2.0)
    set_field(a.x, [0.1, -0.7, 1.3])
    set_field(b.x, [0.5, 0.5, 0.5, 0.5])
    grads = fd_check(a.loss, [a.x], a.compute)
    np.testing.assert_allclose(grads[0], np.sin(a.x.to_numpy()) + a.x.to_numpy() * np.cos(a.x.to_numpy()))
    fd_check(b.loss, [b.x], b.compute)
    a.x.grad.fill(0)
    a.loss.grad[None] = 1.0
    a.compute.grad()
    np.testing.assert_allclose(a.x.grad.to_numpy(), grads[0])


def test_grad_replaced_methods_take_their_instance(f64):
    a = Springs(2, 1.0)
    set_field(a.x, [1.0, 3.0])
    with ti.ad.Tape(loss=a.loss):
        a.step(0.5)
    assert a.loss[None] == pytest.approx(5.0)
    np.testing.assert_allclose(a.x.grad.to_numpy(), [1.0, 3.0])


def test_instances_as_template_arguments_are_keyed_by_identity():
    @ti.data_oriented
    class Grid:
        def __init__(self, value):
            self.value = value
            self.cells = ti.field(ti.f32, shape=2)

        def __eq__(self, other):        # equal instances still hold different fields
            return isinstance(other, Grid) and other.value == self.value

        __hash__ = object.__hash__

    @ti.kernel
    def fill(g: ti.template(), v: ti.f32):
        for i in g.cells:
            g.cells[i] = v + g.value

    a, b = Grid(1), Grid(1)
    fill(a, 1.0)
    fill(b, 2.0)
    assert a.cells.to_numpy().tolist() == [2, 2] and b.cells.to_numpy().tolist() == [3, 3]
    assert isinstance(abi.key_of(fill.specs[0], a), abi.Instance)


def test_a_kernel_method_errors_at_the_users_line():
    @ti.data_oriented
    class Broken:
        def __init__(self):
            self.x = ti.field(ti.f32, shape=2)

        @ti.kernel
        def run(self):
            for i in self.x:
                self.x[i] = self.missing[i]

    with pytest.raises(ti.TaichiTypeError, match='missing') as info:
        Broken().run()
    assert 'self.x[i] = self.missing[i]' in str(info.value)
