"""Billiards (DiffTaichi's billiards.py): aim the cue ball so that the last rack ball reaches a goal.

Scene: balls of radius 0.03 on a frictionless table, a cue ball (ball 0) at (0.1, 0.5)
moving right at 0.3, and a triangular rack of `layers` = 4 rows (1 + 2 + 3 + 4 = 10 balls,
11 balls in all): ball (row i, place j) sits at (0.5 + 2 r i, 0.5 + 2 r j - 0.7 r i).
The target is the last rack ball (ball 10, drawn blue); the goal is (0.9, 0.75).

Each of the `steps - 1` = 1023 steps (dt 0.003) is one launch: for every ball i and every
other ball j whose positions *predicted at the end of the step* overlap (distance
< 2r) while they approach (relative normal velocity v_n < 0), ball i receives the
impulse -(1 + e) v_n / 2 along the contact normal (restitution e = `elasticity` = 0.8,
equal masses). Then v += impulse, x += dt v. With time of impact (`--toi`, the
default) the position is also corrected by min(toi - dt, 0) * impulse, where
toi = (distance - 2r) / min(v_n, -1e-3) is how long before the end of the step the balls
touched: the ball moves with its old velocity until the impact and with the new one
after it, so the final positions depend smoothly on the initial aim (without it they
jump by whole steps, and the gradient is wrong; see tests/test_toi_bounce.py).

Loss: |x_target(T) - goal|^2 at the last step. Parameters: the cue ball's initial
position and velocity, trained by plain gradient descent with lr 0.01 (DiffTaichi's).
"""
import engine as ti
from sims.base import Simulation

from . import kernels, render
from .scene import ball_count, rack_positions


class Billiards(Simulation):
    """Billiards: the cue ball's initial position and velocity, so that the last rack ball
    ends at the goal (--toi/--no-toi: time-of-impact position correction at collisions)."""
    name = 'billiards'
    summary = 'aim the cue ball so that the last ball of an 11-ball rack reaches a goal'
    defaults = dict(steps=1024, dt=0.003, layers=4, radius=0.03, elasticity=0.8, toi=True,
                    cue_x=0.1, cue_y=0.5, cue_vx=0.3, cue_vy=0.0, goal_x=0.9, goal_y=0.75,
                    iters=100, optimizer='gd', lr=0.01)
    # the same 3.07 s of table time in 256 steps
    quick = dict(steps=256, dt=0.012, iters=4)

    @classmethod
    def config(cls, quick=False, **overrides):
        cfg = super().config(quick, **overrides)
        if cfg.steps < 2 or cfg.layers < 1:
            raise ValueError('billiards: steps must be at least 2 and layers at least 1')
        return cfg

    def build(self):
        c = self.cfg
        self.n_balls = n = ball_count(c.layers)
        self.target_ball = n - 1
        self.x = ti.Vector.field(2, float, shape=(c.steps, n), needs_grad=True)
        self.v = ti.Vector.field(2, float, shape=(c.steps, n), needs_grad=True)
        self.init_x = ti.Vector.field(2, float, shape=(), name='init_x', needs_grad=True)
        self.init_v = ti.Vector.field(2, float, shape=(), name='init_v', needs_grad=True)
        self.loss = ti.field(float, shape=(), needs_grad=True)
        self.x.fill(0)
        self.v.fill(0)
        self.x.data[0, 1:] = rack_positions(c.layers, c.radius)

        collide = kernels.collision_impulses(self.x, self.v, n, c.dt, c.radius, c.elasticity, bool(c.toi))
        self.start = kernels.start_kernel(self.x, self.v, self.init_x, self.init_v)
        self.step_kernel = kernels.step_kernel(self.x, self.v, n, c.dt, collide)
        self.compute_loss = kernels.loss_kernel(self.x, self.loss, c.steps - 1, self.target_ball,
                                                ti.Vector([c.goal_x, c.goal_y]))

    def parameters(self):
        return [self.init_x, self.init_v]

    def initialize(self, rng):
        c = self.cfg
        self.init_x[None] = [c.cue_x, c.cue_y]
        self.init_v[None] = [c.cue_vx, c.cue_vy]

    def forward(self):
        self.start()
        for t in range(self.cfg.steps - 1):
            self.step_kernel(t)
        self.compute_loss()

    def render_frames(self, frames=64, size=384):
        return render.frames(self, frames, size)
