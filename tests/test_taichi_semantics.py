"""Taichi's semantics where they are easy to get subtly different: min/max with NaN, the
SVD's signs, sym_eig, the rest of ti.math, ti.init's keywords, tracebacks that end at
the program's frames, and debug mode's index errors."""
import math
import os
import traceback

import numpy as np
import pytest

import engine as ti
from ad_helpers import assert_grad_close, fd_check

NAN = float('nan')


@pytest.fixture(params=[False, True], ids=['native', 'interpreted'])
def mode(request):
    ti.init(arch=ti.cpu, default_fp=ti.f64, interpret=request.param)
    yield request.param
    ti.init()


@pytest.fixture
def f64():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    yield
    ti.init()


# --- min and max: a NaN operand loses -------------------------------------------------

def test_min_max_of_nan_in_python_scope():
    for a, b in ((NAN, 1.0), (1.0, NAN)):
        assert ti.max(a, b) == 1.0 and ti.min(a, b) == 1.0
    assert math.isnan(ti.max(NAN, NAN)) and math.isnan(ti.min(NAN, NAN))
    assert ti.max(ti.Vector([NAN, 3.0]), 2.0).to_list() == [2.0, 3.0]
    assert ti.Vector([NAN, 3.0, -1.0]).max() == 3.0 and ti.Vector([NAN, 3.0, -1.0]).min() == -1.0
    assert ti.math.clamp(NAN, 0.0, 2.0) == 0.0        # clamp = min(max(x, lo), hi): lo


def test_min_max_of_nan_in_kernels_and_folded(mode):
    @ti.kernel
    def both(a: ti.f64, b: ti.f64) -> ti.f64:
        return ti.max(a, b) + 10 * ti.min(a, b)

    @ti.kernel
    def folded() -> ti.f64:
        return ti.max(ti.math.nan, 1.0) + 10 * ti.min(2.0, ti.math.nan)

    @ti.kernel
    def f32(a: ti.f32) -> ti.f32:
        return ti.max(a, ti.f32(1.0)) + ti.math.clamp(a, 3.0, 4.0)

    assert both(NAN, 1.0) == 11.0 and both(1.0, NAN) == 11.0 and both(2.0, -1.0) == -8.0
    assert math.isnan(both(NAN, NAN))
    assert folded() == 21.0
    assert f32(NAN) == 4.0


