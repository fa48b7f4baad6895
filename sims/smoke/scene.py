"""Smoke's scene (numpy only): the initial density (a band) and the target (a ring)."""
import numpy as np


def _smooth_step(distance, width):
    """~1 where distance < 0, ~0 where distance > 0, with a tanh edge `width` wide."""
    return 0.5 * (1 - np.tanh(distance / width))


def _cell_centers(n):
    """x[i, 0] and y[0, j] of the cell centers in the unit square."""
    c = (np.arange(n) + 0.5) / n
    return c[:, None], c[None, :]


def initial_density(n, half_width=0.15, edge=0.025):
    """A smooth horizontal band of smoke across the middle of the box."""
    _, y = _cell_centers(n)
    return np.repeat(_smooth_step(np.abs(y - 0.5) - half_width, edge), n, axis=0)


def target_density(n, radius=0.28, half_width=0.04, edge=0.025):
    """A smooth ring around the center of the box."""
    x, y = _cell_centers(n)
    return _smooth_step(np.abs(np.hypot(x - 0.5, y - 0.5) - radius) - half_width, edge)
