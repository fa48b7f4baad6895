"""What the interop tests share: the optional library (skipped when it is not installed,
unless ENGINE_REQUIRE_INTEROP is set, as CI sets it) and small programs to wrap."""
import importlib
import os

import pytest

import engine as ti


def optional(name):
    if os.environ.get('ENGINE_REQUIRE_INTEROP'):
        return importlib.import_module(name)
    return pytest.importorskip(name)


def field_program():
    """x (vectors), w (0-D) -> y (per entry), loss (0-D): several outputs of fields."""
    x = ti.Vector.field(3, float, shape=4, needs_grad=True)
    w = ti.field(float, shape=(), needs_grad=True)
    y = ti.field(float, shape=4, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def run():
        for i in x:
            y[i] = ti.sin(x[i].dot(x[i])) * w[None]
            loss[None] += y[i] ** 2
    return run, [x, w], [y, loss]


def matrix_kernel():
    """An ndarray kernel: vectors a, matrices m, scale s -> b (scalars), c (vectors)."""
    @ti.kernel
    def mixed(a: ti.types.ndarray(dtype=ti.math.vec3, ndim=1), m: ti.types.ndarray(dtype=ti.math.mat2, ndim=1),
              b: ti.types.ndarray(), c: ti.types.ndarray(dtype=ti.math.vec2, ndim=1), s: ti.f64):
        for i in a:
            b[i] = ti.sin(a[i].dot(a[i])) * s
            c[i] = m[i] @ ti.Vector([a[i][0], a[i][1] ** 2])
    outputs = {'b': lambda a, m, s: (a.shape[0],), 'c': lambda a, m, s: (a.shape[0], 2)}
    return mixed, outputs


def custom_gradient_program():
    """x -> (z, y) where y = x**2 is computed under ti.ad.grad_replaced."""
    x = ti.field(float, shape=3, needs_grad=True)
    y = ti.field(float, shape=3, needs_grad=True)
    z = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def square():
        for i in x:
            y[i] = x[i] ** 2

    @ti.kernel
    def total():
        for i in y:
            z[None] += ti.sin(y[i])

    @ti.ad.grad_replaced
    def squared():
        square()

    @ti.ad.grad_for(squared)
    def squared_gradient():
        square.grad()

    def run():
        squared()
        total()
    return run, [x], [z, y]


def rollout_program(n=3, steps=5):
    """x[t + 1] = sin(x[t]) * p + x[t]; loss = sum x[last]**2: a time-indexed state."""
    x = ti.field(float, shape=(steps, n), needs_grad=True)
    p = ti.field(float, shape=n, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        for i in range(n):
            x[t + 1, i] = ti.sin(x[t, i]) * p[i] + x[t, i]

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += x[steps - 1, i] ** 2

    def rollout():
        for t in range(steps - 1):
            step(t)
        total()
    return dict(x=x, p=p, loss=loss, step=step, total=total, rollout=rollout, steps=steps, n=n)
