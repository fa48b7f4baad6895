"""Taichi's Python-scope API as Taichi 1.7 documents it: layouts, field and vector
elements, swizzles, struct gradients, names and submodules, field helpers, the GUI's
drawing calls and the VideoManager's frames. Features the engine lacks fail saying so."""
import subprocess
import sys

import pytest

import engine as ti

pytestmark = pytest.mark.usefixtures('ti_init')


# --- Python-scope element writes, swizzles, any/all ----------------------------------------

def test_swizzle_setters_write_through_field_elements():
    v = ti.Vector.field(3, ti.f32, shape=2)
    v[0].x = 1
    v[1].zy = [4, 5]
    v[1].y += 1
    assert v.to_numpy().tolist() == [[1, 0, 0], [0, 6, 4]]
    a = ti.Vector([1.0, 2.0, 3.0])
    a.x, a.b = 5, 9
    assert a.to_list() == [5, 2, 9]


def test_swizzles_read_in_python_scope_and_refuse_missing_entries():
    a = ti.math.vec3(1, 2, 3)
    assert a.to_list() == [1.0, 2.0, 3.0] and isinstance(a[0], float)
    assert (a.zyx.to_list(), a.rgb.to_list(), a.xxx.to_list(), a.ts.to_list()) == \
        ([3, 2, 1], [1, 2, 3], [1, 1, 1], [2, 1])
    with pytest.raises(AttributeError, match="3-vector has no entry 'w'"):
        a.w
    with pytest.raises(AttributeError, match='swizzles name entries of vectors'):
        ti.Matrix([[1, 2], [3, 4]]).x
    assert not hasattr(a, 'grad')
    assert str(a.zyx) == '[3. 2. 1.]'          # print() shows the entries as Taichi's does


def test_swizzles_in_a_kernel_differentiate():
    x = ti.Vector.field(3, ti.f32, shape=(), needs_grad=True)
    y = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def f():
        b = x[None].zxy * ti.Vector([1.0, 2.0, 3.0])
        y[None] = b.x + b.yz.dot(ti.Vector([10.0, 100.0])) + x[None].rg.sum()

    x[None] = [1, 2, 3]
    with ti.ad.Tape(y):
        f()
    assert y[None] == 3 + 20 + 600 + 3
    assert x.grad.to_numpy().tolist() == [21, 301, 1]


def test_matrix_any_and_all_in_python_scope_and_kernels():
    @ti.kernel
    def k() -> ti.types.vector(4, ti.i32):
        a = ti.math.vec3(1, 2, 3)
        return ti.Vector([(a > 2.5).any(), (a > 0.5).all(), (a < 0).any(), (a < 2.5).all()])

    assert k().to_list() == [1, 1, 0, 0]
    assert (ti.Vector([0, 0.5]).any(), ti.Vector([0, 0.5]).all()) == (1, 0)


# --- a struct field's gradient and dual -----------------------------------------------------

