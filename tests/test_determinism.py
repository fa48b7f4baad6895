"""Same answer every run: kernels, adjoints and tangents give the same bits on 1, 2 and 3
threads (engine/backend/cpu/ordering.py). Each check runs in a child process in which every
parallel loop goes to the thread pool (threadpool.PARALLEL_MIN_US = 0), so chunks of a loop
run on different threads at the same time, in an order that changes from run to run."""
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))

_SPLIT_EVERY_LOOP = """
import sys
sys.path.insert(0, {tests!r})
from engine.backend.cpu import threadpool
threadpool.PARALLEL_MIN_US = 0      # before the first ti.init loads the pool
import hashlib
import numpy as np
import engine as ti


def digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]
"""

_HANDWRITTEN = """
def run(threads, dtype):
    ti.init(cpu_max_num_threads=threads, default_fp=dtype)
    n, m = 6000, 37
    x = ti.field(dtype, shape=n, needs_grad=True)
    g = ti.field(dtype, shape=m, needs_grad=True)
    h = ti.Vector.field(2, dtype, shape=m, needs_grad=True)
    top = ti.field(dtype, shape=m)
    loss = ti.field(dtype, shape=(), needs_grad=True)
    arr = ti.ndarray(dtype, shape=m)
    count = ti.field(ti.i32, shape=())
    order = ti.field(ti.i32, shape=n)

    @ti.kernel
    def scatter():
        for i in x:
            k = int(ti.abs(x[i]) * 1000) % m
            g[k] += x[i] * 1.37
            h[k] -= ti.Vector([x[i], 1.0 / (1.0 + x[i] ** 2)])

    @ti.kernel
    def inside_if(flag: ti.i32):        # a parallel loop under an `if` is still split
        if flag > 0:
            for i in x:
                g[(i * 3) % m] += x[i] * 0.25

    g8 = ti.field(dtype, shape=256)

    @ti.kernel
    def narrowed():                     # u8(i) wraps: i and i + 256 add into one element
        for i in x:
            w = x[i]
            for _ in range(100):        # slow iterations: the threads' chunks overlap in time
                w = w * 0.9999 + 1e-7
            g8[ti.cast(i, ti.u8)] += w

    @ti.kernel
    def racy():                         # reads what other iterations write: run in order
        for i in x:
            g[i % m] += g[(i + 1) % m] * 1e-3

    @ti.kernel
    def peaks():
        for i in x:
            ti.atomic_max(top[(i * 5) % m], ti.sin(x[i]))

    @ti.kernel
    def gather():
        for i in x:
            k = (i * 7) % m
            loss[None] += ti.sin(g[k]) * x[i] + h[(k + 3) % m].norm()

    @ti.kernel
    def into_ndarray(a: ti.types.ndarray()):
        for i in x:
            a[i % m] += x[i] * 0.5

    @ti.kernel
    def reduce_local() -> dtype:
        total = 0.0
        for i in x:
            total += x[i] * x[(i + 1) % n]
        return total

    @ti.kernel
    def append():
        for i in x:
            if x[i] > 0.3:
                order[ti.atomic_add(count[None], 1)] = i

    x.from_numpy(np.random.default_rng(3).standard_normal(n).astype(np.float32 if dtype == ti.f32 else np.float64))
    with ti.ad.Tape(loss):
        scatter()
        gather()
    values = [g.to_numpy(), h.to_numpy(), top.to_numpy(), loss.to_numpy()]
    grads = [x.grad.to_numpy(), g.grad.to_numpy(), h.grad.to_numpy()]
    with ti.ad.FwdMode(loss=loss, param=x, seed=[float(k % 5) for k in range(n)]):
        scatter()
        gather()
    tangent = loss.dual.to_numpy()
    into_ndarray(arr)
    peaks()
    inside_if(1)
    narrowed()
    racy()
    total = reduce_local()
    append()
    return digest(*values, g.to_numpy(), g8.to_numpy(), *grads, tangent, arr.to_numpy(), np.array([total]), order.to_numpy(), count.to_numpy())


for dtype in (ti.f32, ti.f64):
    print(dtype, *{run(t, dtype) for t in (1, 2, 3, 2, 3, 2)})
"""

_GENERATED = """
import test_autodiff_properties as tp
from hypothesis import given, seed, settings, HealthCheck, Phase
from kernel_grammar import case_source

seen = []


@seed(20261127)
@settings(max_examples={cases}, deadline=None, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(case_source())
def check(source):
    digests = set()
    for threads in (1, 2, 3):
        case = tp.Case(source, init={{'cpu_max_num_threads': threads}})
        digests.add(digest(case.values(), case.reverse_jacobian(), case.forward_jacobian()))
    assert len(digests) == 1, source
    seen.append(source)


check()
print('cases', len(seen))
"""


def _run(tmp_path, program, **env):
    path = tmp_path / 'program.py'          # kernels need their source in a file
    path.write_text(textwrap.dedent(program))
    child = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                           timeout=900, env=dict(os.environ, **env), cwd=os.path.dirname(HERE))
    assert child.returncode == 0, child.stderr[-6000:]
    return child.stdout


def test_scatters_reductions_gradients_and_tangents_are_the_same_bits_on_1_2_and_3_threads(tmp_path):
    out = _run(tmp_path, _SPLIT_EVERY_LOOP.format(tests=HERE) + _HANDWRITTEN)
    lines = out.strip().splitlines()
    assert len(lines) == 2 and all(len(line.split()) == 2 for line in lines), out


def test_generated_programs_are_the_same_bits_on_1_2_and_3_threads(tmp_path):
    # chunks of 2 iterations: the generated loops (3 to 33 iterations) are cut into several
    out = _run(tmp_path, _SPLIT_EVERY_LOOP.format(tests=HERE) + _GENERATED.format(cases=3), ENGINE_CHUNK_MIN='2')
    assert 'cases 3' in out, out
