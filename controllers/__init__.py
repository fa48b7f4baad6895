"""Controllers shared by the simulators.

A controller turns a simulator's observation at step t into actuation values
(see controllers/base.py for the interface). Each controller lives in a module
of this package that defines a class named `Controller`; `make('name', ...)`
imports `controllers.<name>`, so a new controller is one new file.
"""
import importlib
import pkgutil


def available():
    """Names usable with --controller."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name != 'base')


def make(name, n_obs, n_act, steps, dt, **options):
    if name not in available():
        raise ValueError(f'unknown controller {name!r}; available: {", ".join(available())}')
    module = importlib.import_module(f'{__name__}.{name}')
    return module.Controller(n_obs=n_obs, n_act=n_act, steps=steps, dt=dt, **options)
