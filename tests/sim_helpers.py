"""Helpers of the simulator tests: finite-difference checks of a whole simulator's gradient."""
import numpy as np


def check_simulation_gradient(sim, entries=4, eps=1e-6, rtol=1e-4, atol=1e-9, seed=0):
    """Compare d loss / d param from `sim.loss_and_grad()` with central differences of
    `sim.evaluate()` at the largest-gradient entry and `entries - 1` random entries of
    every parameter field. Run it on a float64 simulator with a short horizon."""
    sim.loss_and_grad()
    params = sim.parameters()
    grads = [p.grad.to_numpy().astype(np.float64).reshape(-1) for p in params]
    rng = np.random.default_rng(seed)
    checked = 0
    for p, grad in zip(params, grads):
        flat = p.data.reshape(-1)             # a view: perturbs the field in place
        picks = {int(np.argmax(np.abs(grad)))} | set(rng.choice(flat.size, min(entries - 1, flat.size), replace=False).tolist())
        for k in sorted(picks):
            original = flat[k]
            flat[k] = original + eps
            plus = sim.evaluate()
            flat[k] = original - eps
            minus = sim.evaluate()
            flat[k] = original
            fd = (plus - minus) / (2 * eps)
            assert abs(grad[k] - fd) <= rtol * abs(fd) + atol, (
                f'{sim.name}: d loss / d {p.name}[{k}]: autodiff {grad[k]!r}, finite differences {fd!r}')
            checked += 1
    return checked
