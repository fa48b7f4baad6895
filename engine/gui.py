"""`ti.GUI`: Taichi's 2-D canvas, drawn off screen (engine/gui_draw.py rasterizes whole
arrays of shapes with numpy). Programs draw circles, lines, triangles, rectangles, arrows,
text and images in Taichi's coordinates (x right, y up, both in [0, 1]) and
`show(filename)` writes the frame as an image file; without a file, `show` only starts the
next frame. No window is ever opened, so a program runs the same with or
without a display: there are no events, and `gui.running` stays True until the program sets
it False, or, under `python -m engine run --frames N [--video PATH]`, after the N-th shown
frame (the frames go to the video; engine/taichi_shim.py sets that up).

`ti.tools.VideoManager` writes frames as images and a video of them (imageio; MP4 needs
imageio-ffmpeg, GIF does not)."""
import importlib.util
import os
import sys
import tempfile
import warnings

import numpy as np
from PIL import Image

from . import gui_draw
from .unsupported import unknown_name

CURSOR = (0.5, 0.5)          # where the cursor is off screen: the canvas's centre
OFF_SCREEN = ('ti.GUI draws off screen: no window opens, so there are no events and gui.running stays True; '
              'a `while gui.running:` loop does not end by itself. '
              '`python -m engine run --frames N --video out.mp4 program.py` ends it after N shown frames and '
              'writes them as a video (gui.show(file) writes one frame as an image)')


def rgb_to_hex(c):
    """(r, g, b) in [0, 1] -> 0xRRGGBB (Taichi's ti.rgb_to_hex); arrays of shape (3, ...) too."""
    r, g, b = (np.clip(np.asarray(v, dtype=np.float64) * 255, 0, 255).astype(np.int64) for v in c[:3])
    value = (r << 16) | (g << 8) | b
    return int(value) if np.ndim(value) == 0 else value


def hex_to_rgb(color):
    """0xRRGGBB -> (r, g, b) in [0, 1]."""
    color = int(color)
    return ((color >> 16) & 0xFF) / 255, ((color >> 8) & 0xFF) / 255, (color & 0xFF) / 255


class _Widget:
    def __init__(self, value=0):
        self.value = value


class Event:
    """An input event as Taichi's GUI reports it: `type` (GUI.PRESS, RELEASE or MOTION), `key`
    (GUI.ESCAPE, GUI.LMB, ..., or a printable key's character: 'a', '1'), `modifier` (the
    modifier keys held: GUI.SHIFT, ...), `pos` (the cursor, in [0, 1]^2) and `delta` (the
    wheel's turn). Off screen no event ever comes: `gui.event` stays one with no type or key."""

    def __init__(self, type=None, key=None, modifier=(), pos=CURSOR, delta=(0, 0)):
        self.type, self.key, self.modifier, self.pos, self.delta = type, key, list(modifier), pos, delta


