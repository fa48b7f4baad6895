"""Billiards' kernels: the cue ball's start, the collisions and step, and the loss."""
import engine as ti


def start_kernel(x, v, init_x, init_v):
    @ti.kernel
    def start():
        """The cue ball's initial position and velocity (the parameters) into step 0."""
        x[0, 0] = init_x[None]
        v[0, 0] = init_v[None]
    return start


def collision_impulses(x, v, n, dt, radius, e, toi):
    @ti.func
    def collide(t, i):
        """The impulse on ball i from the balls it hits in step t, and (with time of impact)
        the correction of its position."""
        impulse = ti.Vector([0.0, 0.0])
        shift = ti.Vector([0.0, 0.0])
        predicted = x[t, i] + dt * v[t, i]
        for j in ti.static(range(n)):
            if i != j:
                d = predicted - (x[t, j] + dt * v[t, j])
                distance = d.norm()
                if distance < 2 * radius:
                    normal = d / distance
                    approach = normal.dot(v[t, i] - v[t, j])
                    if approach < 0:
                        kick = -(1 + e) * 0.5 * approach * normal
                        impulse += kick
                        if ti.static(toi):
                            since = (distance - 2 * radius) / ti.min(approach, -1e-3)
                            shift += ti.min(since - dt, 0.0) * kick
        return impulse, shift
    return collide


def step_kernel(x, v, n, dt, collide):
    @ti.kernel
    def step(t: ti.i32):
        """Collisions at step t, then every ball from t to t + 1."""
        for i in range(n):
            impulse, shift = collide(t, i)
            new_v = v[t, i] + impulse
            v[t + 1, i] = new_v
            x[t + 1, i] = x[t, i] + dt * new_v + shift
    return step


def loss_kernel(x, loss, last, target, goal):
    @ti.kernel
    def compute_loss():
        """The squared distance of the target ball to the goal at the last step."""
        d = x[last, target] - goal
        loss[None] = d.dot(d)
    return compute_loss
