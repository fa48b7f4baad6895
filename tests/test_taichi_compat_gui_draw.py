"""ti.GUI's shapes and images, drawn whole arrays at a time (engine/gui_draw.py), against
reference rasterizations written here the plain way: a disc covers the pixels whose centres
lie within its radius, a line the pixels whose centres lie within its radius of the segment,
a triangle the pixels whose centres lie inside it (edges included); radii under √½ count as
√½, so that nothing vanishes between pixel centres. Pixel (i, j) is [i, i+1) x [j, j+1) in
(x * width, y * height), y up. Where shapes overlap the later one shows; colours are
0xRRGGBB, one or one per shape, or a palette; set_image takes Taichi's dtypes."""
import time
import tracemalloc
import warnings

import numpy as np
import pytest
from PIL import Image, ImageDraw

import engine as ti
import engine.gui_draw as gui_draw

pytestmark = pytest.mark.filterwarnings('ignore:ti.GUI draws off screen')
W, H = 48, 40                  # not square: a swapped axis shows
EPS = 1e-6                     # pixel centres this close to an edge may go either way
MIN_RADIUS = np.sqrt(0.5)


def new_gui(res=(W, H), background=0x000000):
    return ti.GUI('draw', res=res, background_color=background, show_gui=False)


def colors_of(gui):
    """The frame as 0xRRGGBB ints, indexed [x, y] (y up)."""
    rgb = np.rint(gui.get_image()[:, :, :3] * 255).astype(np.int64)
    return (rgb[:, :, 0] << 16) | (rgb[:, :, 1] << 8) | rgb[:, :, 2]


def centres(res=(W, H)):
    return np.meshgrid(np.arange(res[0]) + 0.5, np.arange(res[1]) + 0.5, indexing='ij')


def disc_distance(x, y, res=(W, H)):
    i, j = centres(res)
    return np.hypot(i - x, j - y)


def segment_distance(a, b, res=(W, H)):
    i, j = centres(res)
    d = np.subtract(b, a, dtype=np.float64)
    t = ((i - a[0]) * d[0] + (j - a[1]) * d[1]) / max(d @ d, 1e-300)
    t = np.clip(t, 0, 1)
    return np.hypot(i - a[0] - t * d[0], j - a[1] - t * d[1])


def triangle_inside(a, b, c, res=(W, H)):
    """Signed distances-like edge values, all >= 0 inside (either winding)."""
    i, j = centres(res)
    pts = np.array([a, b, c], dtype=np.float64)
    (ux, uy), (vx, vy) = pts[1] - pts[0], pts[2] - pts[0]
    if ux * vy - uy * vx < 0:
        pts = pts[::-1]
    values = []
    for p, q in zip(pts, np.roll(pts, -1, axis=0)):
        e = q - p
        values.append((e[0] * (j - p[1]) - e[1] * (i - p[0])) / np.hypot(*e))
    return np.min(values, axis=0)


def assert_covers(drawn, must, may):
    """Every pixel of `must` drawn, none outside `may` (the two differ by EPS at edges)."""
    missing, extra = must & ~drawn, drawn & ~may
    assert not missing.any(), f'pixels not drawn: {np.argwhere(missing)[:5].tolist()}'
    assert not extra.any(), f'pixels drawn outside: {np.argwhere(extra)[:5].tolist()}'


def px(x, y, res=(W, H)):
    """Pixel coordinates as the GUI's [0, 1] positions."""
    return [x / res[0], y / res[1]]


# --- coverage against the references -----------------------------------------------------------

@pytest.mark.parametrize('radius', [0.2, 0.5, 1, 1.5, 3, 7.3, 12, 30, 400])   # 30 and 400: filled by columns
def test_a_disc_covers_the_pixels_whose_centres_are_within_its_radius(radius):
    rng = np.random.default_rng(int(radius * 10))
    for x, y in [*rng.uniform(-3, [W + 3, H + 3], size=(12, 2)), (0, 0), (W, H / 2), (24.5, 20.5)]:
        gui = new_gui()
        gui.circle(px(x, y), color=0xFF0000, radius=radius)
        d, r = disc_distance(x, y), max(radius, MIN_RADIUS)
        assert_covers(colors_of(gui) == 0xFF0000, d <= r - EPS, d <= r + EPS)


