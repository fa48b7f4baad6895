"""Rigid-body kernels: points on boxes, impulses, ground contact, springs, joints, the advance
of the boxes, the observation, the step and the loss.

`state` is the namespace of the time-indexed fields (x, v, rotation, omega and their
increments x_inc, v_inc, rotation_inc, omega_inc, the impulses' changes from t to t + 1),
`boxes` that of the boxes' constants (half_size, inverse_mass, inverse_inertia); springs
and joints are dicts of fields (a, b, offset_a, offset_b; rest, stiffness, amplitude).
"""
import engine as ti

from .scene import CORNERS, GOAL, GRAVITY, GROUND_HEIGHT, OBSERVATION_SCALE

# inside the square roots of the links' norms: a joint starts with coincident anchor points at
# rest, where the derivative of a plain norm is NaN
TINY = 1e-12


@ti.func
def cross(a, b):
    return a[0] * b[1] - a[1] * b[0]


def world_mapper(state):
    x, v, rotation, omega = state.x, state.v, state.rotation, state.omega

    @ti.func
    def to_world(t, i, local):
        """A point fixed on box i at step t: world position, velocity, offset from the centre."""
        cos, sin = ti.cos(rotation[t, i]), ti.sin(rotation[t, i])
        rel = ti.Vector([cos * local[0] - sin * local[1], sin * local[0] + cos * local[1]])
        return x[t, i] + rel, v[t, i] + omega[t, i] * ti.Vector([-rel[1], rel[0]]), rel
    return to_world


def impulse_applier(state, boxes, toi):
    x, x_inc, v_inc, rotation_inc, omega_inc = state.x, state.x_inc, state.v_inc, state.rotation_inc, state.omega_inc
    inverse_mass, inverse_inertia = boxes.inverse_mass, boxes.inverse_inertia

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
    return apply_impulse


def ground_contact(boxes, to_world, apply_impulse, dt, friction, elasticity, penalty, toi):
    half_size, inverse_mass, inverse_inertia = boxes.half_size, boxes.inverse_mass, boxes.inverse_inertia

    @ti.func
    def collide(t, i):
        """The ground's impulses on the corners of box i at step t (see the package's docstring)."""
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
    return collide


def link_reader(to_world):
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
    return link


def spring_impulses(sp, act, dt, link, apply_impulse):
    @ti.func
    def spring(t, s):
        """Spring s pulls its anchors towards rest * (1 + amplitude * actuation) apart."""
        a, b = sp['a'][s], sp['b'][s]
        direction, length, pos_a, _va, _ra, pos_b, _vb, _rb = link(t, s, sp)
        target = sp['rest'][s] * (1.0 + sp['amplitude'][s] * act[t, s])
        impulse = dt * (length - target) * sp['stiffness'][s] * direction
        apply_impulse(t, a, -impulse, pos_a, 0.0)
        apply_impulse(t, b, impulse, pos_b, 0.0)
    return spring


def joint_impulses(jt, boxes, dt, link, apply_impulse):
    inverse_mass, inverse_inertia = boxes.inverse_mass, boxes.inverse_inertia

    @ti.func
    def joint(t, s):
        """Joint s pulls its anchors together and cancels their relative velocity."""
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
    return joint


def box_advancer(state, dt, decay, toi):
    x, v, rotation, omega = state.x, state.v, state.rotation, state.omega
    x_inc, v_inc, rotation_inc, omega_inc = state.x_inc, state.v_inc, state.rotation_inc, state.omega_inc

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
    return advance


def observation_writer(state, obs, n, head):
    x, v, rotation, omega = state.x, state.v, state.rotation, state.omega

    @ti.func
    def write_observation(t):
        """Per box its offset from the head box, velocity, rotation and angular velocity
        (all scaled), then the goal."""
        for i in range(n):
            offset = x[t, i] - x[t, head]
            values = (offset[0], offset[1], v[t, i][0], v[t, i][1], rotation[t, i], omega[t, i])
            for k in ti.static(range(6)):
                obs[t, 6 * i + k] = values[k] * OBSERVATION_SCALE
        for _ in range(1):
            obs[t, 6 * n] = GOAL[0]
            obs[t, 6 * n + 1] = GOAL[1]
    return write_observation


def observe_kernel(write_observation):
    """The kernel of the observation at t = 0. Unlike sims.controlled.serial_observation's it
    calls write_observation at the kernel's top level: its loop over the boxes runs in parallel."""
    @ti.kernel
    def observe_initial():
        write_observation(0)
    return observe_initial


def step_kernel(n, n_springs, n_joints, collide, spring, joint, advance, write_observation, observe):
    @ti.kernel
    def step(t: ti.i32):
        """Contacts, springs and joints at t, the boxes from t to t + 1, the observation at t + 1."""
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
    return step


def loss_kernel(x, loss, last, head):
    goal = ti.Vector(list(GOAL))

    @ti.kernel
    def compute_loss():
        """The distance of the head box's centre to the goal at the last step."""
        loss[None] = (x[last, head] - goal).norm()
    return compute_loss
