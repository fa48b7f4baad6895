"""Open-loop control: each actuator is tanh of a weighted sum of sine waves.

actuation[t, a] = tanh(sum_j w[a, j] * sin(omega * t * dt + 2*pi*j/n_waves) + b[a])
(DiffTaichi's diffmpm controller). The observation is ignored.
"""
import engine as ti

from .base import ControllerBase


class Controller(ControllerBase):
    uses_observation = False

    def __init__(self, **options):
        super().__init__(**options)
        n_act, n_waves = max(self.n_act, 1), self.n_waves
        self.weights = ti.field(float, shape=(n_act, n_waves), needs_grad=True)
        self.bias = ti.field(float, shape=n_act, needs_grad=True)
        weights, bias, actuation = self.weights, self.bias, self.actuation
        omega, dt, phases = self.omega, self.dt, self.phases()

        @ti.kernel
        def sine_actuation(t: ti.i32):
            for a in range(n_act):
                act = bias[a]
                for j in ti.static(range(n_waves)):
                    act += weights[a, j] * ti.sin(omega * t * dt + phases[j])
                actuation[t, a] = ti.tanh(act)

        self.kernel = sine_actuation

    def parameters(self):
        return [self.weights, self.bias]

    def initialize(self, rng):
        self.weights.from_numpy(rng.standard_normal(self.weights.shape) * 0.01 * self.init_scale)
        self.bias.fill(0)

    def compute(self, t):
        self.kernel(t)