def test_the_gradient_follows_the_operand_returned(mode):
    x = ti.field(ti.f64, shape=6, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def compute():
        loss[None] = ti.max(x[0], x[1]) + 10 * ti.min(x[2], x[3]) + 100 * ti.max(x[4], x[5])

    x.from_numpy(np.array([NAN, 2.0, 3.0, NAN, 5.0, NAN]))
    with ti.ad.Tape(loss=loss, validation=False):
        compute()
    assert loss[None] == 2.0 + 30.0 + 500.0
    assert x.grad.to_numpy().tolist() == [0.0, 1.0, 10.0, 0.0, 100.0, 0.0]


def test_min_max_gradients_match_finite_differences(f64):
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def compute():
        loss[None] = ti.max(x[0] * x[1], x[2]) * ti.min(ti.sin(x[3]), x[0]) + ti.max(x[1], 0.5) ** 2

    x.from_numpy(np.array([0.7, -1.3, 0.2, 2.1]))
    fd_check(loss, [x], compute)


@pytest.mark.parametrize('parallel', [True, False])
def test_atomic_min_max_let_a_nan_lose_too(mode, parallel):
    f = ti.field(ti.f64, shape=4)

    @ti.kernel
    def update(v: ti.f64):
        if ti.static(parallel):
            for i in range(2):
                ti.atomic_max(f[i], v)
                ti.atomic_min(f[i + 2], v)
        else:
            ti.atomic_max(f[0], v)
            ti.atomic_min(f[2], v)
            ti.atomic_max(f[1], v)
            ti.atomic_min(f[3], v)

    f.from_numpy(np.array([NAN, 1.0, NAN, 1.0]))
    update(2.0)                                   # a NaN stored in the field loses
    assert f.to_numpy().tolist() == [2.0, 2.0, 2.0, 1.0]
    update(NAN)                                   # a NaN operand loses
    assert f.to_numpy().tolist() == [2.0, 2.0, 2.0, 1.0]


# --- SVD: U and V are rotations, the last singular value carries det's sign ----------

def _np(M):
    return np.array(M.to_numpy(), dtype=float)


@pytest.mark.parametrize('A, sigma', [([[1.0, 0.0], [0.0, -2.0]], [2.0, -1.0]),
                                      ([[1.0, 0.0, 0.0], [0.0, -2.0, 0.0], [0.0, 0.0, 3.0]], [3.0, 2.0, -1.0])])
def test_svd_of_a_reflection_keeps_rotations(A, sigma):
    U, S, V = (_np(M) for M in ti.svd(ti.Matrix(A)))
    assert np.allclose(np.diag(S), sigma) and np.allclose(U @ S @ V.T, A)
    for R in (U, V):
        assert np.allclose(R.T @ R, np.eye(len(A))) and np.isclose(np.linalg.det(R), 1.0)


@pytest.mark.parametrize('n', [2, 3])
def test_svd_gradients_with_negative_determinants(f64, n):
    rng = np.random.default_rng(5 + n)
    mats = []
    while len(mats) < 3:
        m = rng.normal(size=(n, n))
        s = np.linalg.svd(m, compute_uv=False)
        if np.linalg.det(m) < 0 and np.diff(s).max() < -0.2 and s[-1] > 0.2:
            mats.append(m)
    A = ti.Matrix.field(n, n, ti.f64, shape=3, needs_grad=True)
    w = ti.Matrix.field(n, n, ti.f64, shape=3)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    A.from_numpy(np.array(mats))
    w.from_numpy(rng.uniform(-1, 1, (3, n, n)))

    @ti.kernel
    def compute():
        for i in range(3):
            U, S, V = ti.svd(A[i])
            loss[None] += (w[i] * (U + S + V)).sum() + S[n - 1, n - 1] * 3.0

    fd_check(loss, [A], compute)


# --- sym_eig, eig, solve -----------------------------------------------------------

def _symmetric(rng, n, count):
    out = []
    while len(out) < count:
        m = rng.normal(size=(n, n))
        m = m + m.T
        if np.diff(np.sort(np.linalg.eigvalsh(m))).min() > 0.3:       # distinct eigenvalues
            out.append(m)
    return np.array(out)


@pytest.mark.parametrize('n', [2, 3])
def test_sym_eig_in_kernels(f64, n):
    mats = _symmetric(np.random.default_rng(n), n, 16)
    A = ti.Matrix.field(n, n, ti.f64, shape=16)
    w = ti.Vector.field(n, ti.f64, shape=16)
    Q = ti.Matrix.field(n, n, ti.f64, shape=16)
    A.from_numpy(mats)

    @ti.kernel
    def eig():
        for i in A:
            w[i], Q[i] = ti.sym_eig(A[i])

    eig()
    values, vectors = w.to_numpy(), Q.to_numpy()
    for a, lam, q in zip(mats, values, vectors):
        assert np.allclose(lam, np.sort(np.linalg.eigvalsh(a))[::-1], atol=1e-12)    # decreasing
        assert np.allclose(a @ q, q * lam, atol=1e-12)                              # columns
        assert np.isclose(np.linalg.det(q), 1.0) and np.allclose(q.T @ q, np.eye(n))


@pytest.mark.parametrize('n', [2, 3])
def test_sym_eig_gradients(f64, n):
    rng = np.random.default_rng(10 + n)
    A = ti.Matrix.field(n, n, ti.f64, shape=2, needs_grad=True)
    wl = ti.Vector.field(n, ti.f64, shape=2)
    wq = ti.Matrix.field(n, n, ti.f64, shape=2)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    mats = _symmetric(rng, n, 2)
    A.from_numpy(mats)
    wl.from_numpy(rng.uniform(-1, 1, (2, n)))
    wq.from_numpy(rng.uniform(-1, 1, (2, n, n)))

    @ti.kernel
    def compute():
        for i in range(2):
            lam, Q = ti.sym_eig(A[i])
            loss[None] += wl[i].dot(lam) + (wq[i] * Q).sum()

    fd_check(loss, [A], compute)
    wq.fill(0)                  # d(sum_k c_k l_k)/dA = sum_k c_k v_k v_k^T, exactly
    with ti.ad.Tape(loss):
        compute()
    for i in range(2):
        lam, q = np.linalg.eigh(mats[i])
        q = q[:, ::-1]
        expected = q @ np.diag(wl.to_numpy()[i]) @ q.T
        assert_grad_close(A.grad.to_numpy()[i], expected, 'd sum(c l) / dA', atol=1e-10)


def test_sym_eig_of_repeated_eigenvalues_and_zero(f64):
    for a in ([[2.0, 0.0], [0.0, 2.0]], np.zeros((3, 3)), np.diag([1.0, 1.0, 3.0])):
        lam, q = (_np(M) for M in ti.sym_eig(ti.Matrix(np.asarray(a).tolist())))
        assert np.allclose(np.asarray(a) @ q, q * lam) and np.isclose(np.linalg.det(q), 1.0)


def test_eig_2x2_in_complex_form(f64):
    @ti.kernel
    def eig(a: ti.f64, b: ti.f64, c: ti.f64, d: ti.f64, out: ti.types.ndarray(), vec: ti.types.ndarray()):
        values, vectors = ti.eig(ti.Matrix([[a, b], [c, d]]))
        for i in ti.static(range(2)):
            for j in ti.static(range(2)):
                out[i, j] = values[i, j]
        for i in ti.static(range(4)):
            for j in ti.static(range(2)):
                vec[i, j] = vectors[i, j]

    for a in ([[1.0, 2.0], [3.0, 4.0]], [[0.0, -1.0], [1.0, 0.0]], [[1.0, 1.0], [0.0, 1.0]], [[2.0, 0.0], [0.0, 2.0]]):
        out, vec = np.zeros((2, 2)), np.zeros((4, 2))
        eig(*np.ravel(a), out, vec)
        lam = out[:, 0] + 1j * out[:, 1]
        v = vec[0::2] + 1j * vec[1::2]
        assert np.allclose(sorted(lam, key=lambda z: (-z.real, -z.imag)), lam)     # Taichi's order
        assert np.allclose(np.sort_complex(lam), np.sort_complex(np.linalg.eigvals(a)))
        assert np.allclose(np.array(a) @ v, v * lam) and np.allclose(np.abs(v).sum(0) > 0, True)


def test_solve(f64):
    @ti.kernel
    def solve() -> ti.f64:
        x = ti.solve(ti.Matrix([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]]), ti.Vector([1.0, 2.0, 3.0]))
        return x[0] + 10 * x[1] + 100 * x[2]

    x = np.linalg.solve([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]], [1.0, 2.0, 3.0])
    assert solve() == pytest.approx(x[0] + 10 * x[1] + 100 * x[2], rel=1e-12)


