"""Wave's frames: the height field over the rollout (left) next to the target (right)."""
import numpy as np

from sims.render import next_to_target


def frames(sim, count=64, size=256):
    """About `count` frames of a rollout with the current parameters, the last one held."""
    sim.evaluate()
    steps = sim.cfg.steps
    target = sim.target.data
    vmax = float(np.abs(target).max()) or 1.0
    times = np.unique(np.linspace(0, steps - 1, min(count, steps)).round().astype(int))
    yield from next_to_target(sim.heights, times, target, size, cmap='RdBu_r', vmin=-vmax, vmax=vmax)
