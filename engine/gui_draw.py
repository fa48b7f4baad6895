"""ti.GUI's frame and its rasterizers: every shape call draws its whole array with numpy
operations, never a Python step per shape (Taichi's examples draw 10^5 circles a frame).

The frame is a (width, height) array of little-endian 32-bit pixels indexed [x, y], y up, as
Taichi's images are: bytes red, green, blue, 0 (the int 0x00BBGGRR). A shape writes a
colour with one integer store per pixel, and an RGB image's bytes, read as words, are
already pixels (an image's red byte goes first). Pixel (i, j) is the square
[i, i+1) x [j, j+1) in pixel units (x * width, y * height); a shape covers the pixels whose
centres (i + 0.5, j + 0.5) lie in it, edges included. Shapes are drawn in the order given:
where two overlap, the later one shows (painter's order)."""
import functools
import math

import numpy as np
from PIL import Image, ImageDraw, ImageFont

MIN_RADIUS = math.sqrt(0.5)   # every point is within √½ of a pixel centre: no dot or thin line vanishes
CHUNK = 1 << 16               # candidate pixels per numpy pass of the stamp, in work arrays kept
                              # from call to call (fresh ones can mean fresh pages to fault in, 2 ms
                              # a frame in mpm99: see Canvas.__init__); the temporaries per disc
                              # stay under 128 KB, in cache
FILL_CHUNK = 1 << 17          # bounding-box pixels per pass of shapes filled by columns (they cover
                              # a fraction of their boxes)
IMAGE_CHUNK = 1 << 17         # image pixels converted per pass: the float and byte buffers stay in cache
BLOCK = 1 << 12               # shapes per block (the shapes filled by columns)
STAMP_SIDE = 16               # discs whose box is at most this wide are stamped; wider ones go by columns
TEXT_CACHE = 32               # lines of text whose masks are kept from frame to frame
TEXT_CACHE_PIXELS = 1 << 16   # and only masks of at most this many pixels
MARGIN = 3 * STAMP_SIDE       # pixels of buffer around the frame (Canvas.__init__)


