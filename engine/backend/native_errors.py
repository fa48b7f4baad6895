"""Errors that native code recorded in the runtime buffer, turned into exceptions.

After a launch that can report one (engine/backend/launch.py), or a replayed list of launches
(engine/runtime/replay.py), `raise_recorded_error` reads the error words (engine/core/program.py's
RT_ERROR_*) and raises what the user sees: an index out of range naming the field and
the line, a broken autodiff rule, a failed run-time assert.
"""
import numpy as np

from ..core.errors import (AutodiffRuleError, TaichiIndexError, TaichiNonFiniteError, TaichiRuntimeError,
                           TaichiZeroDivisionError)
from ..language.printing import assertion_error
from ..core.program import (ERROR_ASSERT, ERROR_COMPONENT, ERROR_INDEX, ERROR_NEGATIVE_POWER, ERROR_NON_FINITE, ERROR_OUT_OF_MEMORY,
                            ERROR_RACE, ERROR_RULE1, ERROR_RULE2, ERROR_ZERO_DIVISION, RT_ERROR_FIELD,
                            RT_ERROR_FLAG, RT_ERROR_INDEX, RT_ERROR_LOC)
from ..autodiff.rules import ACCESS_KINDS, race_message, rule_message

NEGATIVE_POWER = ('an integer raised to a negative integer power (its value, a fraction, is no integer; '
                  'convert the base to a float: ti.cast(a, float) ** b)')



def raise_recorded_error(prog, kernel_name, ndarrays=None, locations=(), asserts=()):
    """After a launch that can report errors: turn an error recorded by native code into
    an exception. `ndarrays`: {argument position: (name, shape)} of the launch's ndarray
    arguments; `locations`: the kernel's table of source lines (codegen.location_table);
    `asserts`: the message Formats of its run-time asserts (printing.table)."""
    rt = prog.runtime_buffer
    if rt[RT_ERROR_FLAG] == 0:
        return
    code, at = int(rt[RT_ERROR_FLAG]), int(rt[RT_ERROR_LOC])
    loc = locations[at] if 0 <= at < len(locations) else None
    ident = int(rt[RT_ERROR_FIELD])
    rt[RT_ERROR_FLAG] = 0
    if code in (ERROR_RULE1, ERROR_RULE2, ERROR_RACE):
        raise _rule_error(prog, code, loc, ident, kernel_name, ndarrays, locations)
    if code == ERROR_INDEX:
        if ident >= 0:
            field = prog.fields[ident]
            what, shape = f'field {field.name}', field.shape
        else:                     # codegen writes -1 - position for an ndarray argument
            name, shape = (ndarrays or {}).get(-1 - ident, (f'#{-1 - ident}', None))
            what = f'ndarray argument {name}'
        ndim = len(shape) if shape is not None else 1
        index = tuple(int(v) for v in rt[RT_ERROR_INDEX:RT_ERROR_INDEX + ndim])
        where = f'\n{loc.render()}\n' if loc else ' '
        raise TaichiIndexError(
            f'{where}in kernel {kernel_name}: index {index} is out of range for '
            f'{what}' + (f' of shape {shape}' if shape is not None else ''))
    if code == ERROR_COMPONENT:
        index, extent = (int(v) for v in rt[RT_ERROR_INDEX:RT_ERROR_INDEX + 2])
        where = f'\n{loc.render()}\n' if loc else ' '
        raise TaichiIndexError(f'{where}in kernel {kernel_name}: component index {index} is out of range '
                               f'for a vector or matrix axis of {extent} entries')
    if code == ERROR_ASSERT:
        fmt = asserts[ident]
        words = rt[RT_ERROR_INDEX:RT_ERROR_INDEX + len(fmt.slots)]
        raise assertion_error(kernel_name, loc, fmt.render(fmt.decode(words)))
    where = f'\n{loc.render()}' if loc else ''
    if code == ERROR_NON_FINITE:
        raise TaichiNonFiniteError(f'kernel {kernel_name}: NaN or Inf produced from finite operands{where}')
    if code == ERROR_ZERO_DIVISION:
        raise TaichiZeroDivisionError(f'kernel {kernel_name}: integer division or modulo by zero{where}')
    if code == ERROR_NEGATIVE_POWER:
        raise TaichiRuntimeError(f'kernel {kernel_name}: {NEGATIVE_POWER}{where}')
    if code == ERROR_OUT_OF_MEMORY:
        raise MemoryError(f'kernel {kernel_name}: out of memory for the autodiff stack of a loop{where}')
    raise TaichiRuntimeError(f'kernel {kernel_name} reported error {code}')


def _rule_error(prog, code, loc, ident, kernel_name, ndarrays, locations):
    """The AutodiffRuleError of a rule broken inside a checked launch (engine/autodiff/rules.py)."""
    rt = prog.runtime_buffer
    read_loc, offset, kind = (int(v) for v in rt[RT_ERROR_INDEX:RT_ERROR_INDEX + 3])
    if ident >= 0:
        target = prog.fields[ident]
        shape = target.shape + target.element_shape
    else:
        name, shape = (ndarrays or {}).get(-1 - ident, (f'#{-1 - ident}', ()))
        target = _Named(name)
    element = tuple(int(i) for i in np.unravel_index(offset, shape)) if shape else ()
    kind = ACCESS_KINDS[kind]
    if code == ERROR_RACE:
        message = race_message(target, kind)
    else:
        rule = 2 if code == ERROR_RULE2 else 1
        earlier = locations[read_loc] if 0 <= read_loc < len(locations) else None
        message = (f'global data access rule {rule} is broken: '
                   + rule_message(rule, target, earlier.lineno if earlier else None, kind))
    return AutodiffRuleError(f'in kernel {kernel_name} (element {element} of {target.name}): {message}', loc)


class _Named:
    def __init__(self, name):
        self.name = name
