"""Rigid-body scene constants (numpy only); the robots' boxes, springs and joints are in robots.py."""
GROUND_HEIGHT = 0.1
GRAVITY = -9.8
GOAL = (0.9, 0.15)
OBSERVATION_SCALE = 0.05
SPRING_OMEGA = 30.0
CORNERS = ((-1, -1), (1, -1), (-1, 1), (1, 1))      # a box's corners, in units of its half size
OUTLINE = ((-1, -1), (1, -1), (1, 1), (-1, 1))      # the same, in drawing order
