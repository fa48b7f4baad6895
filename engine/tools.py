"""`ti.tools`, also a module (`from taichi.tools import VideoManager`): images and videos
(engine/gui.py), PLY files (engine/ply.py)."""
from .gui import VideoManager, imread, imresize, imshow, imwrite  # noqa: F401
from .ply import PLYWriter  # noqa: F401
from .core.errors import missing_attribute

# A package to the import system: `from taichi.tools.np2ply import PLYWriter` reaches the shim
# (engine/taichi_shim.py maps it to engine/ply.py), not "'taichi.tools' is not a package".
__path__ = []


def __getattr__(name):
    """A name ti.tools lacks (one of Taichi's, or a typo): the engine's message, not Python's."""
    raise missing_attribute('ti.tools', name, globals())

