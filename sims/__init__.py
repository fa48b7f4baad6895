"""The simulators: one package each, trained with `python -m sims.<name> train`."""
import importlib
import pkgutil

from .base import Simulation


SHARED = ('mpm',)       # packages that simulators share, not simulators


def names():
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg and m.name not in SHARED)


def load(name):
    """The Simulation subclass of package sims.<name>."""
    module = importlib.import_module(f'{__name__}.{name}')
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, Simulation) and value.name == name:
            return value
    raise LookupError(f'sims.{name} defines no Simulation subclass named {name!r}')
