"""Electric (DiffTaichi's electric.py): a charged particle steered by 8 charges towards a moving goal.

Scene: 8 fixed charges on the unit square, at (p, p), (p, 1-p), (1-p, 1-p), (1-p, p),
(0.5, 1-p), (0.5, p), (p, 0.5), (1-p, 0.5) with p = 0.1. A controller sets their
strengths g_k in [-1, 1] at every step; charge k pushes the particle with the force
K g_k r / max(|r|, 0.1)^3 (r from the charge to the particle, K = 1e-3, positive g
repels). The particle moves by symplectic Euler with damping: v <- v exp(-dt 0.2) +
dt F, x <- x + dt v (dt 0.03, 512 steps, unit mass).

The goal moves along a polyline: `steps / seg_size` = 2 segments of 256 steps between
points drawn uniformly from [0.2, 0.8]^2 (from the seed); the particle starts at rest at
the first point. Loss: the time integral of the squared distance to the goal,
sum over t = 1 .. steps-1 of dt |x(t) - goal(t)|^2.

Controller (`controllers.make`, shared with the other simulators): by default DiffTaichi's
closed-loop MLP, 8 inputs -> 64 tanh units -> 8 tanh outputs (one per charge), with no
sine-wave inputs (n_waves 0). Its inputs for the step t -> t+1 are DiffTaichi's: x(t) -
0.5, v(t), goal(t+1) - 0.5 and goal_v(t+1) - 0.5, where goal_v is the current segment's
displacement (end - start point). Unlike DiffTaichi, which feeds x and v of step t+1
before they are computed (stale values of the previous rollout), the controller sees
the state it acts on. `--controller sine` is an open-loop alternative: each charge is
tanh of a weighted sum of `n_waves` sine waves of frequency `omega` (n_waves becomes 8
unless given). `init_scale` scales the controller's initial weights (1: the shared
controllers' initialization; DiffTaichi's uniform(-0.15, 0.15) weights are close to
0.3, which starts with weaker charges and trains more slowly).

Also unlike DiffTaichi, which draws a new goal path every iteration (so its controller
learns to follow any path), the path is fixed by the seed, so that the loss is a
deterministic function of the parameters (finite-difference checks, pinned losses).
Training: gradient descent with DiffTaichi's learning rate 2e-2, the gradient clipped to
norm 1 (without clipping the first steps overshoot); 200 iterations take the loss from
0.72 to about 0.3. `--optimizer adam --lr 0.005` gets to about 0.08, less smoothly.
"""
import math

import numpy as np

import controllers
import engine as ti
from sims.base import Simulation
from sims.render import Canvas, color_map

PAD = 0.1
CHARGES = [(PAD, PAD), (PAD, 1 - PAD), (1 - PAD, 1 - PAD), (1 - PAD, PAD),
           (0.5, 1 - PAD), (0.5, PAD), (PAD, 0.5), (1 - PAD, 0.5)]
N_OBS = 8
MIN_DISTANCE = 0.1


