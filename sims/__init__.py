"""The simulators: one package each, trained with `python -m sims.<name> train`."""
import importlib
import importlib.util
import os
import pkgutil
import shlex
import sys

from .base import Simulation


SHARED = ('mpm',)       # packages that simulators share, not simulators


def names():
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg and m.name not in SHARED)


def load(name):
    """The Simulation subclass of package sims.<name>, or of a reference() 'module:Class'."""
    if ':' in name:
        module_name, qualname = name.split(':', 1)
        found = importlib.import_module(module_name)
        for part in qualname.split('.'):
            found = getattr(found, part)
        if not (isinstance(found, type) and issubclass(found, Simulation)):
            raise LookupError(f'{name} is not a Simulation subclass')
        return found
    module = importlib.import_module(f'{__name__}.{name}')
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, Simulation) and value.name == name:
            return value
    raise LookupError(f'sims.{name} defines no Simulation subclass named {name!r}')


def module_of(sim_class):
    """The package `python -m` runs for a simulator: the nearest package around the module
    that defines it with a __main__ (sims.gravity, or a user's package of their own outside
    sims/), else sims.<name>."""
    parts = sim_class.__module__.split('.')
    while parts and parts != ['__main__']:
        try:
            if importlib.util.find_spec('.'.join(parts + ['__main__'])) is not None:
                return '.'.join(parts)
        except (ImportError, ValueError, AttributeError):      # not a package
            pass
        parts.pop()
    return f'{__name__}.{sim_class.name}'


def reference(sim_class):
    """'module:Class': how another process (a Ray worker) imports this simulator."""
    return f'{sim_class.__module__}:{sim_class.__qualname__}'


def command_words(sim_class):
    """The command that runs this simulator's command line: `python -m <its package>`, or
    `python <script>` for a class defined in the script that was run."""
    script = getattr(sys.modules.get('__main__'), '__file__', None)
    if sim_class.__module__ == '__main__' and script:
        return ['python', os.path.relpath(script) if not os.path.relpath(script).startswith('..') else script]
    return ['python', '-m', module_of(sim_class)]


def command_of(sim_class):
    return shlex.join(command_words(sim_class))
