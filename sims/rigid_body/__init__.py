"""Rigid-body robots (DiffTaichi's rigid_body.py with robot_config.py) learn to walk to a goal.

A robot is a set of 2D boxes (unit density: mass 4wh, moment of inertia 4/3 wh(w^2 + h^2)
for half sizes w, h) joined by springs and joints (`robots.py`, `--robot 0|1|2|3`). The
state per box and time step is its centre x, velocity v, rotation and angular velocity
omega, all indexed by the step (`x[t, i]`), so nothing is overwritten. A step t -> t + 1:

1. the controller turns the observation at t into one actuation in [-1, 1] per spring
   (`--controller mlp`, default: DiffTaichi's MLP over 10 sine waves of frequency 30 and,
   per box, its offset from the head box, velocity, rotation and angular velocity (all
   * 0.05), then the goal; `--controller sine`: open-loop sine waves);
2. ground contact at y = 0.1: each corner of each box whose velocity (with this step's
   gravity) points down and whose predicted position is below the ground gets the normal
   impulse that stops it (restitution `elasticity`, 0) and a tangential impulse clamped to
   `friction` (1) times the normal one, both through the box's mass and inertia at that
   corner; a corner predicted below the ground also gets the penalty impulse
   dt * penalty * depth / (the corner's inverse effective mass), `penalty` 1e4;
3. springs: each spring pulls its two anchor points towards target length
   rest * (1 + amplitude * actuation) with the impulse dt * stiffness * (length - target);
   a joint pulls them together (target 0) and cancels their relative velocity;
4. advance: v and omega are damped by exp(-dt * damping), receive the impulses and gravity
   (-9.8), then x and rotation move by dt times the new velocities (symplectic Euler).

Time of impact (`--toi`, default, as DiffTaichi trains; `--no-toi` for the naive
scheme): a corner that reaches the ground inside the step at time toi in [0, dt] moves
with the old velocity until toi and with the new one after it, so each ground impulse
also moves the box back by toi * (its velocity and angular velocity change). This
keeps the loss continuous in the initial state (DiffTaichi's misc/rigid_body_toi.py shows
the jumps of the naive scheme).

Loss (DiffTaichi's): the distance of the head box's centre to the goal (0.9, 0.15) at the
last step. `steps` counts the states: 2048 states, 2047 advances of dt = 0.001, as
DiffTaichi. Training: DiffTaichi's update, gradient descent with lr 1 and the gradient
clipped to norm 0.2 (`--optimizer gd --lr 1 --clip 0.2`); DiffTaichi's MLP initialization
(weights ~ 0.5 * sqrt(2 / (fan in + fan out)) * normal in the first layer) is the shared
MLP's with `init_scale` 0.25 (its second layer: 0.75 * sqrt(...) where DiffTaichi has 1).

Differences from DiffTaichi: joints and springs are separate lists, so the MLP has one
output per spring (DiffTaichi's also had outputs for the joints, which it ignored). The
ground penalty is DiffTaichi's constant (1e4), but in DiffTaichi's kernel a local variable
shadows it, so there the term is zero; `--penalty 0` reproduces that. Without it the
springs press the feet through the ground (robot 0's sink 4 cm within 1,500 steps), the
contacts then chatter and the gradient of the 2,048-step loss explodes (norms of 1e3 to
1e13 instead of ~0.3), and training stalls.

`--optimizer adam --lr 0.01` and `--optimizer normalized --lr 0.2` train as well.

Speed: the default run (robot 0, 2,048 steps, f32) takes ~0.08 s per iteration on an idle
2-core machine (0.15-0.2 s on a loaded one) after 1-2.5 s of compilation, so 2,048 steps
stay the default. Each step is one launch of `step(t)` (contacts, springs,
joints, advance, observation) after the controller's launches for t.
"""
import math

import numpy as np

import controllers
import engine as ti
from sims.base import Simulation, at_least, zero_fields
from sims.render import Canvas, color_map

from . import robots

GROUND_HEIGHT = 0.1
GRAVITY = -9.8
GOAL = (0.9, 0.15)
OBSERVATION_SCALE = 0.05
SPRING_OMEGA = 30.0
CORNERS = ((-1, -1), (1, -1), (-1, 1), (1, 1))
OUTLINE = ((-1, -1), (1, -1), (1, 1), (-1, 1))
# inside the square roots of the links' norms: a joint starts with coincident anchor points at
# rest, where the derivative of a plain norm is NaN
TINY = 1e-12


