"""FEM's kernels: the neo-Hookean energy of a triangle, the elastic forces as its gradient,
the step, the observation, the loss and the total energy (for the forces by a tape).

`mesh` is the namespace of the mesh's fields: vertex (the triangles' node indices), B
(D_m^-1), area, amplitude (0 for passive triangles), act_id (the actuator, clamped to >= 0)
and mass (per node).
"""
import engine as ti

from .scene import GROUND, OBS_SCALE

# Floors that bound the energy's divisor and log argument away from zero, so that the engine
# proves their derivatives finite and compiles the gradient without NaN guards (twice as fast,
# docs/performance.md). Neither binds in a sound rollout (stretch >= 1 - actuation, J near 1).
MIN_STRETCH = 0.05
MIN_J = 1e-6


def energy_density(mu, lam):
    @ti.func
    def triangle_energy(P, Binv, s):
        """Rest-area-free neo-Hookean energy of a triangle: P (2 x 3) its vertices,
        Binv its D_m^-1, s its vertical rest-shape stretch."""
        Ds = ti.Matrix([[P[0, 0] - P[0, 2], P[0, 1] - P[0, 2]],
                        [P[1, 0] - P[1, 2], P[1, 1] - P[1, 2]]])
        F = Ds @ Binv @ ti.Matrix([[1.0, 0.0], [0.0, 1.0 / ti.max(s, MIN_STRETCH)]])
        log_J = ti.log(ti.max(F.determinant(), MIN_J))
        return mu / 2 * ((F.transpose() @ F).trace() - 2) - mu * log_J + lam / 2 * log_J * log_J
    return triangle_energy


def vertex_reader(vertex):
    @ti.func
    def vertices(pos: ti.template(), t, k):
        """Triangle k's vertices at step t (2 x 3, one column per vertex)."""
        a, b, d = vertex[k][0], vertex[k][1], vertex[k][2]
        return ti.Matrix([[pos[t, a][0], pos[t, b][0], pos[t, d][0]],
                          [pos[t, a][1], pos[t, b][1], pos[t, d][1]]])
    return vertices


def force_adder(x, f, act, mesh, triangle_energy):
    vertex, B, area, amplitude, act_id = mesh.vertex, mesh.B, mesh.area, mesh.amplitude, mesh.act_id
    energy_gradient = ti.ad.grad(triangle_energy)        # d psi / d P, compiled inline
    vertices = vertex_reader(vertex)

    @ti.func
    def add_forces(t, k):
        """Triangle k's elastic forces at step t (-area d psi / d P) added to its nodes."""
        # the stretch passed as an expression, not a local: the engine bounds it
        g = area[k] * energy_gradient(vertices(x, t, k), B[k], 1.0 + amplitude[k] * act[t, act_id[k]])
        for j in ti.static(range(3)):
            ti.atomic_add(f[t, vertex[k][j]], -ti.Vector([g[0, j], g[1, j]]))
    return add_forces


def node_advancer(x, v, f, mass, dt, decay, gravity):
    @ti.func
    def advance(t, i):
        """Node i from step t to t + 1 (symplectic Euler; the sticky floor)."""
        new_v = decay * v[t, i] + dt * (f[t, i] / mass[i] + gravity)
        if x[t, i][1] + dt * new_v[1] < GROUND and new_v[1] < 0:
            new_v = ti.Vector([0.0, 0.0])            # sticky floor: the node stops
        v[t + 1, i] = new_v
        x[t + 1, i] = x[t, i] + dt * new_v
    return advance


def observation_writer(x, v, mass, com, obs, n, inv_total, com0, observe):
    obs_x, obs_v = OBS_SCALE

    @ti.func
    def centre_of_mass(t):
        total = ti.Vector([0.0, 0.0])
        for i in range(n):
            total += mass[i] * x[t, i]
        return total * inv_total

    @ti.func
    def write_observation(t):
        """The centre of mass at t into com[t]; with `observe`, the controller's inputs: the
        centre of mass's displacement from the start and its velocity, scaled."""
        centre = centre_of_mass(t)
        com[t] = centre
        if ti.static(observe):
            velocity = ti.Vector([0.0, 0.0])
            for i in range(n):
                velocity += mass[i] * v[t, i]
            velocity *= inv_total
            obs[t, 0] = (centre[0] - com0[0]) * obs_x
            obs[t, 1] = (centre[1] - com0[1]) * obs_x
            obs[t, 2] = velocity[0] * obs_v
            obs[t, 3] = velocity[1] * obs_v
    return write_observation


def step_kernel(m, n, add_forces, advance, write_observation):
    @ti.kernel
    def step(t: ti.i32):
        """Elastic forces at t (-dE/dx, compiled inline), then the nodes from t to t + 1.
        Serial loops (a few dozen elements): deterministic sums, no atomics in the adjoint."""
        ti.loop_config(serialize=True)
        for k in range(m):
            add_forces(t, k)
        ti.loop_config(serialize=True)
        for i in range(n):
            advance(t, i)
        for _ in range(1):
            write_observation(t + 1)
    return step


def loss_kernel(com, loss, last, target):
    @ti.kernel
    def compute_loss():
        """The squared distance of the centre of mass at the last step to the target."""
        d = com[last] - target
        loss[None] = d.dot(d)
    return compute_loss


def total_energy_kernel(positions, stretch, energy, mesh, m, triangle_energy):
    vertex, B, area = mesh.vertex, mesh.B, mesh.area

    @ti.kernel
    def total_energy():
        """The elastic energy of the nodes at `positions` with the stretches `stretch`."""
        for k in range(m):
            a, b, d = vertex[k][0], vertex[k][1], vertex[k][2]
            P = ti.Matrix([[positions[a][0], positions[b][0], positions[d][0]],
                           [positions[a][1], positions[b][1], positions[d][1]]])
            energy[None] += area[k] * triangle_energy(P, B[k], stretch[k])
    return total_energy