class GUI:
    """Taichi's GUI, off screen. `res`: an int (square) or (width, height). Keys and event
    types are named as Taichi names them: the constants below, and a printable key by its
    character (`gui.is_pressed('a')`)."""
    Event = Event
    ESCAPE, SPACE, RETURN, BACKSPACE, TAB, CAPSLOCK = 'Escape', ' ', 'Return', 'BackSpace', 'Tab', 'Caps_Lock'
    SHIFT, CTRL, ALT, UP, DOWN, LEFT, RIGHT = 'Shift', 'Control', 'Alt', 'Up', 'Down', 'Left', 'Right'
    LMB, MMB, RMB, WHEEL, EXIT = 'LMB', 'MMB', 'RMB', 'Wheel', 'WMClose'
    PRESS, RELEASE, MOTION, MOVE = 'Press', 'Release', 'Motion', 'Motion'

    def __init__(self, name='Taichi', res=512, background_color=0x0, show_gui=True, fullscreen=False,
                 fast_gui=False):
        self.name = name
        self.res = (res, res) if isinstance(res, (int, np.integer)) else tuple(int(v) for v in res)
        self.background_color = background_color
        self._running, self._closed_unnoticed = True, False
        self._shown_after_close = None      # frames shown after --frames closed it (None: open)
        self.frame = 0
        self.fps_limit = None
        self.event = Event()
        self._canvas = gui_draw.Canvas(self.res)
        self.clear()
        if _recording.frames is None:        # nothing ends an endless loop: say what does
            _warn_once('off screen', OFF_SCREEN)

    def __getattr__(self, name):
        """A name Taichi's GUI has and this one lacks (or a typo): the engine's message."""
        if name.startswith('_'):
            raise AttributeError(name)
        raise unknown_name('ti.GUI', name, dir(self), what='ti.GUI draws off screen and has no such method')

    @property
    def running(self):
        """True until the program sets it False (or calls close()), or, under `python -m engine
        run --frames N`, until the N-th frame is shown."""
        self._closed_unnoticed = False          # the program checks it: it ends its loop itself
        return self._running

    @running.setter
    def running(self, value):
        self._running = value

    # --- frames ---------------------------------------------------------------------------
    def clear(self, color=None):
        self._canvas.clear(self.background_color if color is None else color)

    def show(self, file=None):
        """Write the frame to `file` (its folder is created), then start the next frame. Under
        `python -m engine run --frames N` the N-th frame closes the GUI (as a closed window
        would: `running` turns False); a program that shows another frame without having read
        `running` since ignores it, and ends there (SystemExit, status 0); one that read it may
        show one last frame, and ends at the next (`while True:` with a print of `running`)."""
        if self._shown_after_close is not None:
            if self._closed_unnoticed or self._shown_after_close:
                _recording.end_program(self)
            self._shown_after_close += 1
        if file:
            folder = os.path.dirname(file)
            if folder:
                os.makedirs(folder, exist_ok=True)
            Image.fromarray(self._canvas.rows()).save(file)
        _recording.take(self, self._canvas)
        self.frame += 1
        if self.frame == _recording.frames:
            _recording.finish(self)
            self._running, self._closed_unnoticed, self._shown_after_close = False, True, 0
        self.clear()

    def get_image(self):
        """The frame as Taichi's (width, height, 4) float32 array, indexed [x, y], y up."""
        return self._canvas.rgba()

    def set_image(self, img):
        """An image of the window's size indexed [x, y] (y up): (w, h) grey, (w, h, 2) RG,
        (w, h, 3) RGB or (w, h, 4) RGBA; floats in [0, 1] or unsigned integers (0 to their
        maximum); a field or ndarray is converted with to_numpy(). As in Taichi, another
        size or dtype is an error. A C-ordered uint8 RGB(A) image is read in place; others
        are converted a few columns at a time (engine/gui_draw.py, Canvas.image)."""
        self._canvas.image(_window_image(img, self.res))

    # --- shapes (positions in [0, 1], y up; radii and widths in pixels) -----------------------
    # Each call draws its whole array at once (engine/gui_draw.py); the single-shape calls
    # are arrays of one. A color is 0xRRGGBB, one for all or one per shape.
    @staticmethod
    def _positions(pos):
        """Positions (n x 2, or a field of them) in [0, 1], as an (n, 2) float array (float32
        stays float32: the frame converts a block at a time)."""
        p = np.asarray(_array(pos))
        return (p if p.dtype.kind == 'f' else p.astype(np.float64)).reshape(-1, 2)

    @staticmethod
    def _point(pos):
        """One position (a tuple, vector or array: its first two values) as an array of one."""
        return np.asarray(_array(pos), dtype=np.float64).reshape(-1)[:2].reshape(1, 2)

    def circle(self, pos, color=0xFFFFFF, radius=1):
        self.circles(self._point(pos), radius, color)

    def circles(self, pos, radius=1, color=0xFFFFFF, palette=None, palette_indices=None):     # Taichi's order
        """Discs at the rows of `pos`; radius and color one for all or one per circle, or the
        colors palette[palette_indices]."""
        pos = self._positions(pos)
        indices = None if palette is None else np.asarray(_array(palette_indices)).reshape(-1)
        color = _array(color) if palette is None else palette
        self._canvas.discs(pos, gui_draw.radii(_array(radius), len(pos), 'circles'),
                           gui_draw.colors(color, len(pos), 'circles', indices))

    def line(self, begin, end, radius=1, color=0xFFFFFF):
        self.lines(self._point(begin), self._point(end), radius, color)

    def lines(self, begin, end, radius=1, color=0xFFFFFF):
        """Lines from the rows of `begin` to those of `end`, `radius` pixels either side
        (round ends); radius and color one for all or one per line."""
        begin, end = self._positions(begin), self._positions(end)
        n = _same_count('lines', begin, end)
        self._canvas.segments(begin, end, gui_draw.radii(_array(radius), n, 'lines'),
                              gui_draw.colors(_array(color), n, 'lines'))

    def arrow(self, orig, direction, radius=1, color=0xFFFFFF):
        """A line from `orig` to `orig + direction` with a head of two strokes at the tip."""
        self.arrows(self._point(orig), self._point(direction), radius, color)

    def arrows(self, orig, direction, radius=1, color=0xFFFFFF):
        """Arrows from the rows of `orig` (N x 2) along the rows of `direction`; radius and
        color per arrow or one for all. The head's strokes leave the tip 0.5 rad off the
        shaft, min(0.3 x length, 4 + 3 x radius) pixels long; an arrow of no length is not drawn."""
        size = np.array(self.res, dtype=np.float64)
        orig, direction = self._positions(orig) * size, self._positions(direction) * size     # in pixels
        n = _same_count('arrows', orig, direction)
        radius, color = gui_draw.radii(_array(radius), n, 'arrows'), gui_draw.colors(_array(color), n, 'arrows')
        length = np.hypot(direction[:, 0], direction[:, 1])
        keep = length > 0                                    # no direction: nothing to point
        if not keep.all():
            orig, direction, length = orig[keep], direction[keep], length[keep]
            radius, color = (v if np.ndim(v) == 0 else v[keep] for v in (radius, color))
        tip = orig + direction
        back = -direction * (np.minimum(0.3 * length, 4 + 3 * np.asarray(radius)) / length)[:, None]
        c, s = np.cos(0.5), np.sin(0.5)
        heads = [tip + back @ np.array([[c, s], [-s, c]]), tip + back @ np.array([[c, -s], [s, c]])]   # ±0.5 rad
        begin = np.stack([orig, tip, tip], axis=1).reshape(-1, 2) / size      # shaft, then the head's strokes
        end = np.stack([tip, *heads], axis=1).reshape(-1, 2) / size
        radius, color = (v if np.ndim(v) == 0 else np.repeat(v, 3) for v in (radius, color))
        self._canvas.segments(begin, end, radius, color)

    def arrow_field(self, direction, radius=1, color=0xFFFFFF, bound=0.5):
        """An arrow per cell of a (w, h, 2) array, from a grid spread over the canvas."""
        direction = np.asarray(_array(direction), dtype=np.float64)
        self.arrows(_grid(direction.shape[:2], bound), direction.reshape(-1, 2), radius, color)

    def point_field(self, radius, color=0xFFFFFF, bound=0.5):
        """A circle per cell of a (w, h) array of radii, from a grid spread over the canvas."""
        radius = np.asarray(_array(radius), dtype=np.float64)
        self.circles(_grid(radius.shape, bound), radius.reshape(-1), color)

    def contour(self, scalar_field, normalize=False):
        """A (w, h) scalar field in matplotlib's plasma colours, as Taichi draws it: resized
        to the window (bilinear), then, with `normalize`, its range mapped to [0, 1]."""
        import matplotlib       # a third of a second to import: only here
        values = np.asarray(_array(scalar_field), dtype=np.float64)
        if values.shape != tuple(self.res):
            resized = Image.fromarray(values.T.astype(np.float32), mode='F').resize(self.res, Image.BILINEAR)
            values = np.asarray(resized, dtype=np.float64).T
        if normalize:
            low, high = values.min(), values.max()
            values = (values - low) / (high - low) if high > low else np.zeros_like(values)
        self.set_image(matplotlib.colormaps['plasma'](values))

    def vector_field(self, vector_field, arrow_spacing=5, color=0xFFFFFF):
        """Arrows for every `arrow_spacing`-th cell of a (w, h, 2) field, from the cell's
        corner; the longest spans a tenth of the canvas."""
        v = np.asarray(_array(vector_field), dtype=np.float64)
        w, h = v.shape[:2]
        xs, ys = np.meshgrid(np.arange(0, w, arrow_spacing), np.arange(0, h, arrow_spacing), indexing='ij')
        longest = np.sqrt((v ** 2).sum(axis=-1)).max()
        scale = 0.1 / longest if longest > 0 else 0.0
        orig = np.stack([xs / w, ys / h], axis=-1).reshape(-1, 2)
        self.arrows(orig, v[xs, ys].reshape(-1, 2) * scale, 1, color)

    def triangle(self, a, b, c, color=0xFFFFFF):
        self.triangles(self._point(a), self._point(b), self._point(c), color)

    def triangles(self, a, b, c, color=0xFFFFFF):
        """Filled triangles with corners the rows of a, b and c; color one or one per triangle."""
        a, b, c = (self._positions(v) for v in (a, b, c))
        n = _same_count('triangles', a, b, c)
        self._canvas.triangles(a, b, c, gui_draw.colors(_array(color), n, 'triangles'))

    def rect(self, topleft, bottomright, radius=1, color=0xFFFFFF):
        """A rectangle's outline: its four sides as lines of `radius`, as Taichi draws it."""
        (x0, y0), (x1, y1) = self._point(topleft)[0], self._point(bottomright)[0]
        corners = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
        self.lines(corners, np.roll(corners, -1, axis=0), radius, color)

    def text(self, content, pos, font_size=15, color=0xFFFFFF):
        """Text whose top left corner is at `pos`."""
        x, y = self._point(pos)[0]
        self._canvas.text(str(content), x * self.res[0], (1 - y) * self.res[1], int(font_size), color)

    # --- input: none off screen ------------------------------------------------------------
    def get_event(self, *filters):
        """Take the next event that matches `filters` (event types, keys, or (type, key) pairs)
        into `gui.event` and return True; off screen none comes, so False."""
        return False

    def get_events(self, *filters):
        """The events that match `filters`, as get_event takes them: none off screen."""
        return iter(())

    def has_key_event(self):
        return False

    def is_pressed(self, *keys):
        """Whether any of `keys` is held down: never off screen."""
        return False

    def get_cursor_pos(self):
        return CURSOR

    def slider(self, text, minimum, maximum, step=1):
        return _Widget(minimum)

    def label(self, text):
        return _Widget()

    def button(self, text, event_name=None):
        return event_name or text

    def close(self):
        self.running = False

    def __enter__(self):        # `with ti.GUI(...) as gui:` closes it at the end, as Taichi's does
        return self

    def __exit__(self, *exc):
        self.close()


