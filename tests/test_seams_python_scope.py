"""Seams between Python scope and kernels: ti.capture's keys and storage, integer powers,
negative indices from Python, read-only and non-contiguous ndarray arguments, function
transforms, swizzle accumulations and debug mode in adjoints. float64 throughout."""
import numpy as np
import pytest

import engine as ti


@pytest.fixture(autouse=True)
def f64():
    ti.init(default_fp=ti.f64)


# --- B: integer powers with negative exponents --------------------------------------------
def test_folded_negative_integer_power_is_pythons_float():
    out = ti.field(ti.f64, shape=3)

    @ti.kernel
    def k(a: ti.i32):
        out[0] = 2 ** -3
        out[1] = a ** -5            # a literal exponent: a float, as 1.0 / a ** 5
        out[2] = (-2) ** -1

    k(2)
    assert out.to_numpy().tolist() == [2 ** -3, 2 ** -5, (-2) ** -1]


def test_run_time_negative_integer_power_is_reported_in_debug_mode():
    for interpret in (False, True):
        ti.init(default_fp=ti.f64, debug=True, interpret=interpret)

        @ti.kernel
        def power(a: ti.i32, b: ti.i32) -> ti.i32:
            return a ** b

        assert power(2, 3) == 8
        with pytest.raises(ti.TaichiRuntimeError, match='negative integer power') as info:
            power(2, -3)
        assert 'return a ** b' in str(info.value)
    ti.init(default_fp=ti.f64)

    @ti.kernel
    def float_power(a: ti.i32, b: ti.i32) -> ti.f64:
        return ti.cast(a, ti.f64) ** b

    assert float_power(2, -3) == 0.125


# --- C: negative indices from Python scope --------------------------------------------------
def test_python_scope_negative_indices_raise_as_in_kernels():
    x = ti.field(ti.f64, shape=4)
    g = ti.field(ti.f64, shape=(2, 3))
    v = ti.Vector.field(3, ti.f64, shape=4)
    m = ti.Matrix.field(2, 2, ti.f64, shape=4)
    s = ti.Struct.field({'a': ti.f64, 'b': ti.types.vector(2, ti.f64)}, shape=4)
    nd = ti.ndarray(ti.f64, shape=4)
    vnd = ti.Vector.ndarray(2, ti.f64, shape=4)
    x.from_numpy(np.arange(4.0))

    @ti.kernel
    def read(i: ti.i32) -> ti.f64:
        return x[i]

    with pytest.raises(IndexError):
        read(-1)
    reads = [lambda: x[-1], lambda: g[-1, 0], lambda: g[0, -3], lambda: v[-1], lambda: m[-4],
             lambda: s[-1], lambda: s.a[-1], lambda: nd[-1], lambda: vnd[-1], lambda: x[np.int64(-1)]]
    for read_from_python in reads:
        with pytest.raises(IndexError, match='out of range'):
            read_from_python()

    def write(target, index, value):
        target[index] = value
    for target, index, value in ((x, -1, 7.0), (g, (-1, 0), 1.0), (v, -1, [1.0, 2.0, 3.0]), (nd, -1, 1.0),
                                 (s, -2, {'a': 1.0, 'b': [0.0, 0.0]})):
        with pytest.raises(IndexError, match='not wrapped'):
            write(target, index, value)
    assert x.to_numpy().tolist() == [0.0, 1.0, 2.0, 3.0] and nd.to_numpy().tolist() == [0.0] * 4
    assert x[3] == 3.0 and v[3].to_numpy().tolist() == [0.0, 0.0, 0.0]


