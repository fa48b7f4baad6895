"""Wave's kernels: the start (p[0] from the trained field), the finite-difference step and
the loss. The field p is stored with a one-cell border of zeros: p[t, i + 1, j + 1] is the
height of cell (i, j)."""
import engine as ti


def laplacian_of(p):
    @ti.func
    def laplacian(t, i, j):
        """dx^2 times the Laplacian of p[t] at padded cell (i, j)."""
        return p[t, i - 1, j] + p[t, i + 1, j] + p[t, i, j - 1] + p[t, i, j + 1] - 4 * p[t, i, j]
    return laplacian


def start_kernel(initial, p, n, serial):
    @ti.kernel
    def start():
        ti.loop_config(serialize=serial)
        for i in range(n):
            for j in range(n):
                p[0, i + 1, j + 1] = initial[i, j]
    return start


def step_kernel(p, n, a, b, serial):
    laplacian = laplacian_of(p)

    @ti.kernel
    def step(t: ti.i32):
        """p[t] = 2 p[t-1] - p[t-2] + a dx^2 L p[t-1] - b dx^2 L p[t-2]."""
        ti.loop_config(serialize=serial)
        for i in range(1, n + 1):
            for j in range(1, n + 1):
                update = 2 * p[t - 1, i, j] - p[t - 2, i, j] + a * laplacian(t - 1, i, j)
                if ti.static(b != 0):
                    update -= b * laplacian(t - 2, i, j)
                p[t, i, j] = update
    return step


def loss_kernel(p, target, loss, n, steps, dx, serial):
    @ti.kernel
    def compute_loss():
        """dx^2 times the sum over cells of (target - p[steps - 1])^2."""
        ti.loop_config(serialize=serial)
        for i in range(n):
            for j in range(n):
                d = target[i, j] - p[steps - 1, i + 1, j + 1]
                loss[None] += dx * dx * d * d
    return compute_loss