def goal_path(steps, seg_size, rng):
    """The goal and its segment's displacement at every step, and the polyline's points."""
    segments = max(1, math.ceil(steps / seg_size))
    points = 0.2 + 0.6 * rng.random((segments + 1, 2))
    k = np.arange(steps)
    segment = np.minimum(k // seg_size, segments - 1)
    fraction = (k - segment * seg_size) / seg_size
    goal = (1 - fraction)[:, None] * points[segment] + fraction[:, None] * points[segment + 1]
    goal_v = points[segment + 1] - points[segment]
    return goal, goal_v, points


class Electric(Simulation):
    """Electric: a controller (--controller mlp|sine) sets 8 charges' strengths every step
    so that a charged particle follows a goal moving along a path."""
    name = 'electric'
    summary = 'an MLP sets 8 charges each step to steer a charged particle along a moving goal'
    defaults = dict(controller='mlp', steps=512, dt=0.03, damping=0.2, K=1e-3, seg_size=256,
                    hidden=64, n_waves=0, omega=1.0, init_scale=1.0,
                    iters=200, optimizer='gd', lr=2e-2, clip=1.0)
    quick = dict(steps=128, seg_size=64, hidden=16, dt=0.06, iters=4, lr=0.1)

    @classmethod
    def config(cls, quick=False, **overrides):
        cfg = super().config(quick, **overrides)
        if cfg.steps < 2 or cfg.seg_size < 1:
            raise ValueError('electric: steps must be at least 2 and seg_size at least 1')
        if cfg.controller == 'sine' and overrides.get('n_waves') is None and cfg.n_waves == 0:
            cfg.n_waves = 8         # the open-loop controller needs waves
        return cfg

    def build(self):
        c = self.cfg
        steps, dt, n_charges = c.steps, c.dt, len(CHARGES)
        self.x = ti.Vector.field(2, float, shape=steps, needs_grad=True)
        self.v = ti.Vector.field(2, float, shape=steps, needs_grad=True)
        self.goal = ti.Vector.field(2, float, shape=steps)
        self.goal_v = ti.Vector.field(2, float, shape=steps)
        self.loss = ti.field(float, shape=(), needs_grad=True)
        self.controller = controllers.make(
            c.controller, n_obs=N_OBS, n_act=n_charges, steps=steps, dt=dt,
            omega=c.omega, n_waves=c.n_waves, hidden=c.hidden, init_scale=c.init_scale)
        x, v, goal, goal_v, loss = self.x, self.v, self.goal, self.goal_v, self.loss
        act, obs = self.controller.actuation, self.controller.observation
        observe = self.controller.uses_observation
        decay, K = math.exp(-dt * c.damping), c.K

        @ti.func
        def write_observation(t):
            """The controller's inputs for the step t -> t + 1."""
            obs[t, 0] = x[t][0] - 0.5
            obs[t, 1] = x[t][1] - 0.5
            obs[t, 2] = v[t][0]
            obs[t, 3] = v[t][1]
            obs[t, 4] = goal[t + 1][0] - 0.5
            obs[t, 5] = goal[t + 1][1] - 0.5
            obs[t, 6] = goal_v[t + 1][0] - 0.5
            obs[t, 7] = goal_v[t + 1][1] - 0.5

        @ti.kernel
        def observe_initial():
            for _ in range(1):
                write_observation(0)

        @ti.kernel
        def step(t: ti.i32):
            """The particle from t to t + 1 under the charges act[t, :], its loss term, and
            the observation at t + 1."""
            for _ in range(1):
                force = ti.Vector([0.0, 0.0])
                for k in ti.static(range(n_charges)):
                    r = x[t] - ti.Vector(list(CHARGES[k]))
                    distance = ti.max(r.norm(), MIN_DISTANCE)
                    force += K * act[t, k] / (distance * distance * distance) * r
                new_v = decay * v[t] + dt * force
                new_x = x[t] + dt * new_v
                v[t + 1] = new_v
                x[t + 1] = new_x
                d = new_x - goal[t + 1]
                loss[None] += dt * d.dot(d)
                if ti.static(observe):
                    if t + 2 < steps:
                        write_observation(t + 1)

        self.observe_initial = observe_initial if observe else None
        self.step_kernel = step

    def parameters(self):
        return self.controller.parameters()

    def initialize(self, rng):
        c = self.cfg
        goal, goal_v, self.points = goal_path(c.steps, c.seg_size, rng)
        self.goal.from_numpy(goal)
        self.goal_v.from_numpy(goal_v)
        self.x.fill(0)
        self.v.fill(0)
        self.x.data[0] = self.points[0]
        self.controller.initialize(rng)

    def forward(self):
        self.run_controlled()

    def render_frames(self, frames=80, size=384):
        self.evaluate()
        c = self.cfg
        x, goal = self.x.to_numpy(), self.goal.to_numpy()
        act = self.controller.actuation.to_numpy()
        charges = np.array(CHARGES)
        for t in np.unique(np.linspace(1, c.steps - 1, frames).round().astype(int)):
            canvas = Canvas(size, background=(60, 115, 63))
            canvas.lines(self.points[:-1], self.points[1:], 1, (120, 160, 120))
            # the charges colored by strength: blue attracts (-1), red repels (+1)
            canvas.circles(charges, 12, color_map(act[t - 1, :len(CHARGES)]))
            canvas.circles(x[max(0, t - 64):t + 1], 1.5, (240, 200, 200))
            canvas.circles(goal[t], 5, (51, 68, 204))
            canvas.circles(x[t], 7, (242, 5, 48))
            yield canvas.image