# --- the rest of ti.math -------------------------------------------------------------

def test_math_helpers_in_python_scope():
    tm = ti.math
    assert tm.degrees(math.pi) == 180.0 and tm.radians(90.0) == math.pi / 2
    assert tm.log2(8.0) == 3.0 and tm.mod(-0.5, 1.0) == 0.5
    assert [tm.sign(v) for v in (-2, 0.0, 3.5, NAN)] == [-1.0, 0.0, 1.0, 0.0]
    assert [tm.isnan(v) for v in (NAN, 1.0, math.inf)] == [1, 0, 0]
    assert [tm.isinf(v) for v in (NAN, 1.0, -math.inf)] == [0, 0, 1]
    # Taichi's documented example of rotation3d
    expected = [[0.05048351, -0.61339645, -0.78816002, 0.0], [0.65833154, 0.61388511, -0.4355969, 0.0],
                [0.75103329, -0.49688014, 0.4348093, 0.0], [0.0, 0.0, 0.0, 1.0]]
    assert np.allclose(_np(tm.rotation3d(0.52, -0.785, 1.046)), expected, atol=1e-7)
    R = _np(tm.rot_by_axis(tm.vec3(1.0, 2.0, 2.0), 0.4))[:3, :3]
    axis = np.array([1.0, 2.0, 2.0]) / 3.0
    assert np.allclose(R @ axis, axis) and np.isclose(np.trace(R), 1 + 2 * math.cos(0.4))
    assert np.allclose(_np(tm.rotation2d(math.pi / 2)), [[0, -1], [1, 0]])
    assert np.allclose(_np(tm.translate(1, 2, 3) @ tm.scale(2, 2, 2) @ tm.vec4(1, 1, 1, 1)), [3, 4, 5, 1])
    assert np.allclose(_np(tm.refract(tm.vec3(1.0, 1.0, 1.0), tm.vec3(0.0, 1.0, 0.0), 2.0)), [2, -1, 2])
    assert np.allclose(_np(tm.refract(tm.vec3(0.8, -0.6, 0.0), tm.vec3(0.0, 1.0, 0.0), 2.0)), 0)  # total reflection
    z, w = tm.vec2(1.0, 2.0), tm.vec2(-0.5, 0.25)
    zc, wc = 1 + 2j, -0.5 + 0.25j
    for got, want in ((tm.cmul(z, w), zc * wc), (tm.cdiv(z, w), zc / wc), (tm.cconj(z), zc.conjugate()),
                      (tm.cinv(z), 1 / zc), (tm.cexp(z), np.exp(zc)), (tm.clog(w), np.log(wc)),
                      (tm.cpow(w, 2.5), wc ** 2.5), (tm.csqrt(tm.vec2(-4.0, 0.0)), 2j)):
        assert np.allclose(_np(got), [complex(want).real, complex(want).imag]), (got, want)
    assert _np(tm.csqrt(tm.vec2(0.0, 0.0))).tolist() == [0.0, 0.0]
    assert np.allclose(_np(tm.inverse(tm.mat2([[2.0, 0.0], [0.0, 4.0]]))), [[0.5, 0], [0, 0.25]])
    assert tm.determinant(tm.mat3(2.0)) == 0.0 and _np(tm.eye(3)).tolist() == np.eye(3).tolist()


