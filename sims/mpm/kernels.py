"""The MLS-MPM kernels of the robots, over dim (2 or 3): one factory per kernel.

Each factory takes the fields and constants its kernel uses and returns the `@ti.kernel`.
`particles` holds the state fields x, v, C, F (indexed [slot, particle]) and actuator_id;
`grid` holds v_in (momentum, then velocity), m_in (mass) and v_out (the updated
velocity), each of n_grid^dim cells, and box, the cells that a step's particles touch
(box[d, 0] <= I[d] < box[d, 1], see MPMRobot.grid_box): the grid kernels visit only
those, the other cells are never read. The box is a field rather than kernel arguments
(their number would depend on dim), set from Python before each step's grid kernels.

Quadratic B-splines: a particle at xp scatters to and gathers from the 3^dim cells
base + offset, offset in {0, 1, 2}^dim, base = floor(xp / dx - 0.5), with weight
prod_d w[offset[d]][d]. Both scatter and gather come in two formulations with the same
mathematics and different rounding, chosen per robot (`incremental`):
- per cell (2D): the momentum m v + A (offset - fx) dx of every cell, and
  C = 4 inv_dx sum_cells weight g_v (offset - fx)^T;
- incremental (3D): each cell's m v + A (offset - fx) dx starts from the previous
  cell's and adds a column of A dx (the offsets are compile-time constants), and C is
  gathered as 4 inv_dx (sum weight g_v offset^T - new_v fx^T), which costs fewer
  operations per cell.

The kernels compute their terms in the order of the separate 2D and 3D kernels they
replace, and the ti.funcs take their arguments as ti.template() (by reference, without
copies): the adjoint kernels add up the adjoints of a value in the reverse order of its
uses, so the order decides the last bits of the gradients (tests/sim_losses.json pins
them), and the layout of the code a percent or two of speed.
"""
import functools
import itertools
import operator

import engine as ti

MASS = 1.0          # particle mass


def stencil(dim):
    """The 3^dim offsets of the quadratic B-spline stencil, in lexicographic order."""
    return tuple(itertools.product(range(3), repeat=dim))


def weight(w, offset):
    """w[offset[0]][0] * w[offset[1]][1] * ..., multiplied left to right (at compile time
    this is Python code building the kernel's expression)."""
    return functools.reduce(operator.mul, [w[o][d] for d, o in enumerate(offset)])


def increments_axis(offset, d):
    """Whether stepping to `offset` in lexicographic order increments axis d (and resets
    the axes after it to 0)."""
    return offset[d] > 0 and not any(offset[d + 1:])


def bspline(xp, inv_dx):
    """The stencil's base cell, the particle's position from it in cells, and the weights
    w[k][d] of offset k along axis d. Called in kernels, this plain Python function builds
    the expressions when the kernel compiles (it reads no field, which would be read
    then; see box_cells), without the argument copies of a ti.func."""
    base = ti.cast(xp * inv_dx - 0.5, ti.i32)
    fx = xp * inv_dx - ti.cast(base, float)
    w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
    return base, fx, w


@ti.func
def box_cells(box: ti.template(), dim: ti.template()):
    """The cells of the grid's box, for a grouped loop. (A ti.func, so that the kernel
    reads the box when it runs: a plain Python helper would read the field once, when
    the kernel compiles.)"""
    return ti.ndrange(*[(box[d, 0], box[d, 1]) for d in ti.static(range(dim))])


# --- the grid ---------------------------------------------------------------------------
def clear_grid(grid, dim, grads=False):
    """Zero the grid's momentum and mass in a box; with grads, also the gradients of the
    three grid fields (the backward pass of a step rebuilds the grid)."""
    v_in, m_in, v_out, box = grid.v_in, grid.m_in, grid.v_out, grid.box

    def clear_grid():
        for I in ti.grouped(box_cells(box, dim)):
            v_in[I] = [0] * dim
            m_in[I] = 0
            if ti.static(grads):
                v_in.grad[I] = [0] * dim
                m_in.grad[I] = 0
                v_out.grad[I] = [0] * dim

    clear_grid.__name__ = 'clear_grid_and_grads' if grads else 'clear_grid'     # the kernel's name
    return ti.kernel(clear_grid)


