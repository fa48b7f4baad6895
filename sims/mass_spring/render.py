"""Mass-spring frames: a robot (actuated springs colored by their actuation, the head red)
walking towards the goal, or the triangle at its wall."""
import numpy as np

from sims.render import Canvas, color_map

from .scene import GOAL, GROUND_HEIGHT, HEAD, TRIANGLE_WALL


def frames(sim, count=80, size=512):
    """`count` frames of a rollout with the current parameters (at most one per step)."""
    sim.evaluate()
    x = sim.x.to_numpy()
    a, b = sim.anchor_a.to_numpy(), sim.anchor_b.to_numpy()
    actuated = sim.amplitude.to_numpy() != 0
    act = None if sim.controller is None else sim.controller.actuation.to_numpy()
    for t in np.unique(np.linspace(0, sim.cfg.steps - 1, count).round().astype(int)):
        canvas = Canvas(size)
        if act is None:
            draw_triangle(canvas, x[t], a, b)
        else:
            draw_robot(canvas, x[t], a, b, actuated, act[max(t - 1, 0), :sim.n_springs])
        yield canvas.image


def draw_triangle(canvas, x, a, b):
    canvas.lines([[TRIANGLE_WALL, 0]], [[TRIANGLE_WALL, 1]], 3, (0, 0, 0))
    canvas.lines(x[a], x[b], 4, (50, 190, 120))
    canvas.circles(x, 8, (60, 75, 65))


def draw_robot(canvas, x, a, b, actuated, act):
    """The masses x, the springs from a to b, `act` the actuation of every spring."""
    canvas.lines([[0, GROUND_HEIGHT]], [[1, GROUND_HEIGHT]], 3, (0, 0, 0))
    canvas.circles([GOAL], 5, (220, 160, 60))
    passive = ~actuated
    canvas.lines(x[a[passive]], x[b[passive]], 2, (34, 34, 34))
    canvas.lines(x[a[actuated]], x[b[actuated]], 4, color_map(act[actuated]))
    colors = np.tile(np.array([[100, 150, 150]], np.uint8), (len(x), 1))
    colors[HEAD] = (205, 50, 75)
    canvas.circles(x, 6, colors)
