"""The interface between a simulator and its controller.

The controller owns two fields indexed by the time step:
- `observation[t, k]` (n_obs values), written by the simulator before `compute(t)`;
- `actuation[t, a]` (n_act values in [-1, 1]), written by `compute(t)`, read by the simulator.
Both have gradients, so the tape carries the loss back through the simulator,
the actuation and the controller into `parameters()`.
"""
import math

import numpy as np

import engine as ti


class ControllerBase:
    #: whether compute(t) reads `observation` (the simulator may skip filling it otherwise)
    uses_observation = True

    def __init__(self, n_obs, n_act, steps, dt, omega=10.0, n_waves=4, hidden=32, init_scale=1.0):
        self.n_obs, self.n_act, self.steps, self.dt = n_obs, n_act, steps, dt
        self.omega, self.n_waves, self.hidden, self.init_scale = omega, n_waves, hidden, init_scale
        self.observation = ti.field(float, shape=(steps, max(n_obs, 1)), needs_grad=True)
        self.actuation = ti.field(float, shape=(steps, max(n_act, 1)), needs_grad=True)

    def parameters(self):
        """The trainable fields."""
        raise NotImplementedError

    def initialize(self, rng: np.random.Generator):
        """Set the parameters to their initial (random) values."""
        raise NotImplementedError

    def compute(self, t: int):
        """Launch the kernels that write actuation[t, :]."""
        raise NotImplementedError

    def phases(self):
        """The phase offsets of the sine-wave inputs: 2*pi*j/n_waves."""
        return [2 * math.pi * j / self.n_waves for j in range(self.n_waves)]

