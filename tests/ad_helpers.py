"""Shared helpers of the reverse-mode autodiff tests: finite differences in float64.

`fd_check` compares the gradients that `ti.ad.Tape` leaves in `.grad` with central
differences of the same forward computation, element by element; the forward is
re-run from Python for every perturbed input element, so keep the inputs small.
"""
import atexit
import os
import shutil
import tempfile

import numpy as np
import pytest

import engine as ti

EPS = 1e-6
RTOL = 1e-5
ATOL = 1e-9


@pytest.fixture
def f64():
    """A fresh program whose default float type is f64."""
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    yield


def assert_grad_close(analytic, fd, what='', rtol=RTOL, atol=ATOL):
    """|analytic - fd| <= rtol * |fd| + atol, elementwise, with a readable failure."""
    analytic = np.asarray(analytic, dtype=np.float64)
    fd = np.asarray(fd, dtype=np.float64)
    assert analytic.shape == fd.shape, (what, analytic.shape, fd.shape)
    err = np.abs(analytic - fd)
    bad = ~(err <= rtol * np.abs(fd) + atol)        # also catches NaN
    if bad.any():
        idx = [tuple(int(i) for i in ix) for ix in np.argwhere(bad)[:6]]
        lines = [f'  at {ix}: autodiff {analytic[ix]!r}, finite differences {fd[ix]!r}' for ix in idx]
        raise AssertionError(f'gradient mismatch {what} ({int(bad.sum())} of {bad.size} entries):\n'
                             + '\n'.join(lines))


def fd_gradient(field, evaluate, eps=EPS):
    """Central differences of the scalar `evaluate()` w.r.t. every element of `field`.

    The step actually taken is measured from the stored values (exact for f64)."""
    base = field.to_numpy()
    fd = np.zeros(base.shape, dtype=np.float64)
    try:
        for idx in np.ndindex(*base.shape):
            plus, minus = base.copy(), base.copy()
            plus[idx] += eps
            minus[idx] -= eps
            field.from_numpy(plus)
            f_plus = evaluate()
            step = float(field.to_numpy()[idx])
            field.from_numpy(minus)
            f_minus = evaluate()
            step -= float(field.to_numpy()[idx])
            fd[idx] = (f_plus - f_minus) / step
    finally:
        field.from_numpy(base)
    return fd


def fd_check(loss, inputs, forward, eps=EPS, rtol=RTOL, atol=ATOL, nonzero=True):
    """Gradients of loss[None] w.r.t. `inputs` (fields) by Tape vs. finite differences.

    forward(): launches the kernels that compute loss[None], starting from loss = 0
    (it must itself reset any intermediate field it accumulates into). Returns the
    autodiff gradients as numpy arrays. With nonzero=True each input must receive a
    gradient that is not identically zero (so that the check is not vacuous)."""
    with ti.ad.Tape(loss):
        forward()
    value = loss[None]
    analytic = [f.grad.to_numpy() for f in inputs]

    def evaluate():
        loss[None] = 0
        forward()
        return loss[None]

    again = evaluate()
    assert again == pytest.approx(value, rel=1e-12, abs=1e-12), 'forward is not repeatable'
    for f, g in zip(inputs, analytic):
        fd = fd_gradient(f, evaluate, eps)
        assert_grad_close(g, fd, f'd {loss.name} / d {f.name}', rtol, atol)
        if nonzero:
            assert np.abs(g).max() > 0, f'd {loss.name} / d {f.name} is identically zero'
    return analytic


def set_field(field, array):
    field.from_numpy(np.asarray(array, dtype=field.dtype.np))


_generated_dir = None


def generated_source_path(name):
    """Where a generated program's source goes: one folder per process, removed when the
    process exits normally (a process that crashes leaves it, for the fuzz scripts to keep)."""
    global _generated_dir
    if _generated_dir is None:
        _generated_dir = tempfile.mkdtemp(prefix='engine_generated_')
        atexit.register(shutil.rmtree, _generated_dir, True)
    return os.path.join(_generated_dir, name)
