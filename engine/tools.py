"""`ti.tools`, also a module (`from taichi.tools import VideoManager`): images and videos
(engine/gui.py)."""
from .gui import VideoManager, imread, imresize, imshow, imwrite  # noqa: F401
from .core.errors import missing_attribute


def __getattr__(name):
    """A name ti.tools lacks (one of Taichi's, or a typo): the engine's message, not Python's."""
    raise missing_attribute('ti.tools', name, globals())

