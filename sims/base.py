"""What every simulator provides to the shared training loop, command line and renderer.

A simulator is a subclass of `Simulation` with
- `defaults`: its full configuration (DiffTaichi's scene sizes and constants); every key
  becomes a command-line flag (`--steps 100`, `--toi/--no-toi`, `--controller mlp`);
- `quick`: overrides for `--quick`, a small configuration for tests;
- `build()`: allocate fields and define kernels (called once, after `ti.init`);
- `parameters()`: the fields that training updates;
- `initialize(rng)`: their initial values;
- `forward()`: run the rollout and write the scalar field `self.loss`;
- `render_frames()`: images (H x W x 3 uint8) of a rollout with the current parameters;
- `summary`: one line for `python -m sims`; `choices`: the values of keys that take few.

`config()` refuses values out of range (LIMITS below) with a message naming the flag.

`loss_and_grad()` records `forward()` on a tape; simulators with checkpointing override it.
`forward()` is captured (`ti.capture`): the first rollout records its launches, later ones
replay them natively. It must therefore launch kernels only - no field access from
Python (a CaptureError says where) - or set `capture_forward = False`.
"""
import math
from types import SimpleNamespace

import numpy as np

import controllers
import engine as ti

from . import optimizers
from .runs import save_arrays

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
FLOAT_TYPES = ('f32', 'f64')


def at_least(low):
    return lambda v: v >= low, f'at least {low}'


_POSITIVE = (lambda v: v > 0, 'positive')
_NON_NEGATIVE = at_least(0)

# The valid values of configuration keys, for every simulator that has the key (a
# simulator's `limits` add to them). A value outside them would fail deep inside a kernel
# or train nothing, so config() refuses it.
LIMITS = dict(
    iters=at_least(1), seed=_NON_NEGATIVE, lr=_POSITIVE, clip=_POSITIVE, steps=at_least(1),
    dt=_POSITIVE, n_grid=at_least(2), hidden=at_least(1), frames=at_least(1),
    n_waves=_NON_NEGATIVE, n_sin_waves=at_least(1), checkpoint=_NON_NEGATIVE,
    density=at_least(1), layers=at_least(1), n=at_least(1), seg_size=at_least(1),
    jacobi_iters=at_least(1), bound=at_least(1), E=_POSITIVE, p_vol=_POSITIVE,
    radius=_POSITIVE, rho=_POSITIVE, eps=_POSITIVE, c=_POSITIVE, init_scale=_POSITIVE,
    damping=_NON_NEGATIVE, friction=_NON_NEGATIVE, penalty=_NON_NEGATIVE, alpha=_NON_NEGATIVE,
    elasticity=(lambda v: 0 <= v <= 1, 'between 0 and 1'),
    nu=(lambda v: 0 <= v < 0.5, 'in [0, 0.5)'),
)


def flag(key):
    return '--' + key.replace('_', '-')


class ParametersMismatch(ValueError):
    """A parameters file whose arrays do not fit this simulator's configuration."""


