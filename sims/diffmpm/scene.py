"""The 2D robot of DiffTaichi's diffmpm (numpy only): five rectangles, a body on four legs."""
import numpy as np

# The robot: (x, y, width, height, actuator) rectangles, offset by ROBOT_OFFSET.
ROBOT = [(0.0, 0.1, 0.3, 0.1, -1),
         (0.0, 0.0, 0.05, 0.1, 0),
         (0.05, 0.0, 0.05, 0.1, 1),
         (0.2, 0.0, 0.05, 0.1, 2),
         (0.25, 0.0, 0.05, 0.1, 3)]
ROBOT_OFFSET = (0.1, 0.03)


def particle_counts(n_grid):
    """Each rectangle's particles per axis, 2 per dx; ValueError where one gets none."""
    dx = 1 / n_grid
    counts = [(int(w / dx) * 2, int(h / dx) * 2) for _, _, w, h, _ in ROBOT]
    if not all(w * h for w, h in counts):
        thinnest = min(min(piece[2:4]) for piece in ROBOT)
        raise ValueError(f'--n-grid {n_grid} is too coarse for the robot: its {thinnest}-wide legs '
                         f'get no particle (--n-grid {round(1 / thinnest)} or more)')
    return counts


def robot_scene(n_grid):
    """Particle positions, actuator ids (-1: passive) and the number of actuators: each
    rectangle sampled with 2 particles per dx per axis."""
    positions, actuators = [], []
    for (x, y, w, h, actuator), (w_count, h_count) in zip(ROBOT, particle_counts(n_grid)):
        i, j = np.meshgrid(np.arange(w_count), np.arange(h_count), indexing='ij')
        px = x + (i.reshape(-1) + 0.5) * (w / w_count) + ROBOT_OFFSET[0]
        py = y + (j.reshape(-1) + 0.5) * (h / h_count) + ROBOT_OFFSET[1]
        positions.append(np.stack([px, py], axis=1))
        actuators.append(np.full(w_count * h_count, actuator, np.int32))
    actuator_ids = np.concatenate(actuators)
    return np.concatenate(positions), actuator_ids, int(actuator_ids.max()) + 1
