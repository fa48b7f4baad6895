"""Billiards' scene (numpy only): the rack."""
import numpy as np


def ball_count(layers):
    """The cue ball and a rack of `layers` rows (1 + 2 + ... + layers balls)."""
    return 1 + layers * (layers + 1) // 2


def rack_positions(layers, radius):
    """Initial positions of the rack balls (balls 1 .. n-1), row by row."""
    return np.array([[0.5 + 2 * radius * i, 0.5 + 2 * radius * j - 0.7 * radius * i]
                     for i in range(layers) for j in range(i + 1)])