def test_math_helpers_in_kernels(mode):
    tm = ti.math

    @ti.kernel
    def run(x: ti.f64) -> ti.f64:
        v = tm.vec3(x, 2.0 * x, 3.0)
        total = tm.degrees(x) + tm.log2(x * 8) + tm.sign(-x) + tm.mod(x, 0.3) + tm.isnan(ti.sqrt(-x))
        total += tm.isinf(1.0 / (x - x)) + tm.isinf(x) + tm.isnan(x)
        total += (tm.rotation3d(x, 0.2, 0.3) @ tm.translate(1.0, x, 0.0) @ tm.vec4(1.0, 0.0, 0.0, 1.0)).sum()
        total += tm.refract(tm.normalize(v), tm.vec3(0.0, 1.0, 0.0), 0.5).sum()
        total += (tm.rot_by_axis(v, x) @ tm.scale(1.0, 2.0, 3.0)).sum() + tm.rotation2d(x).sum()
        total += tm.cpow(tm.vec2(x, 1.0), 1.5).sum() + tm.clog(tm.vec2(x, -1.0)).sum()
        total += tm.cdiv(tm.cexp(tm.vec2(x, 0.5)), tm.vec2(1.0, x)).sum() + tm.csqrt(tm.vec2(-x, 0.0)).sum()
        return total

    def reference(x):
        tm_py = ti.math
        total = tm_py.degrees(x) + tm_py.log2(x * 8) + tm_py.sign(-x) + tm_py.mod(x, 0.3) + 1 + 1
        total += _np(tm_py.rotation3d(x, 0.2, 0.3) @ tm_py.translate(1.0, x, 0.0) @ tm_py.vec4(1.0, 0, 0, 1)).sum()
        v = tm_py.vec3(x, 2.0 * x, 3.0)
        total += _np(tm_py.refract(v.normalized(), tm_py.vec3(0.0, 1.0, 0.0), 0.5)).sum()
        total += _np(tm_py.rot_by_axis(v, x) @ tm_py.scale(1.0, 2.0, 3.0)).sum() + _np(tm_py.rotation2d(x)).sum()
        z = complex(x, 1.0) ** 1.5 + np.log(complex(x, -1.0)) + np.exp(complex(x, 0.5)) / complex(1.0, x)
        return total + z.real + z.imag + math.sqrt(x)

    for x in (0.7, 1.9):
        assert run(x) == pytest.approx(reference(x), rel=1e-12)


def test_math_helpers_are_differentiable(f64):
    tm = ti.math
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def compute():
        v = tm.vec3(x[0], x[1], x[2])
        R = tm.rotation3d(x[0], x[1], x[2]) @ tm.rot_by_axis(v, x[1])
        z = tm.cpow(tm.vec2(x[0], x[1]), x[2]) + tm.cdiv(tm.clog(tm.vec2(x[2], x[0])), tm.vec2(1.0, x[1]))
        loss[None] = (R @ tm.vec4(1.0, 2.0, 3.0, 1.0)).sum() + z.sum() + tm.log2(x[2]) * tm.degrees(x[1])
        loss[None] += tm.refract(tm.normalize(v), tm.vec3(0.0, 0.0, 1.0), 0.7).sum() + tm.mod(x[0] * 3, 0.7)

    x.from_numpy(np.array([0.4, -0.7, 1.3]))
    fd_check(loss, [x], compute)


