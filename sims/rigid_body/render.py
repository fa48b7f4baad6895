"""Rigid-body frames: the ground, the goal, the boxes' outlines (the head red), the joints
and the springs (colored by their actuation)."""
import numpy as np

from sims.render import Canvas, color_map

from .scene import GOAL, GROUND_HEIGHT, OUTLINE


def box_outlines(x, rotation, half):
    """The four corners (n_boxes x 4 x 2) of boxes with centres x, rotations and half sizes, in drawing order."""
    cos, sin = np.cos(rotation)[:, None], np.sin(rotation)[:, None]
    local = np.array(OUTLINE, np.float64)[None] * half[:, None, :]
    return x[:, None, :] + np.stack([cos * local[..., 0] - sin * local[..., 1],
                                     sin * local[..., 0] + cos * local[..., 1]], axis=-1)


def anchor_points(x, rotation, links):
    """World positions of the anchor points of `links` (a dict of fields: a, b, offset_a,
    offset_b) on boxes with centres x and rotations."""
    def world(boxes, offsets):
        cos, sin = np.cos(rotation[boxes]), np.sin(rotation[boxes])
        return x[boxes] + np.stack([cos * offsets[:, 0] - sin * offsets[:, 1],
                                    sin * offsets[:, 0] + cos * offsets[:, 1]], axis=-1)
    return (world(links['a'].to_numpy(), links['offset_a'].to_numpy()),
            world(links['b'].to_numpy(), links['offset_b'].to_numpy()))


def frames(sim, count, size=512):
    """`count` frames of a rollout with the current parameters (at most one per step)."""
    sim.evaluate()
    act = sim.controller.actuation.to_numpy()
    xs, rotations, half = sim.x.to_numpy(), sim.rotation.to_numpy(), sim.half_size.to_numpy()
    for t in np.unique(np.linspace(0, sim.cfg.steps - 1, count).round().astype(int)):
        canvas = Canvas(size)
        canvas.lines([[0.0, GROUND_HEIGHT]], [[1.0, GROUND_HEIGHT]], 3, (0, 0, 0))
        canvas.circles([GOAL], 5, (220, 160, 60))
        corners = box_outlines(xs[t], rotations[t], half)
        starts, ends = corners.reshape(-1, 2), np.roll(corners, -1, axis=1).reshape(-1, 2)
        colors = np.tile(np.array([[40, 40, 40]], np.uint8), (sim.n_boxes, 4, 1))
        colors[sim.head] = (205, 50, 75)
        canvas.lines(starts, ends, 2, colors.reshape(-1, 3))
        if sim.n_joints:
            a, b = anchor_points(xs[t], rotations[t], sim.joints)
            canvas.lines(a[:sim.n_joints], b[:sim.n_joints], 7, (0, 0, 0))
        if sim.n_springs:
            a, b = anchor_points(xs[t], rotations[t], sim.springs)
            canvas.lines(a, b, 4, color_map(act[max(t - 1, 0), :sim.n_springs]))
        yield canvas.image
