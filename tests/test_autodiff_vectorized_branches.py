"""Gradients of loops that LLVM vectorizes with branches in their bodies.

A local read before a `continue` and stored after it made the adjoint read an element
of .grad in a branch and then zero it. LLVM 22 vectorizes that branch into a masked
load and a masked store, and its InstCombine then moved the load after the store
(engine/backend/cpu/codegen.py: load_frozen): x.grad came out all zeros, but only for
loops of 16 or more iterations (the vector width), so tests at N = 4 never saw it.
"""
import numpy as np
import pytest

import engine as ti
from engine.core import passes

SIZES = (4, 15, 16, 17, 64, 1000)


def _program(dtype, threads, **options):
    ti.init(arch=ti.cpu, default_fp=dtype, cpu_max_num_threads=threads, **options)
    n = max(SIZES)
    x = ti.field(dtype, shape=n, needs_grad=True)
    y = ti.field(dtype, shape=n, needs_grad=True)
    loss = ti.field(dtype, shape=(), needs_grad=True)

    @ti.kernel
    def skip_three(m: ti.i32):
        for i in range(m):
            a = x[i]
            if i == 3:
                continue
            y[i] = a

    @ti.kernel
    def skip_large(m: ti.i32):
        for i in x:
            a = x[i] * 2.0
            if i >= m or x[i] > 50.0:
                continue
            y[i] = a

    @ti.kernel
    def total(m: ti.i32):
        for i in range(m):
            loss[None] += y[i]

    return x, y, loss, skip_three, skip_large, total


def _grad(fields, kernel, m):
    x, y, loss, _, _, total = fields
    x.from_numpy(np.arange(1.0, len(x.to_numpy()) + 1.0))
    y.fill(0)
    with ti.ad.Tape(loss=loss):
        kernel(m)
        total(m)
    return x.grad.to_numpy()


@pytest.mark.parametrize('threads', [1, 2])
@pytest.mark.parametrize('dtype', [ti.f32, ti.f64], ids=['f32', 'f64'])
def test_a_local_read_before_continue_keeps_its_gradient_at_every_size(dtype, threads):
    fields = _program(dtype, threads)
    for m in SIZES:
        expected = np.zeros(max(SIZES))
        expected[:m] = 1.0
        expected[3] = 0.0
        np.testing.assert_array_equal(_grad(fields, fields[3], m), expected, err_msg=f'N = {m}')
        expected = np.zeros(max(SIZES))
        expected[:min(m, 50)] = 2.0
        np.testing.assert_array_equal(_grad(fields, fields[4], m), expected, err_msg=f'N = {m}')


@pytest.mark.parametrize('off', sorted(passes.OPTIONAL))
def test_the_same_gradients_with_each_optional_pass_off(off):
    results = []
    for options in ({'disable_passes': [off]}, {}):
        fields = _program(ti.f64, 2, **options)
        results.append([_grad(fields, fields[k], m) for k in (3, 4) for m in (17, 1000)])
    for without, with_it in zip(*results):
        np.testing.assert_array_equal(without, with_it)


def test_disable_passes_names_the_passes_it_knows():
    with pytest.raises(ti.TaichiInitError, match='no such pass: simplfy .*the optional passes: simplify'):
        ti.init(arch=ti.cpu, disable_passes=['simplfy'])
    ti.init(arch=ti.cpu, disable_passes='simplify')
    assert not passes.enabled('simplify') and passes.enabled('merge_reads')