class _Recording:
    """`python -m engine run --frames N --video PATH` (engine/taichi_shim.py sets it with
    record_frames): each GUI's N-th shown frame closes it; the frames that the first GUI to
    show shows go to the video, written when its N-th is shown or the program ends."""

    def __init__(self, frames=None, video=None, fps=24):
        self.frames, self.video, self.fps = frames, video, fps
        self.gui, self.writer, self.written, self.done = None, None, 0, False

    def take(self, gui, canvas):
        if self.video is None or self.done:
            return
        if self.gui is None:
            self.gui = gui
        if gui is self.gui:
            if self.writer is None:
                self.writer = _open_video(self.video, self.fps)
            self.writer.append_data(canvas.rows())
            self.written += 1

    def finish(self, gui=None):
        """Write the video, once: at the recorded GUI's last frame, or when the program ends."""
        if self.video is None or self.done or (gui is not None and gui is not self.gui):
            return
        self.done = True
        if self.writer is None:
            print(f'python -m engine run: the program showed no frames; {self.video} is not written',
                  file=sys.stderr)
            return
        self.writer.close()
        print(f'python -m engine run: wrote {self.written} frames to {self.video}', file=sys.stderr)

    def end_program(self, gui):
        """A program that shows a frame after its GUI closed, without reading gui.running."""
        self.finish()
        print(f'python -m engine run: ended the program at its frame {gui.frame + 1}: --frames {self.frames} '
              f'closed its ti.GUI and the program did not end its loop', file=sys.stderr)
        raise SystemExit(0)


