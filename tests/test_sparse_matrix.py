"""Sparse matrices (ti.linalg.SparseMatrixBuilder, SparseMatrix, SparseSolver, SparseCG), on
scipy.sparse: triplets added in kernels (duplicates summed, too many or out-of-range ones an
error), the same matrix on any number of threads, arithmetic and products with numpy arrays,
ndarrays and fields, each solver against numpy, the failures solvers report, and a Taichi
program solving sparse systems under `python -m engine run`."""
import runpy

import numpy as np
import pytest
import scipy.io

import engine as ti
from test_taichi_compat import engine_run


def dense(A):
    return np.array([[A[i, j] for j in range(A.m)] for i in range(A.n)])


@ti.kernel
def fill_from(A: ti.types.sparse_matrix_builder(), M: ti.types.ndarray()):
    for i, j in ti.ndrange(M.shape[0], M.shape[1]):
        if M[i, j] != 0:
            A[i, j] += M[i, j]


def matrix_of(M, dtype=ti.f64, storage_format='col_major'):
    builder = ti.linalg.SparseMatrixBuilder(M.shape[0], M.shape[1], M.size, dtype=dtype,
                                            storage_format=storage_format)
    fill_from(builder, np.ascontiguousarray(M, dtype=np.float64))
    return builder.build()


def test_a_kernel_adds_triplets_whose_duplicates_sum(capsys):
    ti.init(arch=ti.cpu)
    K = ti.linalg.SparseMatrixBuilder(3, 4, max_num_triplets=10)

    @ti.kernel
    def fill(A: ti.types.sparse_matrix_builder(), scale: ti.f32):
        for i in range(3):
            A[i, i] += scale
            A[i, i + 1] -= 1
        A[0, 0] += 0.5                      # a duplicate: summed when built

    fill(K, 2.0)
    K.print_triplets()
    assert capsys.readouterr().out.splitlines() == [
        'n=3, m=4, num_triplets=7 (max=10)', '(0, 0) val=2.0', '(0, 1) val=-1.0', '(1, 1) val=2.0',
        '(1, 2) val=-1.0', '(2, 2) val=2.0', '(2, 3) val=-1.0', '(0, 0) val=0.5', '']
    A = K.build()
    assert A.shape == (3, 4) and (A.n, A.m) == (3, 4) and A.dtype == ti.f32
    np.testing.assert_array_equal(dense(A), [[2.5, -1, 0, 0], [0, 2, -1, 0], [0, 0, 2, -1]])
    assert str(A) == '[2.5,  -1,   0,   0]\n[  0,   2,  -1,   0]\n[  0,   0,   2,  -1]'   # Eigen's layout
    assert not dense(K.build()).any()       # build() empties the builder, as Taichi's does
    fill(K, 1.0)
    assert dense(K.build())[0, 0] == 1.5


@pytest.mark.parametrize('dtype', [ti.f32, ti.f64])
@pytest.mark.parametrize('storage_format', ['col_major', 'row_major'])
def test_each_dtype_and_storage_format(dtype, storage_format):
    ti.init(arch=ti.cpu)
    n = 5
    builder = ti.linalg.SparseMatrixBuilder(n, n, max_num_triplets=100, dtype=dtype, storage_format=storage_format)

    @ti.kernel
    def fill(A: ti.types.sparse_matrix_builder()):
        for i, j in ti.ndrange(n, n):
            A[i, j] += i + j

    fill(builder)
    A = builder.build()
    assert A.dtype == dtype
    np.testing.assert_array_equal(dense(A), np.add.outer(np.arange(n), np.arange(n)))


def test_too_many_triplets_is_an_error_and_nothing_is_written_past_the_capacity():
    ti.init(arch=ti.cpu)
    K = ti.linalg.SparseMatrixBuilder(4, 4, max_num_triplets=5)

    @ti.kernel
    def fill(A: ti.types.sparse_matrix_builder()):
        for i, j in ti.ndrange(4, 4):
            A[i, j] += 1.0

    with pytest.raises(ti.TaichiRuntimeError, match=r'SparseMatrixBuilder K was given 16 triplets \(the last by '
                                                    r'kernel fill\), more than its max_num_triplets=5: the last 11 '
                                                    r'were not stored; create it with max_num_triplets=16 or more'):
        fill(K)
    assert K.rows.shape == (5,) and K.rows.to_numpy().tolist() == [0, 0, 0, 0, 1]     # the first five, in order
    with pytest.raises(ti.TaichiRuntimeError, match='was given 16 triplets, more than'):
        K.build()
    assert not dense(K.build()).any()       # the failed build emptied it


