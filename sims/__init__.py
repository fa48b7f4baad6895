"""The simulators: one package each, trained with `python -m sims.<name> train`."""
import importlib
import pkgutil

from .base import Simulation


def names():
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg)


def load(name):
    """The Simulation subclass of package sims.<name>."""
    module = importlib.import_module(f'{__name__}.{name}')
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, Simulation) and value.name == name:
            return value
    raise LookupError(f'sims.{name} defines no Simulation subclass named {name!r}')