def grid_op(grid, dim, cfg):
    """Momentum to velocity, gravity along -y (axis 1), then the boundary: cells within
    `bound` of a wall (the faces of the other axes) or of the ceiling lose a velocity
    that points out of the box; at the floor (y) either the same (sticky floor) or
    Coulomb friction with coefficient `friction` on the tangential velocity."""
    v_in, m_in, v_out, box = grid.v_in, grid.m_in, grid.v_out, grid.box
    n_grid, dt, gravity, bound = cfg.n_grid, cfg.dt, cfg.gravity, cfg.bound
    walls = [d for d in range(dim) if d != 1]
    floor = coulomb_floor(cfg.friction, dim)

    @ti.kernel
    def grid_op():
        for I in ti.grouped(box_cells(box, dim)):
            inv_m = 1 / (m_in[I] + 1e-10)
            v = inv_m * v_in[I]
            v[1] -= dt * gravity
            zero = ti.Vector([0.0] * dim)
            for d in ti.static(walls):
                if I[d] < bound and v[d] < 0:
                    v = zero
                if I[d] > n_grid - bound and v[d] > 0:
                    v = zero
            if I[1] < bound and v[1] < 0:
                if ti.static(cfg.sticky_floor):
                    v = zero
                else:
                    floor(v)
            if I[1] > n_grid - bound and v[1] > 0:
                v = zero
            v_out[I] = v

    return grid_op


def coulomb_floor(friction, dim):
    """A ti.func that applies Coulomb friction to the velocity v (a local, changed in
    place) of a cell that moves into the floor (normal +y): zero where the friction
    cone holds it, else the tangential part shortened by friction times the normal
    speed."""
    tangential = [d for d in range(dim) if d != 1]

    @ti.func
    def floor(v: ti.template()):
        normal = v[1]
        # the tangential speed, kept differentiable at zero
        speed = ti.sqrt(functools.reduce(operator.add, [v[d] * v[d] for d in ti.static(tangential)]) + 1e-20)
        if speed + friction * normal <= 0:
            v = ti.Vector([0.0] * dim)
        else:
            scale = 1 + friction * normal / speed
            v = ti.Vector([scale * v[d] if ti.static(d != 1) else 0.0 for d in ti.static(range(dim))])

    return floor


# --- particles to grid ------------------------------------------------------------------
def p2g(particles, grid, actuation, material, dim, cfg, incremental):
    """Scatter the particles of slot s to the grid (momentum with the stress and the
    actuation of step t in its affine part, and mass); write F of slot s + 1."""
    x, v, C, F, actuator_id = particles.x, particles.v, particles.C, particles.F, particles.actuator_id
    n, dt, inv_dx = x.shape[1], cfg.dt, float(cfg.n_grid)
    scale = -(dt * cfg.p_vol * 4 * inv_dx * inv_dx)
    act_strength = cfg.act_strength
    scatter = scatter_incremental(grid, dim, cfg) if incremental else scatter_per_cell(grid, dim, cfg)

    @ti.kernel
    def p2g(s: ti.i32, t: ti.i32):
        for p in range(n):
            xp = x[s, p]
            base, fx, w = bspline(xp, inv_dx)
            Cp, Fp = C[s, p], F[s, p]
            new_F = Fp + (dt * Cp) @ Fp                      # (I + dt C) F
            F[s + 1, p] = new_F
            prepared = material.prepare(new_F)
            act = 0.0
            a = actuator_id[p]
            if a >= 0:
                act = actuation[t, a] * act_strength
            scatter(base, fx, w, scale * material.stress(new_F, prepared, act), Cp, v[s, p])

    return p2g


def scatter_per_cell(grid, dim, cfg):
    """A ti.func: add weight (m vp + A dpos) and weight m to each cell of the stencil, with
    A = stress + m Cp (`stress` already scaled by -dt p_vol 4 inv_dx^2; `vp` the particle's
    velocity, a field element read here)."""
    v_in, m_in, dx = grid.v_in, grid.m_in, 1 / cfg.n_grid

    @ti.func
    def scatter(base: ti.template(), fx: ti.template(), w: ti.template(), stress: ti.template(),
                Cp: ti.template(), vp: ti.template()):
        affine = stress + MASS * Cp
        momentum = MASS * vp
        for offset in ti.static(stencil(dim)):
            dpos = (ti.Vector(offset) - fx) * dx
            cell_weight = weight(w, offset)
            v_in[base + ti.Vector(offset)] += cell_weight * (momentum + affine @ dpos)
            m_in[base + ti.Vector(offset)] += cell_weight * MASS

    return scatter