# --- D: read-only and non-contiguous ndarray arguments ----------------------------------------
def test_read_only_array_is_refused_only_where_the_kernel_writes_it(tmp_path):
    @ti.kernel
    def total(a: ti.types.ndarray()) -> ti.f64:
        s = 0.0
        for i in range(a.shape[0]):
            s += a[i]
        return s

    @ti.kernel
    def fill(a: ti.types.ndarray()):
        for i in a:
            a[i] = 1.0

    path = tmp_path / 'values.dat'
    np.arange(4.0).tofile(path)
    mapped = np.memmap(path, dtype=np.float64, mode='r', shape=(4,))
    frozen = np.arange(4.0)
    frozen.flags.writeable = False
    for array in (mapped, frozen):
        assert total(array) == 6.0
        with pytest.raises(ti.TaichiTypeError, match="'a' of fill is read-only"):
            fill(array)
    assert total(mapped) == 6.0 and frozen.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_non_contiguous_array_is_a_clear_error():
    @ti.kernel
    def total(a: ti.types.ndarray()) -> ti.f64:
        s = 0.0
        for i in range(a.shape[0]):
            s += a[i]
        return s

    with pytest.raises(ti.TaichiTypeError, match='C-contiguous .use np.ascontiguousarray'):
        total(np.arange(8.0)[::2])
    assert total(np.ascontiguousarray(np.arange(8.0)[::2])) == 12.0


# --- F: swizzle accumulations -----------------------------------------------------------------
def _swizzle_gradients(update):
    n = 3
    v = ti.Vector.field(3, ti.f64, shape=n, needs_grad=True)
    w = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def step():
        for i in range(n):
            update(v, w, i)

    @ti.kernel
    def product():
        for i in range(n):
            loss[None] += v[i][0] * v[i][1] * v[i][2] * w[i]

    def run(v0, w0):
        v.from_numpy(v0)
        w.from_numpy(w0)
        with ti.ad.Tape(loss):
            step()
            product()
        return loss[None], v.grad.to_numpy(), w.grad.to_numpy()

    v0 = np.arange(1.0, 10.0).reshape(3, 3)
    w0 = np.array([0.5, 0.7, 0.9])
    value, gv, gw = run(v0, w0)
    h = 1e-6
    for k in range(3):          # central differences of the loss in w
        up, down = w0.copy(), w0.copy()
        up[k] += h
        down[k] -= h
        assert abs((run(v0, up)[0] - run(v0, down)[0]) / (2 * h) - gw[k]) < 1e-6
    return value, gv, gw


def test_swizzle_accumulation_is_the_subscript_accumulation():
    @ti.func
    def by_subscript(v: ti.template(), w: ti.template(), i):
        v[i][1] += w[i]
        v[i][2] -= 2 * w[i]

    @ti.func
    def by_swizzle(v: ti.template(), w: ti.template(), i):
        v[i].y += w[i]
        v[i].b -= 2 * w[i]

    @ti.func
    def by_wide_swizzle(v: ti.template(), w: ti.template(), i):
        v[i].yz += ti.Vector([w[i], -2 * w[i]])

    expected = _swizzle_gradients(by_subscript)
    for update in (by_swizzle, by_wide_swizzle):
        got = _swizzle_gradients(update)
        assert got[0] == expected[0]
        assert np.array_equal(got[1], expected[1]) and np.array_equal(got[2], expected[2])


def test_swizzle_assignment_of_several_entries():
    v = ti.Vector.field(3, ti.f64, shape=2)

    @ti.kernel
    def k():
        v[0].xz = ti.Vector([1.0, 3.0])
        u = ti.Vector([0.0, 0.0, 0.0])
        u.zy = ti.Vector([5.0, 4.0])
        u.xy += 1.0
        v[1] = u

    k()
    assert v.to_numpy().tolist() == [[1.0, 0.0, 3.0], [1.0, 5.0, 5.0]]


