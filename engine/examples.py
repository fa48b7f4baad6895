"""`taichi.examples`: Taichi ships its example programs in this package, and programs of
their own import one helper from it, `taichi.examples.patterns.taichi_logo`, a pattern to
draw. The engine has that helper (the same logo, drawn with its own code) and none of the
example programs: `import taichi.examples.<other>` and other names fail saying so
(engine/taichi_shim.py maps both `taichi.examples` and `taichi.examples.patterns` here)."""
import sys

from .language.frontend import func, static
from .unsupported import unknown_name

# A package to the import system, so that `import taichi.examples.<other>` reaches the
# shim's refusal instead of Python's "'taichi.examples' is not a package".
__path__ = []

# Taichi's logo, as Taichi's helper draws it (the same shapes and sizes): on [0, 1]^2 shrunk
# by `scale` about the centre, a disc of radius 0.495 in a ring out to 0.52; inside, two
# half-size discs one above the other, each with a dot of the other shade at its centre,
# and the rest split down the middle. The first shape that holds the point decides.
OUTER, RING = 0.52, 0.495
SHAPES = (((0.5, 0.25), 0.08, 1), ((0.5, 0.75), 0.08, 0),     # (centre, radius, shade before inverting)
          ((0.5, 0.25), 0.25, 0), ((0.5, 0.75), 0.25, 1))


@func
def taichi_logo(pos, scale=1 / 1.11):
    """1 or 0 at `pos` (a 2-vector in [0, 1]^2): Taichi's logo, 0 around it."""
    x, y = (pos[0] - 0.5) / scale + 0.5, (pos[1] - 0.5) / scale + 0.5
    shade = -1
    if (x - 0.5) ** 2 + (y - 0.5) ** 2 > OUTER ** 2:
        shade = 0
    elif (x - 0.5) ** 2 + (y - 0.5) ** 2 > RING ** 2:
        shade = 1
    for k in static(range(len(SHAPES))):
        (cx, cy), radius, inside = SHAPES[k]
        if shade == -1 and (x - cx) ** 2 + (y - cy) ** 2 <= radius ** 2:
            shade = inside
    if shade == -1:
        shade = 1 if x < 0.5 else 0
    return 1 - shade


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