def scatter_incremental(grid, dim, cfg):
    """A ti.func: as scatter_per_cell, with each cell's momentum m v + A (offset - fx) dx
    built up from the previous cell's: sums[d] holds the sum for the offsets of axes
    0..d, and stepping axis d adds the column d of A dx."""
    v_in, m_in, dx = grid.v_in, grid.m_in, 1 / cfg.n_grid

    @ti.func
    def scatter(base: ti.template(), fx: ti.template(), w: ti.template(), stress: ti.template(),
                Cp: ti.template(), vp: ti.template()):
        affine = (stress + MASS * Cp) * dx
        columns = [ti.Vector([affine[r, d] for r in ti.static(range(dim))]) for d in ti.static(range(dim))]
        start = MASS * vp - affine @ fx
        sums = [start] * dim
        for offset in ti.static(stencil(dim)):
            for d in ti.static(range(dim)):
                if ti.static(increments_axis(offset, d)):
                    sums[d] = sums[d] + columns[d]
                    for e in ti.static(range(d + 1, dim)):
                        sums[e] = sums[d]
            cell_weight = weight(w, offset)
            cell = base + ti.Vector(offset)
            v_in[cell] += cell_weight * sums[dim - 1]
            m_in[cell] += cell_weight * MASS

    return scatter


# --- grid to particles ------------------------------------------------------------------
def g2p(particles, grid, dim, cfg, incremental):
    """Gather the velocity and C of the particles of slot s + 1 from the grid and move
    them: x[s + 1] = x[s] + dt v[s + 1]."""
    x, v, C = particles.x, particles.v, particles.C
    n, dt, inv_dx = x.shape[1], cfg.dt, float(cfg.n_grid)
    gather = gather_moments(grid, dim, inv_dx) if incremental else gather_per_cell(grid, dim, inv_dx)

    @ti.kernel
    def g2p(s: ti.i32):
        for p in range(n):
            xp = x[s, p]
            base, fx, w = bspline(xp, inv_dx)
            new_v = ti.Vector([0.0] * dim)
            new_C = ti.Matrix([[0.0] * dim for _ in ti.static(range(dim))])
            gather(base, fx, w, new_v, new_C)
            v[s + 1, p] = new_v
            x[s + 1, p] = xp + dt * new_v
            C[s + 1, p] = new_C

    return g2p


def gather_per_cell(grid, dim, inv_dx):
    """A ti.func: add the particle's velocity and C, summed cell by cell, to the zeros
    new_v and new_C (locals, changed in place)."""
    v_out = grid.v_out

    @ti.func
    def gather(base: ti.template(), fx: ti.template(), w: ti.template(), new_v: ti.template(),
               new_C: ti.template()):
        for offset in ti.static(stencil(dim)):
            dpos = ti.Vector(offset) - fx
            g_v = v_out[base + ti.Vector(offset)]
            cell_weight = weight(w, offset)
            new_v += cell_weight * g_v
            new_C += (4 * inv_dx * cell_weight) * g_v.outer_product(dpos)

    return gather


def gather_moments(grid, dim, inv_dx):
    """A ti.func: as gather_per_cell, with new_C = 4 inv_dx (sum weight g_v offset^T -
    new_v fx^T): moment[a] sums weight g_v offset[a] (the offsets are constants)."""
    v_out = grid.v_out

    @ti.func
    def gather(base: ti.template(), fx: ti.template(), w: ti.template(), new_v: ti.template(),
               new_C: ti.template()):
        moment = [ti.Vector([0.0] * dim) for _ in ti.static(range(dim))]
        for offset in ti.static(stencil(dim)):
            wg = weight(w, offset) * v_out[base + ti.Vector(offset)]
            new_v += wg
            for a in ti.static(range(dim)):
                if ti.static(offset[a] == 1):
                    moment[a] += wg
                if ti.static(offset[a] == 2):
                    moment[a] += 2.0 * wg
        for r in ti.static(range(dim)):
            for a in ti.static(range(dim)):
                new_C[r, a] = (4 * inv_dx) * (moment[a][r] - new_v[r] * fx[a])

    return gather


# --- observation and loss ---------------------------------------------------------------
def observe(particles, start_center, observation, dim, scale):
    """The controller's observation of step t: the displacement of the centre of mass from
    its start and its velocity, scaled by scale = (x scale, v scale)."""
    x, v = particles.x, particles.v
    n = x.shape[1]
    x_scale, v_scale = scale[0] / n, scale[1] / n

    @ti.kernel
    def observe(s: ti.i32, t: ti.i32):
        # observation[t, :] must be zero on entry (step() clears it)
        for p in range(n):
            d = (x[s, p] - start_center[None]) * x_scale
            u = v[s, p] * v_scale
            for q in ti.static(range(dim)):
                observation[t, q] += d[q]
            for q in ti.static(range(dim)):
                observation[t, dim + q] += u[q]

    return observe


def mean_x_loss(x, loss):
    """loss = minus the mean x of the particles of slot s."""
    n = x.shape[1]
    inv_n = 1.0 / n

    @ti.kernel
    def compute_loss(s: ti.i32):
        for p in range(n):
            loss[None] += -inv_n * x[s, p][0]

    return compute_loss
