"""FEM's frames: the mesh (actuated triangles colored by their actuation), the centre of
mass (red) and the target (orange)."""
import numpy as np

from sims.render import Canvas, color_map

from .scene import GROUND


def frames(sim, size=512):
    """`frames` (the configuration's) frames of a rollout with the current parameters."""
    sim.evaluate()
    c = sim.cfg
    x = sim.x.to_numpy()
    com = sim.com.to_numpy()
    act = sim.controller.actuation.to_numpy()
    tri, actuated = sim.triangles, sim.actuators >= 0
    edges = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])
    for t in np.unique(np.linspace(0, c.steps - 1, c.frames).round().astype(int)):
        canvas = Canvas(size)
        canvas.image[int((1 - GROUND) * size):] = (200, 200, 200)
        colors = np.tile(np.array([[120, 160, 200]], np.uint8), (len(tri), 1))
        colors[actuated] = color_map(act[max(t - 1, 0), sim.actuators[actuated]])
        canvas.triangles(x[t][tri], colors)
        canvas.lines(x[t][edges[:, 0]], x[t][edges[:, 1]], 1, (40, 40, 40))
        canvas.circles([[c.target_x, c.target_y]], 6, (220, 160, 60))
        canvas.circles(com[t], 4, (200, 40, 60))
        yield canvas.image
