"""`ti.graph` (compute graphs recorded and replayed from Python) and `ti.tools.PLYWriter`
(PLY files of points and meshes): as Taichi 1.7's users write them."""
import numpy as np
import pytest

import engine as ti
from engine.unsupported import MISSING
from tests.test_taichi_compat import engine_run

pytestmark = pytest.mark.usefixtures('ti_init')
NDARRAY, SCALAR, MATRIX = ti.graph.ArgKind.NDARRAY, ti.graph.ArgKind.SCALAR, ti.graph.ArgKind.MATRIX


# --- graphs ------------------------------------------------------------------------------

@ti.kernel
def spread(src: ti.types.ndarray(dtype=ti.f32, ndim=1), dst: ti.types.ndarray(dtype=ti.math.vec2, ndim=1),
           scale: ti.f32):
    for i in src:
        dst[i] = ti.Vector([src[i] * scale, src[i] + scale])


@ti.kernel
def accumulate(dst: ti.types.ndarray(dtype=ti.math.vec2, ndim=1), total: ti.types.ndarray(dtype=ti.f32, ndim=0),
               times: ti.i32):
    for i in dst:
        for _ in range(times):
            total[None] += dst[i].x - dst[i].y


def _placeholders():
    return (ti.graph.Arg(NDARRAY, 'src', ti.f32, ndim=1), ti.graph.Arg(NDARRAY, 'dst', dtype=ti.math.vec2, ndim=1),
            ti.graph.Arg(SCALAR, 'scale', ti.f32), ti.graph.Arg(NDARRAY, 'total', ti.f32, ndim=0))


def _two_kernel_graph():
    src, dst, scale, total = _placeholders()
    builder = ti.graph.GraphBuilder()
    builder.dispatch(spread, src, dst, scale)
    step = builder.create_sequential()
    step.dispatch(accumulate, dst, total, 2)        # a value among the placeholders
    builder.append(step)
    builder.append(step)
    return builder.compile()


def _arrays(n, seed):
    src = ti.ndarray(ti.f32, shape=n)
    src.from_numpy(np.random.default_rng(seed).random(n).astype(np.float32))
    return src, ti.Vector.ndarray(2, ti.f32, shape=n), ti.ndarray(ti.f32, shape=())


def test_a_graph_replays_its_kernels_as_direct_launches_with_new_arrays_and_scalars():
    graph = _two_kernel_graph()
    for n, scale in ((5, 2.0), (9, -0.5)):
        src, dst, total = _arrays(n, seed=n)
        graph.run({'src': src, 'dst': dst, 'scale': scale, 'total': total})
        src2, dst2, total2 = _arrays(n, seed=n)
        spread(src2, dst2, scale)
        for _ in range(2):
            accumulate(dst2, total2, 2)
        assert np.array_equal(dst.to_numpy(), dst2.to_numpy())      # the graph wrote the caller's ndarrays
        assert total.to_numpy() == pytest.approx(total2.to_numpy())
        assert total.to_numpy() != 0


def test_a_sequential_dispatched_after_its_append_is_in_the_graph_and_values_pass_through():
    field = ti.field(ti.f32, shape=3)

    @ti.kernel
    def add(target: ti.template(), amount: ti.types.ndarray(ndim=1), k: ti.math.vec2):
        for i in target:
            target[i] += amount[i] * k.x + k.y

    amount = ti.graph.Arg(NDARRAY, 'amount', ti.f32, ndim=1)
    builder = ti.graph.GraphBuilder()
    step = builder.create_sequential()
    builder.append(step)
    step.dispatch(add, field, amount, ti.graph.Arg(MATRIX, 'k', ti.math.vec2))
    step.dispatch(add, field, amount, ti.Vector([0.0, 1.0]))
    graph = builder.compile()
    graph.run({'amount': np.array([1.0, 2.0, 3.0], np.float32), 'k': ti.Vector([2.0, 0.5])})
    assert field.to_numpy().tolist() == [3.5, 5.5, 7.5]
    assert ti.graph.GraphBuilder().compile().run({}) is None


