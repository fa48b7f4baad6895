"""The machinery shared by the simulators: optimizers, checkpointed rollouts, controllers, CLI flags."""
import numpy as np
import pytest

import controllers
import engine as ti
from sim_helpers import check_simulation_gradient
from sims import optimizers
from sims.base import Simulation
from sims.checkpointing import CheckpointedRollout
from sims.cli import parser_for


@pytest.fixture
def f64():
    ti.init(default_fp=ti.f64)


# --------------------------------------------------------------------------- optimizers

def _param(values, grad):
    p = ti.field(ti.f64, shape=len(values), needs_grad=True)
    p.from_numpy(np.array(values, float))
    p.grad.from_numpy(np.array(grad, float))
    return p


def test_gradient_descent_clips_long_gradients(f64):
    p = _param([1.0, 1.0], [3.0, 4.0])
    norm = optimizers.GradientDescent([p], lr=0.5, clip=1.0).step()
    assert norm == pytest.approx(5.0)
    np.testing.assert_allclose(p.to_numpy(), [1 - 0.5 * 0.6, 1 - 0.5 * 0.8])
    q = _param([1.0], [0.5])
    optimizers.GradientDescent([q], lr=0.5, clip=1.0).step()      # short: not clipped
    np.testing.assert_allclose(q.to_numpy(), [0.75])


def test_adam_first_step_is_lr_times_sign(f64):
    p = _param([0.0, 0.0, 0.0], [2.0, -1e-3, 0.0])
    optimizers.Adam([p], lr=0.1).step()
    np.testing.assert_allclose(p.to_numpy(), [-0.1, 0.1, 0.0], atol=1e-6)


def test_unknown_optimizer():
    with pytest.raises(ValueError, match='unknown optimizer'):
        optimizers.make('lbfgs', [], lr=1)


# --------------------------------------------------------------------------- checkpointing

class Oscillators(Simulation):
    """Damped nonlinear oscillators; the stiffness is trained. With `checkpoint` > 0 the
    state fields keep checkpoint + 1 slots and the rollout is checkpointed."""
    name = 'oscillators'
    defaults = dict(n=3, steps=10, checkpoint=0, dt=0.05)
    capture_forward = False        # forward() sets the initial state from Python

    def build(self):
        c = self.cfg
        slots = (c.checkpoint or c.steps) + 1
        self.x = ti.field(float, shape=(slots, c.n), needs_grad=True)
        self.v = ti.field(float, shape=(slots, c.n), needs_grad=True)
        self.k = ti.field(float, shape=c.n, needs_grad=True)
        self.loss = ti.field(float, shape=(), needs_grad=True)
        x, v, k, loss, dt = self.x, self.v, self.k, self.loss, c.dt

        @ti.kernel
        def step(s: ti.i32, t: ti.i32):
            for i in range(c.n):
                force = -k[i] * ti.sin(x[s, i]) - 0.1 * v[s, i] + 0.01 * t
                v[s + 1, i] = v[s, i] + dt * force
                x[s + 1, i] = x[s, i] + dt * v[s + 1, i]

        @ti.kernel
        def compute_loss(s: ti.i32):
            for i in range(c.n):
                loss[None] += x[s, i] ** 2 + v[s, i]

        self.step, self.compute_loss = step, compute_loss
        if c.checkpoint:
            self.rollout = CheckpointedRollout([x, v], step, c.steps, c.checkpoint)

    def parameters(self):
        return [self.k]

    def initialize(self, rng):
        self.k.from_numpy(1 + rng.random(self.cfg.n))
        self.x0 = rng.random(self.cfg.n)

    def forward(self):
        self.x.data[0] = self.x0
        self.v.data[0] = 0
        if self.cfg.checkpoint:
            self.compute_loss(self.rollout.forward())
            return
        for t in range(self.cfg.steps):
            self.step(t, t)
        self.compute_loss(self.cfg.steps)

    def loss_and_grad(self):
        if not self.cfg.checkpoint:
            return super().loss_and_grad()
        self.x.data[0] = self.x0
        self.v.data[0] = 0
        final = self.rollout.forward()
        with ti.ad.Tape(self.loss):
            self.compute_loss(final)
        self.rollout.backward()
        return float(self.loss[None])


@pytest.mark.parametrize('checkpoint', [3, 5, 10, 12])
def test_checkpointed_gradient_equals_the_full_tape(checkpoint):
    full = Oscillators.create(fp='f64')
    loss = full.loss_and_grad()
    grad = full.k.grad.to_numpy()
    x0_grad = full.x.grad.to_numpy()[0]
    ckpt = Oscillators.create(fp='f64', checkpoint=checkpoint)
    assert ckpt.loss_and_grad() == pytest.approx(loss, rel=1e-14)
    np.testing.assert_allclose(ckpt.k.grad.to_numpy(), grad, rtol=1e-12)
    np.testing.assert_allclose(ckpt.x.grad.to_numpy()[0], x0_grad, rtol=1e-12)   # d loss / d initial state
    assert ckpt.x.shape[0] == checkpoint + 1


