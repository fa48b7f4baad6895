"""engine.jax: wrapped kernels and functions pass jax.test_util.check_grads (reverse
mode, orders 1 and 2, float64) and work under jax.jit, jax.grad and jax.vmap."""
import numpy as np
import pytest

import engine as ti
from interop_support import (custom_gradient_program, field_program, matrix_kernel, optional,
                             rollout_program)

jax = optional('jax')
import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import engine.jax as tj  # noqa: E402

jax.config.update('jax_enable_x64', True)


@pytest.fixture
def f64():
    ti.init(default_fp=ti.f64, cpu_max_num_threads=2)
    yield
    ti.reset()


def _randn(*shape, seed=0):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape))


def test_fields_with_vectors_and_several_outputs(f64):
    run, inputs, outputs = field_program()
    f = tj.function(run, inputs, outputs)
    X, W = _randn(4, 3), jnp.asarray(0.7)
    y, loss = f(X, W)
    assert np.allclose(loss, np.sum(np.asarray(y) ** 2))
    assert np.allclose(jax.jit(f)(X, W)[1], loss)
    check_grads(f, (X, W), order=2, modes=['rev'])


def test_ndarray_kernel_with_vectors_and_matrices(f64):
    kernel, outputs = matrix_kernel()
    g = tj.kernel(kernel, outputs=outputs)
    A, M = _randn(4, 3), _randn(4, 2, 2, seed=1)
    check_grads(lambda a, m: g(a, m, 1.5), (A, M), order=2, modes=['rev'])
    batched = jax.vmap(lambda a: g(a, M, 1.5)[0])(jnp.stack([A, 2 * A]))
    assert np.allclose(batched[1], g(2 * A, M, 1.5)[0])


def test_custom_gradients(f64):
    run, inputs, outputs = custom_gradient_program()
    check_grads(tj.function(run, inputs, outputs), (_randn(3),), order=2, modes=['rev'])


def test_calls_under_jit_grad_are_independent(f64):
    """Two calls in one jitted gradient: the second overwrites the first one's fields."""
    p = rollout_program()
    f = tj.function(p['rollout'], [(p['x'], 0), p['p']], [p['loss']])
    P = _randn(3, seed=2) * 0.5

    def product(a, b):
        return f(a, P) * f(b, P)
    a, b = _randn(3, seed=3), _randn(3, seed=4)
    ga, gb = jax.jit(jax.grad(product, argnums=(0, 1)))(a, b)
    fa, fb = f(a, P), f(b, P)
    assert np.allclose(ga, fb * jax.grad(lambda x: f(x, P))(a))
    assert np.allclose(gb, fa * jax.grad(lambda x: f(x, P))(b))
    check_grads(product, (a, b), order=2, modes=['rev'])


def test_a_backward_pass_whose_tape_is_gone_runs_the_forward_pass_again(f64, monkeypatch):
    monkeypatch.setattr(tj, 'KEPT_CALLS', 2)
    run, inputs, outputs = field_program()
    f = tj.function(run, inputs, outputs)
    X, W = _randn(4, 3), jnp.asarray(0.4)
    _, first = jax.vjp(lambda x: f(x, W)[1], X)
    for k in range(3):                  # the first call's tape is dropped
        jax.vjp(lambda x: f(x, W)[1], X * (k + 2))
    _, again = jax.vjp(lambda x: f(x, W)[1], X)
    assert np.allclose(first(1.0)[0], again(1.0)[0])
