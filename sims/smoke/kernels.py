"""Smoke's kernels: bilinear periodic sampling, the stencils of a time step (divergence and
first Jacobi sweep, the other sweeps, projection and smoke advection), run row by row,
the start, the step and the loss.

The stencils get the wrapped neighbour indices (im, ip, jm, jp) from `row`: each row runs
its two edge cells apart from the interior, whose neighbours need no wrapping (a plain,
vectorizable loop).
"""
import engine as ti


def sampler(n):
    @ti.func
    def sample(f: ti.template(), t, i, j, vel):
        """f[t] at (i, j) - vel: bilinear interpolation, periodic."""
        ci = i - vel[0]
        cj = j - vel[1]
        fi = ti.floor(ci)
        fj = ti.floor(cj)
        wi = ci - fi                    # weight of the next cell along i
        wj = cj - fj
        i0 = ti.cast(fi, ti.i32) % n
        j0 = ti.cast(fj, ti.i32) % n
        i1 = ti.select(i0 == n - 1, 0, i0 + 1)
        j1 = ti.select(j0 == n - 1, 0, j0 + 1)
        return ((1 - wi) * ((1 - wj) * f[t, i0, j0] + wj * f[t, i0, j1])
                + wi * ((1 - wj) * f[t, i1, j0] + wj * f[t, i1, j1]))
    return sample


def first_sweep_stencil(v_adv, p, dx):
    @ti.func
    def first_sweep(t, k, i, j, im, ip, jm, jp):
        """The divergence div of v_adv[t]; the first sweep from p = 0: p = div / 4."""
        div = -0.5 * dx * (v_adv[t, ip, j][0] - v_adv[t, im, j][0]
                           + v_adv[t, i, jp][1] - v_adv[t, i, jm][1])
        p[t, k, i, j] = 0.25 * div
    return first_sweep


def sweep_stencil(p):
    @ti.func
    def sweep(t, k, i, j, im, ip, jm, jp):
        # (div + neighbours) / 4 with div = 4 p[t, 0]
        p[t, k, i, j] = p[t, 0, i, j] + 0.25 * (p[t, k - 1, ip, j] + p[t, k - 1, im, j]
                                                + p[t, k - 1, i, jp] + p[t, k - 1, i, jm])
    return sweep


def projection_stencil(v, v_adv, p, smoke, dx, sample):
    @ti.func
    def project_and_advect(t, k, i, j, im, ip, jm, jp):
        """v[t + 1] = v_adv[t] - grad p; smoke[t + 1] = smoke[t] advected by v[t + 1]."""
        grad_p = ti.Vector([p[t, k, ip, j] - p[t, k, im, j], p[t, k, i, jp] - p[t, k, i, jm]])
        vel = v_adv[t, i, j] - (0.5 / dx) * grad_p
        v[t + 1, i, j] = vel
        smoke[t + 1, i, j] = sample(smoke, t, i, j, vel)
    return project_and_advect


def row_runner(n):
    @ti.func
    def row(cell: ti.template(), t, k, i):
        """The stencil `cell` on row i: its edge cells, then the interior."""
        ip = (i + 1) % n
        im = (i + n - 1) % n
        cell(t, k, i, 0, im, ip, n - 1, 1)
        for j in range(1, n - 1):
            cell(t, k, i, j, im, ip, j - 1, j + 1)
        cell(t, k, i, n - 1, im, ip, n - 2, 0)
    return row


def start_kernel(v0, v, n, serial):
    @ti.kernel
    def start():
        ti.loop_config(serialize=serial)
        for i, j in ti.ndrange(n, n):
            v[0, i, j] = v0[i, j]
    return start


def step_kernel(v, v_adv, p, smoke, n, J, dx, serial):
    sample, row = sampler(n), row_runner(n)
    first_sweep, sweep = first_sweep_stencil(v_adv, p, dx), sweep_stencil(p)
    project_and_advect = projection_stencil(v, v_adv, p, smoke, dx, sample)

    @ti.kernel
    def step(t: ti.i32):
        """One time step: four phases, each a loop over the grid, run in order."""
        ti.loop_config(serialize=serial)
        for i in range(n):                                  # 1. self-advection
            for j in range(n):
                v_adv[t, i, j] = sample(v, t, i, j, v[t, i, j])
        ti.loop_config(serialize=serial)
        for i in range(n):                                  # 2. divergence, first sweep
            row(first_sweep, t, 0, i)
        ti.loop_config(serialize=True)                      # each sweep reads the previous one:
        for k in range(1, J):                               # 3. the other Jacobi sweeps, in turn
            for i in range(n):
                row(sweep, t, k, i)
        ti.loop_config(serialize=serial)
        for i in range(n):                                  # 4. projection, smoke advection
            row(project_and_advect, t, J - 1, i)
    return step


def loss_kernel(smoke, target, loss, n, steps, serial):
    @ti.kernel
    def compute_loss():
        """Sum over cells of (smoke - target)^2 at the last step, times 1 / n^2."""
        ti.loop_config(serialize=serial)
        for i in range(n):
            for j in range(n):
                d = smoke[steps, i, j] - target[i, j]
                loss[None] += d * d * (1.0 / (n * n))
    return compute_loss