def test_struct_field_grad_is_a_struct_field_of_the_members_gradients():
    inner = ti.types.struct(p=ti.f32, q=ti.math.vec2)
    s = ti.types.struct(a=ti.f32, n=ti.i32, inner=inner).field(shape=2, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def f():
        for i in s:
            loss[None] += s[i].a * 3 + s[i].inner.q.dot(ti.Vector([1.0, 2.0])) + s[i].n

    @ti.kernel
    def read() -> ti.f32:
        return s.grad.a[0] + s.grad[1].inner.q.y

    with ti.ad.Tape(loss):
        f()
    assert s.grad.keys == ['a', 'inner'] and s.grad is s.grad      # integers have no gradient
    assert s.grad.a.to_numpy().tolist() == [3, 3]
    assert s.grad.inner.q.to_numpy().tolist() == [[1, 2], [1, 2]]
    assert read() == 5
    assert s.dual.a is s.a.dual and s.grad.dual.inner.p is s.inner.p.grad.dual


# --- names: Taichi's simple ones are here, the rest fail saying what they are -------------

def test_logging_level_version_and_extensions():
    ti.set_logging_level(ti.WARN)
    with pytest.raises(TypeError, match='set_logging_level'):
        ti.set_logging_level('loud')
    assert ti.__version__ >= (1, 7, 0) and len(ti.__version__) == 3
    assert ti.is_extension_supported(ti.cuda, ti.extension.data64)
    assert not ti.is_extension_supported(ti.cpu, ti.extension.sparse)


def test_bit_shr_shifts_logically_in_both_scopes():
    @ti.kernel
    def shr(x: ti.i32, n: ti.i32) -> ti.i32:
        return ti.bit_shr(x, n)

    @ti.kernel
    def shr8(x: ti.i8) -> ti.i8:
        return ti.bit_shr(x, 4)

    assert (shr(-1, 28), shr(-16, 2), shr(64, 3), shr8(-1)) == (15, 2 ** 30 - 4, 8, 15)
    assert (ti.bit_shr(-1, 28), ti.bit_shr(ti.Vector([-1, 8]), 1).to_list()) == (15, [2 ** 31 - 1, 4])


def test_pyfunc_runs_in_python_and_inlines_in_kernels():
    @ti.pyfunc
    def sq(x):
        return x * x

    @ti.data_oriented
    class Scaled:
        @ti.pyfunc
        def twice(self, x):
            return 2 * x

        @ti.kernel
        def run(self, x: ti.f32) -> ti.f32:
            return self.twice(sq(x))

    @ti.kernel
    def k(x: ti.f32) -> ti.f32:
        return sq(x) + 1

    assert (sq(3), k(3.0), Scaled().twice(4), Scaled().run(3.0)) == (9, 10.0, 8, 18.0)


def test_layout_axes_and_type_aliases():
    v = ti.Vector.field(2, ti.f32, shape=3, layout=ti.Layout.SOA)
    a = ti.field(ti.f32)
    ti.root.dense(ti.axes(0, 1), (2, 3)).place(a)
    assert (v.shape, a.shape) == ((3,), (2, 3))
    assert (ti.types.float32, ti.types.int32, ti.types.uint16, ti.int8) == (ti.f32, ti.i32, ti.u16, ti.i8)


def test_profiler_and_tools_extras(capsys, monkeypatch):
    ti.profiler.print_scoped_profiler_info()
    assert 'no scoped profiler' in capsys.readouterr().out
    import engine.gui
    monkeypatch.setattr(engine.gui, '_warned', set())
    with pytest.warns(RuntimeWarning, match='imshow shows nothing'):
        ti.tools.imshow([[0.5]])
    import numpy as np
    assert ti.tools.imresize(np.arange(6).reshape(2, 3), 4, 6)[3].tolist() == [3, 3, 4, 4, 5, 5]


@pytest.mark.parametrize('namespace, name, words', [(ti, 'BitpackedFields', 'quantized'),
                                                    (ti.lang, 'misc', 'internals'),
                                                    (ti.types, 'quant', 'quantized'),
                                                    (ti.types, 'argpack', 'argument packs')])
def test_names_the_engine_lacks_say_what_they_are(namespace, name, words):
    with pytest.raises(AttributeError, match=f'not supported by this engine: .*{words}'):
        getattr(namespace, name)


def test_types_and_tools_are_submodules():
    import engine.tools
    import engine.types
    from engine.types import ndarray, template, vector  # noqa: F401
    assert engine.types is ti.types and engine.tools is ti.tools
    assert vector(2, ti.f32)(1, 2).to_list() == [1.0, 2.0]


def test_taichi_submodules_import_under_engine_run(tmp_path):
    script = tmp_path / 'imports.py'
    script.write_text('from taichi.types import ndarray\nfrom taichi.tools import VideoManager\n'
                      'import taichi.tools\nimport taichi.ui\n')
    done = subprocess.run([sys.executable, '-m', 'engine', 'run', str(script)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    assert 'ModuleNotFoundError: taichi.ui is not supported by this engine: GGUI' in done.stderr
    assert 'line 4' in done.stderr


# --- fields and ndarrays: Taichi's helpers ------------------------------------------------

def test_to_numpy_takes_dtype_and_keep_dims():
    import numpy as np
    v = ti.Vector.field(3, ti.f32, shape=4)
    m = ti.Matrix.field(2, 2, ti.f32, shape=4)
    assert v.to_numpy(dtype=np.float64).dtype == np.float64 and v.to_numpy(dtype=ti.f64).dtype == np.float64
    assert (v.to_numpy(keep_dims=True).shape, v.to_numpy().shape, m.to_numpy(keep_dims=True).shape) == \
        ((4, 3, 1), (4, 3), (4, 2, 2))


def test_an_n_by_1_matrix_gives_vectors_to_numpy_unless_keep_dims():
    """Taichi drops the axis of length 1 of n x 1 matrices (not of 1 x n ones), and
    from_numpy takes either shape back."""
    import numpy as np
    column = ti.Matrix.field(3, 1, ti.f32, shape=4)
    row = ti.Matrix.field(1, 3, ti.f32, shape=4)
    assert (column.to_numpy().shape, column.to_numpy(keep_dims=True).shape, row.to_numpy().shape) == \
        ((4, 3), (4, 3, 1), (4, 1, 3))
    column.from_numpy(np.arange(12.0).reshape(4, 3))
    assert column[1][2, 0] == 5.0
    column.from_numpy(np.ones((4, 3, 1)))
    assert column.to_numpy().sum() == 12.0
    assert ti.Matrix([[0], [1], [2]]).to_numpy().shape == (3,)
    assert ti.Matrix([[0], [1], [2]]).to_numpy(keep_dims=True).shape == (3, 1)


def test_fields_and_ndarrays_of_vector_and_matrix_types():
    b = ti.math.vec3.field(shape=4, needs_grad=True)
    c = ti.types.matrix(2, 3, float).field(shape=2, layout=ti.Layout.SOA)
    n = ti.math.vec2.ndarray(5)
    assert (b.name, b.shape, b.element_shape, b.grad.placed) == ('b', (4,), (3,), True)
    assert (c.shape, c.element_shape, n.shape, n.element_shape) == ((2,), (2, 3), (5,), (2,))
    with pytest.raises(ti.TaichiRuntimeError, match='offsets'):
        ti.Vector.field(2, ti.f32, shape=4, offset=(-2,))


def test_ndarray_copy_from_and_printing_fields_shows_values(capsys):
    a, b = ti.ndarray(ti.f32, 3), ti.ndarray(ti.f32, 3)
    a.fill(2)
    b.copy_from(a)
    x = ti.field(ti.i32, shape=3)
    x.fill(7)

    @ti.kernel
    def show():
        print(x)        # a kernel's text is fixed when it compiles: the description, not values

    print(b, x)
    show()
    assert capsys.readouterr().out == '[2. 2. 2.] [7 7 7]\n<x: i32 field, shape (3,), element ()>\n'


# --- the GUI's field drawings and the VideoManager's frames ---------------------------------

def test_gui_draws_arrows_fields_and_contours(tmp_path):
    import numpy as np
    gui = ti.GUI('t', res=(32, 32), show_gui=False)
    gui.arrows(np.array([[0.1, 0.5]]), np.array([[0.8, 0.0]]), radius=1, color=0xFF0000)
    red = gui.get_image()[:, :, 0]
    assert red[5:25, 14:18].max(axis=1).min() == 1.0 and red[30].max() == 0.0     # the shaft along y = 0.5
    gui.clear()
    gui.arrow_field(np.full((4, 4, 2), 0.05))
    gui.point_field(np.full((4, 4), 2.0))
    gui.vector_field(ti.Vector.field(2, ti.f32, shape=(8, 8)), arrow_spacing=4)   # zeros: no arrows
    assert gui.get_image()[4, 4, 0] == 1.0                   # a point at the first cell's centre
    gui.contour(np.linspace(0, 10, 32)[:, None] * np.ones((32, 32)), normalize=True)
    image = gui.get_image()                                  # matplotlib's plasma, as Taichi's contour
    np.testing.assert_allclose(image[0, 0, :3], [0.050, 0.030, 0.528], atol=0.01)
    np.testing.assert_allclose(image[31, 0, :3], [0.940, 0.975, 0.131], atol=0.01)


def test_video_manager_writes_frames_then_the_video(tmp_path, monkeypatch):
    import numpy as np
    import engine.gui
    vm = ti.tools.VideoManager(output_dir=str(tmp_path), framerate=10, automatic_build=False)
    for i in range(3):
        vm.write_frame(np.full((8, 8, 3), i / 3, np.float32))
    assert vm.frame_directory == str(tmp_path / 'frames')
    assert sorted(p.name for p in (tmp_path / 'frames').iterdir()) == ['000000.png', '000001.png', '000002.png']
    monkeypatch.setattr(engine.gui, '_mp4_writer_available', lambda: False)
    monkeypatch.setattr(engine.gui, '_warned', set())
    with pytest.warns(RuntimeWarning, match='MP4 needs imageio-ffmpeg'):
        vm.make_video(gif=False, mp4=True)
    assert (tmp_path / 'video.gif').stat().st_size > 0 and not (tmp_path / 'video.mp4').exists()
