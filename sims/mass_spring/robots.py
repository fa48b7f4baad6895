"""The mass-spring robots of DiffTaichi (robots 0, 1 and 2) and the spring triangle.

A robot is a list of point masses (initial positions) and a list of springs
(a, b, rest length, stiffness, actuation amplitude). A spring's target length is
rest * (1 + amplitude * actuation); springs with amplitude 0 are passive.

- robot 0: six masses in two rows, eleven springs of stiffness 14,000, all actuated (0.1);
- robots 1 and 2: built from unit cells of a 0.05 grid whose corner (0, 0) sits at
  (0.1, 0.1): a square cell links its four corners pairwise (stiffness 30,000) and, when
  actuated (0.15), its two vertical edges are the actuators; a triangle cell links its
  centre and its two upper corners (never actuated).
"""
from dataclasses import dataclass, field

import numpy as np

GRID = 0.05
ORIGIN = 0.1
MESH_STIFFNESS = 3e4


@dataclass
class Robot:
    objects: list = field(default_factory=list)     # [x, y] per mass
    springs: list = field(default_factory=list)     # (a, b, rest, stiffness, amplitude)
    grid_ids: dict = field(default_factory=dict)    # grid point -> mass id
    linked: set = field(default_factory=set)        # unordered mass pairs already linked

    def add_object(self, position):
        self.objects.append([float(position[0]), float(position[1])])
        return len(self.objects) - 1

    def add_spring(self, a, b, stiffness, amplitude, rest=None):
        if rest is None:
            rest = float(np.hypot(self.objects[a][0] - self.objects[b][0],
                                  self.objects[a][1] - self.objects[b][1]))
        self.springs.append((a, b, rest, float(stiffness), float(amplitude)))
        self.linked.add(frozenset((a, b)))

    # --- grid-built robots ---------------------------------------------------------
    def grid_point(self, i, j):
        if (i, j) not in self.grid_ids:
            self.grid_ids[i, j] = self.add_object((i * GRID + ORIGIN, j * GRID + ORIGIN))
        return self.grid_ids[i, j]

    def link_once(self, a, b, amplitude=0.0):
        if frozenset((a, b)) not in self.linked:
            self.add_spring(a, b, MESH_STIFFNESS, amplitude)

    def link_all(self, corners):
        for a in corners:
            for b in corners:
                if a != b:
                    self.link_once(a, b)

    def square(self, i, j, amplitude=0.0):
        lower_left, upper_left = self.grid_point(i, j), self.grid_point(i, j + 1)
        lower_right, upper_right = self.grid_point(i + 1, j), self.grid_point(i + 1, j + 1)
        self.link_once(lower_left, upper_left, amplitude)      # the vertical edges actuate
        self.link_once(lower_right, upper_right, amplitude)
        self.link_all([lower_left, upper_left, lower_right, upper_right])

    def triangle(self, i, j):
        self.link_all([self.grid_point(i + 0.5, j + 0.5), self.grid_point(i, j + 1),
                       self.grid_point(i + 1, j + 1)])

    def arrays(self):
        springs = np.array(self.springs, dtype=np.float64).reshape(-1, 5)
        return dict(x0=np.array(self.objects, np.float64),
                    anchor_a=springs[:, 0].astype(np.int32), anchor_b=springs[:, 1].astype(np.int32),
                    rest=springs[:, 2], stiffness=springs[:, 3], amplitude=springs[:, 4])


def robot0():
    r = Robot()
    for position in ([0.2, 0.1], [0.3, 0.13], [0.4, 0.1], [0.2, 0.2], [0.3, 0.2], [0.4, 0.2]):
        r.add_object(position)
    for a, b in ((0, 1), (1, 2), (3, 4), (4, 5), (0, 3), (2, 5), (0, 4), (1, 4), (2, 4), (3, 1), (5, 1)):
        r.add_spring(a, b, stiffness=14000, amplitude=0.1)
    return r


def robot1():
    r = Robot()
    r.triangle(2, 0)
    r.triangle(0, 0)
    r.square(0, 1, 0.15)
    r.square(0, 2)
    r.square(1, 2)
    r.square(2, 1, 0.15)
    r.square(2, 2)
    return r


def robot2():
    r = Robot()
    for i, j, amplitude in ((2, 0, 0.15), (0, 0, 0.15), (0, 1, 0.15), (0, 2, 0), (1, 2, 0),
                            (2, 1, 0.15), (2, 2, 0), (2, 3, 0), (2, 4, 0)):
        r.square(i, j, amplitude)
    return r


def triangle():
    """DiffTaichi's mass_spring_simple: three masses, three springs (rest lengths trained)."""
    r = Robot()
    for position in ([0.3, 0.5], [0.3, 0.4], [0.4, 0.4]):
        r.add_object(position)
    r.add_spring(0, 1, stiffness=10, amplitude=0, rest=0.1)
    r.add_spring(1, 2, stiffness=10, amplitude=0, rest=0.1)
    r.add_spring(2, 0, stiffness=10, amplitude=0, rest=0.1 * 2 ** 0.5)
    return r


ROBOTS = {0: robot0, 1: robot1, 2: robot2}