class Simulation:
    name = 'simulation'
    summary = ''        # one line for `python -m sims`
    defaults = {}
    quick = {}
    choices = {}        # key -> the values it may take (besides fp, optimizer, controller)
    limits = {}         # key -> (test, text), besides LIMITS
    capture_forward = True

    def __init__(self, cfg):
        self.cfg = cfg
        self.build()
        controller = getattr(self, 'controller', None)
        if getattr(controller, 'drives_rollout', False) and not hasattr(self, 'state_fields'):
            raise ValueError(f'--controller {self.cfg.controller} drives the rollout step by step; {self.name} '
                             f'does not name its state for it (state_fields()): use mass_spring')
        capturable = self.capture_forward and getattr(getattr(self, 'controller', None), 'capturable', True)
        self.rollout_forward = ti.capture(self.forward) if capturable else self.forward

    @classmethod
    def all_choices(cls):
        values = vars(cls.config_unchecked())
        found = dict(fp=FLOAT_TYPES, optimizer=tuple(optimizers.OPTIMIZERS), **cls.choices)
        if 'controller' in values:
            found['controller'] = tuple(controllers.available(stepwise=hasattr(cls, 'state_fields')))
        return found

    @classmethod
    def config_unchecked(cls, quick=False):
        return SimpleNamespace(**{**COMMON_DEFAULTS, **cls.defaults, **(cls.quick if quick else {})})

    @classmethod
    def config(cls, quick=False, **overrides):
        values = vars(cls.config_unchecked(quick))
        unknown = set(overrides) - set(values)
        if unknown:
            raise ValueError(f'{cls.name}: unknown configuration keys {sorted(unknown)}; '
                             f'known: {sorted(values)}')
        values.update({k: v for k, v in overrides.items() if v is not None})
        cls.check(values)
        return SimpleNamespace(**values)

    @classmethod
    def check(cls, values):
        """ValueError naming the flag of the first value that is out of its range."""
        choices = cls.all_choices()
        for key, value in values.items():
            if key in choices and value not in choices[key]:
                raise ValueError(f'{flag(key)} must be one of {", ".join(map(str, choices[key]))}, got {value!r}')
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f'{flag(key)} must be a finite number, got {value!r}')
            test, text = {**LIMITS, **cls.limits}.get(key, (None, None))
            if test is not None and value is not None and not isinstance(value, bool) and not test(value):
                raise ValueError(f'{flag(key)} must be {text}, got {value!r}')

    @classmethod
    def create(cls, quick=False, threads=None, **overrides):
        """Start a fresh engine program and build the simulator in it."""
        cfg = cls.config(quick, **overrides)
        ti.init(default_fp=getattr(ti, cfg.fp), cpu_max_num_threads=threads, random_seed=cfg.seed)
        sim = cls(cfg)
        sim.quick, sim.threads = quick, threads        # what a run folder records
        sim.rng = np.random.default_rng(cfg.seed)      # kept: a checkpoint saves its state
        sim.initialize(sim.rng)
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
        actuation at t and `step_kernel(t)`, which advances t to t + 1 (sims/controlled.py
        builds the controller and the kernel of the first observation)."""
        if self.observe_initial is not None:
            self.observe_initial()
        compute, step = self.controller.compute, self.step_kernel
        for t in range(self.cfg.steps - 1):
            compute(t)
            step(t)

    def make_optimizer(self):
        """The optimizer of the configuration over parameters() (the controller's own, for a
        controller that brings one: controllers/torch.py)."""
        c, controller = self.cfg, getattr(self, 'controller', None)
        if hasattr(controller, 'optimizer'):
            return controller.optimizer(c.optimizer, lr=c.lr, clip=c.clip)
        return optimizers.make(c.optimizer, self.parameters(), lr=c.lr, clip=c.clip)

    def loss_and_grad(self):
        """Run forward() on a tape; returns the loss, leaves d loss / d param in param.grad
        (or the controller's own rollout, for one that drives it: controllers/torch.py)."""
        if getattr(getattr(self, 'controller', None), 'drives_rollout', False):
            return self.controller.loss_and_grad(self)
        with ti.ad.Tape(self.loss):
            self.rollout_forward()
        return float(self.loss[None])

    def evaluate(self):
        """The loss without gradients."""
        self.loss[None] = 0
        self.rollout_forward()
        return float(self.loss[None])

    def save_parameters(self, path):
        """params.npz (arr_0, arr_1, ...), replaced atomically."""
        save_arrays(path, [p.to_numpy() for p in self.parameters()])

    def load_parameters(self, path):
        """Set the parameters from the arr_<i> arrays of an .npz (params.npz or a checkpoint)."""
        with np.load(path) as saved:
            arrays = [saved[f'arr_{i}'] for i in range(sum(k.startswith('arr_') for k in saved.files))]
        params = self.parameters()
        if len(arrays) != len(params):
            raise ParametersMismatch(f'{path} holds {len(arrays)} arrays, {self.name} has {len(params)} parameters '
                             f'(trained with another configuration?)')
        for i, (p, a) in enumerate(zip(params, arrays)):
            if a.shape != p.data.shape:
                raise ParametersMismatch(f'{path}: parameter {i} has shape {a.shape}, {self.name} has {p.data.shape} '
                                 f'(trained with another configuration?)')
        for p, a in zip(params, arrays):
            p.from_numpy(a.astype(p.data.dtype))
