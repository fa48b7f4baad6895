"""Electric's kernels: the controller's observation, the loss term and the step."""
import engine as ti

from .scene import CHARGES, MIN_DISTANCE


def observation_writer(x, v, goal, goal_v, obs):
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
    return write_observation


def loss_term(goal, loss, dt):
    @ti.func
    def add_loss(t, new_x):
        """The loss's term of step t + 1: dt |x(t + 1) - goal(t + 1)|^2."""
        d = new_x - goal[t + 1]
        loss[None] += dt * d.dot(d)
    return add_loss


def step_kernel(x, v, act, dt, decay, K, add_loss, write_observation, observe, steps):
    n_charges = len(CHARGES)

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
            add_loss(t, new_x)
            if ti.static(observe):
                if t + 2 < steps:
                    write_observation(t + 1)
    return step