class Canvas:
    """A frame of `res` = (width, height) pixels and the shapes drawn into it."""

    def __init__(self, res):
        self.w, self.h = (int(v) for v in res)
        # The frame sits in a buffer with MARGIN pixels around it: a small disc's box, its
        # centre clipped to just off the frame, stays in the buffer, so the stamp needs no
        # bounds test; what lands in the margin is never shown.
        self.stride = self.h + 2 * MARGIN
        self._buffer = np.zeros((self.w + 2 * MARGIN, self.stride), dtype='<u4')
        self.frame = self._buffer[MARGIN:MARGIN + self.w, MARGIN:MARGIN + self.h]
        self.flat = self._buffer.reshape(-1)
        self.origin = MARGIN * self.stride + MARGIN          # flat index of pixel (0, 0)
        self._columns = max(1, IMAGE_CHUNK // max(self.h, 1))     # image columns per pass
        self._staging = None
        self._work = None
        # glibc's malloc maps a block this big afresh and, when it is freed, raises its
        # thresholds: blocks up to 8 MB then come from the heap, which is trimmed only past
        # 16 MB free. Otherwise the MBs of temporaries a frame's drawing takes and frees can
        # be mapped and unmapped pass after pass, every page faulted in again (4 ms of a
        # frame of initial_value_problem's arrows). Other allocators: an unused block.
        np.empty(8 << 20, np.uint8)

    def clear(self, color):
        self.frame.fill(pixel_value(int(color) & 0xFFFFFF))

    def rgb(self):
        """The frame's (w, h, 3) red, green and blue bytes: a view, written through."""
        return self._buffer.view(np.uint8).reshape(self._buffer.shape + (4,))[
            MARGIN:MARGIN + self.w, MARGIN:MARGIN + self.h, :3]

    def rows(self):
        """The frame as (h, w, 3) uint8 rows, top row first (Pillow's and imageio's layout)."""
        top_first = np.ascontiguousarray(self.frame.T[::-1])       # 4-byte pixels: one fast transpose
        return np.ascontiguousarray(top_first.view(np.uint8).reshape(self.h, self.w, 4)[:, :, :3])

    def rgba(self):
        """Taichi's get_image: (w, h, 4) float32 in [0, 1], alpha 1."""
        out = np.empty((self.w, self.h, 4), dtype=np.float32)
        np.divide(self.rgb(), np.float32(255), out=out[:, :, :3])
        out[:, :, 3] = 1
        return out

    # --- images -------------------------------------------------------------------------
    def image(self, img):
        """Copy a (w, h, c) image (c = 1 to 4, checked by the caller) into the frame. A
        C-ordered uint8 RGB or RGBA image is read in place, as words; anything else goes
        through byte and float buffers of a few columns, kept for the next frame (a fresh
        frame-sized buffer costs more in page faults than the conversion)."""
        channels, done = img.shape[2], 0
        if img.dtype == np.uint8 and channels in (3, 4) and img.flags.c_contiguous:
            done = self.w - (channels == 3)      # an RGB image's last word would read a byte past it
            words = _pixel_words(img, (self.h * channels, channels), (done, self.h))
            np.bitwise_and(words, 0xFFFFFF, out=self.frame[:done])
        if channels == 1:           # grey: one value a pixel, spread to its three bytes by one multiply
            for x in range(0, self.w, self._columns):
                part = img[x:x + self._columns, :, 0]
                np.multiply(self._grey_bytes(part), np.uint32(0x010101), out=self.frame[x:x + len(part)], casting='unsafe')
            return
        for x in range(done, self.w, self._columns):
            part = img[x:x + self._columns]
            words = _pixel_words(self._bytes_of(part), (self.h * 3, 3), (len(part), self.h))
            np.bitwise_and(words, 0xFFFFFF, out=self.frame[x:x + len(part)])

    def _grey_bytes(self, part):
        """Columns (k, h) of a grey image as their 0-255 values, uint8 or wider."""
        if part.dtype == np.uint8:
            return part
        if part.dtype.kind == 'u':
            return part // (np.iinfo(part.dtype).max // 255)
        scaled = self._staging_floats().reshape(-1)[:part.size].reshape(part.shape)
        np.multiply(part, np.float32(255), out=scaled, casting='same_kind')
        grey = self._staging[0][:part.size].reshape(part.shape)
        with np.errstate(invalid='ignore'):     # NaN: black, as in the three-channel path
            np.clip(scaled, 0, 255, out=grey, casting='unsafe')     # truncates, as astype(uint8) does
        return grey

    def _staging_floats(self):
        """The conversion's buffers, made at the first image: bytes and floats of a pass."""
        if self._staging is None:
            n = self._columns * self.h
            self._staging = np.zeros(3 * n + 1, np.uint8), np.empty((self._columns, self.h, 3), np.float32)
        return self._staging[1]

    def _bytes_of(self, part):
        """Columns (k, h, c) of an image as (k, h, 3) RGB bytes, C-ordered, with one byte
        after them (so that the last pixel's word stays in the buffer)."""
        self._staging_floats()
        size = len(part) * self.h * 3
        out = self._staging[0][:size + 1][:size].reshape(len(part), self.h, 3)
        src = part[:, :, :3]
        dst = out[:, :, :2] if src.shape[2] == 2 else out      # grey (c = 1) broadcasts to 3
        if src.shape[2] == 2:                                   # red and green, no blue
            out[:, :, 2] = 0
        if src.dtype == np.uint8:
            np.copyto(dst, src)
        elif src.dtype.kind == 'u':     # 0 to max as 0 to 255: max is 255 * (max // 255) exactly
            np.floor_divide(src, np.iinfo(src.dtype).max // 255, out=dst, casting='unsafe')
        else:
            scaled = self._staging[1][:len(part), :, :dst.shape[2]]
            np.multiply(src, np.float32(255), out=scaled, casting='same_kind')
            np.clip(scaled, 0, 255, out=dst, casting='unsafe')   # truncates, as astype(uint8) does
        return self._staging[0][:size + 1]

    def text(self, content, left, top, size, color):
        """Text in Pillow's rows (y down) from (left, top), `size` pixels high, blended in by
        its coverage."""
        x0, y0, alpha = _text_mask(content, left, top, size)
        w, h = alpha.shape
        cx0, cy0, cx1, cy1 = max(x0, 0), max(y0, 0), min(x0 + w, self.w), min(y0 + h, self.h)
        if cx1 <= cx0 or cy1 <= cy0:
            return
        alpha = alpha[cx0 - x0:cx1 - x0, cy0 - y0:cy1 - y0][:, ::-1, None].astype(np.uint32)    # rows -> [x, y up]
        region = self.rgb()[cx0:cx1, self.h - cy1:self.h - cy0]
        ink = np.array(rgb_bytes(color), dtype=np.uint32)
        region[...] = (ink * alpha + region * (255 - alpha) + 127) // 255

    # --- shapes: positions (n, 2) in [0, 1], y up; radii in pixels --------------------------
    # Shapes go in blocks, in order: every temporary stays small, in cache and off fresh
    # pages, and a later block overwrites an earlier one as a later shape should.
    def _to_pixels(self, pos):
        return np.multiply(pos[:, 0], self.w, dtype=np.float64), np.multiply(pos[:, 1], self.h, dtype=np.float64)

    def discs(self, pos, r, color):
        """Discs centred at the rows of pos, of radius r (one or one per disc); color one or
        one per disc. A disc off the frame, or not finite, draws nothing."""
        r = np.maximum(r, MIN_RADIUS)
        finite = np.isfinite(r)
        if not finite.all():
            if np.ndim(r) == 0:
                return
            pos, r, color = pos[finite], r[finite], _part(color, finite)
        if not len(pos):
            return
        side = math.floor(2 * np.max(r)) + 1    # pixel centres within r of x span at most floor(2r) + 1 columns
        if side <= STAMP_SIDE:
            self._stamp_discs(pos, r, color, side)
            return
        for part in _blocks(len(pos), BLOCK):
            cx, cy = self._to_pixels(pos[part])
            rp = np.broadcast_to(_part(r, part), cx.shape)
            params = np.stack([cx, cy, rp], axis=1)
            self._fill(cx - rp, cx + rp, cy - rp, cy + rp, _part(color, part),
                       lambda ids, u: _disc_spans(*np.take(params, ids, axis=0).T, u))

    def _stamp_discs(self, pos, r, color, side):
        """Small discs: every disc tests the same side x side box of pixels from its first
        column and row, the discs along the last axis so that each numpy pass runs over
        many. Boxes up to 3 x 3 in one colour: a pass per pixel of the box, selecting the
        discs that cover it (the order of writes cannot matter); others: _paint."""
        k = np.arange(side)
        offsets = self.origin + k[:, None] * self.stride + k
        by_pixel = np.ndim(color) == 0 and side <= 3
        with np.errstate(invalid='ignore'):        # a NaN centre casts to garbage and fails the test
            for part in _blocks(len(pos), max(1, CHUNK // max(side * side, 4))):
                cx, cy = self._to_pixels(pos[part])
                rp = _part(r, part)
                to_centres = (k[:, None] - rp).astype(np.float32)      # box pixel k's centre: first + k + 0.5
                first_x, dx2 = _first_pixels(cx, rp, side, self.w, to_centres)
                first_y, dy2 = _first_pixels(cy, rp, side, self.h, to_centres)
                base, r2 = first_x * self.stride + first_y, np.square(rp, dtype=np.float32)
                if by_pixel:
                    for i, j in np.ndindex(side, side):
                        self.flat[np.compress(dx2[i] + dy2[j] <= r2, base) + offsets[i, j]] = color
                else:
                    self._paint(offsets, base, dx2, dy2, r2, _part(color, part))

    def _paint(self, offsets, base, dx2, dy2, r2, color):
        """Store color in the box pixels base + offsets (box pixel, disc) whose squared
        distances dx2 + dy2 are within r2. Every candidate is stored, those outside to the
        buffer's first pixel (never shown): selecting them would allocate index arrays, and
        all the rest runs in work arrays kept from call to call (see CHUNK). One colour: in
        any order. One per disc: disc by disc (the mask transposed), and numpy's assignment
        keeps the last of repeated indices, so a later disc overwrites an earlier one."""
        side, count = len(offsets), len(base)
        if self._work is None or self._work[0].size < CHUNK:
            self._work = (np.empty(CHUNK, np.float32), np.empty((3, CHUNK), bool), np.empty(CHUNK, np.intp),
                          np.empty(CHUNK, np.uint32))
        distance, (inside, by_disc, outside), pixel, shade = (w[..., :side * side * count] for w in self._work)
        np.add(dx2[:, None], dy2[None], out=distance.reshape(side, side, count))
        np.less_equal(distance.reshape(side, side, count), r2, out=inside.reshape(side, side, count))  # NaN: out
        if np.ndim(color) == 0:
            np.add(offsets[:, :, None], base, out=pixel.reshape(side, side, count))
        else:
            np.copyto(by_disc.reshape(count, -1), inside.reshape(-1, count).T)
            inside = by_disc
            np.add(base[:, None], offsets.reshape(1, -1), out=pixel.reshape(count, -1))
            np.copyto(shade.reshape(count, -1), color[:, None])
            color = shade
        np.logical_not(inside, out=outside)
        np.copyto(pixel, 0, where=outside)
        self.flat[pixel] = color

    def segments(self, a, b, r, color):
        """Thick lines from the rows of a to those of b: capsules of radius r (one or one per line)."""
        r = np.maximum(r, MIN_RADIUS)
        for part in _blocks(len(a), BLOCK):
            ends = (*self._to_pixels(a[part]), *self._to_pixels(b[part]))
            self._capsules(*ends, np.broadcast_to(_part(r, part), ends[0].shape), _part(color, part))

    def _capsules(self, ax, ay, bx, by, r, color):
        keep = _finite(ax, ay, bx, by, r)
        if not keep.all():
            ax, ay, bx, by, r = (v[keep] for v in (ax, ay, bx, by, r))
            color = _part(color, keep)
        swap = bx < ax                                   # left end first: dx >= 0
        ax, bx = np.where(swap, bx, ax), np.where(swap, ax, bx)
        ay, by = np.where(swap, by, ay), np.where(swap, ay, by)
        dx, dy = bx - ax, by - ay
        length = np.hypot(dx, dy)
        sine = np.divide(dy, length, out=np.zeros_like(length), where=length > 0)
        with np.errstate(divide='ignore'):                # 1 / 0: inf, see _capsule_spans
            params = np.stack([ax, ay, dx, dy, 1 / dx, r * sine, r * r], axis=1)
        self._fill(ax - r, bx + r, np.minimum(ay, by) - r, np.maximum(ay, by) + r, color,
                   lambda ids, u: _capsule_spans(np.take(params, ids, axis=0).T, u))

    def triangles(self, a, b, c, color):
        """Filled triangles with corners the rows of a, b and c; color one or one per triangle."""
        for part in _blocks(len(a), BLOCK):
            (ax, ay), (bx, by), (cx, cy) = (self._to_pixels(v[part]) for v in (a, b, c))
            xs, ys, col = np.stack([ax, bx, cx]), np.stack([ay, by, cy]), _part(color, part)
            keep = _finite(*xs, *ys)
            if not keep.all():
                xs, ys, col = xs[:, keep], ys[:, keep], _part(col, keep)
            edges = _edges([(xs[k], ys[k], xs[k - 1], ys[k - 1]) for k in range(3)])
            self._fill(xs.min(axis=0), xs.max(axis=0), ys.min(axis=0), ys.max(axis=0), col,
                       lambda ids, u: _edge_spans(np.take(edges, ids, axis=0).T, u))

    def _fill(self, xlo, xhi, ylo, yhi, color, spans):
        """Convex shapes by pixel columns: each shape's columns are those whose centres lie in
        [xlo, xhi]; spans(ids, u) gives, for shapes ids at column centres u, the run [lo, hi]
        of y the shape covers there (NaN: none); the callers keep a row of parameters per
        shape, so that one np.take of rows gathers them for every column (a take per
        parameter costs several times more). Shapes go in chunks of about FILL_CHUNK pixels
        of their bounding boxes, in order."""
        c0, count = _pixel_range(xlo, xhi, self.w)
        _, rows = _pixel_range(ylo, yhi, self.h)
        bounds = _chunk_bounds(count * rows + count, FILL_CHUNK)
        for start, stop in zip(bounds[:-1], bounds[1:]):
            ids = np.repeat(np.arange(start, stop), count[start:stop])
            if not len(ids):
                continue
            col = _runs(c0[start:stop], count[start:stop])
            with np.errstate(invalid='ignore'):           # NaN marks a column a part misses
                lo, hi = spans(ids, col + 0.5)
            first, run = _pixel_range(lo, hi, self.h)
            pixel = _runs(self.origin + col * self.stride + first, run)    # a column's pixels are consecutive
            self.flat[pixel] = color if np.ndim(color) == 0 else np.repeat(color[ids], run)


def _first_pixels(centre, r, side, size, to_centres):
    """Along one axis, the first pixel of each disc's box (pixel centres within r of the
    centre start at ceil(centre - r - 0.5)) and the squared distances (side, discs) from
    the centre to the box's pixel centres, given to_centres = k - r for k < side. A
    centre off the frame is clipped to just off it first, so that the box stays in the
    buffer's margin (and casts to an int)."""
    np.clip(centre, -side - 1, size + side + 1, out=centre)
    centre -= r + 0.5
    first = np.ceil(centre)
    fraction = np.empty(centre.shape, np.float32)
    np.subtract(first, centre, out=fraction, casting='same_kind')     # in [0, 1): small, float32 is exact enough
    d2 = np.add(fraction, to_centres)
    return first.astype(np.intp), np.square(d2, out=d2)


def _pixel_range(lo, hi, size):
    """The first index and the count of the pixels (0 to size - 1) whose centres lie in
    [lo, hi]; clipped before the cast (no overflow), and fmin/fmax turn NaN into no pixels."""
    first = np.ceil(np.fmin(np.fmax(lo, 0), size) - 0.5).astype(np.intp)
    last = np.floor(np.fmin(np.fmax(hi, -1), size) - 0.5).astype(np.intp)
    return first, np.maximum(last - first + 1, 0)


def _runs(first, count):
    """Ragged runs of consecutive ints as one flat array: first[m] + k for k < count[m]."""
    ends = np.cumsum(count)
    return np.repeat(first - (ends - count), count) + np.arange(ends[-1] if len(ends) else 0)


def _chunk_bounds(cost, budget):
    """Bounds of consecutive shapes whose costs add up to about budget (a costlier shape alone)."""
    total = np.cumsum(cost)
    if not len(total) or total[-1] <= budget:
        return np.array([0, len(cost)])
    inner = np.searchsorted(total, np.arange(budget, total[-1], budget), side='right')
    return np.unique(np.concatenate([[0], inner, [len(cost)]]))


def _edges(segments):
    """Polygon edges, each given as (x, y, x', y') arrays over the shapes, as rows of (left
    x, right x, y at left x, slope) per edge, a row per shape. A vertical edge gets an
    empty x range (right x = -inf: no column crosses it, and no inf - inf makes a NaN);
    the edges meeting it give the run's ends at its column."""
    columns = []
    for px, py, qx, qy in segments:
        left = px <= qx
        x0, x1 = np.where(left, px, qx), np.where(left, qx, px)
        y0, y1 = np.where(left, py, qy), np.where(left, qy, py)
        dx = x1 - x0
        slope = np.divide(y1 - y0, dx, out=np.zeros_like(dx), where=dx > 0)
        columns += [x0, np.where(dx > 0, x1, -np.inf), y0, slope]
    return np.stack(columns, axis=1)


def _edge_spans(edges, u):
    """The runs of y convex polygons cover at columns u, given their _edges (a column of
    values each): between the edges' lowest and highest crossings (NaN where none)."""
    lo = hi = None
    for x0, x1, y0, slope in zip(*[iter(edges)] * 4):
        y = np.where((x0 <= u) & (u <= x1), y0 + (u - x0) * slope, np.nan)
        lo, hi = (y, y) if lo is None else (np.fmin(lo, y), np.fmax(hi, y))
    return lo, hi


def _disc_spans(cx, cy, r, u):
    """The runs of y discs cover at columns u (sqrt of a negative is NaN where a column
    misses a disc)."""
    h = np.sqrt(np.square(r) - np.square(u - cx))
    return cy - h, cy + h


def _capsule_spans(params, u):
    """The runs of y capsules (segments a-b, left end a, thickened by r) cover at columns u.
    The run's top is the highest point of the discs of radius r centred along the segment:
    a concave function of the centre's place t in [0, 1], highest at the t whose centre is
    at x = u + r sin(angle), clipped to the segment (then an end disc's arc); the bottom
    likewise at x = u - r sin(angle). A vertical segment's t is 0 or 1 (x / 0 is +-inf);
    0 / 0 (a column at a dot's centre, or at exactly r from a vertical segment) is NaN,
    which fmin and fmax turn into 1, where any t gives the same point or a pixel at the
    edge."""
    ax, ay, dx, dy, inverse_dx, r_sine, r2 = params
    from_a = u - ax
    ends = []
    for sign in (-1, 1):
        t = np.fmax(np.fmin((from_a + sign * r_sine) * inverse_dx, 1), 0)
        off = from_a - t * dx
        ends.append(ay + t * dy + sign * np.sqrt(np.maximum(r2 - off * off, 0)))
    return ends


def _finite(*arrays):
    keep = np.isfinite(arrays[0])
    for a in arrays[1:]:
        keep &= np.isfinite(a)
    return keep


def _part(value, part):
    """A block (a slice or a mask) of a value given one for all shapes or one per shape."""
    return value if np.ndim(value) == 0 else value[part]


def _blocks(count, step):
    return [slice(s, s + step) for s in range(0, count, step)]


def rgb_bytes(color):
    color = int(color)
    return (color >> 16) & 0xFF, (color >> 8) & 0xFF, color & 0xFF


def _text_mask(content, left, top, size):
    """(x0, y0, coverage) of text drawn by Pillow's default font of `size` pixels at (left,
    top): coverage is (w, h) uint8 indexed [x, row], its corner at pixel (x0, y0). Small
    masks are kept for later frames (Pillow takes 2-3 ms to load the font and draw a line,
    and a label rarely changes); the oldest goes when TEXT_CACHE are kept."""
    key = (content, left, top, size)
    if key in _texts:
        return _texts[key]
    font = _font(size)
    probe = ImageDraw.Draw(Image.new('L', (1, 1)))
    x0, y0, x1, y1 = probe.textbbox((left, top), content, font=font)
    x0, y0, x1, y1 = math.floor(x0), math.floor(y0), math.ceil(x1), math.ceil(y1)
    mask = Image.new('L', (max(x1 - x0, 0), max(y1 - y0, 0)))
    ImageDraw.Draw(mask).text((left - x0, top - y0), content, fill=255, font=font)
    coverage = np.asarray(mask, dtype=np.uint8).T
    coverage.flags.writeable = False
    if coverage.size <= TEXT_CACHE_PIXELS:
        if len(_texts) >= TEXT_CACHE:
            del _texts[next(iter(_texts))]
        _texts[key] = (x0, y0, coverage)
    return x0, y0, coverage


_texts = {}         # _text_mask's masks kept, oldest first


@functools.lru_cache(maxsize=4)
def _font(size):
    """Pillow's default font at `size` pixels (a font object holds its glyphs: few are kept)."""
    try:
        return ImageFont.load_default(size=size)
    except TypeError:                         # Pillow < 10.1 has one size
        return ImageFont.load_default()


def pixel_value(color):
    """0xRRGGBB (an int or an int array) as the frame's pixel: bytes red, green, blue, 0."""
    return ((color & 0xFF) << 16) | (color & 0xFF00) | ((color >> 16) & 0xFF)


def _pixel_words(data, strides, shape):
    """Little-endian words over the bytes of `data` with these strides: over RGB or RGBA
    bytes, one from each pixel's red byte, and & 0xFFFFFF leaves the pixel's red, green and
    blue (a pixel value). No copy; the words need not be aligned."""
    return np.ndarray(shape, dtype='<u4', buffer=data, strides=strides)


def colors(color, n, what, indices=None):
    """A colour (0xRRGGBB) for all n shapes as a pixel value, or one per shape as uint32
    pixel values (an array that holds one colour is that colour: the order of writes
    cannot matter). With indices, `color` is a palette and shape k gets color[indices[k]]:
    the palette is converted, then indexed (no big temporaries)."""
    values = np.asarray(color)
    if values.ndim == 0 and indices is None:
        return pixel_value(int(values) & 0xFFFFFF)
    values = pixel_value(values.reshape(-1).astype(np.int64) & 0xFFFFFF).astype(np.uint32)
    if indices is not None:
        values = values[indices]
    if len(values) != n:
        raise ValueError(f'GUI.{what}: {n} {what} but {len(values)} values of color')
    return int(values[0]) if n and (values == values[0]).all() else values


def radii(radius, n, what):
    """A radius for all n shapes as a float, or one per shape as float64."""
    values = np.asarray(radius, dtype=np.float64)
    if values.ndim == 0:
        return float(values)
    values = values.reshape(-1)
    if len(values) != n:
        raise ValueError(f'GUI.{what}: {n} {what} but {len(values)} values of radius')
    return values
