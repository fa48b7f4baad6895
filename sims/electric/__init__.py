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
import engine as ti
from sims.base import Simulation
from sims.controlled import damping_factor, make_controller, serial_observation

from . import kernels, render
from .scene import CHARGES, N_OBS, goal_path


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
        self.x = ti.Vector.field(2, float, shape=c.steps, needs_grad=True)
        self.v = ti.Vector.field(2, float, shape=c.steps, needs_grad=True)
        self.goal = ti.Vector.field(2, float, shape=c.steps)
        self.goal_v = ti.Vector.field(2, float, shape=c.steps)
        self.loss = ti.field(float, shape=(), needs_grad=True)
        self.controller = make_controller(c, N_OBS, len(CHARGES), c.omega, init_scale=c.init_scale)
        act, obs = self.controller.actuation, self.controller.observation
        observe = self.controller.uses_observation
        write_observation = kernels.observation_writer(self.x, self.v, self.goal, self.goal_v, obs)
        add_loss = kernels.loss_term(self.goal, self.loss, c.dt)
        self.step_kernel = kernels.step_kernel(self.x, self.v, act, c.dt, damping_factor(c), c.K, add_loss,
                                               write_observation, observe, c.steps)
        self.observe_initial = serial_observation(write_observation) if observe else None

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
        return render.frames(self, frames, size)