def test_checkpointed_gradient_matches_finite_differences():
    assert check_simulation_gradient(Oscillators.create(fp='f64', checkpoint=4)) >= 3


def test_checkpoint_store_grows_with_segments():
    sim = Oscillators.create(fp='f64', steps=12, checkpoint=4)
    assert sim.rollout.memory_bytes() == 3 * 2 * sim.cfg.n * 8


def test_rollout_rejects_fields_without_the_right_slots(f64):
    x = ti.field(ti.f64, shape=(5, 2), needs_grad=True)
    with pytest.raises(ValueError, match='segment'):
        CheckpointedRollout([x], lambda s, t: None, 10, 3)


# --------------------------------------------------------------------------- controllers

class Controlled(Simulation):
    """loss = sum_t sum_a actuation[t, a] * weight[t, a], observation = a function of t."""
    name = 'controlled'
    defaults = dict(controller='sine', steps=6, n_obs=3, n_act=2)

    def build(self):
        c = self.cfg
        self.controller = controllers.make(c.controller, n_obs=c.n_obs, n_act=c.n_act, steps=c.steps,
                                           dt=0.1, omega=3.0, n_waves=3, hidden=5)
        self.weight = ti.field(float, shape=(c.steps, c.n_act))
        self.loss = ti.field(float, shape=(), needs_grad=True)
        act, obs, weight, loss = self.controller.actuation, self.controller.observation, self.weight, self.loss

        @ti.kernel
        def observe(t: ti.i32):
            for k in range(c.n_obs):
                obs[t, k] = ti.cos(0.3 * t + k)

        @ti.kernel
        def compute_loss():
            for t, a in weight:
                loss[None] += act[t, a] * weight[t, a]

        self.observe, self.compute_loss = observe, compute_loss

    def parameters(self):
        return self.controller.parameters()

    def initialize(self, rng):
        self.controller.initialize(rng)
        self.controller.init_scale = 1
        for p in self.parameters():     # large enough to make every entry matter
            p.from_numpy(rng.standard_normal(p.shape) * 0.5)
        self.weight.from_numpy(rng.standard_normal(self.weight.shape))

    def forward(self):
        for t in range(self.cfg.steps):
            if self.controller.uses_observation:
                self.observe(t)
            self.controller.compute(t)
        self.compute_loss()


@pytest.mark.parametrize('name', ['sine', 'mlp'])
def test_controller_gradients_match_finite_differences(name):
    sim = Controlled.create(fp='f64', controller=name)
    assert check_simulation_gradient(sim, entries=3) >= 2 * len(sim.parameters())
    act = sim.controller.actuation.to_numpy()
    assert np.all(np.abs(act) < 1) and np.abs(act).max() > 0.05


def test_controllers_are_discovered_by_module():
    assert {'sine', 'mlp'} <= set(controllers.available())
    with pytest.raises(ValueError, match='available'):
        controllers.make('pid', n_obs=1, n_act=1, steps=1, dt=0.1)


# --------------------------------------------------------------------------- CLI flags

class Flags(Simulation):
    name = 'flags'
    defaults = dict(steps=5, toi=False, controller='sine', dt=1e-3)
    quick = dict(steps=2)


def test_every_config_key_is_a_flag():
    args = parser_for(Flags).parse_args(['train', '--toi', '--steps', '7', '--controller', 'mlp', '--lr', '0.5'])
    assert (args.toi, args.steps, args.controller, args.lr, args.dt) == (True, 7, 'mlp', 0.5, None)
    assert parser_for(Flags).parse_args(['render', '--no-toi']).toi is False
    with pytest.raises(SystemExit):
        parser_for(Flags).parse_args(['train', '--controller', 'nope'])


def test_quick_and_overrides_compose():
    assert Flags.config(quick=True).steps == 2
    assert Flags.config(quick=True, steps=9).steps == 9
    assert Flags.config().steps == 5


# --------------------------------------------------------------------------- layouts used by DiffTaichi

def test_axes_follow_taichis_axis_order_whatever_the_nesting(f64):
    x = ti.Vector.field(2, ti.f64)
    y = ti.field(ti.f64)
    ti.root.dense(ti.l, 5).dense(ti.i, 3).place(x)       # DiffTaichi's electric.py: x[i, t]
    ti.root.dense(ti.j, 4).dense(ti.i, 3).place(y)
    assert x.shape == (3, 5) and y.shape == (3, 4)

    @ti.kernel
    def fill():
        for i, t in x:
            x[i, t] = [t, i]

    fill()
    np.testing.assert_array_equal(x.to_numpy()[2, 4], [4.0, 2.0])


def test_normalized_step_has_fixed_length(f64):
    p = _param([1.0, 1.0], [0.03, 0.04])
    optimizers.make('normalized', [p], lr=0.2).step()
    np.testing.assert_allclose(p.to_numpy(), [1 - 0.12, 1 - 0.16], rtol=1e-4)
