"""What the MLS-MPM robots draw: the particles of each frame, coloured by actuation."""
import numpy as np

from ..render import color_map

PASSIVE = (40, 40, 40)      # dark grey


def particle_frames(sim):
    """(positions, colours) of `sim.cfg.frames` or so frames of a rollout with the current
    parameters, from step 0 (the scene) to the last; an actuated particle is coloured by
    the actuation that led to the frame (darkened: zero is mid grey), a passive one dark
    grey."""
    c = sim.cfg
    stride = max(1, sim.n_advance // max(1, c.frames))
    times = list(range(0, sim.n_advance + 1, stride))
    captured = sim.positions_at(times)
    captured[0] = sim.scene_x
    actuation = sim.controller.actuation.to_numpy()
    ids = sim.scene_actuators
    active = ids >= 0
    for t in times:
        colors = np.empty((sim.n_particles, 3), np.uint8)
        colors[...] = PASSIVE
        colors[active] = color_map(actuation[max(t - 1, 0)][ids[active]]) * 0.75
        yield captured[t], colors