def test_a_triplet_outside_the_matrix_is_an_error_naming_the_kernel():
    ti.init(arch=ti.cpu)
    K = ti.linalg.SparseMatrixBuilder(3, 2, max_num_triplets=4)

    @ti.kernel
    def fill(A: ti.types.sparse_matrix_builder(), j: ti.i32):
        A[1, j] += 1.0

    fill(K, 1)
    with pytest.raises(ti.TaichiIndexError, match=r'K was given the triplet \(1, 2\) by kernel fill, outside '
                                                  r'its 3 x 2 matrix'):
        fill(K, 2)


@pytest.mark.parametrize('body, words', [
    ('A[0, 0] = 1.0', 'takes triplets with `A[i, j] += value` or `A[i, j] -= value` only'),
    ('x[None] = A[0, 0]', 'cannot be read or assigned in a kernel'),
    ('A[0, 0] *= 2.0', 'takes triplets with'),
    ('A[0.5, 0] += 1.0', 'must be integers'),
    ('A[0, 0, 0] += 1.0', 'is indexed A[row, column], got 3 index(es)'),
    ('A[0, 0] += ti.Vector([1.0, 2.0])', 'a sparse matrix entry is a scalar'),
])
def test_a_builder_only_takes_additions_in_kernels(tmp_path, body, words):
    script = tmp_path / 'misuse.py'
    script.write_text('import engine as ti\nti.init(arch=ti.cpu)\nx = ti.field(ti.f32, shape=())\n'
                      'K = ti.linalg.SparseMatrixBuilder(2, 2, 4)\n\n@ti.kernel\n'
                      f'def misuse(A: ti.types.sparse_matrix_builder()):\n    {body}\n\nmisuse(K)\n')
    with pytest.raises(ti.TaichiCompilationError) as info:
        runpy.run_path(str(script))
    assert words in str(info.value) and 'misuse.py' in str(info.value)


def test_the_argument_must_be_a_builder_and_builders_work_through_funcs_and_classes():
    ti.init(arch=ti.cpu)

    @ti.func
    def add_diagonal(A: ti.template(), i, value):
        A[i, i] += value

    @ti.data_oriented
    class Laplacian:
        def __init__(self, n):
            self.n = n
            self.builder = ti.linalg.SparseMatrixBuilder(n, n, max_num_triplets=3 * n)

        @ti.kernel
        def assemble(self):             # the builder is an attribute, not an argument
            for i in range(self.n):
                add_diagonal(self.builder, i, 2.0)
                if i > 0:
                    self.builder[i, i - 1] -= 1.0
                    self.builder[i - 1, i] -= 1.0

    lap = Laplacian(4)
    lap.assemble()
    np.testing.assert_array_equal(dense(lap.builder.build()), 2 * np.eye(4) - np.eye(4, k=1) - np.eye(4, k=-1))

    @ti.kernel
    def fill(A: ti.types.sparse_matrix_builder()):
        A[0, 0] += 1.0

    with pytest.raises(ti.TaichiTypeError, match="argument 'A' of kernel fill\\(\\) must be a "
                                                 "ti.linalg.SparseMatrixBuilder, got Field"):
        fill(ti.field(ti.f32, shape=2))


def test_a_matrix_built_in_a_parallel_loop_is_the_same_on_every_run():
    digests = []
    for _ in range(2):
        ti.init(arch=ti.cpu, cpu_max_num_threads=2)
        n = 3000
        K = ti.linalg.SparseMatrixBuilder(n, n, max_num_triplets=4 * n)

        @ti.kernel
        def fill(A: ti.types.sparse_matrix_builder()):
            for i in range(n):
                A[i, i] += 0.1 * i
                A[i, (i * 7) % n] += 1.0 / (i + 1)
                A[(i * 13) % n, i] -= 0.3
                A[0, 0] += 1e-3 * i          # many duplicates: f32 sums in a fixed order

        fill(K)
        rows, values = K.rows.to_numpy(), K.values.to_numpy()
        assert rows[:8].tolist() == [0, 0, 0, 0, 1, 1, 13, 0]    # the loop's order: it ran serially
        A = K.build()
        digests.append((rows.tobytes(), values.tobytes(), A[0, 0], dense_diagonal(A)))
    assert digests[0][:3] == digests[1][:3]
    np.testing.assert_array_equal(digests[0][3], digests[1][3])


def dense_diagonal(A):
    return np.array([A[i, i] for i in range(0, A.n, 97)])


