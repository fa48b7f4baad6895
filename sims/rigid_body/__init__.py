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
from types import SimpleNamespace

import engine as ti
from sims.base import Simulation, at_least, zero_fields
from sims.controlled import damping_factor, make_controller

from . import kernels, render, robots
from .scene import SPRING_OMEGA


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
        self._allocate(boxes)
        self.springs = self._links(springs, ('rest', 'stiffness', 'amplitude'))
        self.joints = self._links(joints, ('stiffness',))
        self.controller = make_controller(c, 6 * self.n_boxes + 2, self.n_springs, SPRING_OMEGA,
                                          init_scale=c.init_scale)
        self._build_kernels()

    def _allocate(self, boxes):
        """The time-indexed state (`self.state`), the boxes' constants (`self.boxes`), the loss."""
        n, steps = self.n_boxes, self.cfg.steps

        def state(vector):
            if vector:
                return ti.Vector.field(2, float, shape=(steps, n), needs_grad=True)
            return ti.field(float, shape=(steps, n), needs_grad=True)

        self.x, self.v, self.x_inc, self.v_inc = (state(True) for _ in range(4))
        self.rotation, self.omega, self.rotation_inc, self.omega_inc = (state(False) for _ in range(4))
        self.increments = (self.x_inc, self.v_inc, self.rotation_inc, self.omega_inc)
        self.state = SimpleNamespace(x=self.x, v=self.v, rotation=self.rotation, omega=self.omega,
                                     x_inc=self.x_inc, v_inc=self.v_inc, rotation_inc=self.rotation_inc,
                                     omega_inc=self.omega_inc)
        self.loss = ti.field(float, shape=(), needs_grad=True)

        self.half_size = ti.Vector.field(2, float, shape=n)
        self.inverse_mass = ti.field(float, shape=n)
        self.inverse_inertia = ti.field(float, shape=n)
        self.half_size.from_numpy(boxes['half_size'])
        self.inverse_mass.from_numpy(boxes['inverse_mass'])
        self.inverse_inertia.from_numpy(boxes['inverse_inertia'])
        self.boxes = SimpleNamespace(half_size=self.half_size, inverse_mass=self.inverse_mass,
                                     inverse_inertia=self.inverse_inertia)
        for f in (self.x, self.v, self.rotation, self.omega):
            f.fill(0)
        self.x.data[0] = boxes['x0']
        self.rotation.data[0] = boxes['rotation0']

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
        dt, toi, state, boxes = c.dt, bool(c.toi), self.state, self.boxes
        observe = self.controller.uses_observation
        to_world = kernels.world_mapper(state)
        apply_impulse = kernels.impulse_applier(state, boxes, toi)
        link = kernels.link_reader(to_world)
        collide = kernels.ground_contact(boxes, to_world, apply_impulse, dt, c.friction, c.elasticity, c.penalty, toi)
        spring = kernels.spring_impulses(self.springs, self.controller.actuation, dt, link, apply_impulse)
        joint = kernels.joint_impulses(self.joints, boxes, dt, link, apply_impulse)
        advance = kernels.box_advancer(state, dt, damping_factor(c), toi)
        write_observation = kernels.observation_writer(state, self.controller.observation, self.n_boxes, self.head)
        self.step_kernel = kernels.step_kernel(self.n_boxes, self.n_springs, self.n_joints, collide, spring, joint,
                                               advance, write_observation, observe)
        self.observe_initial = kernels.observe_kernel(write_observation) if observe else None
        self.compute_loss = kernels.loss_kernel(self.x, self.loss, c.steps - 1, self.head)

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
        return render.box_outlines(self.x.to_numpy()[t], self.rotation.to_numpy()[t], self.half_size.to_numpy())

    def render_frames(self, frames=None, size=512):
        return render.frames(self, frames or self.cfg.frames, size)
