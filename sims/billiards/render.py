"""Billiards' frames: the balls (the cue ball grey, the target ball blue) and the goal."""
import numpy as np

from sims.render import Canvas


def frames(sim, count=64, size=384):
    """`count` frames of a rollout with the current parameters (at most one per step)."""
    sim.evaluate()
    c = sim.cfg
    x = sim.x.to_numpy()
    pixels = c.radius * size
    colors = np.tile(np.array([[242, 5, 48]], np.uint8), (sim.n_balls, 1))
    colors[0] = (204, 204, 204)
    colors[sim.target_ball] = (51, 68, 204)
    for t in np.unique(np.linspace(0, c.steps - 1, count).round().astype(int)):
        canvas = Canvas(size, background=(60, 115, 63))
        canvas.circles([c.goal_x, c.goal_y], pixels / 2, (0, 0, 0))
        canvas.circles(x[t], pixels, colors)
        yield canvas.image