_recording = _Recording()
VIDEO_FORMATS = ('.mp4', '.gif')


def record_frames(frames=None, video=None):
    """End each GUI after `frames` shown frames (None: never) and write the shown frames to
    the video file `video` (None: none); `python -m engine run --frames --video` calls it."""
    global _recording
    _recording = _Recording(frames, video)


def finish_recording():
    """The program ended: write the video of the frames shown so far, if it is not written."""
    _recording.finish()


def video_problem(path):
    """Why shown frames could not be written to `path` (None if they can): checked before the
    program runs, so that a long run does not end without its video."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.splitext(path)[1].lower() not in VIDEO_FORMATS:
        return f'{path}: the video must be a .mp4 or .gif file'
    if path.lower().endswith('.mp4') and not _mp4_writer_available():
        return f'{path}: MP4 needs imageio-ffmpeg (pip install imageio-ffmpeg); a .gif needs nothing'
    if not os.path.isdir(folder):
        return f'{path}: the folder {folder} does not exist'
    if os.path.isdir(path):
        return f'{path} is a folder'
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f'{path}: the folder {folder} cannot be written ({exc.strerror})'
    return None


def _open_video(path, fps):
    """A writer of frames (rows of RGB, top first) to `path`, MP4 or GIF by its extension."""
    import imageio
    if path.lower().endswith('.gif'):
        return imageio.get_writer(path, mode='I', duration=1000 / fps, loop=0)
    return imageio.get_writer(path, fps=fps, macro_block_size=2)   # any even size, no rescaling


def _array(value):
    """A field or ndarray as its numpy array; anything else as it is."""
    return value.to_numpy() if hasattr(value, 'to_numpy') else value


def _grid(shape, bound):
    """The (w * h, 2) positions of a w x h grid over [0, 1]^2, `bound` cells in from the
    edges (0.5: the cells' centres), ordered [x, y] as the field's cells are."""
    w, h = shape
    x, y = np.linspace(bound / w, 1 - bound / w, w), np.linspace(bound / h, 1 - bound / h, h)
    return np.stack(np.meshgrid(x, y, indexing='ij'), axis=-1).reshape(-1, 2)


def _window_image(img, res):
    """What set_image accepts, as Taichi's GUI does, checked: the numpy array (w, h, channels),
    not copied."""
    if hasattr(img, 'to_numpy'):
        img = img.to_numpy()
    if not isinstance(img, np.ndarray):
        raise ValueError(f'GUI.set_image takes a field, an ndarray or a numpy array, not {type(img).__name__}')
    if img.dtype.kind not in 'uf':
        raise ValueError(f'GUI.set_image: data type {img.dtype} is not supported (floats in [0, 1] or '
                         f'unsigned integers, as in Taichi)')
    if img.ndim not in (2, 3) or (img.ndim == 3 and img.shape[2] not in (1, 2, 3, 4)):
        raise ValueError(f'GUI.set_image: an image is (w, h) or (w, h, 1 to 4 channels), got shape {img.shape}')
    if tuple(img.shape[:2]) != tuple(res):
        raise ValueError(f'GUI.set_image: the image is {img.shape[0]} x {img.shape[1]}, the window '
                         f'{res[0]} x {res[1]} (Taichi asserts they match)')
    return img[:, :, None] if img.ndim == 2 else img


def _same_count(what, *coordinates):
    """The number of shapes, which every array of positions must give."""
    counts = {len(c) for c in coordinates}
    if len(counts) > 1:
        raise ValueError(f'GUI.{what}: the arrays of positions have {" and ".join(map(str, sorted(counts)))} rows')
    return counts.pop()


def _rows_of(img, channels=3):
    """An image indexed [x, y] with y up ((w, h) grey, (w, h, 3) RGB or (w, h, 4) RGBA;
    floats in [0, 1] or uint8; a field or ndarray) as uint8 rows, top row first, with
    `channels` channels (3, or None to keep the image's own)."""
    if hasattr(img, 'to_numpy'):
        img = img.to_numpy()
    img = np.asarray(img)
    if img.dtype != np.uint8:
        img = (np.clip(img.astype(np.float64), 0, 1) * 255).astype(np.uint8)
    if img.ndim == 2:
        img = img[:, :, None] if channels is None else np.repeat(img[:, :, None], channels, axis=2)
    img = img if channels is None else img[:, :, :channels]
    rows = img.transpose(1, 0, 2)[::-1]
    return np.ascontiguousarray(rows[:, :, 0] if rows.shape[2] == 1 else rows)


def imwrite(img, filename):
    """`ti.tools.imwrite`: an image indexed [x, y] (y up), as `GUI.set_image` takes it, to
    a file whose extension names the format (grey, RGB or RGBA as the image has)."""
    folder = os.path.dirname(filename)
    if folder:
        os.makedirs(folder, exist_ok=True)
    Image.fromarray(_rows_of(img, channels=None)).save(filename)


def imread(filename, channels=0):
    """`ti.tools.imread`: a file as a uint8 array indexed [x, y] (y up), (w, h, c); `channels`
    1, 3 or 4 converts it (0 keeps the file's)."""
    image = Image.open(filename)
    if channels:
        image = image.convert({1: 'L', 3: 'RGB', 4: 'RGBA'}[channels])
    rows = np.asarray(image)
    if rows.ndim == 2:
        rows = rows[:, :, None]
    return np.ascontiguousarray(rows[::-1].transpose(1, 0, 2))


def imresize(img, w, h=None):
    """`ti.tools.imresize`: an image indexed [x, y] resized to w x h (h = w if not given) by
    taking the nearest pixel; its dtype and channels are kept."""
    img = np.asarray(img.to_numpy() if hasattr(img, 'to_numpy') else img)
    h = w if h is None else h
    xs, ys = np.arange(w) * img.shape[0] // w, np.arange(h) * img.shape[1] // h
    return img[xs][:, ys]


_warned = set()


def _warn_once(key, message):
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def imshow(img, title='imshow'):
    """`ti.tools.imshow`: off screen there is no window, so nothing is shown (a warning
    says so, once); ti.tools.imwrite writes the image to a file instead."""
    _warn_once('imshow', 'ti.tools.imshow shows nothing: the engine opens no windows '
                         '(ti.tools.imwrite writes the image to a file)')


class VideoManager:
    """Frames in, a video out: `write_frame(img)` takes an image as GUI.set_image does (or
    a frame from `gui.get_image()`) and writes it at once as 000000.png, 000001.png, ... in
    `frame_directory` (`output_dir`/frames); `make_video(gif=True, mp4=True)` writes
    video.gif and video.mp4 in `output_dir` from them. MP4 needs imageio-ffmpeg (or PyAV):
    without one, a warning says so, once, and the GIF is written instead."""

    def __init__(self, output_dir, video_filename='video', width=None, height=None, post_processor=None,
                 framerate=24, automatic_build=True):
        self.directory = self.output_dir = output_dir
        self.frame_directory = os.path.join(output_dir, 'frames')
        self.video_filename = video_filename
        self.framerate = framerate
        self.post_processor = post_processor
        self.frame_counter = 0
        os.makedirs(self.frame_directory, exist_ok=True)

    def write_frame(self, img):
        frame = _rows_of(img)
        frame = self.post_processor(frame) if self.post_processor else frame
        Image.fromarray(frame).save(self._frame_path(self.frame_counter))
        self.frame_counter += 1

    def write_frames(self, images):
        for img in images:
            self.write_frame(img)

    def _frame_path(self, k):
        return os.path.join(self.frame_directory, f'{k:06d}.png')

    def clean_frames(self):
        """Delete the frames written so far; the next one is 000000.png again."""
        for k in range(self.frame_counter):
            if os.path.exists(self._frame_path(k)):
                os.remove(self._frame_path(k))
        self.frame_counter = 0

    def get_output_filename(self, suffix):
        return os.path.join(self.output_dir, self.video_filename + suffix)

    def make_video(self, gif=True, mp4=True):
        import imageio
        if not self.frame_counter:
            raise ValueError('VideoManager.make_video: no frames were written')
        frames = [np.asarray(Image.open(self._frame_path(k))) for k in range(self.frame_counter)]
        if mp4 and not _mp4_writer_available():
            _warn_once('mp4', 'VideoManager.make_video: MP4 needs imageio-ffmpeg (pip install imageio-ffmpeg); '
                              'writing the GIF only')
            mp4, gif = False, True
        if gif:
            imageio.mimsave(self.get_output_filename('.gif'), frames, duration=1000 / self.framerate)
        if mp4:
            imageio.mimsave(self.get_output_filename('.mp4'), frames, fps=self.framerate)


def _mp4_writer_available():
    """Whether imageio has a backend that writes MP4: imageio-ffmpeg or PyAV."""
    return any(importlib.util.find_spec(name) is not None for name in ('imageio_ffmpeg', 'av'))