def test_a_tiny_disc_still_covers_the_pixel_under_its_centre():
    rng = np.random.default_rng(1)
    pos = rng.uniform(0, 1, size=(300, 2))
    gui = new_gui()
    gui.circles(pos, radius=0.01, color=0xFFFFFF)
    drawn = colors_of(gui) == 0xFFFFFF
    cells = np.floor(pos * [W, H]).astype(int)
    assert drawn[cells[:, 0], cells[:, 1]].all()


@pytest.mark.parametrize('radius', [0.5, 1, 2.5, 6])
def test_a_line_covers_the_pixels_within_its_radius_of_the_segment(radius):
    rng = np.random.default_rng(int(radius * 10))
    ends = [*rng.uniform(-10, [W + 10, H + 10], size=(10, 2, 2))]
    ends += [np.array([[5.3, 3.0], [5.3, 30.0]]), np.array([[2.0, 7.7], [40.0, 7.7]]),     # vertical, horizontal
             np.array([[20.2, 20.6], [20.2, 20.6]]), np.array([[-30.0, -5.0], [90.0, 50.0]])]   # a dot; crossing
    for a, b in ends:
        gui = new_gui()
        gui.line(px(*a), px(*b), radius=radius, color=0x00FF00)
        d, r = segment_distance(a, b), max(radius, MIN_RADIUS)
        assert_covers(colors_of(gui) == 0x00FF00, d <= r - EPS, d <= r + EPS)


def test_a_triangle_covers_the_pixels_whose_centres_are_inside_it():
    rng = np.random.default_rng(3)
    corners = [*rng.uniform(-20, [W + 20, H + 20], size=(20, 3, 2))]
    corners += [np.array([[3.0, 3.0], [3.0, 30.0], [40.0, 3.0]]),                 # vertical and horizontal edges
                np.array([[-100.0, -100.0], [200.0, -100.0], [0.0, 300.0]]),      # around the whole frame
                np.array([[10.0, 10.0], [30.0, 11.0], [20.0, 10.5]])]             # a sliver
    for a, b, c in corners:
        gui = new_gui()
        gui.triangle(px(*a), px(*b), px(*c), color=0x0000FF)
        inside = triangle_inside(a, b, c)
        assert_covers(colors_of(gui) == 0x0000FF, inside >= EPS, inside >= -EPS)


def test_shapes_cover_what_pillow_covered_to_within_a_pixel():
    """The old drawing (Pillow, y down) and the new one differ only at edges: each new pixel
    is next to an old one, and each old one next to a new one or, at a triangle's sharp
    corners (Pillow draws the outline too, new pixels need their centres inside), within
    1.5 pixels of the triangle."""
    def near(a, b):        # every pixel of a is b's or one of its 8 neighbours
        padded, grown = np.pad(b, 1), np.zeros_like(b)
        for dx in (0, 1, 2):
            for dy in (0, 1, 2):
                grown |= padded[dx:dx + b.shape[0], dy:dy + b.shape[1]]
        return a & ~grown
    rng = np.random.default_rng(4)
    for _ in range(30):
        (x, y), r = rng.uniform(5, [W - 5, H - 5]), rng.uniform(0.5, 8)
        a, b, c = rng.uniform(0, [W, H], size=(3, 2))
        triangle = np.where(triangle_inside(a, b, c) >= 0, 0, np.minimum.reduce(
            [segment_distance(p, q) for p, q in ((a, b), (b, c), (c, a))]))
        shapes = [(lambda d: d.ellipse((x - r, H - y - r, x + r, H - y + r), fill=1),
                   lambda g: g.circle(px(x, y), color=1, radius=r), None),
                  (lambda d: d.polygon([(a[0], H - a[1]), (b[0], H - b[1]), (c[0], H - c[1])], fill=1),
                   lambda g: g.triangle(px(*a), px(*b), px(*c), color=1), triangle),
                  (lambda d: d.line([(a[0], H - a[1]), (c[0], H - c[1])], fill=1, width=1),
                   lambda g: g.line(px(*a), px(*c), radius=0.5, color=1), None)]
        for pillow, ours, distance in shapes:
            old = Image.new('L', (W, H))
            pillow(ImageDraw.Draw(old))
            old = np.asarray(old).T[:, ::-1] == 1
            gui = new_gui()
            ours(gui)
            new = colors_of(gui) == 1
            assert not near(new, old).any()
            far = near(old, new)
            assert not far.any() if distance is None else (distance[far] <= 1.5).all()