# --- E: function transforms: several argnums, several outputs -----------------------------------
def test_grad_of_several_arguments_and_transforms_of_several_outputs():
    @ti.func
    def f(x, y):
        return x * x * y

    @ti.func
    def two(x, y):
        return x * y, x + y * y

    both = ti.ad.grad(f, argnums=(0, 1))
    tangents = ti.ad.jvp(two)
    cotangents = ti.ad.vjp(two)

    @ti.kernel
    def k() -> ti.types.vector(8, ti.f64):
        gx, gy = both(2.0, 3.0)
        out, tan = tangents((2.0, 3.0), (1.0, 0.5))
        out2, (cx, cy) = cotangents((2.0, 3.0), (1.0, 2.0))
        return ti.Vector([gx, gy, out[0], out[1], tan[0], tan[1], cx, cy])

    # f: (2xy, x^2); two: (xy, x + y^2), J = [[y, x], [1, 2y]] at (2, 3)
    assert k().to_numpy().tolist() == [12.0, 4.0, 6.0, 11.0, 3.0 + 0.5 * 2.0, 1.0 + 0.5 * 6.0,
                                       3.0 + 2.0 * 1.0, 2.0 + 2.0 * 6.0]


def test_unsupported_transform_calls_are_syntax_errors():
    @ti.func
    def two(x, y):
        return x * y, x + y

    @ti.func
    def f(x, y):
        return x * y

    grad_two, grad_third, grad_f, vjp_two = (ti.ad.grad(two), ti.ad.grad(f, argnums=2), ti.ad.grad(f),
                                             ti.ad.vjp(two))

    @ti.kernel
    def several_outputs() -> ti.f64:
        return grad_two(1.0, 2.0)

    @ti.kernel
    def no_such_argument() -> ti.f64:
        return grad_third(1.0, 2.0)

    @ti.kernel
    def keywords() -> ti.f64:
        return grad_f(1.0, y=2.0)

    @ti.kernel
    def one_cotangent() -> ti.f64:
        out, (gx, gy) = vjp_two((1.0, 2.0), 1.0)
        return gx

    for k, message in ((several_outputs, 'returns 2 values'), (no_such_argument, 'argnums 2 is out of range'),
                       (keywords, 'keyword arguments'), (one_cotangent, 'cotangent has 1 entries')):
        with pytest.raises(ti.TaichiSyntaxError, match=message):
            k()
    with pytest.raises(ti.TaichiSyntaxError, match='argnums'):
        ti.ad.grad(f, argnums='x')


# --- A: ti.capture's keys and the storage it replays ---------------------------------------------
def test_capture_notices_a_tensor_with_new_memory():
    torch = pytest.importorskip('torch')

    @ti.kernel
    def scale(a: ti.types.ndarray(), s: ti.f64):
        for i in a:
            a[i] = a[i] * s

    @ti.capture
    def double(p):
        scale(p, 2.0)

    p = torch.ones(3, dtype=torch.float64)
    double(p)
    double(p)
    assert p.tolist() == [4.0] * 3
    p.data = p.data * 0.5
    double(p)
    assert p.tolist() == [4.0] * 3
    q = torch.full((3,), 10.0, dtype=torch.float64)
    p.set_(q)
    double(p)
    assert p.tolist() == [20.0] * 3 and q.data_ptr() == p.data_ptr()


def test_capture_under_a_tape_after_the_gradient_is_dropped():
    torch = pytest.importorskip('torch')
    y = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def squares(p: ti.types.ndarray()):
        for i in range(p.shape[0]):
            y[None] += p[i] * p[i]

    @ti.capture
    def forward(p):
        squares(p)

    p = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    for _ in range(3):
        y[None] = 0.0
        with ti.ad.Tape(y):
            forward(p)
        assert y[None] == 5.0 and p.grad.tolist() == [2.0, 4.0]
        p.grad = None           # as optimizer.zero_grad() leaves it


def test_capture_keys_tell_signed_zeros_and_types_apart():
    out = ti.field(ti.f64, shape=())
    runs = []

    @ti.kernel
    def angle(y: ti.f64, x: ti.f64):
        out[None] = ti.atan2(y, x)

    @ti.capture
    def at(y, x):
        runs.append(1)
        angle(y, x)

    for x, expected in ((0.0, 0.0), (-0.0, np.pi), (0.0, 0.0), (np.float64(-0.0), np.pi), (-0.0, np.pi)):
        at(0.0, x)
        assert out[None] == expected
    assert len(runs) == 3
    at(0.0, float('nan'))
    at(0.0, float('nan'))
    assert len(runs) == 4           # a NaN argument is one call, not a new capture each time


