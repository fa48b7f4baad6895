"""The gradient-descent loop shared by every simulator."""
import json
import os
import time

from . import optimizers
from .render import plot_losses


def train(sim, iters=None, out=None, log=print):
    """Train `sim` for `iters` iterations; returns the per-iteration records.

    Each record: iteration, loss (before the update), gradient norm (before
    clipping), seconds for forward + backward + update. With `out`, writes
    losses.json, loss_curve.png and params.npz (the trained parameters) there."""
    cfg = sim.cfg
    iters = cfg.iters if iters is None else iters
    optimizer = optimizers.make(cfg.optimizer, sim.parameters(), lr=cfg.lr, clip=cfg.clip)
    records = []
    for it in range(iters):
        start = time.perf_counter()
        loss = sim.loss_and_grad()
        norm = optimizer.step()
        seconds = time.perf_counter() - start
        records.append(dict(iteration=it, loss=loss, grad_norm=norm, seconds=seconds))
        log(f'iter {it:4d}  loss {loss:+.6e}  grad_norm {norm:.4e}  {seconds:.3f} s')
    if out:
        save_results(sim, records, out)
    return records


def save_results(sim, records, out):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, 'losses.json'), 'w') as f:
        json.dump(dict(simulator=sim.name, config=vars(sim.cfg), iterations=records), f, indent=1)
    plot_losses([r['loss'] for r in records], os.path.join(out, 'loss_curve.png'), f'{sim.name}: training loss')
    sim.save_parameters(os.path.join(out, 'params.npz'))