# --- painter's order, colours and radii -----------------------------------------------------------

def test_numpy_assignment_keeps_the_last_of_repeated_indices():
    """What painter's order rests on: frame[idx] = values writes in order, at the sizes drawn."""
    rng = np.random.default_rng(5)
    for n in (10, gui_draw.CHUNK, 8 * gui_draw.CHUNK):
        idx = rng.integers(0, 97, n).astype(np.intp) * 1009        # 97 pixels of a frame, hit again and again
        flat = np.zeros(97 * 1009, dtype='<u4')
        flat[idx] = np.arange(n, dtype=np.uint32)
        last = np.full(flat.shape, -1)
        np.maximum.at(last, idx, np.arange(n))                      # order-free: the largest index per pixel
        hit = last >= 0
        assert (flat[hit] == last[hit]).all()


def _last_shape(covers):
    """The reference painter: per pixel, the index of the last shape that must cover it and
    of the last that may (EPS apart); -1 where none. `covers`: (must, may) masks per shape."""
    must, may = np.full((W, H), -1), np.full((W, H), -1)
    for k, (surely, maybe) in enumerate(covers):
        must[surely], may[maybe] = k, k
    return must, may


def _within(distances, radii):
    for d, r in zip(distances, radii):
        r = max(r, MIN_RADIUS)
        yield d <= r - EPS, d <= r + EPS


def assert_painted(gui, covers, colors):
    must, may = _last_shape(covers)
    sure = must == may
    expected = np.where(must >= 0, colors[np.maximum(must, 0)], 0)
    assert sure.mean() > 0.95 and (colors_of(gui)[sure] == expected[sure]).all()


@pytest.mark.parametrize('count, largest', [(50, 6), (20000, 6), (300, 20)])   # 20000: many passes
def test_the_later_of_overlapping_circles_shows(count, largest):                # 20: filled by columns
    rng = np.random.default_rng(count)
    pos = rng.uniform(-0.05, 1.05, size=(count, 2))
    radii = rng.uniform(0.3, largest, size=count)
    colors = rng.integers(1, 1 << 24, size=count)
    gui = new_gui()
    gui.circles(pos, radius=radii, color=colors)
    assert_painted(gui, _within((disc_distance(*p) for p in pos * [W, H]), radii), colors)


@pytest.mark.parametrize('chunk', [gui_draw.FILL_CHUNK, 64])    # 64: a pass every few shapes
def test_the_later_of_overlapping_lines_and_triangles_shows(chunk, monkeypatch):
    monkeypatch.setattr(gui_draw, 'FILL_CHUNK', chunk)
    rng = np.random.default_rng(6)
    a, b = rng.uniform(0, 1, size=(2, 300, 2))
    radii, colors = rng.uniform(0.3, 4, size=300), rng.integers(1, 1 << 24, size=300)
    gui = new_gui()
    gui.lines(a, b, radius=radii, color=colors)
    assert_painted(gui, _within((segment_distance(p, q) for p, q in zip(a * [W, H], b * [W, H])), radii), colors)
    p, q, r = rng.uniform(0, 1, size=(3, 100, 2))
    gui.clear()
    gui.triangles(p, q, r, color=colors[:100])
    inside = (triangle_inside(*(v * [W, H] for v in corners)) for corners in zip(p, q, r))
    assert_painted(gui, ((e >= EPS, e >= -EPS) for e in inside), colors[:100])


def test_two_circles_in_either_order():
    for first, second in ((0xFF0000, 0x00FF00), (0x00FF00, 0xFF0000)):
        gui = new_gui()
        gui.circles(np.array([px(20, 20), px(24, 20)]), radius=5, color=np.array([first, second]))
        assert colors_of(gui)[22, 20] == second and colors_of(gui)[16, 20] == first