def test_arithmetic_transpose_and_entries_match_dense_numpy():
    ti.init(arch=ti.cpu)
    rng = np.random.default_rng(0)
    P, Q = (np.where(rng.random((4, 3)) < 0.5, rng.standard_normal((4, 3)), 0) for _ in range(2))
    R = np.where(rng.random((3, 5)) < 0.5, rng.standard_normal((3, 5)), 0)
    A, B, C = matrix_of(P), matrix_of(Q), matrix_of(R)
    for result, expected in [(A + B, P + Q), (A - B, P - Q), (A * 2.5, P * 2.5), (2.5 * A, 2.5 * P),
                             (3 * A, 3 * P), (np.float64(0.5) * A, 0.5 * P), (A * B, P * Q),
                             (A @ C, P @ R), (A.transpose(), P.T), (A.transpose() @ B, P.T @ Q)]:
        assert isinstance(result, ti.linalg.SparseMatrix)
        np.testing.assert_allclose(dense(result), expected, rtol=1e-12, atol=1e-12)
    A += B
    A -= B
    A -= B
    np.testing.assert_allclose(dense(A), P - Q, atol=1e-12)
    with pytest.raises(ti.TaichiRuntimeError, match=r'mismatch between sparse matrices \(4, 3\) and \(3, 5\)'):
        A + C
    with pytest.raises(ti.TaichiRuntimeError, match='dimension mismatch'):
        A @ B


def test_products_with_numpy_arrays_fields_and_ndarrays_return_what_taichi_returns():
    ti.init(arch=ti.cpu)
    M = np.array([[2.0, 0, 1], [0, 3, 0], [1, 0, 4]])
    A = matrix_of(M, ti.f32)
    x = np.array([1.0, -2.0, 0.5])
    field = ti.field(ti.f32, shape=3)
    field.from_numpy(x)
    array = ti.ndarray(ti.f32, shape=3)
    array.from_numpy(x)
    for given in (x, field):
        y = A @ given
        assert isinstance(y, np.ndarray) and y.dtype == np.float32
        np.testing.assert_allclose(y, M @ x)
    y = A @ array
    assert isinstance(y, ti.Ndarray) and y.to_numpy().dtype == np.float32
    np.testing.assert_allclose(y.to_numpy(), M @ x)
    with pytest.raises(ti.TaichiRuntimeError, match='dimension mismatch between sparse matrix'):
        A @ np.ones(4)
    with pytest.raises(ti.TaichiRuntimeError, match='not supported'):
        A @ [1.0, 2.0, 3.0]


def test_a_matrix_made_directly_from_triplets_and_entries(tmp_path):
    ti.init(arch=ti.cpu)
    A = ti.linalg.SparseMatrix(n=4, m=4, dtype=ti.f32)
    assert A.shape == (4, 4) and not dense(A).any()
    triplets = ti.Vector.ndarray(n=3, dtype=ti.f32, shape=4)
    triplets.from_numpy(np.array([[0, 1, 1.5], [2, 3, 2.0], [0, 1, 0.5], [3, 0, -1.0]], dtype=np.float32))
    A.build_from_ndarray(triplets)
    A[1, 1] = 7.0                                # a new entry
    A[2, 3] = 4.0                                # an existing one
    expected = np.zeros((4, 4))
    expected[0, 1], expected[2, 3], expected[3, 0], expected[1, 1] = 2.0, 4.0, -1.0, 7.0
    np.testing.assert_array_equal(dense(A), expected)
    A.mmwrite(str(tmp_path / 'A.mtx'))
    np.testing.assert_array_equal(scipy.io.mmread(str(tmp_path / 'A.mtx')).toarray(), expected)
    with pytest.raises(IndexError, match='outside the 4 x 4 sparse matrix'):
        A[4, 0]


SPD = np.array([[4.0, 1, 0, 0.5], [1, 3, -0.5, 0], [0, -0.5, 2.5, 0.25], [0.5, 0, 0.25, 2]])


@pytest.mark.parametrize('solver_type', ['LLT', 'LDLT', 'LU'])
@pytest.mark.parametrize('ordering', ['AMD', 'COLAMD'])
@pytest.mark.parametrize('dtype', [ti.f32, ti.f64])
def test_each_solver_matches_numpy(solver_type, ordering, dtype):
    ti.init(arch=ti.cpu)
    A = matrix_of(SPD, dtype)
    b = np.array([1.0, 2.0, 3.0, 4.0])
    expected = np.linalg.solve(SPD, b)
    solver = ti.linalg.SparseSolver(dtype=dtype, solver_type=solver_type, ordering=ordering)
    solver.analyze_pattern(A)
    solver.factorize(A)
    tolerance = 1e-5 if dtype == ti.f32 else 1e-12
    x = solver.solve(b)
    assert solver.info() and isinstance(x, np.ndarray) and x.dtype == dtype.np
    np.testing.assert_allclose(x, expected, rtol=tolerance)
    field = ti.field(dtype, shape=4)
    field.from_numpy(b)
    np.testing.assert_allclose(solver.solve(field), expected, rtol=tolerance)
    array = ti.ndarray(dtype, shape=4)
    array.from_numpy(b)
    x = solver.solve(array)
    assert isinstance(x, ti.Ndarray)
    np.testing.assert_allclose(x.to_numpy(), expected, rtol=tolerance)


