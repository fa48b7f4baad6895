"""`ti.GUI`: Taichi's 2-D canvas, drawn off screen with Pillow. Programs draw circles,
lines, triangles, rectangles, text and images in Taichi's coordinates (x right, y up, both
in [0, 1]) and `show(filename)` writes the frame as an image file; without a file, `show`
only starts the next frame. No window is ever opened, so a program runs the same with or
without a display (`gui.running` stays True, there are no events).

`ti.tools.VideoManager` collects frames and writes a video (imageio; MP4 needs
imageio-ffmpeg, GIF does not)."""
import os
import warnings

import numpy as np
from PIL import Image, ImageDraw, ImageFont


def rgb_to_hex(c):
    """(r, g, b) in [0, 1] -> 0xRRGGBB (Taichi's ti.rgb_to_hex); arrays of shape (3, ...) too."""
    r, g, b = (np.clip(np.asarray(v, dtype=np.float64) * 255, 0, 255).astype(np.int64) for v in c[:3])
    value = (r << 16) | (g << 8) | b
    return int(value) if np.ndim(value) == 0 else value


def hex_to_rgb(color):
    """0xRRGGBB -> (r, g, b) in [0, 1]."""
    color = int(color)
    return ((color >> 16) & 0xFF) / 255, ((color >> 8) & 0xFF) / 255, (color & 0xFF) / 255


def _rgb(color):
    color = int(color)
    return (color >> 16) & 0xFF, (color >> 8) & 0xFF, color & 0xFF


class _Widget:
    def __init__(self, value=0):
        self.value = value


