"""FEM's elastic forces in closed form (numpy): the reference the tests check the
autodiff forces against."""
import numpy as np


def elastic_forces(x, triangles, B0, area0, stretch, mu, lam):
    """-dE/dx of the nodes at x: H = -area P(F) (D_m^-1 S^-1)^T per triangle, with the first
    Piola stress P = mu (F - F^-T) + lambda log J F^-T and S = diag(1, stretch)."""
    tri = triangles
    Ds = np.stack([x[tri[:, 0]] - x[tri[:, 2]], x[tri[:, 1]] - x[tri[:, 2]]], axis=2)
    S_inv = np.zeros((len(tri), 2, 2))
    S_inv[:, 0, 0] = 1
    S_inv[:, 1, 1] = 1 / stretch
    G = B0 @ S_inv
    F = Ds @ G
    F_inv_T = np.linalg.inv(F).transpose(0, 2, 1)
    log_J = np.log(np.linalg.det(F))
    P = mu * (F - F_inv_T) + lam * log_J[:, None, None] * F_inv_T
    H = -area0[:, None, None] * P @ G.transpose(0, 2, 1)
    forces = np.zeros_like(x)
    np.add.at(forces, tri[:, 0], H[:, :, 0])
    np.add.at(forces, tri[:, 1], H[:, :, 1])
    np.add.at(forces, tri[:, 2], -H[:, :, 0] - H[:, :, 1])
    return forces