def test_a_failed_factorization_is_a_status_not_an_exception():
    ti.init(arch=ti.cpu)
    singular = matrix_of(np.array([[1.0, 2.0], [2.0, 4.0]]))
    indefinite = matrix_of(np.array([[1.0, 2.0], [2.0, 1.0]]))
    zero_pivot = matrix_of(np.array([[0.0, 1.0], [1.0, 0.0]]))
    for matrix, solver_type, ok in [(singular, 'LU', False), (singular, 'LDLT', False), (singular, 'LLT', False),
                                    (indefinite, 'LLT', False), (indefinite, 'LDLT', True), (indefinite, 'LU', True),
                                    (zero_pivot, 'LDLT', False), (zero_pivot, 'LU', True)]:
        solver = ti.linalg.SparseSolver(dtype=ti.f64, solver_type=solver_type)
        solver.compute(matrix)
        assert solver.info() is ok, (solver_type, dense(matrix))
        x = solver.solve(np.ones(2))
        assert solver.info() is ok and bool(np.isfinite(x).all()) is ok


def test_lower_triangle_solvers_read_the_lower_triangle_as_eigen_does():
    ti.init(arch=ti.cpu)
    M = np.array([[4.0, 9.0], [1.0, 3.0]])         # solved as [[4, 1], [1, 3]]
    solver = ti.linalg.SparseSolver(dtype=ti.f64, solver_type='LLT')
    solver.compute(matrix_of(M))
    np.testing.assert_allclose(solver.solve(np.array([1.0, 2.0])), np.linalg.solve([[4, 1], [1, 3]], [1, 2]))


def test_solver_misuse_is_an_error():
    ti.init(arch=ti.cpu)
    with pytest.raises(ti.TaichiRuntimeError, match='The solver type QR with AMD is not supported'):
        ti.linalg.SparseSolver(solver_type='QR')
    solver = ti.linalg.SparseSolver()
    with pytest.raises(ti.TaichiRuntimeError, match='call analyze_pattern'):
        solver.solve(np.ones(2))
    with pytest.raises(ti.TaichiRuntimeError, match='takes a SparseMatrix'):
        solver.factorize(np.eye(2))
    with pytest.raises(ti.TaichiRuntimeError, match='must be square'):
        solver.compute(matrix_of(np.ones((2, 3))))
    solver.compute(matrix_of(np.eye(2), ti.f32))
    with pytest.raises(ti.TaichiRuntimeError, match='needs a vector of 2 entries'):
        solver.solve(np.ones(3))


@pytest.mark.parametrize('cg', ['SparseCG', 'CG'])
def test_conjugate_gradients(cg):
    ti.init(arch=ti.cpu)
    A = matrix_of(SPD, ti.f32)
    b = ti.ndarray(ti.f32, shape=4)
    b.from_numpy(np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32))
    x, converged = getattr(ti.linalg, cg)(A, b, x0=np.zeros(4, np.float32), max_iter=50, atol=1e-6).solve()
    assert converged and x.dtype == np.float32
    np.testing.assert_allclose(x, np.linalg.solve(SPD, [1, 2, 3, 4]), rtol=1e-5)
    _, converged = ti.linalg.SparseCG(A, b.to_numpy(), max_iter=1, atol=1e-12).solve()
    assert not converged


def test_the_names_are_there_and_the_matrix_free_solver_says_it_is_missing():
    assert isinstance(ti.types.sparse_matrix_builder(), ti.types.sparse_matrix_builder)
    with pytest.warns(DeprecationWarning, match='ti.types.sparse_matrix_builder'):
        ti.linalg.sparse_matrix_builder()
    with pytest.raises(AttributeError, match='ti.linalg.MatrixFreeCG is not supported by this engine: matrix-free'):
        ti.linalg.MatrixFreeCG


def test_a_taichi_program_solving_sparse_systems_runs_unchanged():
    out, _ = engine_run('sparse_matrix_solve.py')
    assert out.splitlines() == [
        'heat shape (48, 48) symmetric True rows sum to 1.0',
        'heat conserved True max 0.918 everywhere True',
        'heat matches dense True',
        'LLT Ndarray True', 'LDLT Ndarray True', 'LU Ndarray True',
        'CG converged True agrees True',
        'direct solvers agree True',
        'residual True sag -0.8261',
        'lowest node 3',
        'singular info False']
