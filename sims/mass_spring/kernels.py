"""Mass-spring kernels: the robots' observation, spring impulses, ground contact, step and
loss; the triangle's spring forces, wall, step and loss.

`springs` is the namespace of the springs' fields: anchor_a, anchor_b, rest, stiffness and
amplitude.
"""
import engine as ti

from .scene import (GOAL, GRAVITY, GROUND_HEIGHT, HEAD, OBSERVATION_SCALE, TRIANGLE_FRICTION,
                    TRIANGLE_TARGET_AREA, TRIANGLE_WALL)


def spring_reader(x, springs):
    anchor_a, anchor_b = springs.anchor_a, springs.anchor_b

    @ti.func
    def spring(t, s):
        """Spring s at step t: its masses a and b, the vector d from b to a, and its length."""
        a, b = anchor_a[s], anchor_b[s]
        d = x[t, a] - x[t, b]
        length = d.norm() + 1e-4
        return a, b, d, length
    return spring


# --------------------------------------------------------------------------- robots

def observation_writer(x, v, obs, n):
    scale, inv_n = OBSERVATION_SCALE, 1.0 / n
    goal = ti.Vector(list(GOAL))

    @ti.func
    def write_observation(t):
        """Each mass's offset from the centre and velocity (scaled), then goal - centre."""
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
    return write_observation


def robot_advancer(x, v, v_inc, dt, decay, toi):
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
    return advance


def robot_step_kernel(x, v_inc, act, springs, n, ns, dt, advance, write_observation, observe):
    rest, stiffness, amplitude = springs.rest, springs.stiffness, springs.amplitude
    spring = spring_reader(x, springs)

    @ti.kernel
    def step(t: ti.i32):
        """Spring impulses at t, the masses from t to t + 1, the observation at t + 1."""
        for s in range(ns):
            a, b, d, length = spring(t, s)
            target = rest[s] * (1.0 + amplitude[s] * act[t, s])
            impulse = dt * (length - target) * stiffness[s] / length * d
            ti.atomic_add(v_inc[t + 1, a], -impulse)
            ti.atomic_add(v_inc[t + 1, b], impulse)
        for i in range(n):
            advance(t + 1, i)
        if ti.static(observe):
            for _ in range(1):
                write_observation(t + 1)
    return step


def robot_loss_kernel(x, loss, last):
    @ti.kernel
    def compute_loss():
        """Minus the head's x at the last step: the robot walks right."""
        loss[None] = -x[last, HEAD][0]
    return compute_loss


# --------------------------------------------------------------------------- the triangle

@ti.func
def wall(new_v):
    """Friction projection at the wall: the normal velocity goes, the tangential shrinks."""
    if new_v[1] > 0:
        new_v[1] -= ti.min(new_v[1], TRIANGLE_FRICTION * new_v[0])
    if new_v[1] < 0:
        new_v[1] += ti.min(-new_v[1], TRIANGLE_FRICTION * new_v[0])
    new_v[0] = 0.0
    return new_v


def triangle_step_kernel(x, v, force, springs, n, ns, dt, decay):
    rest, stiffness = springs.rest, springs.stiffness
    spring = spring_reader(x, springs)

    @ti.kernel
    def step(t: ti.i32):
        """Spring forces at t, then the masses from t to t + 1 (unit mass)."""
        for s in range(ns):
            a, b, d, length = spring(t, s)
            f = (length - rest[s]) * stiffness[s] * d / length
            ti.atomic_add(force[t + 1, a], -f)
            ti.atomic_add(force[t + 1, b], f)
        for i in range(n):
            new_v = decay * v[t, i] + dt * force[t + 1, i]
            new_x = x[t, i] + dt * new_v
            if new_x[0] > TRIANGLE_WALL and new_v[0] > 0:
                new_v = wall(new_v)
            v[t + 1, i] = new_v
            x[t + 1, i] = new_x
    return step


def triangle_loss_kernel(x, loss, last):
    @ti.kernel
    def compute_loss():
        """The squared difference of the final triangle's area from the target area."""
        e01 = x[last, 0] - x[last, 1]
        e02 = x[last, 0] - x[last, 2]
        area = ti.abs(0.5 * (e01[0] * e02[1] - e01[1] * e02[0]))
        loss[None] = (area - TRIANGLE_TARGET_AREA) ** 2
    return compute_loss
