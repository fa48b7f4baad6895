"""Mass-spring scenes (numpy only): the constants of the robot and triangle scenes; the
robots' and the triangle's masses and springs are in robots.py."""
from . import robots

GROUND_HEIGHT = 0.1
GRAVITY = -4.8
GOAL = (0.9, 0.2)
OBSERVATION_SCALE = 0.05
SPRING_OMEGA = 10.0
HEAD = 0

# The triangle scene's own defaults: they replace the robot's unless given explicitly.
TRIANGLE = dict(steps=1024, dt=0.001, damping=20.0, iters=25, optimizer='gd', lr=5.0, clip=None)
TRIANGLE_WALL = 0.4
TRIANGLE_FRICTION = 0.01
TRIANGLE_TARGET_AREA = 0.1


def make_robot(scene, robot):
    """The masses and springs of `--scene triangle`, or of robot `robot`."""
    return robots.triangle() if scene == 'triangle' else robots.ROBOTS[robot]()
