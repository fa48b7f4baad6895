"""Controllers shared by the simulators.

A controller turns a simulator's observation at step t into actuation values
(see controllers/base.py for the interface). Each controller lives in a module
of this package that defines a class named `Controller`; `make('name', ...)`
imports `controllers.<name>`, so a new controller is one new file.
"""
import importlib
import pkgutil


# controllers that run the rollout themselves, step by step (a simulator that offers them
# names its state: Simulation.state_fields)
STEPWISE = ('torch',)


def available(stepwise=True):
    """Names usable with --controller (the stepwise ones too, if `stepwise`)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__)
                  if m.name != 'base' and (stepwise or m.name not in STEPWISE))


def make(name, n_obs, n_act, steps, dt, **options):
    if name not in available():
        raise ValueError(f'unknown controller {name!r}; available: {", ".join(available())}')
    try:
        module = importlib.import_module(f'{__name__}.{name}')
    except ImportError as exc:          # an optional extra (torch) is not installed
        raise ValueError(f'controller {name!r} needs {exc.name}, which is not installed: '
                         f"pip install -e '.[{exc.name}]'") from exc
    return module.Controller(n_obs=n_obs, n_act=n_act, steps=steps, dt=dt, **options)
