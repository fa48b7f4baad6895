"""Electric's frames: the charges colored by strength, the particle's trail, the goal."""
import numpy as np

from sims.render import Canvas, color_map

from .scene import CHARGES


def frames(sim, count=80, size=384):
    """`count` frames of a rollout with the current parameters (at most one per step)."""
    sim.evaluate()
    x, goal = sim.x.to_numpy(), sim.goal.to_numpy()
    act = sim.controller.actuation.to_numpy()
    charges = np.array(CHARGES)
    for t in np.unique(np.linspace(1, sim.cfg.steps - 1, count).round().astype(int)):
        canvas = Canvas(size, background=(60, 115, 63))
        canvas.lines(sim.points[:-1], sim.points[1:], 1, (120, 160, 120))
        # the charges colored by strength: blue attracts (-1), red repels (+1)
        canvas.circles(charges, 12, color_map(act[t - 1, :len(CHARGES)]))
        canvas.circles(x[max(0, t - 64):t + 1], 1.5, (240, 200, 200))
        canvas.circles(goal[t], 5, (51, 68, 204))
        canvas.circles(x[t], 7, (242, 5, 48))
        yield canvas.image
