"""The 3D robot of DiffTaichi's diffmpm3d (numpy only): an H of boxes, four legs of
2 x 2 actuated blocks joined by a passive body strip."""
import numpy as np

BLOCK = 0.1
ROBOT_OFFSET = (0.1, 0.05, 0.3)


def robot_boxes():
    """DiffTaichi's robot: (corner, size, actuator) boxes; actuator -1 is passive."""
    boxes = []
    half, low = BLOCK / 2, 0.7 * BLOCK / 2
    for leg in range(4):
        lx, lz = leg // 2 * BLOCK * 2, leg % 2 * BLOCK * 2
        for part in range(4):
            boxes.append(((lx + half * (part // 2), low * (part % 2), lz), (half, low, BLOCK), len(boxes)))
    for i in range(3):
        boxes.append(((BLOCK * i, 0.0, BLOCK), (BLOCK, 0.7 * BLOCK, BLOCK), -1))
    return boxes


def particle_counts(n_grid, density):
    """Each box's particles per axis, `density` per dx; ValueError where one gets none."""
    dx = 1 / n_grid
    counts = [[int(s / dx * density) for s in size] for _, size, _ in robot_boxes()]
    if not all(all(c) for c in counts):
        thinnest = min(min(size) for _, size, _ in robot_boxes())
        raise ValueError(f'--n-grid {n_grid} at --density {density} is too coarse for the robot: its '
                         f'{thinnest:g}-wide blocks get no particle (a larger --n-grid or --density)')
    return counts


def robot_scene(n_grid, density=3):
    """Particle positions, actuator ids (-1: passive) and the number of actuators: a
    regular lattice of `density` particles per dx per axis in each box."""
    positions, actuators = [], []
    for (corner, size, actuator), counts in zip(robot_boxes(), particle_counts(n_grid, density)):
        axes = [corner[a] + ROBOT_OFFSET[a] + (np.arange(counts[a]) + 0.5) * (size[a] / counts[a])
                for a in range(3)]
        grid = np.meshgrid(*axes, indexing='ij')
        positions.append(np.stack([g.reshape(-1) for g in grid], axis=1))
        actuators.append(np.full(int(np.prod(counts)), actuator, np.int32))
    actuator_ids = np.concatenate(actuators)
    return np.concatenate(positions), actuator_ids, int(actuator_ids.max()) + 1