# --- ti.init's keywords -----------------------------------------------------------

def test_taichis_init_keywords_are_accepted():
    ti.init(arch=ti.cpu, default_fp=ti.f32, default_ip=ti.i32, debug=False, cpu_max_num_threads=2,
            random_seed=3, offline_cache=True, kernel_profiler=False, log_level=ti.INFO,
            advanced_optimization=True, fast_math=False, device_memory_GB=1.5, device_memory_fraction=0.5,
            packed=True, dynamic_index=True, ad_stack_size=256, check_out_of_bound=True, print_ir=False,
            verbose=False, excepthook=False, default_cpu_block_dim=32, cfg_optimization=False,
            use_unified_memory=False, opt_level=3, gdb_trigger=False, short_circuit_operators=False,
            print_full_traceback=False, offline_cache_cleaning_policy='never', num_compile_threads=2,
            native_replay=True, ad_validation=True, interpret=False)
    ti.init()


def test_an_unknown_init_keyword_is_a_type_error_with_a_suggestion():
    with pytest.raises(TypeError, match=r"'kernel_profile' \(did you mean 'kernel_profiler'\?\)"):
        ti.init(arch=ti.cpu, kernel_profile=True)
    with pytest.raises(KeyError, match='frobnicate'):           # Taichi raises a KeyError
        ti.init(frobnicate=1)
    with pytest.raises(TypeError, match='log_level'):
        ti.init(log_level='loud')
    ti.init()


def test_check_out_of_bound_maps_onto_check_bounds():
    from engine.core import program
    ti.init(check_out_of_bound=False)
    assert not program.current().config.check_bounds
    ti.init(check_out_of_bound=False, debug=True)         # debug mode always checks
    assert program.current().config.check_bounds
    ti.init(check_out_of_bound=False, check_bounds=True)  # the engine's own keyword wins
    assert program.current().config.check_bounds
    ti.init()
    assert program.current().config.check_bounds          # on by default here


def test_environment_variables_fill_keywords_left_out(monkeypatch):
    from engine.core import program
    monkeypatch.setenv('TI_KERNEL_PROFILER', '1')
    monkeypatch.setenv('TI_CHECK_OUT_OF_BOUND', '0')
    ti.init()
    assert program.current().config.kernel_profiler and not program.current().config.check_bounds
    ti.init(kernel_profiler=False)                        # the call's keyword wins
    assert not program.current().config.kernel_profiler
    monkeypatch.delenv('TI_KERNEL_PROFILER')
    monkeypatch.delenv('TI_CHECK_OUT_OF_BOUND')
    ti.init()


def test_log_level_error_silences_the_gpu_warning(recwarn):
    ti.init(arch=ti.cuda, log_level=ti.ERROR)
    assert not [w for w in recwarn if 'GPU' in str(w.message)]
    ti.init()


def test_print_ir(capsys):
    ti.init(print_ir=True)

    @ti.kernel
    def shown(a: ti.f32) -> ti.f32:
        return a * 2.0

    assert shown(1.5) == 3.0
    out = capsys.readouterr().out
    assert 'kernel shown, after build:' in out and 'mul(' in out
    ti.init()


# --- tracebacks end at the program's frames ------------------------------------------

ENGINE_DIR = os.path.dirname(os.path.abspath(ti.__file__))


def _files(exc):
    return [frame.filename for frame in traceback.extract_tb(exc.__traceback__)]


def _only_mine(exc):
    files = _files(exc)
    assert files and all(not f.startswith(ENGINE_DIR) for f in files), files
    assert files[0] == os.path.abspath(__file__) or files[0] == __file__, files


