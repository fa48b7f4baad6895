"""The frames of the 2D robot: its particles over the floor line."""
from ..mpm.render import particle_frames
from ..render import Canvas


def render_frames(sim):
    floor = sim.cfg.bound / sim.cfg.n_grid
    for positions, colors in particle_frames(sim):
        canvas = Canvas(512)
        canvas.lines([0.0, floor], [1.0, floor], 3, (0, 0, 0))
        canvas.circles(positions, 1.5, colors)
        yield canvas.image
