"""DiffMPM3D: a 3D soft robot simulated with MLS-MPM learns to walk along +x.

DiffTaichi's diffmpm3d example. The robot (DiffTaichi's scene, offset
(0.1, 0.05, 0.3), block size 0.1) is an H seen from above: four legs of
0.1 x 0.07 x 0.1 at the corners of a 0.3 x 0.3 square and a passive body strip
of three 0.1 x 0.07 x 0.1 blocks joining them along x. Each leg is a 2 x 2
stack (in x and y) of actuated blocks, 16 actuators in all. Particles sit on a
regular lattice of `density` particles per dx per axis. The material is
neo-Hookean (stress mu (F F^T - I) + la log(J) I, E = mu = la = 10, particle
volume and mass 1); an actuator adds the active stress act * F a a^T F^T with
a = e_z, the axis DiffTaichi actuates. An open-loop sine controller (default;
`--controller mlp` also works, observing the centre of mass's displacement and
velocity) gives the actuation at each step; the loss is minus the mean x of
the particles (all solid) after the last step. As in DiffTaichi, `steps`
counts the states: the rollout makes steps - 1 advances.

Sizes. DiffTaichi runs n_grid 64 (64^3 cells), density 3 (30,495 particles)
and 512 steps (dt 2e-3, about 1 s of simulated time, 8 periods of the
omega = 40 sine waves) on a GPU: here that costs about 16 s of CPU time per
training iteration, too slow for a 2-core CPU. The default keeps DiffTaichi's
scene, constants, dt and number of steps and halves the resolution: n_grid
32, density 3 (3,186 particles, 27 per cell as in DiffTaichi), 512 steps,
with `bound` 2 instead of 3 so that the floor layer and the walls sit where
DiffTaichi's do (grid nodes at y <= 1/32; `--n-grid 64 --bound 3` is
DiffTaichi's full-size scene). Measured on the shared 2-core development
machine (float32, sine controller, steady state): 1.7-1.8 s per training
iteration with `--threads 1` (1.74 s of CPU time); with 2 threads 1.9-2.0 s
wall (2.0 s of CPU time) while other jobs kept the second core busy; the
kernels' work splits over the threads, so expect about 1-1.2 s on an idle
machine. The first iteration adds 2-4 s of compilation. `--checkpoint
32` adds a forward pass (2.3 s of CPU time per iteration). Without
checkpointing the rollout keeps values and gradients of x, v, C, F for 512
slots: about 0.31 GB.

Training: DiffTaichi's plain gradient descent (learning rate 30) barely moves
at the start, because the initial actuation (sine weights of 0.01) hardly
deforms the robot and the gradient is ~1e-3; the default is Adam with learning
rate 0.1 (`--optimizer gd --lr 30` is DiffTaichi's), which moves the centre
of mass about 7 cm (loss -0.250 -> -0.326) in 20 iterations.

`quick` is a sparser robot (density 2: 1,008 particles) over 128 steps, with
a larger learning rate so that four iterations visibly lower the loss.

A step (sims/mpm) is MLS-MPM's particle-to-grid scatter (with the actuation
stress), the grid update (gravity, walls in x and z, floor and ceiling in y) and the
grid-to-particle gather, recorded on the tape as one custom-gradient unit that re-runs
the grid part in its gradient. The grid kernels visit only the box of cells that the
step's particles touch (about 1,500 of the 32,768 cells at the start). The 3D kernels
sum the stencil incrementally (see sims/mpm/kernels.py). The particle state x, v, C, F
is indexed by the time slot; with `checkpoint=K` it holds K + 1 slots and
`CheckpointedRollout` re-runs the segments in the backward pass (memory ~ steps/K + K
instead of steps).

The floor: like DiffTaichi, every cell within `bound` cells of the floor whose
velocity points into it is zeroed (DiffTaichi zeroes it before its Coulomb
projection, which then does nothing): the floor is sticky. `--no-sticky-floor`
applies the Coulomb projection with coefficient `friction` (DiffTaichi's 1.5)
instead. The robot starts 0.05 above the ground and settles onto the sticky
nodes (its lowest particles come to rest about 1.5 dx above y = 0).
"""
from sims.mpm.robot import MPMRobot
from sims.mpm.materials import neo_hookean

from . import render
from .scene import particle_counts, robot_scene


class DiffMPM3D(MPMRobot):
    """DiffMPM3D: a 3D MLS-MPM soft robot learns to walk along +x."""
    name = 'diffmpm3d'
    summary = '3D MLS-MPM soft robot: train its sine (or MLP) actuation to walk along +x'
    defaults = dict(steps=512, n_grid=32, density=3, dt=2e-3, E=10.0, p_vol=1.0, gravity=10.0,
                    act_strength=5.0, bound=2, friction=1.5, sticky_floor=True,
                    controller='sine', n_sin_waves=4, omega=40.0, hidden=32,
                    checkpoint=0, frames=64,
                    iters=10, optimizer='adam', lr=0.1, clip=None)
    quick = dict(steps=128, density=2, iters=4, lr=0.3, frames=16)
    dim = 3
    incremental = True

    @classmethod
    def check(cls, values):
        super().check(values)
        particle_counts(values['n_grid'], values['density'])     # a grid too coarse for the robot

    def scene(self):
        return robot_scene(self.cfg.n_grid, self.cfg.density)

    def material(self):
        return neo_hookean(mu=self.cfg.E, la=self.cfg.E)

    def render_frames(self):
        return render.render_frames(self)
