"""Mass-spring robots (DiffTaichi's mass_spring.py) and the spring triangle (mass_spring_simple.py).

Robot scene (`--scene robot`, `--robot 0|1|2`): point masses linked by damped springs
walk on the ground at y = 0.1 under gravity -4.8. At each step the controller (an MLP
by default, `--controller sine` for open-loop sine waves) turns the observation
(each mass's offset from the centre and velocity, both * 0.05, then goal - centre with
goal (0.9, 0.2)) into one actuation per spring; an actuated spring's target length is
rest * (1 + amplitude * actuation). Springs add velocity impulses; then each mass is
advanced by symplectic Euler with damping exp(-dt * 15). A mass that moves down below
the ground stops: without time of impact it stops for the whole step (DiffTaichi's
advance_no_toi), with `--toi` it moves until it hits the ground, then stops
(advance_toi). The loss is minus the x of the head (mass 0) at the last step. Training:
DiffTaichi's normalized gradient steps of length 0.2 (`--optimizer normalized --lr 0.2`).

Triangle scene (`--scene triangle`): three masses, three springs of stiffness 10, no
gravity, a friction wall at x = 0.4; the rest lengths are trained (lr 5, 25 iterations)
so that the final triangle's area reaches 0.1.

Each step is one launch of `step(t)` (spring impulses at t, advance to t + 1,
observation at t + 1) after the controller's launches for t.
"""
from types import SimpleNamespace

import engine as ti
from sims.base import Simulation, at_least, zero_fields
from sims.controlled import damping_factor, make_controller, serial_observation

from . import kernels, render, robots
from .scene import SPRING_OMEGA, TRIANGLE, make_robot


class MassSpring(Simulation):
    """Mass-spring robots (--robot 0|1|2, --toi, --controller mlp|sine) learn to walk right;
    --scene triangle trains the spring triangle's rest lengths instead (its own defaults:
    1024 steps, dt 0.001, damping 20, 25 iterations, lr 5, no clipping)."""
    name = 'mass_spring'
    summary = "spring robots learn to walk (MLP or sine controller), or the spring triangle's rest lengths"
    choices = dict(scene=('robot', 'triangle'), robot=tuple(robots.ROBOTS))   # checked by config()
    limits = dict(steps=at_least(2))
    defaults = dict(scene='robot', robot=0, toi=False, controller='mlp', steps=2048 // 3, dt=0.004,
                    damping=15.0, n_waves=10, hidden=32, iters=100, optimizer='normalized', lr=0.2)
    quick = dict(steps=128, iters=6, lr=0.1)

    @classmethod
    def config(cls, quick=False, **overrides):
        cfg = super().config(quick, **overrides)
        if cfg.scene == 'triangle':
            explicit = {k for k, v in overrides.items() if v is not None}
            for key, value in TRIANGLE.items():   # the full triangle is quick already
                if key not in explicit:
                    setattr(cfg, key, value)
        return cfg

    # --- building ----------------------------------------------------------------
    def build(self):
        c = self.cfg
        self.robot = make_robot(c.scene, c.robot)
        geometry = self.robot.arrays()
        self.n_objects, self.n_springs = len(geometry['x0']), len(geometry['rest'])
        self.initial_rest = geometry['rest']
        self._allocate(geometry)
        if c.scene == 'triangle':
            self.controller = None
            self._build_triangle()
        else:
            self.controller = make_controller(c, 4 * self.n_objects + 2, self.n_springs, SPRING_OMEGA)
            self._build_robot()

    def _allocate(self, geometry):
        n, ns, steps = self.n_objects, self.n_springs, self.cfg.steps
        self.x = ti.Vector.field(2, float, shape=(steps, n), needs_grad=True)
        self.v = ti.Vector.field(2, float, shape=(steps, n), needs_grad=True)
        # velocity impulses (robot) or forces (triangle) from the springs, per step
        self.v_inc = ti.Vector.field(2, float, shape=(steps, n), needs_grad=True)
        self.anchor_a = ti.field(ti.i32, shape=ns)
        self.anchor_b = ti.field(ti.i32, shape=ns)
        self.rest = ti.field(float, shape=ns, needs_grad=self.cfg.scene == 'triangle')
        self.stiffness = ti.field(float, shape=ns)
        self.amplitude = ti.field(float, shape=ns)
        self.loss = ti.field(float, shape=(), needs_grad=True)

        self.x.fill(0)
        self.v.fill(0)
        self.x.data[0] = geometry['x0']
        for name in ('anchor_a', 'anchor_b', 'rest', 'stiffness', 'amplitude'):
            getattr(self, name).from_numpy(geometry[name])
        self.springs = SimpleNamespace(anchor_a=self.anchor_a, anchor_b=self.anchor_b, rest=self.rest,
                                       stiffness=self.stiffness, amplitude=self.amplitude)

    def _build_robot(self):
        c = self.cfg
        n, ns, observe = self.n_objects, self.n_springs, self.controller.uses_observation
        act, obs = self.controller.actuation, self.controller.observation
        write_observation = kernels.observation_writer(self.x, self.v, obs, n)
        advance = kernels.robot_advancer(self.x, self.v, self.v_inc, c.dt, damping_factor(c), bool(c.toi))
        self.step_kernel = kernels.robot_step_kernel(self.x, self.v_inc, act, self.springs, n, ns, c.dt, advance,
                                                     write_observation, observe)
        self.observe_initial = serial_observation(write_observation) if observe else None
        self.compute_loss = kernels.robot_loss_kernel(self.x, self.loss, c.steps - 1)

    def _build_triangle(self):
        c = self.cfg
        self.step_kernel = kernels.triangle_step_kernel(self.x, self.v, self.v_inc, self.springs, self.n_objects,
                                                        self.n_springs, c.dt, damping_factor(c))
        self.observe_initial = None
        self.compute_loss = kernels.triangle_loss_kernel(self.x, self.loss, c.steps - 1)

    # --- the Simulation interface -------------------------------------------------
    def parameters(self):
        if self.controller is None:
            return [self.rest]
        return self.controller.parameters()

    def initialize(self, rng):
        if self.controller is None:
            self.rest.from_numpy(self.initial_rest)
        else:
            self.controller.initialize(rng)

    def state_fields(self):
        """What step_kernel(t) carries from t to t + 1 (for controllers/torch.py)."""
        return [self.x, self.v]

    def reset_accumulators(self):
        zero_fields(self.v_inc)      # the spring impulses accumulate with atomic adds

    def forward(self):
        self.reset_accumulators()
        if self.controller is None:
            for t in range(self.cfg.steps - 1):
                self.step_kernel(t)
        else:
            self.run_controlled()
        self.compute_loss()

    def render_frames(self, frames=80, size=512):
        return render.frames(self, frames, size)
