"""FEM's scene (numpy only): the robot's triangle mesh, its rest shape and masses, the material."""
import numpy as np

GROUND = 0.1
ORIGIN = (0.1, GROUND)          # lower-left corner of the robot's cell grid
# The robot's cells: 12 x 4 cells; the lower 2 rows only under the legs. Actuator of each
# leg cell column (the other cells are passive).
COLUMNS, ROWS, LEG_ROWS = 12, 4, 2
LEG_ACTUATORS = {0: 0, 1: 0, 2: 1, 3: 1, 8: 2, 9: 2, 10: 3, 11: 3}
N_OBS = 4
OBS_SCALE = (10.0, 1.0)         # displacement, velocity


def robot_mesh(cell=0.025):
    """Node positions (n, 2), triangles (m, 3) counter-clockwise, actuator per triangle (-1: none)."""
    cells = [(i, j) for j in range(ROWS) for i in range(COLUMNS) if j >= LEG_ROWS or i in LEG_ACTUATORS]
    corners = sorted({(i + di, j + dj) for i, j in cells for di in (0, 1) for dj in (0, 1)},
                     key=lambda ij: (ij[1], ij[0]))
    index = {ij: k for k, ij in enumerate(corners)}
    nodes = np.array([(ORIGIN[0] + i * cell, ORIGIN[1] + j * cell) for i, j in corners])
    triangles, actuators = [], []
    for i, j in cells:
        a, b, c, d = index[i, j], index[i + 1, j], index[i + 1, j + 1], index[i, j + 1]
        if (i + j) % 2 == 0:            # alternate the diagonals: no preferred shear direction
            triangles += [(a, b, c), (a, c, d)]
        else:
            triangles += [(a, b, d), (b, c, d)]
        act = LEG_ACTUATORS.get(i, -1) if j < LEG_ROWS else -1
        actuators += [act, act]
    return nodes, np.array(triangles, np.int32), np.array(actuators, np.int32)


def lame(E, nu):
    return E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))


def rest_shape(nodes, triangles, rho):
    """D_m^-1 and area per triangle (D_m's columns: the edges x0 - x2, x1 - x2 at rest), and
    the lumped node masses (a third of each triangle's mass rho * area to each vertex)."""
    Dm = np.stack([nodes[triangles[:, 0]] - nodes[triangles[:, 2]],
                   nodes[triangles[:, 1]] - nodes[triangles[:, 2]]], axis=2)   # columns: edges
    B0 = np.linalg.inv(Dm)
    area0 = 0.5 * np.abs(np.linalg.det(Dm))
    mass = np.zeros(len(nodes))
    np.add.at(mass, triangles.reshape(-1), np.repeat(rho * area0 / 3, 3))
    return B0, area0, mass


def centre_of_mass(nodes, mass):
    """1 / total mass and the centre of mass of nodes with these masses."""
    inv_total = 1.0 / float(mass.sum())
    return inv_total, (mass[:, None] * nodes).sum(0) * inv_total
