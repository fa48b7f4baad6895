"""Closed-loop control: a two-layer tanh MLP over sine waves and the observation.

input  = [sin(omega*t*dt + 2*pi*j/n_waves) for j] + observation[t, :]
hidden = tanh(W1 @ input + b1)          (hidden units)
output = tanh(W2 @ hidden + b2)         (one per actuator)
(DiffTaichi's mass-spring controller; the simulator chooses and scales the observation.)
"""
import math

import engine as ti

from .base import ControllerBase


class Controller(ControllerBase):

    def __init__(self, **options):
        super().__init__(**options)
        n_in, n_hidden, n_act = self.n_waves + self.n_obs, self.hidden, max(self.n_act, 1)
        n_waves, n_obs = self.n_waves, self.n_obs
        self.n_in = n_in
        self.w1 = ti.field(float, shape=(n_hidden, n_in), needs_grad=True)
        self.b1 = ti.field(float, shape=n_hidden, needs_grad=True)
        self.w2 = ti.field(float, shape=(n_act, n_hidden), needs_grad=True)
        self.b2 = ti.field(float, shape=n_act, needs_grad=True)
        self.hidden_state = ti.field(float, shape=(self.steps, n_hidden), needs_grad=True)
        w1, b1, w2, b2 = self.w1, self.b1, self.w2, self.b2
        hidden, observation, actuation = self.hidden_state, self.observation, self.actuation
        omega, dt, phases = self.omega, self.dt, self.phases()

        @ti.kernel
        def mlp_hidden(t: ti.i32):
            for i in range(n_hidden):
                h = b1[i]
                for j in ti.static(range(n_waves)):
                    h += w1[i, j] * ti.sin(omega * t * dt + phases[j])
                for k in range(n_obs):
                    h += w1[i, n_waves + k] * observation[t, k]
                hidden[t, i] = ti.tanh(h)

        @ti.kernel
        def mlp_output(t: ti.i32):
            for a in range(n_act):
                out = b2[a]
                for i in range(n_hidden):
                    out += w2[a, i] * hidden[t, i]
                actuation[t, a] = ti.tanh(out)

        self.kernels = (mlp_hidden, mlp_output)

    def parameters(self):
        return [self.w1, self.b1, self.w2, self.b2]

    def initialize(self, rng):
        w1, w2 = initial_weights(rng, self.n_in, self.hidden, max(self.n_act, 1), self.init_scale)
        self.w1.from_numpy(w1)
        self.w2.from_numpy(w2)
        self.b1.fill(0)
        self.b2.fill(0)

    def compute(self, t):
        for kernel in self.kernels:
            kernel(t)


def initial_weights(rng, n_in, n_hidden, n_act, init_scale):
    """DiffTaichi's scaled Glorot initialization: (W1, W2); the biases start at zero."""
    s1 = math.sqrt(2 / (n_hidden + n_in)) * 2 * init_scale
    s2 = math.sqrt(2 / (n_hidden + n_act)) * 3 * init_scale
    return rng.standard_normal((n_hidden, n_in)) * s1, rng.standard_normal((n_act, n_hidden)) * s2
