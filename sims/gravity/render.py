"""Gravity's frames: the particles (particle 0 blue, with its trail) and the target (red)."""
import numpy as np

from sims.render import Canvas


def frames(sim):
    """About 64 frames of a rollout with the current parameters."""
    sim.evaluate()
    c = sim.cfg
    trail = []
    for t in range(0, c.steps + 1, max(1, c.steps // 64)):
        canvas = Canvas(384)
        trail.append(sim.x.data[t, 0].copy())
        canvas.circles([c.target_x, c.target_y], 7, (220, 60, 60))
        canvas.circles(np.array(trail), 1.5, (120, 120, 200))
        canvas.circles(sim.x.data[t], 5, (40, 40, 40))
        canvas.circles(sim.x.data[t, :1], 5, (40, 90, 220))
        yield canvas.image