class RigidBody(Simulation):
    """Rigid-body robots (--robot 0|1|2|3, --toi, --controller mlp|sine) learn to reach a goal."""
    name = 'rigid_body'
    summary = 'rigid-body robots of boxes, springs and joints learn to reach a goal'
    choices = dict(robot=tuple(robots.ROBOTS))      # checked by config()
    limits = dict(steps=at_least(2))
    defaults = dict(robot=0, toi=True, controller='mlp', steps=2048, dt=0.001, damping=10.0,
                    friction=1.0, elasticity=0.0, penalty=1e4, n_waves=10, hidden=32, init_scale=0.25,
                    frames=80, iters=20, optimizer='gd', lr=1.0, clip=0.2)
    quick = dict(steps=400, iters=5, frames=20)

    # --- building ----------------------------------------------------------------
    def build(self):
        c = self.cfg
        self.robot = robots.ROBOTS[c.robot]()
        boxes, springs, joints = self.robot.arrays()
        self.n_boxes, self.n_springs, self.n_joints = len(boxes['x0']), len(springs['a']), len(joints['a'])
        self.head = self.robot.head
        n, steps = self.n_boxes, c.steps

        def state(vector):
            if vector:
                return ti.Vector.field(2, float, shape=(steps, n), needs_grad=True)
            return ti.field(float, shape=(steps, n), needs_grad=True)

        self.x, self.v, self.x_inc, self.v_inc = (state(True) for _ in range(4))
        self.rotation, self.omega, self.rotation_inc, self.omega_inc = (state(False) for _ in range(4))
        self.increments = (self.x_inc, self.v_inc, self.rotation_inc, self.omega_inc)
        self.loss = ti.field(float, shape=(), needs_grad=True)

        self.half_size = ti.Vector.field(2, float, shape=n)
        self.inverse_mass = ti.field(float, shape=n)
        self.inverse_inertia = ti.field(float, shape=n)
        self.half_size.from_numpy(boxes['half_size'])
        self.inverse_mass.from_numpy(boxes['inverse_mass'])
        self.inverse_inertia.from_numpy(boxes['inverse_inertia'])
        for f in (self.x, self.v, self.rotation, self.omega):
            f.fill(0)
        self.x.data[0] = boxes['x0']
        self.rotation.data[0] = boxes['rotation0']

        self.springs = self._links(springs, ('rest', 'stiffness', 'amplitude'))
        self.joints = self._links(joints, ('stiffness',))

        self.controller = controllers.make(
            c.controller, n_obs=6 * n + 2, n_act=self.n_springs, steps=steps, dt=c.dt,
            omega=SPRING_OMEGA, n_waves=c.n_waves, hidden=c.hidden, init_scale=c.init_scale)
        self._build_kernels()

    @staticmethod
    def _links(arrays, scalars):
        """Fields of springs or joints (at least one element each, so empty lists are fine)."""
        count = max(len(arrays['a']), 1)
        fields = {key: ti.field(ti.i32, shape=count) for key in ('a', 'b')}
        fields.update({key: ti.Vector.field(2, float, shape=count) for key in ('offset_a', 'offset_b')})
        fields.update({key: ti.field(float, shape=count) for key in scalars})
        if len(arrays['a']):
            for key, f in fields.items():
                f.from_numpy(arrays[key])
        return fields

    def _build_kernels(self):
        c = self.cfg
        n, n_springs, n_joints, dt, toi = self.n_boxes, self.n_springs, self.n_joints, c.dt, bool(c.toi)
        x, v, rotation, omega = self.x, self.v, self.rotation, self.omega
        x_inc, v_inc, rotation_inc, omega_inc = self.increments
        half_size, inverse_mass, inverse_inertia = self.half_size, self.inverse_mass, self.inverse_inertia
        sp, jt = self.springs, self.joints
        act, obs = self.controller.actuation, self.controller.observation
        observe = self.controller.uses_observation
        decay = math.exp(-dt * c.damping)
        friction, elasticity, penalty = c.friction, c.elasticity, c.penalty
        head, last, loss = self.head, c.steps - 1, self.loss
        goal = ti.Vector(list(GOAL))

        @ti.func
        def cross(a, b):
            return a[0] * b[1] - a[1] * b[0]

        @ti.func
        def to_world(t, i, local):
            """A point fixed on box i at step t: world position, velocity, offset from the centre."""
            cos, sin = ti.cos(rotation[t, i]), ti.sin(rotation[t, i])
            rel = ti.Vector([cos * local[0] - sin * local[1], sin * local[0] + cos * local[1]])
            return x[t, i] + rel, v[t, i] + omega[t, i] * ti.Vector([-rel[1], rel[0]]), rel

        @ti.func
        def apply_impulse(t, i, impulse, location, impact):
            """Add the impulse at `location` to box i's change from t to t + 1; with time of
            impact, the box also moves back by impact * (its velocity change)."""
            dv = impulse * inverse_mass[i]
            domega = cross(location - x[t, i], impulse) * inverse_inertia[i]
            ti.atomic_add(v_inc[t + 1, i], dv)
            ti.atomic_add(omega_inc[t + 1, i], domega)
            if ti.static(toi):
                ti.atomic_add(x_inc[t + 1, i], -impact * dv)
                ti.atomic_add(rotation_inc[t + 1, i], -impact * domega)

        @ti.func
        def collide(t, i):
            hs = half_size[i]
            normal, tangent = ti.Vector([0.0, 1.0]), ti.Vector([1.0, 0.0])
            for k in ti.static(range(4)):
                local = ti.Vector([CORNERS[k][0] * hs[0], CORNERS[k][1] * hs[1]])
                corner, corner_v, rel = to_world(t, i, local)
                corner_v += ti.Vector([0.0, dt * GRAVITY])
                normal_share = inverse_mass[i] + cross(rel, normal) ** 2 * inverse_inertia[i]
                tangent_share = inverse_mass[i] + cross(rel, tangent) ** 2 * inverse_inertia[i]
                new_corner = corner + dt * corner_v
                impulse = 0.0
                tangent_impulse = 0.0
                impact = 0.0
                if corner_v[1] < 0 and new_corner[1] < GROUND_HEIGHT:
                    impulse = -(1 + elasticity) * corner_v[1] / normal_share
                    if impulse > 0:
                        tangent_impulse = -corner_v[0] / tangent_share
                        limit = friction * impulse
                        tangent_impulse = ti.min(limit, ti.max(-limit, tangent_impulse))
                        if ti.static(toi):
                            if corner[1] > GROUND_HEIGHT:
                                impact = -(corner[1] - GROUND_HEIGHT) / ti.min(corner_v[1], -1e-3)
                                impact = ti.min(impact, dt)
                apply_impulse(t, i, impulse * normal + tangent_impulse * tangent, new_corner, impact)
                if ti.static(penalty > 0):
                    if new_corner[1] < GROUND_HEIGHT:   # push a corner below the ground back up
                        push = -dt * penalty * (new_corner[1] - GROUND_HEIGHT) / normal_share
                        apply_impulse(t, i, push * normal, new_corner, 0.0)

        @ti.func
        def link(t, s, links):
            """Link s: the unit vector from its b anchor to its a anchor, their distance, and
            each anchor's world position, velocity and offset from its box's centre."""
            a, b = links['a'][s], links['b'][s]
            pos_a, vel_a, rel_a = to_world(t, a, links['offset_a'][s])
            pos_b, vel_b, rel_b = to_world(t, b, links['offset_b'][s])
            d = pos_a - pos_b
            length = d.norm(TINY) + 1e-4
            return d / length, length, pos_a, vel_a, rel_a, pos_b, vel_b, rel_b

        @ti.func
        def spring(t, s):
            a, b = sp['a'][s], sp['b'][s]
            direction, length, pos_a, _va, _ra, pos_b, _vb, _rb = link(t, s, sp)
            target = sp['rest'][s] * (1.0 + sp['amplitude'][s] * act[t, s])
            impulse = dt * (length - target) * sp['stiffness'][s] * direction
            apply_impulse(t, a, -impulse, pos_a, 0.0)
            apply_impulse(t, b, impulse, pos_b, 0.0)

        @ti.func
        def joint(t, s):
            a, b = jt['a'][s], jt['b'][s]
            direction, length, pos_a, vel_a, rel_a, pos_b, vel_b, rel_b = link(t, s, jt)
            impulse = dt * length * jt['stiffness'][s] * direction
            # cancel the relative velocity of the two points (DiffTaichi's projection)
            rel_v = vel_a - vel_b
            along = rel_v / (rel_v.norm(TINY) + 0.1)
            share = (inverse_mass[a] + cross(along, rel_a) ** 2 * inverse_inertia[a]
                     + inverse_mass[b] + cross(along, rel_b) ** 2 * inverse_inertia[b])
            impulse += rel_v / share
            apply_impulse(t, a, -impulse, pos_a, 0.0)
            apply_impulse(t, b, impulse, pos_b, 0.0)

        @ti.func
        def advance(t, i):
            """Box i from step t - 1 to step t."""
            new_v = decay * v[t - 1, i] + v_inc[t, i] + ti.Vector([0.0, dt * GRAVITY])
            new_omega = decay * omega[t - 1, i] + omega_inc[t, i]
            v[t, i] = new_v
            omega[t, i] = new_omega
            if ti.static(toi):
                x[t, i] = x[t - 1, i] + dt * new_v + x_inc[t, i]
                rotation[t, i] = rotation[t - 1, i] + dt * new_omega + rotation_inc[t, i]
            else:
                x[t, i] = x[t - 1, i] + dt * new_v
                rotation[t, i] = rotation[t - 1, i] + dt * new_omega

        @ti.func
        def write_observation(t):
            for i in range(n):
                offset = x[t, i] - x[t, head]
                state = (offset[0], offset[1], v[t, i][0], v[t, i][1], rotation[t, i], omega[t, i])
                for k in ti.static(range(6)):
                    obs[t, 6 * i + k] = state[k] * OBSERVATION_SCALE
            for _ in range(1):
                obs[t, 6 * n] = GOAL[0]
                obs[t, 6 * n + 1] = GOAL[1]

        @ti.kernel
        def observe_initial():
            write_observation(0)

        @ti.kernel
        def step(t: ti.i32):
            for i in range(n):
                collide(t, i)
            if ti.static(n_springs > 0):
                for s in range(n_springs):
                    spring(t, s)
            if ti.static(n_joints > 0):
                for s in range(n_joints):
                    joint(t, s)
            for i in range(n):
                advance(t + 1, i)
            if ti.static(observe):
                write_observation(t + 1)

        @ti.kernel
        def compute_loss():
            loss[None] = (x[last, head] - goal).norm()

        self.observe_initial = observe_initial if observe else None
        self.step_kernel, self.compute_loss = step, compute_loss

    # --- the Simulation interface -------------------------------------------------
    def parameters(self):
        return self.controller.parameters()

    def initialize(self, rng):
        self.controller.initialize(rng)

    def forward(self):
        zero_fields(*self.increments)
        self.run_controlled()
        self.compute_loss()

    # --- rendering ----------------------------------------------------------------
    def box_outlines(self, t):
        """The four corners (n_boxes x 4 x 2) of every box at step t, in drawing order."""
        x, rotation = self.x.to_numpy()[t], self.rotation.to_numpy()[t]
        half = self.half_size.to_numpy()
        cos, sin = np.cos(rotation)[:, None], np.sin(rotation)[:, None]
        local = np.array(OUTLINE, np.float64)[None] * half[:, None, :]
        return x[:, None, :] + np.stack([cos * local[..., 0] - sin * local[..., 1],
                                         sin * local[..., 0] + cos * local[..., 1]], axis=-1)

    def anchor_points(self, t, links):
        """World positions of the anchor points of `links` (self.springs or self.joints) at step t."""
        x, rotation = self.x.to_numpy()[t], self.rotation.to_numpy()[t]

        def world(boxes, offsets):
            cos, sin = np.cos(rotation[boxes]), np.sin(rotation[boxes])
            return x[boxes] + np.stack([cos * offsets[:, 0] - sin * offsets[:, 1],
                                        sin * offsets[:, 0] + cos * offsets[:, 1]], axis=-1)
        return (world(links['a'].to_numpy(), links['offset_a'].to_numpy()),
                world(links['b'].to_numpy(), links['offset_b'].to_numpy()))

    def render_frames(self, frames=None, size=512):
        frames = frames or self.cfg.frames
        self.evaluate()
        act = self.controller.actuation.to_numpy()
        for t in np.unique(np.linspace(0, self.cfg.steps - 1, frames).round().astype(int)):
            canvas = Canvas(size)
            canvas.lines([[0.0, GROUND_HEIGHT]], [[1.0, GROUND_HEIGHT]], 3, (0, 0, 0))
            canvas.circles([GOAL], 5, (220, 160, 60))
            corners = self.box_outlines(t)
            starts, ends = corners.reshape(-1, 2), np.roll(corners, -1, axis=1).reshape(-1, 2)
            colors = np.tile(np.array([[40, 40, 40]], np.uint8), (self.n_boxes, 4, 1))
            colors[self.head] = (205, 50, 75)
            canvas.lines(starts, ends, 2, colors.reshape(-1, 3))
            if self.n_joints:
                a, b = self.anchor_points(t, self.joints)
                canvas.lines(a[:self.n_joints], b[:self.n_joints], 7, (0, 0, 0))
            if self.n_springs:
                a, b = self.anchor_points(t, self.springs)
                canvas.lines(a, b, 4, color_map(act[max(t - 1, 0), :self.n_springs]))
            yield canvas.image
