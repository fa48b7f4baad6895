"""Drawing frames with numpy and writing them as videos and plots (no GUI window).

A `Canvas` maps the unit square (y up) to a square RGB image.
"""
import os

import numpy as np


class Canvas:
    def __init__(self, size=512, background=(255, 255, 255)):
        self.size = size
        self.image = np.empty((size, size, 3), np.uint8)
        self.image[...] = background

    def _pixels(self, points):
        points = np.asarray(points, np.float64).reshape(-1, 2)
        return points[:, 0] * self.size, (1 - points[:, 1]) * self.size

    def circles(self, centers, radius, colors):
        """Filled discs of `radius` pixels; colors: one RGB triple or one per disc."""
        px, py = self._pixels(centers)
        colors = np.broadcast_to(np.asarray(colors, np.uint8).reshape(-1, 3), (len(px), 3))
        r = int(np.ceil(radius))
        for dy in range(-r, r + 1):
            for dx in range(-r, r + 1):
                if dx * dx + dy * dy > radius * radius + 0.25:
                    continue
                ix = np.floor(px).astype(np.int64) + dx
                iy = np.floor(py).astype(np.int64) + dy
                inside = (ix >= 0) & (ix < self.size) & (iy >= 0) & (iy < self.size)
                self.image[iy[inside], ix[inside]] = colors[inside]

    def lines(self, starts, ends, width, colors):
        """Segments `width` pixels wide; colors: one RGB triple or one per segment."""
        starts = np.asarray(starts, np.float64).reshape(-1, 2)
        ends = np.asarray(ends, np.float64).reshape(-1, 2)
        colors = np.broadcast_to(np.asarray(colors, np.uint8).reshape(-1, 3), (len(starts), 3))
        longest = np.max(np.linalg.norm(ends - starts, axis=1), initial=0) * self.size
        t = np.linspace(0, 1, int(longest * 2) + 2)
        points = starts[:, None, :] + t[None, :, None] * (ends - starts)[:, None, :]
        self.circles(points.reshape(-1, 2), width / 2, np.repeat(colors, len(t), axis=0))

    def triangles(self, corners, colors):
        """Filled triangles (m x 3 x 2 corners), one RGB color each."""
        size = self.size
        pixels = np.stack([corners[..., 0] * size, (1 - corners[..., 1]) * size], axis=-1)
        for (a, b, c), color in zip(pixels, colors):
            lo = np.maximum(np.floor(np.minimum(np.minimum(a, b), c)).astype(int), 0)
            hi = np.minimum(np.ceil(np.maximum(np.maximum(a, b), c)).astype(int), size - 1)
            if np.any(hi < lo):
                continue
            px, py = np.meshgrid(np.arange(lo[0], hi[0] + 1) + 0.5, np.arange(lo[1], hi[1] + 1) + 0.5)

            def edge(p, q):
                return (q[0] - p[0]) * (py - p[1]) - (q[1] - p[1]) * (px - p[0])
            e0, e1, e2 = edge(a, b), edge(b, c), edge(c, a)
            inside = ((e0 >= 0) & (e1 >= 0) & (e2 >= 0)) | ((e0 <= 0) & (e1 <= 0) & (e2 <= 0))
            rows, cols = np.nonzero(inside)
            self.image[rows + lo[1], cols + lo[0]] = color

    def field(self, values, cmap='viridis', vmin=None, vmax=None):
        """Cover the canvas with a 2-D array (values[i, j]: i along x, j along y)."""
        from matplotlib import colormaps
        values = np.asarray(values, np.float64)
        vmin = values.min() if vmin is None else vmin
        vmax = values.max() if vmax is None else vmax
        normalized = np.clip((values - vmin) / max(vmax - vmin, 1e-12), 0, 1)
        rgb = (colormaps[cmap](normalized)[..., :3] * 255).astype(np.uint8)
        rows = (np.arange(self.size) * values.shape[1] // self.size)[::-1]   # image rows: y down
        cols = np.arange(self.size) * values.shape[0] // self.size
        self.image[...] = rgb[cols[None, :], rows[:, None]]


def next_to_target(field_at, times, target, size, hold=10, **colors):
    """Frames of a 2-D quantity at `times` (`field_at(t)`, left) next to its `target` (right),
    the last one repeated `hold` more times; colors: Canvas.field's cmap, vmin, vmax."""
    right = Canvas(size)
    right.field(target, **colors)
    gap = np.full((size, 8, 3), 255, np.uint8)
    for t in list(times) + [times[-1]] * hold:
        canvas = Canvas(size)
        canvas.field(field_at(t), **colors)
        yield np.concatenate([canvas.image, gap, right.image], axis=1)


class FramesError(ValueError):
    """A simulator's render_frames() gave what no video can be made of."""


def checked_frames(frames, owner):
    """`frames` as a list of (H, W, 3) uint8 arrays of one size; else FramesError naming
    `owner`'s render_frames()."""
    frames, what = [np.asarray(f) for f in frames], f'{owner}.render_frames()'
    if not frames:
        raise FramesError(f'{what} gave no frames: it must return or yield images, (H, W, 3) uint8 arrays '
                          f'of one size (sims.render.Canvas draws them)')
    for k, frame in enumerate(frames):
        if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
            raise FramesError(f'{what}: frame {k} is a {frame.dtype} array of shape {frame.shape}, '
                              f'not (H, W, 3) uint8')
        if frame.shape != frames[0].shape:
            raise FramesError(f'{what}: frame {k} is {frame.shape[1]} x {frame.shape[0]} pixels and frame 0 '
                              f'{frames[0].shape[1]} x {frames[0].shape[0]}: a video\'s frames have one size')
    return frames


def write_video(frames, stem, fps=30, kind='mp4'):
    """Write frames as `<stem>.mp4` (H.264 through imageio-ffmpeg, which ships its own
    ffmpeg) or, with kind='gif' or when that fails, `<stem>.gif`. Returns (path, frame
    count, None or why the MP4 could not be written). A video is written under a temporary
    name and renamed when complete: a render that fails or is interrupted leaves the
    previous video as it was."""
    frames = [np.asarray(f) for f in frames]
    if kind == 'mp4':
        try:
            return _complete(_write_mp4, frames, f'{stem}.mp4', fps), len(frames), None
        except Exception as e:   # noqa: BLE001 - no ffmpeg, or it failed: the GIF still shows the rollout
            why = f'{type(e).__name__}: {e}'.splitlines()[0]
            return _complete(_write_gif, frames, f'{stem}.gif', fps), len(frames), why
    return _complete(_write_gif, frames, f'{stem}.gif', fps), len(frames), None


def _complete(write, frames, path, fps):
    """write(frames, a temporary path with path's extension, fps), then rename it to path."""
    stem, ext = os.path.splitext(path)
    partial = f'{stem}.partial{ext}'
    try:
        write(frames, partial, fps)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    return path


def _write_mp4(frames, path, fps):
    import imageio.v2 as imageio
    import imageio_ffmpeg  # noqa: F401 - the ffmpeg binary; without it the GIF is written instead
    # yuv420p (what players expect) needs even sizes: macro_block_size=2 pads odd ones
    with imageio.get_writer(path, format='FFMPEG', fps=fps, codec='libx264', pixelformat='yuv420p',
                            macro_block_size=2, ffmpeg_log_level='error') as writer:
        for frame in frames:
            writer.append_data(frame)
    return path


def _write_gif(frames, path, fps):
    import imageio.v2 as imageio
    imageio.mimsave(path, frames, duration=1000 / fps, loop=0)
    return path


def _axes(title):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    fig, ax = plt.subplots(figsize=(5, 3.5), dpi=100)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))     # iterations are whole numbers
    ax.set_xlabel('iteration')
    ax.set_ylabel('loss')
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return fig, ax


def _save(fig, path):
    import matplotlib.pyplot as plt
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_losses(losses, path, title):
    fig, ax = _axes(title)
    ax.plot(range(len(losses)), losses, marker='.')
    _save(fig, path)


def plot_comparison(curves, path, title):
    """Several runs' loss curves in one plot; curves: {label: [(iteration, loss), ...]}."""
    fig, ax = _axes(title)
    for label, points in curves.items():
        ax.plot([i for i, _ in points], [loss for _, loss in points], marker='.', label=label)
    ax.legend(fontsize='small')
    _save(fig, path)


def color_map(values, cmap='coolwarm', vmin=-1.0, vmax=1.0):
    """RGB uint8 colors for scalar values (e.g. actuation in [-1, 1])."""
    from matplotlib import colormaps
    normalized = np.clip((np.asarray(values, np.float64) - vmin) / (vmax - vmin), 0, 1)
    return (colormaps[cmap](normalized)[..., :3] * 255).astype(np.uint8)