def test_user_errors_show_no_engine_frames(ti_init):
    x = ti.field(ti.f32, shape=4, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def poke(i: ti.i32):
        x[i] = 1.0

    @ti.kernel
    def broken():
        x[0] = undefined_name     # noqa: F821

    @ti.kernel
    def read_then_write():
        for i in range(4):
            loss[None] += x[i]
            x[i] = 0.0

    cases = [(IndexError, lambda: poke(9)), (TypeError, lambda: poke('a')), (TypeError, lambda: poke(1, 2)),
             (NameError, broken), (ti.TaichiCompilationError, lambda: read_then_write.grad())]
    for kind, call in cases:
        with pytest.raises(kind) as info:
            call()
        _only_mine(info.value)
    with pytest.raises(ti.TaichiCompilationError) as info:
        with ti.ad.Tape(loss=loss):
            read_then_write()
    _only_mine(info.value)


def test_errors_of_a_tapes_backward_pass_end_at_the_with_statement():
    ti.init(debug=True)
    x = ti.field(ti.f32, shape=(), needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def root():
        loss[None] = ti.sqrt(x[None])

    x[None] = 0.0               # sqrt's derivative at 0 is inf: debug mode reports it
    with pytest.raises(FloatingPointError) as info:
        with ti.ad.Tape(loss=loss):
            root()
    _only_mine(info.value)
    ti.init()


def test_full_tracebacks_on_request(monkeypatch):
    ti.init(print_full_traceback=True)

    @ti.kernel
    def poke(i: ti.i32):
        pass

    with pytest.raises(TypeError) as info:
        poke(1, 2)
    assert any(f.startswith(ENGINE_DIR) for f in _files(info.value))
    ti.init()
    monkeypatch.setenv('ENGINE_FULL_TRACEBACK', '1')
    with pytest.raises(TypeError) as info:
        poke(1, 2)
    assert any(f.startswith(ENGINE_DIR) for f in _files(info.value))


def test_engine_bugs_keep_their_full_traceback(ti_init, monkeypatch):
    from engine.runtime import pipeline

    def bug(*args):
        raise RuntimeError('an engine bug')

    @ti.kernel
    def fine():
        pass

    monkeypatch.setattr(pipeline, 'lower_and_load', bug)
    with pytest.raises(RuntimeError, match='an engine bug') as info:
        fine()
    assert any(f.startswith(ENGINE_DIR) for f in _files(info.value))


# --- debug mode: indices out of range --------------------------------------------------

@pytest.mark.parametrize('interpret', [False, True])
def test_debug_mode_index_errors_for_ndarrays_and_components(interpret):
    ti.init(debug=True, check_bounds=False, interpret=interpret)     # debug checks regardless

    @ti.kernel
    def nd(a: ti.types.ndarray(), i: ti.i32) -> ti.f32:
        return a[i]

    @ti.kernel
    def component(k: ti.i32) -> ti.f32:
        v = ti.Vector([1.0, 2.0, 3.0])
        return v[k]

    a = np.arange(4, dtype=np.float32)
    assert nd(a, 3) == 3.0 and component(2) == 3.0
    with pytest.raises(IndexError, match='ndarray argument a'):
        nd(a, 4)
    with pytest.raises(IndexError, match='component index 3'):
        component(3)
    ti.init()


def test_raw_div_and_raw_mod_truncate_as_c_does_where_floordiv_and_mod_floor():
    ti.init(arch=ti.cpu, default_fp=ti.f64)

    @ti.kernel
    def k(a: ti.i32, b: ti.i32, x: ti.f64, y: ti.f64) -> ti.types.vector(7, ti.f64):
        return ti.Vector([ti.raw_div(a, b), ti.raw_mod(a, b), a // b, a % b, ti.raw_mod(x, y),
                          ti.raw_div(x, y), ti.zero(x) + ti.one(a)])

    assert k(-7, 2, -7.5, 2.0).to_list() == [-3, -1, -4, 1, -1.5, -3.75, 1]
    assert k(7, -2, 7.5, -2.0).to_list() == [-3, 1, -4, -1, 1.5, -3.75, 1]
    assert (ti.raw_div(-7, 2), ti.raw_mod(-7, 2), ti.raw_div(6, 3)) == (-3, -1, 2)


def test_taichi_names_the_engine_lacks_say_what_they_are():
    with pytest.raises(AttributeError, match='ti.ui is not supported by this engine: GGUI'):
        ti.ui.Window('x', (4, 4))
    with pytest.raises(AttributeError, match='ti.no_such_name is not supported by this engine: the engine has no such'):
        ti.no_such_name
    assert not hasattr(ti, 'f16')


def test_tools_imwrite_and_imread_keep_taichis_x_first_y_up_order(tmp_path):
    img = np.zeros((6, 4, 3), np.uint8)       # 6 wide, 4 high
    img[5, 3] = (255, 0, 0)                   # the top right pixel
    ti.tools.imwrite(img, str(tmp_path / 'a.png'))
    back = ti.tools.imread(str(tmp_path / 'a.png'))
    assert back.shape == (6, 4, 3) and (back == img).all()
    grey = ti.tools.imread(str(tmp_path / 'a.png'), channels=1)
    assert grey.shape == (6, 4, 1) and grey[5, 3, 0] > 0 and grey[0, 0, 0] == 0
