"""Generated programs through engine.torch, checked by torch.autograd.gradcheck (and
gradgradcheck for some): a generated ti.func (tests/test_function_transforms_generated.py)
inside a kernel over fields or over ndarrays, wrapped with whole or partial ports, called
one to three times in one graph with the calls' results mixed by torch, on 1 or 2 threads.
INTEROP_FUZZ_EXAMPLES=K draws K programs (default 12)."""
import importlib.util
import itertools
import os
import random

import numpy as np
import pytest

import engine as ti
from ad_helpers import generated_source_path
from interop_support import optional
from test_function_transforms_generated import function_source

torch = optional('torch')
import engine.torch as tt  # noqa: E402

EXAMPLES = int(os.environ.get('INTEROP_FUZZ_EXAMPLES', 12))
N = 3
_counter = itertools.count()

_KERNELS = '''
import engine as ti

@ti.func
def f(p, q):
{body}

def over_fields(x, q, y, loss, scale):
    @ti.kernel
    def values():
        for i in y:
            y[i] = f(x[i], q[i])

    @ti.kernel
    def total():
        loss[None] = 0.0
        for i in y:
            loss[None] += scale * y[i] * y[i]
    return values, total

@ti.kernel
def over_ndarrays(a: ti.types.ndarray(dtype=ti.math.vec3, ndim=1), b: ti.types.ndarray(),
                  out: ti.types.ndarray()):
    for i in range(out.shape[0]):
        out[i] = f(a[i], b[i])
'''


def _module(rng):
    body = function_source(rng)
    path = generated_source_path(f'interop_{next(_counter)}.py')
    with open(path, 'w') as handle:
        handle.write(_KERNELS.format(body=body))
    spec = importlib.util.spec_from_file_location(f'generated_interop_{os.path.basename(path)[:-3]}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, body


def _wrapped(module, rng):
    """(a function of tensors, the shapes of its inputs)."""
    if rng.random() < 0.3:
        op = tt.kernel(module.over_ndarrays, outputs={'out': lambda a, b: (a.shape[0],)})
        return op, [(N, 3), (N,)]
    x = ti.Vector.field(3, float, shape=N, needs_grad=True)
    q = ti.field(float, shape=N, needs_grad=True)
    y = ti.field(float, shape=N, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)
    x.from_numpy(0.3 * (1 + np.arange(3 * N).reshape(N, 3) % 4))
    values, total = module.over_fields(x, q, y, loss, rng.uniform(0.5, 1.5))
    part = rng.choice([Ellipsis, slice(0, 2), 1])
    inputs = [x if part is Ellipsis else (x, part), q]
    shapes = [x.data[part].shape if part is not Ellipsis else (N, 3), (N,)]

    def run():
        values()
        total()
    outputs = rng.choice([[y, loss], [loss], [y]])
    return tt.function(run, inputs, outputs), shapes


def _graph(op, shapes, rng):
    """f(inputs) -> a scalar, from one to three calls of op mixed by torch."""
    calls = rng.randint(1, 3)
    weights = [rng.uniform(-1, 1) for _ in range(calls)]

    def graph(*inputs):
        result = 0
        for k in range(calls):
            moved = [t * (1 + 0.25 * k) for t in inputs]
            out = op(*moved)
            out = out if isinstance(out, tuple) else (out,)
            result = result + weights[k] * sum(o.sum() for o in out) * (1 if k % 2 else out[0].sum())
        return result
    return graph


@pytest.mark.parametrize('seed', range(EXAMPLES))
def test_generated_programs_pass_gradcheck(seed):
    rng = random.Random(seed)
    ti.init(default_fp=ti.f64, cpu_max_num_threads=rng.choice([1, 2]))
    module, body = _module(rng)
    op, shapes = _wrapped(module, rng)
    graph = _graph(op, shapes, rng)
    generator = torch.Generator().manual_seed(seed)
    inputs = [(torch.rand(s, generator=generator, dtype=torch.float64) * 2 - 1).requires_grad_() for s in shapes]
    try:
        assert torch.autograd.gradcheck(graph, inputs, atol=1e-5, rtol=1e-3)
        if seed % 3 == 0:
            assert torch.autograd.gradgradcheck(graph, inputs, atol=1e-5, rtol=1e-3)
    except Exception as error:
        raise AssertionError(f'seed {seed}: {error}\n@ti.func\ndef f(p, q):\n{body}') from None
    finally:
        ti.reset()
