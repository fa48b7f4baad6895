"""Optimizers over lists of fields: they read `field.grad` and update `field` in place.

`state()` / `load_state()` carry what an optimizer keeps between steps (Adam's moments and
step count), so that a resumed run continues exactly where it stopped."""
import math

import numpy as np


def gradient_norm(params):
    return math.sqrt(sum(float(np.sum(p.grad.data.astype(np.float64) ** 2)) for p in params))


class Optimizer:
    def state(self):
        """Arrays and numbers kept between steps: none for a stateless rule."""
        return {}

    def load_state(self, state):
        pass


class GradientDescent(Optimizer):
    """p -= lr * g, with g scaled down to norm `clip` when it is longer (DiffTaichi's scheme)."""

    def __init__(self, params, lr, clip=None):
        self.params, self.lr, self.clip = list(params), lr, clip

    def step(self):
        norm = gradient_norm(self.params)
        scale = self.lr
        if self.clip is not None and norm > self.clip:
            scale *= self.clip / norm
        for p in self.params:
            p.data -= (scale * p.grad.data).astype(p.data.dtype)
        return norm


class NormalizedStep(Optimizer):
    """p -= lr * g / |g|: a step of fixed length lr (DiffTaichi's mass-spring update)."""

    def __init__(self, params, lr, clip=None):
        self.params, self.lr = list(params), lr

    def step(self):
        norm = gradient_norm(self.params)
        for p in self.params:
            p.data -= (self.lr / (norm + 1e-6) * p.grad.data).astype(p.data.dtype)
        return norm


class Adam(Optimizer):
    """Adam (Kingma & Ba) with optional gradient-norm clipping before the moments."""

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, clip=None):
        self.params, self.lr, self.betas, self.eps, self.clip = list(params), lr, betas, eps, clip
        self.m = [np.zeros(p.data.shape) for p in self.params]
        self.v = [np.zeros(p.data.shape) for p in self.params]
        self.t = 0

    def step(self):
        norm = gradient_norm(self.params)
        clip_scale = self.clip / norm if self.clip is not None and norm > self.clip else 1.0
        self.t += 1
        b1, b2 = self.betas
        for p, m, v in zip(self.params, self.m, self.v):
            g = p.grad.data.astype(np.float64) * clip_scale
            m[...] = b1 * m + (1 - b1) * g
            v[...] = b2 * v + (1 - b2) * g * g
            m_hat = m / (1 - b1 ** self.t)
            v_hat = v / (1 - b2 ** self.t)
            p.data -= (self.lr * m_hat / (np.sqrt(v_hat) + self.eps)).astype(p.data.dtype)
        return norm

    def state(self):
        return dict(t=self.t, m=[m.copy() for m in self.m], v=[v.copy() for v in self.v])

    def load_state(self, state):
        self.t = int(state['t'])
        for mine, saved in zip(self.m + self.v, list(state['m']) + list(state['v'])):
            mine[...] = saved


OPTIMIZERS = {'gd': GradientDescent, 'normalized': NormalizedStep, 'adam': Adam}


def make(name, params, lr, clip=None):
    if name not in OPTIMIZERS:
        raise ValueError(f'unknown optimizer {name!r}; available: {", ".join(OPTIMIZERS)}')
    return OPTIMIZERS[name](params, lr=lr, clip=clip)