def test_palettes_and_colors_per_shape():
    ti.init(arch=ti.cpu)
    pos = np.array([px(10, 10), px(20, 20), px(30, 30)])
    palette = [0x068587, 0xED553B, 0xEEEEF0]
    indices = ti.field(ti.i32, shape=3)
    indices.from_numpy(np.array([2, 0, 1], dtype=np.int32))
    for given in (indices, [2, 0, 1], np.array([2, 0, 1], dtype=np.uint8)):
        gui = new_gui()
        gui.circles(pos, radius=2, palette=palette, palette_indices=given)
        assert [colors_of(gui)[p, p] for p in (10, 20, 30)] == [0xEEEEF0, 0x068587, 0xED553B]
    gui = new_gui()
    gui.circles(pos, radius=2, color=np.array([0x123456, 0x123456, 0x123456], dtype=np.uint32))
    assert (colors_of(gui)[[10, 20, 30], [10, 20, 30]] == 0x123456).all()
    gui.triangles(np.array([px(0, 0)]), np.array([px(8, 0)]), np.array([px(0, 8)]), color=np.array([0xABCDEF]))
    assert colors_of(gui)[1, 1] == 0xABCDEF
    with pytest.raises(ValueError, match='3 circles but 2 values of color'):
        gui.circles(pos, color=np.array([1, 2]))
    with pytest.raises(ValueError, match='3 circles but 2 values of radius'):
        gui.circles(pos, radius=np.array([1.0, 2.0]))


def test_radius_per_circle_and_per_line():
    gui = new_gui()
    gui.circles(np.array([px(10, 20), px(30, 20)]), radius=np.array([2.0, 6.0]), color=0xFFFFFF)
    drawn = colors_of(gui) == 0xFFFFFF
    assert drawn[:20].sum() == (disc_distance(10, 20)[:20] <= 2).sum()
    assert drawn[20:].sum() == (disc_distance(30, 20)[20:] <= 6).sum()
    gui.clear()
    gui.lines(np.array([px(5, 10), px(5, 30)]), np.array([px(40, 10), px(40, 30)]), radius=[1, 3], color=0xFFFFFF)
    column = colors_of(gui)[20] == 0xFFFFFF
    assert column[8:13].tolist() == [0, 1, 1, 0, 0] and column[26:34].tolist() == [0, 1, 1, 1, 1, 1, 1, 0]


# --- borders, bad values, empty arrays, single shapes ---------------------------------------------

def test_shapes_off_the_frame_or_not_finite_draw_nothing_and_warn_nothing():
    gui = new_gui()
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        gui.circles(np.array([[np.nan, 0.5], [0.5, np.inf], [5.0, 5.0], [-3.0, 0.5], [1e30, -1e30]]), radius=4)
        gui.circles(np.array([[0.5, 0.5]]), radius=np.array([np.nan]))
        gui.lines(np.array([[np.nan, 0.0], [2.0, 2.0]]), np.array([[0.5, 0.5], [3.0, 2.0]]), radius=2)
        gui.triangles(np.array([[0.0, np.inf]]), np.array([[0.5, 0.5]]), np.array([[0.2, 0.9]]))
        gui.arrows(np.array([[np.nan, 0.5]]), np.array([[0.1, 0.0]]))
    assert (colors_of(gui) == 0).all()


def test_shapes_across_the_borders_are_clipped():
    gui = new_gui()
    gui.circles(np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 0.0]]), radius=3.2, color=0xFFFFFF)
    drawn = colors_of(gui) == 0xFFFFFF
    expected = np.zeros((W, H), bool)
    for x, y in ((0, 0), (W, H), (0, H), (W, 0)):
        expected |= disc_distance(x, y) <= 3.2
    assert (drawn == expected).all()


def test_empty_arrays_draw_nothing():
    gui = new_gui(background=0x112233)
    none = np.zeros((0, 2))
    gui.circles(none, radius=np.zeros(0), color=np.zeros(0, dtype=np.uint32))
    gui.circles(none, palette=[0xFF0000], palette_indices=np.zeros(0, dtype=int))
    gui.lines(none, none, radius=np.zeros(0), color=np.zeros(0))
    gui.triangles(none, none, none, color=np.zeros(0))
    gui.arrows(none, none, color=np.zeros(0))
    assert (colors_of(gui) == 0x112233).all()


def test_one_shape_draws_as_an_array_of_one():
    calls = [(lambda g: g.circle((0.3, 0.6), 0xFF00FF, 4.5),
              lambda g: g.circles(np.array([[0.3, 0.6]]), 4.5, 0xFF00FF)),
             (lambda g: g.line((0.1, 0.2), (0.8, 0.9), 2, 0xFF00FF),
              lambda g: g.lines(np.array([[0.1, 0.2]]), np.array([[0.8, 0.9]]), 2, 0xFF00FF)),
             (lambda g: g.triangle((0.1, 0.2), (0.8, 0.3), (0.4, 0.9), 0xFF00FF),
              lambda g: g.triangles(np.array([[0.1, 0.2]]), np.array([[0.8, 0.3]]), np.array([[0.4, 0.9]]), 0xFF00FF)),
             (lambda g: g.arrow((0.1, 0.2), (0.6, 0.5), 1, 0xFF00FF),
              lambda g: g.arrows(np.array([[0.1, 0.2]]), np.array([[0.6, 0.5]]), 1, 0xFF00FF))]
    for one, array in calls:
        a, b = new_gui(), new_gui()
        one(a)
        array(b)
        assert (colors_of(a) == colors_of(b)).all() and (colors_of(a) == 0xFF00FF).sum() > 10


