"""Gravity's kernels: the potential (for the forces by a tape), the closed-form force, the
start, the step and the loss."""
import engine as ti


def potential_kernel(positions, potential, n, G, eps):
    @ti.kernel
    def compute_potential():
        """U = sum over ordered pairs of -G / sqrt(|x_i - x_j|^2 + eps)."""
        for i, j in ti.ndrange(n, n):
            r = positions[i] - positions[j]
            potential[None] += -G / r.norm(eps)
    return compute_potential


def start_kernel(v, v0, n):
    @ti.kernel
    def start():
        for i in range(n):
            v[0, i] = v0[i]
    return start


def step_kernel(x, v, n, dt, G, eps):
    @ti.func
    def force(t, i):
        f = ti.Vector([0.0, 0.0])
        for j in range(n):
            r = x[t, i] - x[t, j]
            s = r.norm(eps)
            f += -2 * G * r / (s * s * s)
        return f

    @ti.kernel
    def step(t: ti.i32):
        """Symplectic Euler from t to t + 1 (unit masses)."""
        for i in range(n):
            v[t + 1, i] = v[t, i] + dt * force(t, i)
            x[t + 1, i] = x[t, i] + dt * v[t + 1, i]
    return step


def loss_kernel(x, loss, last, target):
    @ti.kernel
    def compute_loss():
        """The squared distance of particle 0 to the target after the last step."""
        d = x[last, 0] - target
        loss[None] = d.dot(d)
    return compute_loss
