"""Smoke's frames: the density over the rollout (left) next to the target (right)."""
import numpy as np

from sims.render import next_to_target


def frames(sim, count=50, size=256):
    """About `count` frames of a rollout with the current parameters, the last one held."""
    sim.evaluate()
    steps = sim.cfg.steps
    vmax = max(1.0, float(sim.target.data.max()))
    times = np.unique(np.linspace(0, steps, min(count, steps + 1)).round().astype(int))
    yield from next_to_target(lambda t: sim.smoke.data[t], times, sim.target.data, size,
                              cmap='magma', vmin=0, vmax=vmax)
