"""Property-based autodiff tests: generated kernels (tests/kernel_grammar.py) whose reverse-
and forward-mode Jacobians must agree with central finite differences in float64.

The normal run checks 30 kernels of 10 programs each (300 generated programs);
scripts/fuzz_autodiff.py runs as many as asked (e.g. 10,000 programs).
"""
import importlib.util
import itertools
import os
import tempfile

import numpy as np
from hypothesis import HealthCheck, given, settings

import engine as ti
from kernel_grammar import PROGRAMS_PER_KERNEL, kernel_source

N = 3
EXAMPLES = int(os.environ.get('AUTODIFF_FUZZ_EXAMPLES', 30))
_counter = itertools.count()


def load_generated(source):
    path = os.path.join(tempfile.mkdtemp(prefix='engine_fuzz_'), f'generated_{next(_counter)}.py')
    with open(path, 'w') as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_generated_kernel(source, seed=0):
    ti.init(default_fp=ti.f64)
    x = ti.field(ti.f64, shape=N, needs_grad=True)
    y = ti.field(ti.f64, shape=(PROGRAMS_PER_KERNEL, N), needs_grad=True)
    kernel = load_generated(source).build(x, y, N)
    x.from_numpy(np.random.default_rng(seed).uniform(-1.5, 1.5, N))
    reverse = ti.ad.jacobian(kernel, [x], [y], mode='reverse')
    forward = ti.ad.jacobian(kernel, [x], [y], mode='forward')
    base, eps = x.to_numpy(), 1e-6
    fd = np.zeros_like(reverse)
    for k in range(N):
        for sign in (1, -1):
            x.from_numpy(base + sign * eps * np.eye(N)[k])
            kernel()
            fd[:, k] += sign * y.to_numpy().reshape(-1) / (2 * eps)
    x.from_numpy(base)
    tol = 1e-5 * np.abs(fd) + 1e-6
    for name, jac in (('reverse', reverse), ('forward', forward)):
        bad = np.argwhere(~(np.abs(jac - fd) <= tol))
        assert bad.size == 0, (f'{name} mode disagrees with finite differences in program '
                               f'{bad[0][0] // N} at {tuple(bad[0])}: {jac[tuple(bad[0])]} vs '
                               f'{fd[tuple(bad[0])]}\n{source}')
    np.testing.assert_allclose(forward, reverse, rtol=1e-9, atol=1e-12)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get('AUTODIFF_FUZZ_RANDOM'),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kernel_source())
def test_generated_kernels_match_finite_differences(source):
    check_generated_kernel(source)