def test_a_rect_is_its_four_sides_as_lines():
    gui = new_gui()
    gui.rect(px(10, 30), px(40, 8), radius=1, color=0xFFFFFF)
    expected = new_gui()
    corners = np.array([px(10, 30), px(40, 30), px(40, 8), px(10, 8)])
    expected.lines(corners, np.roll(corners, -1, axis=0), radius=1, color=0xFFFFFF)
    drawn = colors_of(gui) == 0xFFFFFF
    assert (drawn == (colors_of(expected) == 0xFFFFFF)).all()
    assert drawn[10, 20] and drawn[39, 20] and drawn[25, 8] and drawn[25, 29] and not drawn[13:37, 11:27].any()


def test_an_arrow_is_its_shaft_and_two_strokes_at_the_tip():
    gui = new_gui()
    gui.arrows(np.array([px(5, 5), px(20, 20)]), np.array([px(30, 20), px(0, 0)]), radius=1, color=0xFFFFFF)
    expected = new_gui()
    tip = np.array([35.0, 25.0])
    back = -np.array([30.0, 20.0]) * min(0.3 * np.hypot(30, 20), 4 + 3) / np.hypot(30, 20)
    c, s = np.cos(0.5), np.sin(0.5)
    heads = [tip + (c * back[0] - k * s * back[1], k * s * back[0] + c * back[1]) for k in (1, -1)]
    expected.lines(np.array([px(5, 5), px(*tip), px(*tip)]), np.array([px(*tip), px(*heads[0]), px(*heads[1])]),
                   radius=1, color=0xFFFFFF)
    assert (colors_of(gui) == colors_of(expected)).all()        # and the arrow of no length: nothing


# --- images ---------------------------------------------------------------------------------------

def _expected_bytes(img):
    """What the frame's red, green and blue bytes must be: Taichi's scaling, truncated."""
    img = img[:, :, None] if img.ndim == 2 else img
    if img.dtype.kind == 'u':
        values = img.astype(np.float64) * 255 / np.iinfo(img.dtype).max
    else:
        values = np.clip(img.astype(np.float64), 0, 1) * 255
    values = np.floor(values + 1e-9).astype(np.int64)
    if values.shape[2] == 1:
        values = np.repeat(values, 3, axis=2)
    if values.shape[2] == 2:
        values = np.concatenate([values, np.zeros_like(values[:, :, :1])], axis=2)
    return values[:, :, :3]


@pytest.mark.parametrize('make', [
    lambda r: r.integers(0, 256, (W, H, 3), dtype=np.uint8),                           # read in place
    lambda r: r.integers(0, 256, (W, H, 4), dtype=np.uint8),
    lambda r: np.ascontiguousarray(r.integers(0, 256, (H, W, 3), dtype=np.uint8).transpose(1, 0, 2)),
    lambda r: r.integers(0, 256, (H, W, 3), dtype=np.uint8).transpose(1, 0, 2),         # a view: not C-ordered
    lambda r: r.integers(0, 256, (W, H), dtype=np.uint8),
    lambda r: r.random((W, H, 3), dtype=np.float32),
    lambda r: r.uniform(-0.5, 1.5, (W, H, 3)),                                          # float64, clipped
    lambda r: r.random((W, H), dtype=np.float32),                                      # grey: one channel spread
    lambda r: r.uniform(-0.5, 1.5, (W, H, 1)),
    lambda r: r.integers(0, 65536, (W, H), dtype=np.uint16),
    lambda r: r.random((W, H, 2)).astype(np.float16),
    lambda r: r.random((W, H, 4), dtype=np.float32),
    lambda r: r.integers(0, 65536, (W, H, 3), dtype=np.uint16),
    lambda r: np.full((W, H, 2), 2 ** 32 - 1, dtype=np.uint32),
])
def test_set_image_converts_taichis_dtypes(make):
    img = make(np.random.default_rng(7))
    before = img.copy()
    gui = new_gui()
    gui.set_image(img)
    got = np.rint(gui.get_image()[:, :, :3] * 255).astype(np.int64)
    assert (got == _expected_bytes(img)).all()
    assert (img == before).all()                      # the image is read, not written
    img[...] = 0
    assert (np.rint(gui.get_image()[:, :, :3] * 255) == got).all()    # and the frame does not share it


