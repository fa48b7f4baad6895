"""What the controlled simulators (electric, fem, mass_spring, rigid_body) share.

A controlled simulator has a controller (`controllers.make`) that turns the observation at
step t into the actuation at t, and a kernel `step(t)` that advances the state to t + 1 and
writes the observation at t + 1; `Simulation.run_controlled` runs them, after the kernel
`observe_initial` (if any) that writes the observation at t = 0. These helpers build the
controller from the configuration and that first observation's kernel.
"""
import math

import controllers
import engine as ti


def make_controller(cfg, n_obs, n_act, omega, **options):
    """The controller `cfg.controller` for cfg's steps, dt, n_waves and hidden units."""
    return controllers.make(cfg.controller, n_obs=n_obs, n_act=n_act, steps=cfg.steps, dt=cfg.dt,
                            omega=omega, n_waves=cfg.n_waves, hidden=cfg.hidden, **options)


def damping_factor(cfg):
    """exp(-dt * damping): what the velocities keep from one step to the next."""
    return math.exp(-cfg.dt * cfg.damping)


def serial_observation(write_observation):
    """A kernel writing the observation at t = 0 with the ti.func `write_observation(t)`,
    run in a one-iteration (serial) loop as the step kernels run it."""
    @ti.kernel
    def observe_initial():
        for _ in range(1):
            write_observation(0)
    return observe_initial