class GUI:
    """Taichi's GUI, off screen. `res`: an int (square) or (width, height)."""
    ESCAPE, SPACE, LMB, RMB, PRESS, RELEASE, MOTION = 'Escape', ' ', 'LMB', 'RMB', 'Press', 'Release', 'Motion'
    SHIFT, CTRL, ALT, UP, DOWN, LEFT, RIGHT, EXIT = 'Shift', 'Control', 'Alt', 'Up', 'Down', 'Left', 'Right', 'WMClose'

    def __init__(self, name='Taichi', res=512, background_color=0x0, show_gui=True, fullscreen=False,
                 fast_gui=False):
        self.name = name
        self.res = (res, res) if isinstance(res, (int, np.integer)) else tuple(int(v) for v in res)
        self.background_color = background_color
        self.running = True
        self.frame = 0
        self.fps_limit = None
        self._image = None
        self.clear()

    # --- frames ---------------------------------------------------------------------------
    def clear(self, color=None):
        color = self.background_color if color is None else color
        self._image = Image.new('RGB', self.res, _rgb(color))
        self._draw = ImageDraw.Draw(self._image)

    def show(self, file=None):
        """Write the frame to `file` (its folder is created), then start the next frame."""
        if file:
            folder = os.path.dirname(file)
            if folder:
                os.makedirs(folder, exist_ok=True)
            self._image.save(file)
        self.frame += 1
        self.clear()

    def get_image(self):
        """The frame as Taichi's (width, height, 4) float32 array, indexed [x, y], y up."""
        rgba = np.asarray(self._image.convert('RGBA'), dtype=np.float32) / 255
        return np.ascontiguousarray(rgba[::-1].transpose(1, 0, 2))

    def set_image(self, img):
        """An image indexed [x, y] (y up): (w, h) grey, (w, h, 3) RGB or (w, h, 4) RGBA,
        floats in [0, 1] or uint8; a field or ndarray is converted with to_numpy()."""
        rows = _rows_of(img)
        self._image = Image.fromarray(rows, 'RGB').resize(self.res)
        self._draw = ImageDraw.Draw(self._image)

    # --- shapes (positions in [0, 1], y up; radii and widths in pixels) -----------------------
    def _pixel(self, pos):
        w, h = self.res
        x, y = np.asarray(pos.to_numpy() if hasattr(pos, 'to_numpy') else pos, dtype=np.float64).reshape(-1)[:2]
        return float(x) * w, (1 - float(y)) * h

    def circle(self, pos, color=0xFFFFFF, radius=1):
        x, y = self._pixel(pos)
        r = float(radius)
        self._draw.ellipse((x - r, y - r, x + r, y + r), fill=_rgb(color))

    def circles(self, pos, color=0xFFFFFF, radius=1, palette=None, palette_indices=None):
        pos = np.asarray(pos.to_numpy() if hasattr(pos, 'to_numpy') else pos).reshape(-1, 2)
        if palette is not None:
            indices = np.asarray(palette_indices.to_numpy() if hasattr(palette_indices, 'to_numpy')
                                 else palette_indices).reshape(-1)
            color = np.asarray(palette)[indices]
        colors = np.broadcast_to(np.asarray(color), (len(pos),))
        radii = np.broadcast_to(np.asarray(radius, dtype=np.float64), (len(pos),))
        for p, c, r in zip(pos, colors, radii):
            self.circle(p, c, r)

    def line(self, begin, end, radius=1, color=0xFFFFFF):
        self._draw.line([self._pixel(begin), self._pixel(end)], fill=_rgb(color), width=max(1, round(2 * radius)))

    def lines(self, begin, end, radius=1, color=0xFFFFFF):
        begin, end = np.asarray(begin).reshape(-1, 2), np.asarray(end).reshape(-1, 2)
        colors = np.broadcast_to(np.asarray(color), (len(begin),))
        radii = np.broadcast_to(np.asarray(radius, dtype=np.float64), (len(begin),))
        for a, b, c, r in zip(begin, end, colors, radii):
            self.line(a, b, r, c)

    def arrow(self, orig, direction, radius=1, color=0xFFFFFF):
        tip = (orig[0] + direction[0], orig[1] + direction[1])
        self.line(orig, tip, radius, color)

    def triangle(self, a, b, c, color=0xFFFFFF):
        self._draw.polygon([self._pixel(a), self._pixel(b), self._pixel(c)], fill=_rgb(color))

    def triangles(self, a, b, c, color=0xFFFFFF):
        a, b, c = (np.asarray(v).reshape(-1, 2) for v in (a, b, c))
        colors = np.broadcast_to(np.asarray(color), (len(a),))
        for p, q, r, col in zip(a, b, c, colors):
            self.triangle(p, q, r, col)

    def rect(self, topleft, bottomright, radius=1, color=0xFFFFFF):
        (x0, y0), (x1, y1) = self._pixel(topleft), self._pixel(bottomright)
        box = (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))
        self._draw.rectangle(box, outline=_rgb(color), width=max(1, round(radius)))

    def text(self, content, pos, font_size=15, color=0xFFFFFF):
        try:
            font = ImageFont.load_default(size=int(font_size))
        except TypeError:                         # Pillow < 10.1 has one size
            font = ImageFont.load_default()
        self._draw.text(self._pixel(pos), str(content), fill=_rgb(color), font=font)

    # --- input: none off screen ------------------------------------------------------------
    def get_event(self, *filters):
        return False

    def get_events(self, *filters):
        return iter(())

    def is_pressed(self, *keys):
        return False

    def get_cursor_pos(self):
        return 0.5, 0.5

    def slider(self, text, minimum, maximum, step=1):
        return _Widget(minimum)

    def label(self, text):
        return _Widget()

    def button(self, text, event_name=None):
        return event_name or text

    def close(self):
        self.running = False


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
    """Frames in, a video out: `write_frame(img)` takes an image as GUI.set_image does (or a
    frame from `gui.get_image()`); `make_video(gif=True, mp4=True)` writes video.gif and
    video.mp4 in `output_dir`."""

    def __init__(self, output_dir, video_filename='video', width=None, height=None, post_processor=None,
                 framerate=24, automatic_build=True):
        self.output_dir = output_dir
        self.video_filename = video_filename
        self.framerate = framerate
        self.frames = []
        self.post_processor = post_processor
        os.makedirs(output_dir, exist_ok=True)

    def write_frame(self, img):
        frame = _rows_of(img)
        self.frames.append(self.post_processor(frame) if self.post_processor else frame)

    def write_frames(self, images):
        for img in images:
            self.write_frame(img)

    def get_output_filename(self, suffix):
        return os.path.join(self.output_dir, self.video_filename + suffix)

    def make_video(self, gif=True, mp4=True):
        import imageio
        if not self.frames:
            raise ValueError('VideoManager.make_video: no frames were written')
        if gif:
            imageio.mimsave(self.get_output_filename('.gif'), self.frames, duration=1000 / self.framerate)
        if mp4:
            imageio.mimsave(self.get_output_filename('.mp4'), self.frames, fps=self.framerate)