def test_a_graph_runs_on_a_tape():
    x = ti.ndarray(ti.f32, shape=4, needs_grad=True)
    loss = ti.ndarray(ti.f32, shape=(), needs_grad=True)
    x.from_numpy(np.arange(4, dtype=np.float32))

    @ti.kernel
    def energy(x: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in x:
            loss[None] += x[i] ** 2

    builder = ti.graph.GraphBuilder()
    builder.dispatch(energy, ti.graph.Arg(NDARRAY, 'x', ti.f32, ndim=1), ti.graph.Arg(NDARRAY, 'loss', ti.f32, ndim=0))
    graph = builder.compile()
    with ti.ad.Tape(loss=loss):
        graph.run({'x': x, 'loss': loss})
    assert x.grad.to_numpy().tolist() == [0.0, 2.0, 4.0, 6.0]


@pytest.mark.parametrize('change, words', [
    (lambda a: a.pop('total'), "argument 'total' is missing; the graph takes 'src' (an ndarray(dtype=f32, ndim=1))"),
    (lambda a: a.update(scal=1.0), "unknown argument 'scal' (did you mean 'scale'?)"),
    (lambda a: a.update(src=ti.ndarray(ti.f64, 4)), "argument 'src' must be an ndarray(dtype=f32, ndim=1), got an "
                                                    "ndarray(dtype=f64, ndim=1)"),
    (lambda a: a.update(src=ti.ndarray(ti.f32, (2, 2))), "'src' must be an ndarray(dtype=f32, ndim=1), got an "
                                                         "ndarray(dtype=f32, ndim=2) of shape (2, 2)"),
    (lambda a: a.update(dst=ti.ndarray(ti.f32, 4)), "'dst' must be an ndarray(dtype=f32, element_shape=(2,), "
                                                    "ndim=1), got an ndarray(dtype=f32, ndim=1)"),
    (lambda a: a.update(src=[1.0, 2.0]), "argument 'src' must be an ndarray (ti.ndarray, or a numpy array), got list"),
    (lambda a: a.update(scale='fast'), "argument 'scale' must be a scalar f32, got 'fast' (str)"),
])
def test_run_checks_each_argument_and_names_it(change, words):
    graph = _two_kernel_graph()
    src, dst, total = _arrays(4, seed=0)
    args = {'src': src, 'dst': dst, 'scale': 1.0, 'total': total}
    change(args)
    with pytest.raises(ti.TaichiRuntimeError) as error:
        graph.run(args)
    assert words in str(error.value)
    assert total.to_numpy() == 0                    # nothing ran


def test_run_checks_integer_scalars_matrices_and_the_dict():
    @ti.kernel
    def shift(a: ti.types.ndarray(ndim=1), n: ti.i32, m: ti.math.mat2):
        for i in a:
            a[i] += n * m[0, 1]

    builder = ti.graph.GraphBuilder()
    builder.dispatch(shift, ti.graph.Arg(NDARRAY, 'a', ti.f32, ndim=1), ti.graph.Arg(SCALAR, 'n', ti.i32),
                     ti.graph.Arg(MATRIX, 'm', ti.math.mat2))
    graph, a = builder.compile(), ti.ndarray(ti.f32, 2)
    with pytest.raises(ti.TaichiRuntimeError, match=r"argument 'n' must be a scalar i32, got 1.5 \(float\)"):
        graph.run({'a': a, 'n': 1.5, 'm': ti.math.mat2(1)})
    with pytest.raises(ti.TaichiRuntimeError, match=r"'m' must be a matrix \(2, 2\) of f32, got Matrix of shape \(2,\)"):
        graph.run({'a': a, 'n': 1, 'm': ti.Vector([1.0, 2.0])})
    with pytest.raises(ti.TaichiRuntimeError, match='Graph.run takes a dict'):
        graph.run([a, 1])
    graph.run({'a': a, 'n': 3, 'm': ti.Matrix([[0.0, 2.0], [0.0, 0.0]])})
    assert a.to_numpy().tolist() == [6.0, 6.0]


@pytest.mark.parametrize('make, error, words', [
    (lambda: ti.graph.Arg(ti.graph.ArgKind.TEXTURE, 'tex', ndim=2), ti.TaichiNotImplementedError,
     "ti.graph.Arg(ArgKind.TEXTURE, 'tex') is not supported by this engine: textures"),
    (lambda: ti.graph.Arg(ti.graph.ArgKind.RWTEXTURE, 'img', ndim=2, fmt='rgba8'), NotImplementedError,
     'is not supported by this engine: textures'),
    (lambda: ti.graph.Arg(SCALAR, 'dt', ti.f32, ndim=1), ti.TaichiRuntimeError,
     "Arg(ArgKind.SCALAR, 'dt'): unexpected argument ndim; a SCALAR argument takes dtype"),
    (lambda: ti.graph.Arg(NDARRAY, 'x', ti.f32), ti.TaichiRuntimeError, "Arg(ArgKind.NDARRAY, 'x') needs ndim"),
    (lambda: ti.graph.Arg(NDARRAY, 'x', ndim=1), ti.TaichiRuntimeError, 'needs a dtype'),
    (lambda: ti.graph.Arg(MATRIX, 'm', ti.f32), ti.TaichiRuntimeError, 'the dtype must be a vector or matrix type'),
    (lambda: ti.graph.Arg(SCALAR, 'v', ti.math.vec3), ti.TaichiRuntimeError, 'the dtype must be a scalar type'),
    (lambda: ti.graph.Arg('ndarray', 'x', ti.f32, ndim=1), ti.TaichiRuntimeError, 'must be one of ti.graph.ArgKind'),
    (lambda: ti.graph.Arg(NDARRAY, 'x', ti.f32, 1, 1), ti.TaichiRuntimeError, 'field_dim is the old name of ndim'),
])
def test_placeholders_check_their_own_arguments(make, error, words):
    with pytest.raises(error) as raised:
        make()
    assert words in str(raised.value)


def test_deprecated_placeholder_arguments_still_work():
    with pytest.warns(DeprecationWarning, match='field_dim'):
        old = ti.graph.Arg(NDARRAY, 'x', ti.f32, field_dim=2)
    with pytest.warns(DeprecationWarning, match='element_shape'):
        shaped = ti.graph.Arg(NDARRAY, 'v', ti.f32, ndim=1, element_shape=(3,))
    assert (old.ndim, shaped.element_shape) == (2, (3,))
    assert shaped.describe() == ti.graph.Arg(NDARRAY, 'v', ti.math.vec3, ndim=1).describe()


@pytest.mark.parametrize('args, words', [
    (lambda s, d, k, t: (d, d, k), "parameter 'src' takes elements of type f32; the placeholder 'dst' is an "
                                   "ndarray(dtype=f32, element_shape=(2,), ndim=1)"),
    (lambda s, d, k, t: (t, d, k), "parameter 'src' takes ndim=1; the placeholder 'total'"),
    (lambda s, d, k, t: (s, d, s), "parameter 'scale' takes a SCALAR argument"),
    (lambda s, d, k, t: (k, d, k), "parameter 'src' takes a NDARRAY argument"),
    (lambda s, d, k, t: (s, d), "dispatch of kernel spread(): missing a required argument: 'scale'"),
    (lambda s, d, k, t: (ti.graph.Arg(NDARRAY, 'src', ti.f64, ndim=1), d, k), "takes elements of type f32"),
])
def test_dispatch_checks_placeholders_against_the_kernel(args, words):
    with pytest.raises(ti.TaichiRuntimeError) as error:
        ti.graph.GraphBuilder().dispatch(spread, *args(*_placeholders()))
    assert words in str(error.value)


def test_builder_errors():
    @ti.kernel
    def fill(target: ti.template()):
        for i in target:
            target[i] = 1

    builder = ti.graph.GraphBuilder()
    with pytest.raises(ti.TaichiRuntimeError, match="parameter 'target' is a ti.template\\(\\): give it a value"):
        builder.dispatch(fill, ti.graph.Arg(NDARRAY, 'target', ti.f32, ndim=1))
    with pytest.raises(ti.TaichiRuntimeError, match='is not a ti.kernel'):
        builder.dispatch(print, 1)
    with pytest.raises(ti.TaichiRuntimeError, match='GraphBuilder.append takes a sequential'):
        builder.append(builder)
    src, dst, scale, _ = _placeholders()
    builder.dispatch(spread, src, dst, scale)
    builder.dispatch(spread, src, dst, ti.graph.Arg(SCALAR, 'scale', ti.f64))
    with pytest.raises(ti.TaichiRuntimeError, match="two placeholders are named 'scale': a scalar f32 and a scalar f64"):
        builder.compile()


def test_ti_graph_is_no_longer_missing():
    assert 'graph' not in MISSING and ti.graph.ArgKind.NDARRAY.name == 'NDARRAY'
    with pytest.raises(AttributeError, match="ti.graph.GraphBuild is not supported .*did you mean 'GraphBuilder'"):
        ti.graph.GraphBuild


# --- PLY files ----------------------------------------------------------------------------

PLY_TYPES = {'char': 'i1', 'uchar': 'u1', 'short': 'i2', 'ushort': 'u2', 'int': 'i4', 'uint': 'u4', 'float': 'f4',
             'double': 'f8'}


def read_ply(path):
    """(format, comment, {element: (count, [[type, name] or ['list', ...]])}, body) of a PLY file."""
    head, body = path.read_bytes().split(b'end_header\n', 1)
    lines, elements = head.decode().splitlines(), {}
    assert lines[0] == 'ply'
    for words in map(str.split, lines):
        if words[0] == 'element':
            current = elements[words[1]] = (int(words[2]), [])
        elif words[0] == 'property':
            current[1].append(words[1:])
    return lines[1], lines[2], elements, body


def read_binary(path, per_face):
    fmt, _, elements, body = read_ply(path)
    assert fmt == 'format binary_little_endian 1.0'
    count, props = elements['vertex']
    vertices = np.frombuffer(body, np.dtype([(n, '<' + PLY_TYPES[t]) for t, n in props]), count)
    faces = None
    if 'face' in elements:
        count, props = elements['face']
        assert props[0] == ['list', 'uchar', 'int', 'vertex_indices']
        fields = [('n', 'u1'), ('indices', '<i4', (per_face,))] + [(n, '<' + PLY_TYPES[t]) for t, n in props[1:]]
        faces = np.frombuffer(body, np.dtype(fields), count, offset=vertices.nbytes)
        assert vertices.nbytes + faces.nbytes == len(body)
    return elements, vertices, faces


def _cube_face_writer():
    writer = ti.tools.PLYWriter(num_vertices=4, num_faces=2, face_type='quad', comment='two quads')
    writer.add_vertex_pos(np.array([0.0, 1, 1, 0]), np.array([0.0, 0, 1, 1]), np.full(4, 0.25))
    writer.add_vertex_normal(np.zeros(4), np.zeros(4), np.ones(4))
    writer.add_vertex_rgba(*np.linspace(0, 1, 16).reshape(4, 4))
    writer.add_vertex_channel('weight', 'double', np.array([[0.5, 1.5], [2.5, 3.5], [4.5, 5.5], [6.5, 7.5]]))
    writer.add_vertex_id()
    writer.add_faces(np.array([0, 1, 2, 3, 3, 2, 1, 0]))
    writer.add_face_id()
    writer.add_face_channel('tag', 'uchar', np.array([7, 9]))
    return writer


def test_a_binary_ply_reads_back(tmp_path):
    _cube_face_writer().export(str(tmp_path / 'quads.ply'))
    elements, vertices, faces = read_binary(tmp_path / 'quads.ply', per_face=4)
    assert [n for _, n in elements['vertex'][1]] == ['x', 'y', 'z', 'nx', 'ny', 'nz', 'red', 'green', 'blue',
                                                     'Alpha', 'weight_1', 'weight_2', 'id']
    assert elements['vertex'][1][0] == ['float', 'x'] and elements['vertex'][1][10] == ['double', 'weight_1']
    assert vertices['x'].tolist() == [0, 1, 1, 0] and vertices['z'].tolist() == [0.25] * 4
    assert vertices['Alpha'].tolist() == pytest.approx(np.linspace(0, 1, 16)[12:])
    assert vertices['weight_2'].tolist() == [1.5, 3.5, 5.5, 7.5] and vertices['id'].tolist() == [0, 1, 2, 3]
    assert faces['n'].tolist() == [4, 4] and faces['indices'].tolist() == [[0, 1, 2, 3], [3, 2, 1, 0]]
    assert faces['id'].tolist() == [0, 1] and faces['tag'].tolist() == [7, 9]


def test_an_ascii_ply_reads_back(tmp_path):
    _cube_face_writer().export_ascii(tmp_path / 'quads.ply')
    fmt, comment, elements, body = read_ply(tmp_path / 'quads.ply')
    assert (fmt, comment, elements['face'][0]) == ('format ascii 1.0', 'comment two quads', 2)
    rows = [line.split() for line in body.decode().splitlines()]
    assert len(rows) == 4 + 2
    assert [float(v) for v in rows[2][:3]] == [1.0, 1.0, 0.25] and rows[2][-3:] == ['4.5', '5.5', '2']
    assert float(rows[0][6]) == pytest.approx(0.0) and float(rows[3][9]) == pytest.approx(1.0)
    assert rows[4] == ['4', '0', '1', '2', '3', '0', '7'] and rows[5] == ['4', '3', '2', '1', '0', '1', '9']


def test_points_and_frames(tmp_path):
    writer = ti.tools.PLYWriter(num_vertices=3)
    writer.add_vertex_pos(*np.eye(3))
    writer.add_vertex_color(np.ones(3), np.zeros(3), np.zeros(3))
    writer.export_frame(7, str(tmp_path / 'points.ply'))
    writer.export_frame_ascii(12, str(tmp_path / 'text'))
    assert sorted(p.name for p in tmp_path.iterdir()) == ['points_000007.ply', 'text_000012.ply']
    elements, vertices, faces = read_binary(tmp_path / 'points_000007.ply', per_face=3)
    assert faces is None and list(elements) == ['vertex'] and vertices['y'].tolist() == [0, 1, 0]
    body = read_ply(tmp_path / 'text_000012.ply')[3].decode()
    assert body.splitlines()[0].split() == ['1.0', '0.0', '0.0', '1.0', '0.0', '0.0']


def test_triangles_from_rows_and_from_taichi_arrays(tmp_path):
    pos = ti.Vector.ndarray(3, ti.f32, shape=3)
    pos.from_numpy(np.arange(9, dtype=np.float32).reshape(3, 3))
    writer = ti.tools.PLYWriter(3, 1)
    writer.add_vertex_channel('p', 'float', pos)        # a 2-D channel: p_1, p_2, p_3
    writer.add_vertex_pos(*pos.to_numpy().T)
    writer.add_faces([[2, 1, 0]])
    writer.export(tmp_path / 't.ply')
    _, vertices, faces = read_binary(tmp_path / 't.ply', per_face=3)
    assert vertices['p_3'].tolist() == [2, 5, 8] and faces['indices'].tolist() == [[2, 1, 0]]


@pytest.mark.parametrize('action, words', [
    (lambda w: w.add_vertex_pos(np.zeros(3), np.zeros(4), np.zeros(4)),
     "the vertex channel 'x' needs 4 values (a 1-D array), or 4 rows (a 2-D array); got an array of shape (3,)"),
    (lambda w: w.add_vertex_channel('v', 'float', np.zeros((2, 4))), "channel 'v' needs 4 values (a 1-D array), or "
                                                                   "4 rows (a 2-D array); got an array of shape (2, 4)"),
    (lambda w: w.add_faces([0, 1, 2]), '2 tri faces need 6 vertex indices, got 3'),
    (lambda w: w.add_face_channel('id', 'int', np.zeros(3)), "the face channel 'id' needs 2 values"),
    (lambda w: w.export('never.ply'), 'the vertex positions are missing (channels x, y, z)'),
    (lambda w: (w.add_vertex_pos(*np.zeros((3, 4))), w.export('never.ply')), '2 faces were announced but add_faces'),
    (lambda w: (w.add_vertex_pos(*np.zeros((3, 4))), w.add_faces([0, 1, 2, 1, 2, 4]), w.export_ascii('never.ply')),
     'face 1 has vertex indices [1, 2, 4], outside 0..3'),
])
def test_ply_inputs_are_checked(action, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as error:
        action(ti.tools.PLYWriter(num_vertices=4, num_faces=2))
    assert words in str(error.value) and not (tmp_path / 'never.ply').exists()


def test_ply_constructor_and_unknown_types():
    for args, words in (((0,), 'num_vertices must be positive'), ((3, -1), 'num_faces must not be negative'),
                        ((3, 1, 'hexagon'), "face_type must be 'tri' or 'quad'")):
        with pytest.raises(ValueError, match=words):
            ti.tools.PLYWriter(*args)
    writer = ti.tools.PLYWriter(2)
    with pytest.warns(UserWarning, match="unknown data type 'foo' for the vertex channel 'k', the channel is skipped"):
        writer.add_vertex_channel('k', 'foo', np.zeros(2))     # Taichi skips it too (its export_mesh.py does this)
    assert writer.vertices.names == []


def test_a_taichi_program_with_a_graph_and_a_ply_export(tmp_path):
    out, _ = engine_run('graph_and_ply.py', str(tmp_path))
    lines = out.splitlines()
    assert lines[0] == 'graph [0.5, 0.866, 0.6] replayed True'
    assert lines[1].startswith("error: Graph.run: argument 'height' is missing")
    assert lines[2] == "files ['ring_000000.ply', 'ring_000001.ply', 'ring_ascii.ply']"
    _, vertices, faces = read_binary(tmp_path / 'ring_000001.ply', per_face=3)
    assert len(vertices) == 7 and vertices['red'].tolist() == [1.0] * 7
    assert faces['indices'][2].tolist() == [6, 2, 3]
