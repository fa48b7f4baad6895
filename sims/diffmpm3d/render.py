"""The frames of the 3D robot: two orthographic views at the same scale.

The side (x right, y up, seen from +z) in the upper half and the top (x right, z down,
seen from +y; z from 0.2 to 0.7) in the lower half; particles coloured by their
actuation (passive: dark grey), nearer ones drawn over farther ones.
"""
import numpy as np

from ..mpm.render import particle_frames
from ..render import Canvas


def render_frames(sim):
    floor = (sim.cfg.bound - 0.5) / sim.cfg.n_grid    # where particles come to rest on the sticky nodes
    for positions, colors in particle_frames(sim):
        xs = np.asarray(positions, np.float64)
        canvas = Canvas(512)
        canvas.lines([0.0, 0.5], [1.0, 0.5], 2, (160, 160, 160))            # between the views
        canvas.lines([0.0, 0.5 + floor], [1.0, 0.5 + floor], 3, (0, 0, 0))  # the floor
        views = ((np.stack([xs[:, 0], 0.5 + xs[:, 1]], axis=1), xs[:, 2], 0.5, 1.0),   # side
                 (np.stack([xs[:, 0], 0.7 - xs[:, 2]], axis=1), xs[:, 1], 0.0, 0.5))   # top
        for points, depth, y0, y1 in views:
            order = np.argsort(depth, kind='stable')          # far particles first
            points, shade = points[order], colors[order]
            inside = (points[:, 1] > y0) & (points[:, 1] < y1)
            canvas.circles(points[inside], 1.5, shade[inside])
        yield canvas.image