def test_set_image_of_a_field_and_shapes_on_top():
    ti.init(arch=ti.cpu)
    field = ti.Vector.field(3, ti.f32, shape=(W, H))
    field.from_numpy(np.full((W, H, 3), 0.5, dtype=np.float32))
    gui = new_gui()
    gui.set_image(field)
    gui.circle(px(10, 10), color=0xFF0000, radius=2)
    frame = colors_of(gui)
    assert frame[10, 10] == 0xFF0000 and frame[30, 30] == 0x7F7F7F


def test_set_image_needs_no_frame_sized_buffer():
    """uint8 RGB is read in place; other dtypes go through buffers of a few columns."""
    res = (1024, 768)
    gui = new_gui(res)
    images = [np.zeros((*res, 3), np.uint8), np.zeros((*res, 3), np.float32), np.zeros(res, np.float32)]
    for img in images:
        gui.set_image(img)                            # buffers made once, kept
        tracemalloc.start()
        gui.set_image(img)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < img.nbytes / 4, (img.dtype, peak)


def test_show_writes_the_frame_top_row_first(tmp_path):
    gui = new_gui()
    gui.triangles(np.array([px(0, 0)]), np.array([px(3, 0)]), np.array([px(0, 3)]), color=0x102030)
    gui.show(str(tmp_path / 'frame.png'))
    rows = np.asarray(Image.open(tmp_path / 'frame.png'))
    assert rows.shape == (H, W, 3)
    assert rows[H - 1, 0].tolist() == [0x10, 0x20, 0x30] and rows[0, 0].tolist() == [0, 0, 0]


def test_text_is_drawn_in_its_colour_below_and_right_of_its_position():
    gui = new_gui((64, 32))
    gui.text('Hi', (0.25, 0.75), font_size=14, color=0x00FF00)
    rgb = np.rint(gui.get_image()[:, :, :3] * 255)
    ink = np.argwhere(rgb[:, :, 1] > 0)
    assert len(ink) > 10 and (rgb[:, :, [0, 2]] == 0).all()
    assert ink[:, 0].min() >= 16 and ink[:, 1].max() <= 24        # right of x = 16, below y = 24 (y up)


def test_text_kept_from_frame_to_frame_is_drawn_again_in_the_new_colour_and_place():
    gui = new_gui((64, 32))
    gui.text('Hi', (0.25, 0.75), font_size=14, color=0x00FF00)
    first = colors_of(gui)
    gui.clear(0x000000)
    gui.text('Hi', (0.25, 0.75), font_size=14, color=0xFF0000)      # the kept mask, another colour
    second = colors_of(gui)
    assert ((first > 0) == (second > 0)).all() and ((second & 0x00FFFF) == 0).all()
    gui.clear(0x000000)
    gui.text('Hi', (-5.0, 0.75), font_size=14, color=0xFF0000)      # wholly off the frame
    assert (colors_of(gui) == 0).all()


def test_texts_of_many_sizes_keep_few_fonts_and_masks():
    """A label that zooms: fonts (which hold their glyphs) and masks are kept a few at a time."""
    gui = new_gui((64, 32))
    for size in range(10, 400, 3):
        gui.text('zoom', (0.1, 0.9), font_size=size)
    assert len(gui_draw._texts) <= gui_draw.TEXT_CACHE and gui_draw._font.cache_info().currsize <= 4
    assert all(mask.size <= gui_draw.TEXT_CACHE_PIXELS for _, _, mask in gui_draw._texts.values())


def test_a_hundred_thousand_circles_draw_at_once():
    """No Python step per shape: the old drawing took about a second for these."""
    pos = np.random.default_rng(8).random((100000, 2))
    gui = new_gui((512, 512))
    gui.circles(pos, radius=1, color=0xFFFFFF)
    start = time.perf_counter()
    gui.circles(pos, radius=1, color=0xFFFFFF)
    assert time.perf_counter() - start < 0.5
