"""The MLP controller of controllers/mlp.py as a PyTorch network (`--controller torch`).

torch.nn computes the actuation, torch.optim updates the weights; the simulator is a
chain of differentiable PyTorch operations (engine.torch), one per time step, whose
inputs and outputs are the state at t and t + 1:

    obs_0 = observe(x_0, v_0)
    for t:  act_t = net(waves_t, obs_t);  x_t+1, v_t+1, obs_t+1 = step_t(x_t, v_t, act_t)
    loss = loss_of(x_last);  loss.backward();  optimizer.step()

From the same initial weights (the same draws as the MLP controller's) and the same
optimizer rule it follows the MLP controller's loss curve. A simulator offers it by
naming its state fields (`state_fields()`: time-indexed, written by `step_kernel(t)` at
t + 1) and zeroing what its steps accumulate in `reset_accumulators()`. Needs the
optional extra: pip install -e '.[torch]'.
"""
import math

import numpy as np
import torch

import engine.torch as ti_torch

from .base import ControllerBase
from .mlp import initial_weights


class Controller(ControllerBase):
    drives_rollout = True       # Simulation.loss_and_grad runs this controller's rollout
    capturable = False          # compute(t) runs PyTorch: the forward pass cannot be captured

    def __init__(self, **options):
        super().__init__(**options)
        self.n_in = self.n_waves + self.n_obs
        dtype = torch.float64 if self.observation.dtype.np == np.float64 else torch.float32
        self.net = torch.nn.Sequential(
            torch.nn.Linear(self.n_in, self.hidden), torch.nn.Tanh(),
            torch.nn.Linear(self.hidden, max(self.n_act, 1)), torch.nn.Tanh()).to(dtype)
        self.dtype = dtype
        self.rollout = None

    def parameters(self):
        return [TensorParameter(p, name) for name, p in self.net.named_parameters()]

    def initialize(self, rng):
        w1, w2 = initial_weights(rng, self.n_in, self.hidden, max(self.n_act, 1), self.init_scale)
        with torch.no_grad():
            for layer, weight in ((self.net[0], w1), (self.net[2], w2)):
                layer.weight.copy_(torch.from_numpy(weight))
                layer.bias.zero_()

    def inputs(self, t, observation):
        """The network's input at step t: the sine waves, then the observation."""
        waves = [math.sin(self.omega * t * self.dt + p) for p in self.phases()]
        return torch.cat([torch.tensor(waves, dtype=self.dtype), observation])

    def compute(self, t):
        """The actuation at t from the observation field (a rollout without gradients)."""
        with torch.no_grad():
            observation = torch.from_numpy(self.observation.to_numpy()[t, :self.n_obs])
            self.actuation.from_numpy(_with_row(self.actuation.to_numpy(), t,
                                                self.net(self.inputs(t, observation)).numpy()))

    def loss_and_grad(self, sim):
        """One training rollout: the loss, with d loss / d weight in each weight's .grad."""
        if self.rollout is None:
            self.rollout = Rollout(sim, self)
        return self.rollout.loss_and_grad()

    def optimizer(self, name, lr, clip=None):
        return TorchOptimizer(self.net.parameters(), name, lr, clip)


def _with_row(array, t, row):
    array[t, :len(row)] = row
    return array


class Rollout:
    """The simulator's steps as PyTorch operations over (x, v) and the observation."""

    def __init__(self, sim, controller):
        self.sim, self.controller = sim, controller
        steps, act, obs = sim.cfg.steps, controller.actuation, controller.observation
        state = sim.state_fields()
        self.observe = ti_torch.function(sim.observe_initial, [(f, 0) for f in state], [(obs, 0)],
                                         name='observe')
        self.steps = [ti_torch.function(_step(sim.step_kernel, t), [(f, t) for f in state] + [(act, t)],
                                        [(f, t + 1) for f in state] + [(obs, t + 1)], name=f'step {t}')
                      for t in range(steps - 1)]
        self.loss = ti_torch.function(sim.compute_loss, [(f, steps - 1) for f in state], [sim.loss],
                                      name='loss')
        self.initial = [torch.from_numpy(f.to_numpy()[0]) for f in state]

    def loss_and_grad(self):
        c, n_obs = self.controller, self.controller.n_obs
        self.sim.reset_accumulators()
        c.net.zero_grad()
        state = list(self.initial)
        observation = self.observe(*state)
        for t, step in enumerate(self.steps):
            action = c.net(c.inputs(t, observation[:n_obs]))
            *state, observation = step(*state, action)
        loss = self.loss(*state)
        loss.backward()
        return loss.item()


def _step(kernel, t):
    def step():
        kernel(t)
    return step


class TensorParameter:
    """A torch parameter as the training loop sees a parameter field: .data and .grad as
    numpy views, to_numpy / from_numpy (checkpoints, params.npz)."""

    def __init__(self, tensor, name):
        self.tensor, self.name = tensor, name

    @property
    def data(self):
        return self.tensor.detach().numpy()

    @property
    def grad(self):
        return None if self.tensor.grad is None else _Grad(self.tensor.grad.numpy())

    def to_numpy(self):
        return self.data.copy()

    def from_numpy(self, array):
        with torch.no_grad():
            self.tensor.copy_(torch.from_numpy(np.asarray(array)))


class _Grad:
    def __init__(self, data):
        self.data = data


class TorchOptimizer:
    """The training loop's optimizers (sims/optimizers.py) as torch.optim steps: 'gd' is
    SGD after clipping the gradient's norm to `clip`, 'normalized' SGD on g / (|g| + 1e-6),
    'adam' Adam after the same clipping. step() returns the gradient's norm before."""

    def __init__(self, params, name, lr, clip=None):
        self.params, self.name, self.clip = list(params), name, clip
        if name not in ('gd', 'normalized', 'adam'):
            raise ValueError(f'unknown optimizer {name!r}; available: gd, normalized, adam')
        make = torch.optim.Adam if name == 'adam' else torch.optim.SGD
        self.optimizer = make(self.params, lr=lr)

    def step(self):
        norm = math.sqrt(sum(float(torch.sum(p.grad.double() ** 2)) for p in self.params))
        scale = 1.0
        if self.name == 'normalized':
            scale = 1.0 / (norm + 1e-6)
        elif self.clip is not None and norm > self.clip:
            scale = self.clip / norm
        if scale != 1.0:
            for p in self.params:
                p.grad.mul_(scale)
        self.optimizer.step()
        return norm

    def state(self):
        """Adam's step count and moments, as sims/optimizers.Adam keeps them."""
        if self.name != 'adam':
            return {}
        states = [self.optimizer.state.get(p, {}) for p in self.params]
        if not states or 'step' not in states[0]:
            return dict(t=0, m=[np.zeros(p.shape) for p in self.params], v=[np.zeros(p.shape) for p in self.params])
        return dict(t=int(states[0]['step']), m=[s['exp_avg'].numpy().copy() for s in states],
                    v=[s['exp_avg_sq'].numpy().copy() for s in states])

    def load_state(self, state):
        if self.name != 'adam' or not state or int(state['t']) == 0:
            return
        for p, m, v in zip(self.params, state['m'], state['v']):
            self.optimizer.state[p] = dict(step=torch.tensor(float(state['t'])),
                                           exp_avg=torch.tensor(np.asarray(m), dtype=p.dtype),
                                           exp_avg_sq=torch.tensor(np.asarray(v), dtype=p.dtype))
