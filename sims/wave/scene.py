"""Wave's scene (numpy only): the time step, the update's coefficients and the target pattern."""
import math

import numpy as np


def _smooth_step(distance, width):
    """~1 where distance < 0, ~0 where distance > 0, with a tanh edge `width` wide."""
    return 0.5 * (1 - np.tanh(distance / width))


def time_step(dx, c, alpha):
    """DiffTaichi's dt = (sqrt(alpha^2 + dx^2/3) - alpha) / c."""
    return (math.sqrt(alpha ** 2 + dx * dx / 3) - alpha) / c


def coefficients(dx, dt, c, alpha):
    """The update's factors on dx^2 L p[t-1] and on dx^2 L p[t-2]."""
    a = c * c * dt * dt / (dx * dx) + c * alpha * dt / (dx * dx)
    b = c * alpha * dt / (dx * dx)
    return a, b


def target_pattern(n, radius=0.3, edge=0.006):
    """A yin-yang symbol (the Taichi logo's shape) on an n x n grid ([i, j]: x, y), minus its mean.

    Light background (1); inside a circle of `radius`: the left half dark (0) and the right
    half light, swapped inside two circles of radius/2 above and below the centre, each with a
    small dot of the other shade; a dark ring around the symbol."""
    c = (np.arange(n) + 0.5) / n
    x, y = c[:, None] - 0.5, c[None, :] - 0.5
    r = np.hypot(x, y)
    r_top, r_bottom = np.hypot(x, y - radius / 2), np.hypot(x, y + radius / 2)
    # dark: the left half, minus the top lobe, plus the bottom lobe
    left = _smooth_step(x, edge)
    top, bottom = _smooth_step(r_top - radius / 2, edge), _smooth_step(r_bottom - radius / 2, edge)
    dark = np.clip(left * (1 - top) + bottom * (1 - left), 0, 1)
    dot_top, dot_bottom = _smooth_step(r_top - radius / 8, edge), _smooth_step(r_bottom - radius / 8, edge)
    dark = dark * (1 - dot_bottom) + dot_top * (1 - dark)
    inside = _smooth_step(r - radius, edge)
    ring = _smooth_step(np.abs(r - radius - 0.01) - 0.01, edge)
    image = 1 - np.clip(inside * dark + ring, 0, 1)
    return image - image.mean()
