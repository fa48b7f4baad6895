"""What every simulator provides to the shared training loop, command line and renderer.

A simulator is a subclass of `Simulation` with
- `defaults`: its full configuration (DiffTaichi's scene sizes and constants); every key
  becomes a command-line flag (`--steps 100`, `--toi/--no-toi`, `--controller mlp`);
- `quick`: overrides for `--quick`, a small configuration for tests;
- `build()`: allocate fields and define kernels (called once, after `ti.init`);
- `parameters()`: the fields that training updates;
- `initialize(rng)`: their initial values;
- `forward()`: run the rollout and write the scalar field `self.loss`;
- `render_frames()`: images (H x W x 3 uint8) of a rollout with the current parameters.

`loss_and_grad()` records `forward()` on a tape; simulators with checkpointing override it.
`forward()` is captured (`ti.capture`): the first rollout records its launches, later ones
replay them natively. It must therefore launch kernels only - no field access from
Python (a CaptureError says where) - or set `capture_forward = False`.
"""
from types import SimpleNamespace

import numpy as np

import engine as ti

@ti.ad.no_grad
@ti.kernel
def _zero(f: ti.template()):
    for I in ti.grouped(f):
        f[I] = 0


def zero_fields(*fields):
    """Zero fields in kernels (a captured forward pass may not touch fields from Python).
    Off the tape: clearing accumulators before a rollout has no gradient."""
    for f in fields:
        _zero(f)


COMMON_DEFAULTS = dict(iters=10, seed=0, fp='f32', optimizer='gd', lr=0.1, clip=None)


class Simulation:
    name = 'simulation'
    defaults = {}
    quick = {}
    capture_forward = True

    def __init__(self, cfg):
        self.cfg = cfg
        self.build()
        self.rollout_forward = ti.capture(self.forward) if self.capture_forward else self.forward

    @classmethod
    def config(cls, quick=False, **overrides):
        values = {**COMMON_DEFAULTS, **cls.defaults, **(cls.quick if quick else {})}
        unknown = set(overrides) - set(values)
        if unknown:
            raise ValueError(f'{cls.name}: unknown configuration keys {sorted(unknown)}; '
                             f'known: {sorted(values)}')
        values.update({k: v for k, v in overrides.items() if v is not None})
        return SimpleNamespace(**values)

    @classmethod
    def create(cls, quick=False, threads=None, **overrides):
        """Start a fresh engine program and build the simulator in it."""
        cfg = cls.config(quick, **overrides)
        ti.init(default_fp=getattr(ti, cfg.fp), cpu_max_num_threads=threads, random_seed=cfg.seed)
        sim = cls(cfg)
        sim.initialize(np.random.default_rng(cfg.seed))
        return sim

    # --- what a simulator implements --------------------------------------------
    def build(self):
        raise NotImplementedError

    def parameters(self):
        raise NotImplementedError

    def initialize(self, rng):
        raise NotImplementedError

    def forward(self):
        raise NotImplementedError

    def render_frames(self):
        raise NotImplementedError

    # --- shared -------------------------------------------------------------------
    observe_initial = None      # a controlled simulator's kernel writing the observation at t = 0

    def run_controlled(self):
        """A controlled rollout: the observation at 0, then for each step the controller's
        actuation at t and `step_kernel(t)`, which advances t to t + 1."""
        if self.observe_initial is not None:
            self.observe_initial()
        compute, step = self.controller.compute, self.step_kernel
        for t in range(self.cfg.steps - 1):
            compute(t)
            step(t)

    def loss_and_grad(self):
        """Run forward() on a tape; returns the loss, leaves d loss / d param in param.grad."""
        with ti.ad.Tape(self.loss):
            self.rollout_forward()
        return float(self.loss[None])

    def evaluate(self):
        """The loss without gradients."""
        self.loss[None] = 0
        self.rollout_forward()
        return float(self.loss[None])

    def save_parameters(self, path):
        np.savez(path, *[p.to_numpy() for p in self.parameters()])

    def load_parameters(self, path):
        with np.load(path) as saved:
            arrays = [saved[f'arr_{i}'] for i in range(len(saved.files))]
        params = self.parameters()
        if len(arrays) != len(params):
            raise ValueError(f'{path} holds {len(arrays)} arrays, {self.name} has {len(params)} parameters')
        for p, a in zip(params, arrays):
            p.from_numpy(a.astype(p.data.dtype))
