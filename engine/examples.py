"""`taichi.examples`: Taichi ships its example programs in this package, and programs of
their own import one helper from it, `taichi.examples.patterns.taichi_logo`, a pattern to
draw. The engine has that helper (its own drawing: a yin-yang-like disc) and none of the
example programs: `import taichi.examples.<other>` and other names fail saying so
(engine/taichi_shim.py maps both `taichi.examples` and `taichi.examples.patterns` here)."""
import sys

from .language.frontend import func
from .unsupported import unknown_name

# A package to the import system, so that `import taichi.examples.<other>` reaches the
# shim's refusal instead of Python's "'taichi.examples' is not a package".
__path__ = []

RADIUS = 0.45            # the logo's disc, around the centre of [0, 1]^2
RIM = RADIUS / 10        # its dark rim: the light half stands out from the background (0)
DOT_RADIUS = RADIUS / 6  # the dot in each half


@func
def taichi_logo(pos):
    """1 or 0 at `pos` (a 2-vector in [0, 1]^2) for a yin-yang-like logo: a disc with a dark
    (1) rim, split into a dark left and a light (0) right half by an S of two half-discs, the
    upper one light and the lower one dark, each with a dot of the other value at its
    centre; 0 outside."""
    x, y = pos[0] - 0.5, pos[1] - 0.5
    value = 0
    if x * x + y * y <= RADIUS * RADIUS:
        if x < 0:
            value = 1
        upper = x * x + (y - RADIUS / 2) ** 2
        lower = x * x + (y + RADIUS / 2) ** 2
        if upper <= (RADIUS / 2) ** 2:
            value = 0
        if lower <= (RADIUS / 2) ** 2:
            value = 1
        if upper <= DOT_RADIUS ** 2:
            value = 1
        if lower <= DOT_RADIUS ** 2:
            value = 0
        if x * x + y * y > (RADIUS - RIM) ** 2:
            value = 1
    return value


def __getattr__(name):
    """`from taichi.examples import patterns` is this module; other names are example
    programs the engine does not ship."""
    if name == 'patterns':
        return sys.modules[__name__]
    if name.startswith('__'):
        raise AttributeError(name)
    raise unknown_name('taichi.examples', name, ['patterns', 'taichi_logo'],
                       what="Taichi's example programs are not part of the engine; only "
                            'taichi.examples.patterns.taichi_logo is here')

