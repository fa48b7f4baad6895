"""DiffTaichi's rigid-body robots (examples/robot_config.py): boxes joined by springs and joints.

A box: centre, half size (w, h), initial rotation. A link joins a point fixed on box a
(`offset_a`, in a's frame) to one on box b; it is either
- a spring: rest length, stiffness, actuation amplitude (DiffTaichi's 0 means its default
  0.05): the target length is rest * (1 + amplitude * actuation), or
- a joint (DiffTaichi's length -1): a stiff zero-length spring whose impulse also cancels
  the relative velocity of the two points.

- robot 0 (robotA): a plank on three feet, six springs (stiffness 15), plus a mast on a
  joint at the plank's right end; the head is the plank;
- robot 1 (robotB): a body on two legs, one spring and one joint per leg; the head is the body;
- robot 2 (robotLeg): a hip with two legs of thigh, calf and foot (springs as muscles,
  joints at hip, knee and ankle); the head is the left foot;
- robot 3 (robotC, defined but not listed in DiffTaichi): robot 0 without the mast; the head
  is its right foot.
"""
import math
from dataclasses import dataclass, field

import numpy as np

DEFAULT_AMPLITUDE = 0.05


@dataclass
class Robot:
    boxes: list = field(default_factory=list)    # (centre, half size, rotation)
    springs: list = field(default_factory=list)  # (a, b, offset_a, offset_b, rest, stiffness, amplitude)
    joints: list = field(default_factory=list)   # (a, b, offset_a, offset_b, stiffness)
    head: int = 0

    def box(self, centre, half_size, rotation=0.0):
        self.boxes.append((list(centre), list(half_size), float(rotation)))
        return len(self.boxes) - 1

    def spring(self, a, b, offset_a, offset_b, rest, stiffness, amplitude=DEFAULT_AMPLITUDE):
        self.springs.append((a, b, list(offset_a), list(offset_b), float(rest), float(stiffness),
                             float(amplitude)))

    def joint(self, a, b, offset_a, offset_b, stiffness):
        self.joints.append((a, b, list(offset_a), list(offset_b), float(stiffness)))

    def arrays(self):
        """numpy arrays per box, per spring and per joint (float64, int32 indices)."""
        def links(rows, n_values):
            cols = list(zip(*rows)) if rows else [[]] * (4 + n_values)
            out = dict(a=np.array(cols[0], np.int32), b=np.array(cols[1], np.int32),
                       offset_a=np.array(cols[2], np.float64).reshape(-1, 2),
                       offset_b=np.array(cols[3], np.float64).reshape(-1, 2))
            return out, [np.array(c, np.float64) for c in cols[4:]]

        centre, half, rotation = zip(*self.boxes)
        half = np.array(half, np.float64)
        w, h = half[:, 0], half[:, 1]
        boxes = dict(x0=np.array(centre, np.float64), half_size=half, rotation0=np.array(rotation),
                     inverse_mass=1.0 / (4 * w * h),                            # unit density
                     inverse_inertia=1.0 / (4 / 3 * w * h * (w * w + h * h)))
        springs, (rest, stiffness, amplitude) = links(self.springs, 3)
        springs.update(rest=rest, stiffness=stiffness, amplitude=amplitude)
        joints, (joint_stiffness,) = links(self.joints, 1)
        joints.update(stiffness=joint_stiffness)
        return boxes, springs, joints


def robot_a(mast=True):
    r = Robot()
    plank = r.box([0.3, 0.25], [0.15, 0.03])
    feet = [r.box([x, 0.15], [0.03, 0.02]) for x in (0.2, 0.3, 0.4)]
    for foot, offsets in zip(feet, ((-0.03, -0.1), (-0.03, 0.03), (0.03, 0.1))):
        for dx in offsets:
            r.spring(plank, foot, [dx, 0.0], [0.0, 0.0], rest=0.12, stiffness=15)
    if mast:
        top = r.box([0.4, 0.3], [0.005, 0.03])
        r.joint(plank, top, [0.1, 0.0], [0.0, -0.05], stiffness=15)
    r.head = plank if mast else feet[-1]
    return r


def robot_b():
    r = Robot()
    body = r.box([0.15, 0.25], [0.1, 0.03])
    back = r.box([0.08, 0.22], [0.03, 0.10])
    front = r.box([0.22, 0.22], [0.03, 0.10])
    r.spring(body, back, [0.08, 0.02], [0.0, -0.08], rest=0.22, stiffness=50, amplitude=0.03)
    r.spring(body, front, [-0.08, 0.02], [0.0, -0.08], rest=0.22, stiffness=50, amplitude=0.03)
    r.joint(body, back, [-0.08, 0.0], [0.0, 0.03], stiffness=50)
    r.joint(body, front, [0.08, 0.0], [0.0, 0.03], stiffness=50)
    r.head = body
    return r


def _along(distance, degrees, start):
    """The point `distance` below `start` along a segment tilted by `degrees`."""
    angle = math.radians(degrees)
    return [start[0] + distance * math.sin(angle), start[1] - distance * math.cos(angle)]


def robot_leg():
    thigh, calf, foot, hip_half = 0.11, 0.11, 0.08, 0.08
    thigh_angle, calf_angle = 10, -10
    hip_centre = [0.3, 0.65]
    r = Robot()
    hip = r.box(hip_centre, [0.06, hip_half])
    hip_end = [hip_centre[0], hip_centre[1] - (hip_half - 0.01)]
    legs = []
    for _side in range(2):         # left, then right: the same initial pose
        knee = _along(2 * thigh, thigh_angle, hip_end)
        ankle = _along(2 * calf, calf_angle, knee)
        legs.append((r.box(_along(thigh, thigh_angle, hip_end), [0.02, thigh], math.radians(thigh_angle)),
                     r.box(_along(calf, calf_angle, knee), [0.02, calf], math.radians(calf_angle)),
                     r.box([ankle[0] + foot, ankle[1]], [foot, 0.02])))
    foot_rest = 0.7 * math.sqrt(thigh ** 2 + (2 * foot) ** 2)
    for upper, lower, sole in legs:
        r.spring(hip, upper, [0, (hip_half - 0.01) * 0.4], [0, -thigh], 0.9 * (2 * thigh + 0.22), 5)
        r.spring(upper, lower, [0, thigh], [0, -thigh], 0.9 * 4 * thigh, 20, amplitude=0.08)
        r.spring(lower, sole, [0, 0], [foot, 0], foot_rest, 40)
        r.joint(hip, upper, [0, -(hip_half - 0.01)], [0, thigh], 200)
        r.joint(upper, lower, [0, -thigh], [0, thigh], 200)
        r.joint(lower, sole, [0, -thigh], [-foot, 0], 200)
    r.head = legs[0][2]
    return r


ROBOTS = {0: robot_a, 1: robot_b, 2: robot_leg, 3: lambda: robot_a(mast=False)}
