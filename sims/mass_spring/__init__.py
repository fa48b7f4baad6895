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
import math

import numpy as np

import controllers
import engine as ti
from sims.base import Simulation, at_least, zero_fields
from sims.render import Canvas, color_map

from . import robots

GROUND_HEIGHT = 0.1
GRAVITY = -4.8
GOAL = (0.9, 0.2)
OBSERVATION_SCALE = 0.05
SPRING_OMEGA = 10.0
HEAD = 0

# The triangle scene's own defaults: they replace the robot's unless given explicitly.
TRIANGLE = dict(steps=1024, dt=0.001, damping=20.0, iters=25, optimizer='gd', lr=5.0, clip=None)
TRIANGLE_WALL = 0.4
TRIANGLE_FRICTION = 0.01
TRIANGLE_TARGET_AREA = 0.1


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
        self.robot = robots.triangle() if c.scene == 'triangle' else robots.ROBOTS[c.robot]()
        geometry = self.robot.arrays()
        self.n_objects, self.n_springs = len(geometry['x0']), len(geometry['rest'])
        self.initial_rest = geometry['rest']
        n, ns, steps = self.n_objects, self.n_springs, c.steps

        self.x = ti.Vector.field(2, float, shape=(steps, n), needs_grad=True)
        self.v = ti.Vector.field(2, float, shape=(steps, n), needs_grad=True)
        # velocity impulses (robot) or forces (triangle) from the springs, per step
        self.v_inc = ti.Vector.field(2, float, shape=(steps, n), needs_grad=True)
        self.anchor_a = ti.field(ti.i32, shape=ns)
        self.anchor_b = ti.field(ti.i32, shape=ns)
        self.rest = ti.field(float, shape=ns, needs_grad=c.scene == 'triangle')
        self.stiffness = ti.field(float, shape=ns)
        self.amplitude = ti.field(float, shape=ns)
        self.loss = ti.field(float, shape=(), needs_grad=True)

        self.x.fill(0)
        self.v.fill(0)

        self.x.data[0] = geometry['x0']
        for name in ('anchor_a', 'anchor_b', 'rest', 'stiffness', 'amplitude'):
            getattr(self, name).from_numpy(geometry[name])

        if c.scene == 'triangle':
            self.controller = None
            self._build_triangle()
        else:
            self.controller = controllers.make(
                c.controller, n_obs=4 * n + 2, n_act=ns, steps=steps, dt=c.dt,
                omega=SPRING_OMEGA, n_waves=c.n_waves, hidden=c.hidden)
            self._build_robot()

    def _build_robot(self):
        c = self.cfg
        n, ns, dt, toi = self.n_objects, self.n_springs, c.dt, bool(c.toi)
        x, v, v_inc, loss = self.x, self.v, self.v_inc, self.loss
        anchor_a, anchor_b, rest, stiffness, amplitude = (
            self.anchor_a, self.anchor_b, self.rest, self.stiffness, self.amplitude)
        act, obs = self.controller.actuation, self.controller.observation
        observe = self.controller.uses_observation
        decay = math.exp(-dt * c.damping)
        scale, inv_n = OBSERVATION_SCALE, 1.0 / n
        goal = ti.Vector(list(GOAL))
        last = c.steps - 1

        @ti.func
        def write_observation(t):
            center = ti.Vector([0.0, 0.0])
            for i in ti.static(range(n)):
                center += x[t, i]
            center *= inv_n
            for i in range(n):
                offset = x[t, i] - center
                obs[t, 4 * i] = offset[0] * scale
                obs[t, 4 * i + 1] = offset[1] * scale
                obs[t, 4 * i + 2] = v[t, i][0] * scale
                obs[t, 4 * i + 3] = v[t, i][1] * scale
            to_goal = goal - center
            obs[t, 4 * n] = to_goal[0]
            obs[t, 4 * n + 1] = to_goal[1]

        @ti.func
        def advance(t, i):
            """Mass i from step t - 1 to step t."""
            old_v = decay * v[t - 1, i] + ti.Vector([0.0, dt * GRAVITY]) + v_inc[t, i]
            old_x = x[t - 1, i]
            new_v = old_v
            new_x = old_x + dt * old_v
            if ti.static(toi):
                impact = 0.0
                if new_x[1] < GROUND_HEIGHT and old_v[1] < -1e-4:
                    impact = -(old_x[1] - GROUND_HEIGHT) / old_v[1]
                    new_v = ti.Vector([0.0, 0.0])
                new_x = old_x + impact * old_v + (dt - impact) * new_v
            else:
                if old_x[1] - GROUND_HEIGHT < 0 and old_v[1] < 0:
                    new_v = ti.Vector([0.0, 0.0])   # friction projection: the mass stops
                new_x = old_x + dt * new_v
            v[t, i] = new_v
            x[t, i] = new_x

        @ti.kernel
        def observe_initial():
            for _ in range(1):
                write_observation(0)

        @ti.kernel
        def step(t: ti.i32):
            for s in range(ns):
                a, b = anchor_a[s], anchor_b[s]
                d = x[t, a] - x[t, b]
                length = d.norm() + 1e-4
                target = rest[s] * (1.0 + amplitude[s] * act[t, s])
                impulse = dt * (length - target) * stiffness[s] / length * d
                ti.atomic_add(v_inc[t + 1, a], -impulse)
                ti.atomic_add(v_inc[t + 1, b], impulse)
            for i in range(n):
                advance(t + 1, i)
            if ti.static(observe):
                for _ in range(1):
                    write_observation(t + 1)

        @ti.kernel
        def compute_loss():
            loss[None] = -x[last, HEAD][0]

        self.observe_initial = observe_initial if observe else None
        self.step_kernel, self.compute_loss = step, compute_loss

    def _build_triangle(self):
        c = self.cfg
        n, ns, dt = self.n_objects, self.n_springs, c.dt
        x, v, force, loss = self.x, self.v, self.v_inc, self.loss
        anchor_a, anchor_b, rest, stiffness = self.anchor_a, self.anchor_b, self.rest, self.stiffness
        decay = math.exp(-dt * c.damping)
        last = c.steps - 1

        @ti.kernel
        def step(t: ti.i32):
            """Spring forces at t, then the masses from t to t + 1 (unit mass)."""
            for s in range(ns):
                a, b = anchor_a[s], anchor_b[s]
                d = x[t, a] - x[t, b]
                length = d.norm() + 1e-4
                f = (length - rest[s]) * stiffness[s] * d / length
                ti.atomic_add(force[t + 1, a], -f)
                ti.atomic_add(force[t + 1, b], f)
            for i in range(n):
                new_v = decay * v[t, i] + dt * force[t + 1, i]
                new_x = x[t, i] + dt * new_v
                if new_x[0] > TRIANGLE_WALL and new_v[0] > 0:
                    # friction projection at the wall: the normal velocity goes, the tangential shrinks
                    if new_v[1] > 0:
                        new_v[1] -= ti.min(new_v[1], TRIANGLE_FRICTION * new_v[0])
                    if new_v[1] < 0:
                        new_v[1] += ti.min(-new_v[1], TRIANGLE_FRICTION * new_v[0])
                    new_v[0] = 0.0
                v[t + 1, i] = new_v
                x[t + 1, i] = new_x

        @ti.kernel
        def compute_loss():
            e01 = x[last, 0] - x[last, 1]
            e02 = x[last, 0] - x[last, 2]
            area = ti.abs(0.5 * (e01[0] * e02[1] - e01[1] * e02[0]))
            loss[None] = (area - TRIANGLE_TARGET_AREA) ** 2

        self.observe_initial = None
        self.step_kernel, self.compute_loss = step, compute_loss

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

    def forward(self):
        zero_fields(self.v_inc)      # the spring impulses accumulate with atomic adds
        if self.controller is None:
            for t in range(self.cfg.steps - 1):
                self.step_kernel(t)
        else:
            self.run_controlled()
        self.compute_loss()

    # --- rendering ----------------------------------------------------------------
    def render_frames(self, frames=80, size=512):
        self.evaluate()
        c = self.cfg
        x = self.x.to_numpy()
        a, b = self.anchor_a.to_numpy(), self.anchor_b.to_numpy()
        actuated = self.amplitude.to_numpy() != 0
        act = None if self.controller is None else self.controller.actuation.to_numpy()
        for t in np.unique(np.linspace(0, c.steps - 1, frames).round().astype(int)):
            canvas = Canvas(size)
            if self.controller is None:
                canvas.lines([[TRIANGLE_WALL, 0]], [[TRIANGLE_WALL, 1]], 3, (0, 0, 0))
                canvas.lines(x[t, a], x[t, b], 4, (50, 190, 120))
                canvas.circles(x[t], 8, (60, 75, 65))
            else:
                canvas.lines([[0, GROUND_HEIGHT]], [[1, GROUND_HEIGHT]], 3, (0, 0, 0))
                canvas.circles([GOAL], 5, (220, 160, 60))
                passive = ~actuated
                canvas.lines(x[t, a[passive]], x[t, b[passive]], 2, (34, 34, 34))
                colors = color_map(act[max(t - 1, 0), :self.n_springs][actuated])
                canvas.lines(x[t, a[actuated]], x[t, b[actuated]], 4, colors)
                colors = np.tile(np.array([[100, 150, 150]], np.uint8), (self.n_objects, 1))
                colors[HEAD] = (205, 50, 75)
                canvas.circles(x[t], 6, colors)
            yield canvas.image
