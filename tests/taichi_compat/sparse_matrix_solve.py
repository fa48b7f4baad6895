# Sparse matrices as Taichi's documentation uses them: a kernel fills a
# ti.linalg.SparseMatrixBuilder, build() makes the matrix, a ti.linalg.SparseSolver
# factorizes it and solves. An implicit (backward Euler) heat equation on a rod with
# insulated ends rebuilds and solves its system every step; a chain of springs pinned at
# both ends is solved by each factorization and by conjugate gradients.
import numpy as np

import taichi as ti

ti.init(arch=ti.cpu)

n = 48
kappa = 1.5
heat = ti.field(ti.f32, shape=n)
system = ti.linalg.SparseMatrixBuilder(n, n, max_num_triplets=5 * n)


@ti.kernel
def hot_middle():
    for i in heat:
        heat[i] = 0.0
        if n // 4 <= i < n // 2:
            heat[i] = 1.0


@ti.kernel
def backward_euler(A: ti.types.sparse_matrix_builder(), r: ti.f32):
    # (I + r L) u' = u, L the Laplacian of the rod with no flux through its ends
    for i in range(n):
        A[i, i] += 1.0
        if i > 0:
            A[i, i] += r
            A[i, i - 1] -= r
        if i < n - 1:
            A[i, i] += r
            A[i, i + 1] -= r


def dense_step(u, r):
    L = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    L[0, 0] = L[-1, -1] = 1
    return np.linalg.solve(np.eye(n) + r * L, u)


hot_middle()
total = heat.to_numpy().sum()
reference = heat.to_numpy().astype(np.float64)
worst = 0.0
for step in range(12):
    dt = 0.05 * (1 + step)                      # a new matrix every step
    backward_euler(system, kappa * dt)
    A = system.build()
    solver = ti.linalg.SparseSolver(solver_type='LLT')
    solver.analyze_pattern(A)
    solver.factorize(A)
    u = solver.solve(heat)                       # a field in, a numpy array out
    assert solver.info()
    heat.from_numpy(u)
    reference = dense_step(reference, kappa * dt)
    worst = max(worst, float(np.abs(u - reference).max()))
u = heat.to_numpy()
print('heat shape', A.shape, 'symmetric', A[3, 4] == A[4, 3], 'rows sum to', round(A[0, 0] + A[0, 1], 5))
print('heat conserved', abs(u.sum() - total) < 1e-3, 'max', round(float(u.max()), 3), 'everywhere', u.min() > 0)
print('heat matches dense', worst < 1e-4)

# --- springs pinned at both ends, pulled down by gravity -------------------------------
m = 10
k_spring = ti.field(ti.f64, shape=m + 1)
chain = ti.linalg.SparseMatrixBuilder(m, m, max_num_triplets=4 * (m + 1), dtype=ti.f64)


@ti.kernel
def stiffness(K: ti.types.sparse_matrix_builder()):
    for s in k_spring:                           # spring s joins nodes s - 1 and s
        k = k_spring[s]
        if s > 0:
            K[s - 1, s - 1] += k
        if s < m:
            K[s, s] += k
        if 0 < s < m:
            K[s - 1, s] -= k
            K[s, s - 1] -= k


k_spring.from_numpy(np.linspace(1.0, 3.0, m + 1))
stiffness(chain)
K = chain.build()
f = ti.ndarray(ti.f64, shape=m)
f.fill(-0.1)
answers = {}
for kind in ('LLT', 'LDLT', 'LU'):
    solver = ti.linalg.SparseSolver(dtype=ti.f64, solver_type=kind, ordering='COLAMD' if kind == 'LU' else 'AMD')
    solver.compute(K)
    x = solver.solve(f)                          # a ti.ndarray in, a ti.ndarray out
    answers[kind] = x.to_numpy()
    print(kind, type(x).__name__, solver.info())
cg_x, converged = ti.linalg.SparseCG(K, f.to_numpy(), max_iter=100, atol=1e-10).solve()
print('CG converged', converged, 'agrees', np.allclose(cg_x, answers['LU'], atol=1e-8))
print('direct solvers agree', all(np.allclose(answers['LLT'], answers[kind]) for kind in ('LDLT', 'LU')))
residual = K @ answers['LLT'] - f.to_numpy()
print('residual', float(np.abs(residual).max()) < 1e-12, 'sag', round(float(answers['LLT'].min()), 4))
print('lowest node', int(np.argmin(answers['LLT'])))

# --- what a singular system reports ---------------------------------------------------
k_spring.fill(0.0)
stiffness(chain)
solver = ti.linalg.SparseSolver(dtype=ti.f64, solver_type='LLT')
solver.compute(chain.build())
print('singular info', solver.info())
