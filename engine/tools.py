"""`ti.tools`, also a module (`from taichi.tools import VideoManager`): images and videos
(engine/gui.py)."""
from .gui import VideoManager, imread, imresize, imshow, imwrite  # noqa: F401
