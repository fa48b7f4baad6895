"""Shared fixtures for the engine test suite.

`ti_init` gives a test a fresh default runtime (the core test modules request
it for every test through `pytestmark`); `fp` additionally parametrizes a test
over default_fp = f32 / f64 and re-initializes with that default.
"""
import os

import pytest

import engine as ti


@pytest.fixture(scope='session', autouse=True)
def kernel_cache_dir(tmp_path_factory):
    """The suite compiles into a cache of its own, never the user's."""
    os.environ['ENGINE_CACHE_DIR'] = str(tmp_path_factory.mktemp('kernel-cache'))


# Every compile verifies its IR after each stage (engine/ir/verify.py): as built, simplified,
# differentiated; child processes inherit it.
os.environ.setdefault('ENGINE_VERIFY_IR', '1')

# Every launch on a tape is checked for the global data access rules (engine/autodiff/rules.py),
# not only the first of each kernel with each arguments; child processes inherit it.
os.environ.setdefault('ENGINE_AD_VALIDATION', 'always')


@pytest.fixture
def ti_init():
    ti.init(arch=ti.cpu)
    yield


@pytest.fixture(params=['f32', 'f64'])
def fp(request, ti_init):
    dt = getattr(ti, request.param)
    ti.init(arch=ti.cpu, default_fp=dt)
    return dt
