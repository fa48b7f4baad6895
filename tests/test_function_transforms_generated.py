"""Generated ti.funcs through the in-kernel transforms ti.ad.grad and ti.ad.jvp, checked
against float64 central differences of the same function called in a kernel.

The functions reassign locals (`t1 = t1 * t0`), swap them with tuple assignment, pass
values through select/min/max arms, sqrt and log of bounded values and divisions, and
sometimes run a serial loop or branch: straight-line bodies take the path that reuses the
primal values for every direction (forward.TangentPass.reusing); the others copy the body
once per direction. FUNCTION_FUZZ_EXAMPLES=K draws K functions (default 60).
"""
import importlib.util
import itertools
import os
import random

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import engine as ti
from ad_helpers import generated_source_path

EXAMPLES = int(os.environ.get('FUNCTION_FUZZ_EXAMPLES', 60))
LOCALS = 4
_counter = itertools.count()

_BINARY = ['{a} + {b}', '{a} - {b}', '{a} * {b}', '{a} / (1.5 + ti.abs({b}))', 'ti.max({a}, {b})',
           'ti.min({a}, {b})', 'ti.select({a} > {b}, {a} * {a}, {b})', '{a} if {b} > 0.2 else {b} * 0.5']
_UNARY = ['ti.sin({a})', 'ti.cos({a})', 'ti.tanh({a})', 'ti.sqrt({a} * {a} + 0.5)', 'ti.log({a} * {a} + 1.0)',
          'ti.select({a} > 0.0, ti.sqrt(ti.abs({a}) + 1e-3), -{a})', 'ti.exp(-{a} * {a})', '0.5 * {a}']


def function_source(rng):
    """A ti.func f(p, q) of a 3-vector p and a scalar q, returning a scalar."""
    lines = ['t0 = p[0]', 't1 = p[1]', 't2 = p[2] * q', 't3 = q']
    shape = rng.choice(['straight', 'straight', 'straight', 'loop', 'branch'])
    body = []
    for _ in range(rng.randint(3, 9)):
        target, a, b = (f't{rng.randrange(LOCALS)}' for _ in range(3))
        kind = rng.random()
        if kind < 0.15:
            body.append(f'{a}, {b} = {b}, {a}')
        elif kind < 0.55:
            body.append(f'{target} = ' + rng.choice(_BINARY).format(a=a, b=b))
        else:
            body.append(f'{target} = ' + rng.choice(_UNARY).format(a=a))
    if shape == 'loop':
        body = ['for _ in range(2):'] + ['    ' + line for line in body]
    elif shape == 'branch':
        body = ['if t3 > 0.0:'] + ['    ' + line for line in body]
    out = ' + '.join(f'{rng.uniform(-1, 1):.3f} * t{k}' for k in range(LOCALS))
    return '\n'.join('    ' + line for line in lines + body + [f'return {out}'])


def load(source, program):
    text = ('import engine as ti\n\n@ti.func\ndef f(p, q):\n' + source + '\n')
    path = generated_source_path(f'function_{program}.py')
    with open(path, 'w') as handle:
        handle.write(text)
    spec = importlib.util.spec_from_file_location(f'generated_function_{program}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.f


def check(f, p0, q0):
    n = len(p0)
    points = ti.Vector.field(3, float, shape=2 * n + 1)
    qs = ti.field(float, shape=2 * n + 1)
    values = ti.field(float, shape=2 * n + 1)
    grads = ti.Vector.field(3, float, shape=())
    tangent = ti.field(float, shape=())
    direction = ti.Vector.field(3, float, shape=())
    d_f = ti.ad.grad(f)
    jvp_f = ti.ad.jvp(f)

    @ti.kernel
    def run():
        for i in range(2 * n + 1):
            values[i] = f(points[i], qs[i])
        for _ in range(1):
            grads[None] = d_f(points[0], qs[0])
            _, tangent[None] = jvp_f((points[0], qs[0]), (direction[None], 0.0))

    step = 1e-6
    at = np.tile(p0, (2 * n + 1, 1))
    for k in range(n):
        at[1 + 2 * k, k] += step
        at[2 + 2 * k, k] -= step
    points.from_numpy(at)
    qs.fill(q0)
    towards = np.array([0.3, -0.7, 0.5])
    direction.from_numpy(towards)
    run()
    v = values.to_numpy()
    if not np.all(np.isfinite(v)) or np.abs(v).max() > 1e6:
        return False
    fd = np.array([(v[1 + 2 * k] - v[2 + 2 * k]) / (2 * step) for k in range(n)])
    np.testing.assert_allclose(grads.to_numpy(), fd, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tangent.to_numpy(), fd @ towards, rtol=1e-4, atol=1e-5)
    return True


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2 ** 32 - 1))
def test_generated_functions_through_grad_and_jvp(seed):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    rng = random.Random(seed)
    source = function_source(rng)
    f = load(source, next(_counter))
    p0 = np.array([rng.uniform(-1.5, 1.5) for _ in range(3)])
    q0 = rng.uniform(-1.5, 1.5)
    try:
        check(f, p0, q0)
    except AssertionError as error:
        raise AssertionError(f'{error}\nat p = {p0.tolist()}, q = {q0}\n@ti.func\ndef f(p, q):\n{source}')