def test_capture_takes_arrays_lists_dicts_keywords_and_methods():
    total = ti.field(ti.f64, shape=())

    @ti.kernel
    def add(a: ti.types.ndarray(), s: ti.f64):
        for i in range(a.shape[0]):
            total[None] += a[i] * s

    @ti.capture
    def accumulate(arrays, weights, scale=1.0):
        for a, w in zip(arrays, weights['w']):
            add(a, w * scale)

    a, b = np.array([1.0, 2.0]), np.array([3.0])
    for _ in range(2):
        accumulate([a, b], {'w': [1.0, 2.0]}, scale=0.5)
    assert total[None] == 2 * (1.5 + 3.0)
    a[0] = 2.0                       # the kernels read the array's current values
    accumulate([a, b], {'w': [1.0, 2.0]}, scale=0.5)
    assert total[None] == 9.0 + 2.0 + 3.0
    with pytest.raises(ti.CaptureError, match='argument 0 is a set'):
        accumulate({1, 2}, {'w': []})

    @ti.data_oriented
    class Counter:
        def __init__(self):
            self.x = ti.field(ti.f64, shape=())
            self.runs = 0

        @ti.kernel
        def bump(self, s: ti.f64):
            self.x[None] += s

        @ti.capture
        def step(self, s, times=1):
            self.runs += 1
            for _ in range(times):
                self.bump(s)

    one, two = Counter(), Counter()
    for _ in range(3):
        one.step(1.0, times=2)
        two.step(2.0)
    assert (one.x[None], two.x[None], one.runs, two.runs) == (6.0, 6.0, 1, 1)


# --- F: debug mode and the NaN guards of gradient terms -----------------------------------------
@pytest.mark.parametrize('interpret', [False, True])
def test_debug_mode_accepts_an_infinite_term_that_a_zero_weight_drops(interpret):
    values = np.array([-1.0, -2.0, 4.0, 0.25])

    def gradient(debug):
        ti.init(default_fp=ti.f64, debug=debug, interpret=interpret and debug)
        x = ti.field(ti.f64, shape=4, needs_grad=True)
        loss = ti.field(ti.f64, shape=(), needs_grad=True)

        @ti.kernel
        def roots():
            for i in x:
                loss[None] += ti.sqrt(ti.max(x[i], 0.0)) + ti.sqrt(ti.max(ti.max(x[i], 0.0), 0.0)) + \
                    ti.sqrt(ti.select(x[i] > 0, x[i], 0.0)) + ti.sqrt(-ti.min(x[i], 0.0))

        x.from_numpy(values)
        with ti.ad.Tape(loss):
            roots()
        return x.grad.to_numpy()

    release = gradient(False)
    assert np.array_equal(gradient(True), release)
    assert np.allclose(release, [-0.5, -0.5 / np.sqrt(2.0), 3 * 0.25, 3 * 0.5 / 0.5], rtol=1e-15, atol=0)


@pytest.mark.parametrize('interpret', [False, True])
def test_debug_mode_still_reports_an_infinite_gradient(interpret):
    ti.init(default_fp=ti.f64, debug=True, interpret=interpret)
    x = ti.field(ti.f64, shape=2, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def root():
        for i in x:
            loss[None] += ti.sqrt(ti.max(x[i], 0.0))

    x.from_numpy(np.array([1.0, 0.0]))          # max(0, 0) gives x: d sqrt / dx is inf
    with pytest.raises(FloatingPointError, match='kernel root') as info:
        with ti.ad.Tape(loss):
            root()
    assert 'ti.sqrt(ti.max(x[i], 0.0))' in str(info.value)
