"""Entries of vector and matrix elements named by constant subscripts or one-letter swizzles.

Each function takes the KernelBuilder (`kb`) to report errors at the user's line.
"""
import numpy as np

from ...ir import ops
from ...core.errors import TaichiTypeError
from ..matrix import swizzle


def constant_component(comp, shape):
    """`comp` names one entry of an element of `shape` with compile-time integers."""
    comps = comp if isinstance(comp, tuple) else (comp,)
    return len(comps) == len(shape) and all(
        isinstance(c, (int, np.integer)) and not isinstance(c, bool) and 0 <= c < n for c, n in zip(comps, shape))


def flat_component(kb, node, shape, comp):
    comp = comp if isinstance(comp, tuple) else (comp,)
    if any(ops.is_value(c) for c in comp):
        raise kb.error(node, 'writing a matrix component needs constant indices')
    if len(comp) != len(shape):
        raise kb.error(node, f'component index {comp} does not match element shape {shape}')
    flat = 0
    for c, n in zip(comp, shape):
        if not -n <= c < n:         # past the element: it would touch the next one
            raise kb.error(node, f'component index {comp} is out of range for an element of shape {shape}',
                           TaichiTypeError)
        flat = flat * n + c % n
    return flat


def component_of(attr, node=None, kb=None, shape=None):
    """The entry that a one-letter swizzle (`.x`..`.w`, `.r`..`.a`, `.s`..`.q`) names (None for
    another attribute); with `shape`, an error naming the line when the vector has no such entry."""
    picks = swizzle(attr)
    if picks is None or len(picks) != 1:
        return None
    k = picks[0]
    if shape is not None and len(shape) == 1 and k >= shape[0]:
        raise kb.error(node, f'.{attr} needs a vector of at least {k + 1} entries; this one has {shape[0]}',
                       TaichiTypeError)
    return k
