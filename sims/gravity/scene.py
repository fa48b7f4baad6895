"""Gravity's scene (numpy only): the particles' initial positions and the closed-form forces."""
import numpy as np


def initial_positions(n, rng):
    """n particles uniformly in [0.3, 0.7]^2."""
    return 0.3 + 0.4 * rng.random((n, 2))


def pair_forces(x, G, eps):
    """The forces -dU/dx in closed form: sum over j of -2 G r / (|r|^2 + eps)^(3/2), r = x_i - x_j."""
    r = x[:, None, :] - x[None, :, :]
    s = np.sqrt((r ** 2).sum(-1) + eps)
    return (-2 * G * r / s[..., None] ** 3).sum(1)
