"""Electric's scene (numpy only): the fixed charges and the goal's path."""
import math

import numpy as np

PAD = 0.1
CHARGES = [(PAD, PAD), (PAD, 1 - PAD), (1 - PAD, 1 - PAD), (1 - PAD, PAD),
           (0.5, 1 - PAD), (0.5, PAD), (PAD, 0.5), (1 - PAD, 0.5)]
N_OBS = 8
MIN_DISTANCE = 0.1


def goal_path(steps, seg_size, rng):
    """The goal and its segment's displacement at every step, and the polyline's points."""
    segments = max(1, math.ceil(steps / seg_size))
    points = 0.2 + 0.6 * rng.random((segments + 1, 2))
    k = np.arange(steps)
    segment = np.minimum(k // seg_size, segments - 1)
    fraction = (k - segment * seg_size) / seg_size
    goal = (1 - fraction)[:, None] * points[segment] + fraction[:, None] * points[segment + 1]
    goal_v = points[segment + 1] - points[segment]
    return goal, goal_v, points
