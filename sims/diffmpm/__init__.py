"""DiffMPM: a 2D soft robot simulated with MLS-MPM learns to walk to the right.

DiffTaichi's diffmpm example. The robot is five rectangles of elastic
(fixed-corotated) material sampled with 2 particles per dx per axis: a body
and four legs; each leg is one actuator, which adds an active stress along its
vertical axis. A controller (default: DiffTaichi's open-loop sine controller)
gives the actuation at each step; the loss is minus the mean x of the
particles (all solid) after the last step, and training follows its gradient.
As in DiffTaichi, `steps` counts the states: the rollout makes steps - 1
advances.

`quick` is a coarser robot (n_grid 64: 744 particles) over 160 steps, with a
larger learning rate so that a few iterations visibly lower the loss.

A step (sims/mpm) is MLS-MPM's particle-to-grid scatter (with the actuation
stress), the grid update (gravity, walls, floor) and the grid-to-particle gather,
recorded on the tape as one custom-gradient unit that re-runs the grid part in its
gradient. The particle state x, v, C, F is indexed by the time slot; with
`checkpoint=K` it holds K + 1 slots and `CheckpointedRollout` re-runs the segments in
the backward pass (memory ~ steps/K + K instead of steps).

DiffTaichi's floor zeroes the grid velocity of every cell near the floor that
moves into it before its friction projection, which makes the projection a
no-op: the floor is sticky. `sticky_floor` (default) keeps that behaviour;
`--no-sticky-floor` applies the Coulomb projection with coefficient `friction`
(sims/mpm/kernels.py, shared with diffmpm3d: the tangential speed is
sqrt(v_x^2 + 1e-20), which keeps it differentiable at zero).
"""
from sims.mpm.robot import MPMRobot
from sims.mpm.materials import fixed_corotated

from . import render
from .scene import particle_counts, robot_scene


class DiffMPM(MPMRobot):
    """DiffMPM: an MLS-MPM soft robot learns to walk right."""
    name = 'diffmpm'
    summary = '2D MLS-MPM soft robot: train its sine (or MLP) actuation to walk right'
    defaults = dict(steps=1024, n_grid=128, dt=1e-3, E=10.0, p_vol=1.0, gravity=3.8,
                    act_strength=4.0, bound=3, friction=0.5, sticky_floor=True,
                    controller='sine', n_sin_waves=4, omega=20.0, hidden=32,
                    checkpoint=0, frames=80,
                    iters=10, optimizer='gd', lr=0.1, clip=None)
    quick = dict(steps=160, n_grid=64, iters=4, lr=10.0, frames=20)
    dim = 2
    incremental = False

    @classmethod
    def check(cls, values):
        super().check(values)
        particle_counts(values['n_grid'])       # a grid too coarse for the robot's legs

    def scene(self):
        return robot_scene(self.cfg.n_grid)

    def material(self):
        return fixed_corotated(mu=self.cfg.E, la=self.cfg.E)

    def render_frames(self):
        return render.render_frames(self)
