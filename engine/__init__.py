"""`import engine as ti`: a differentiable kernel language with Taichi's API."""
from .runtime import ad, profiler
from .internals import lang
from . import internals as _lib     # taichi._lib.core: the backends this build has
from .core import dtypes
from .core.errors import (TaichiAssertionError, TaichiCompilationError, TaichiIndexError, TaichiInitError,
                          TaichiNameError, TaichiNotImplementedError, TaichiRuntimeError, TaichiSyntaxError,
                          TaichiTypeError)
from .core.errors import USER_ERRORS as _USER_ERRORS, user_frames_only as _user_frames_only
from .language.fields import ComponentField, Field, Ndarray, ndarray
from .language.placement import Layout, axes, field, i, ij, ijk, ijkl, ik, j, jk, k, l, root  # noqa: E741
from .language.snodes import SNode, deactivate_all_snodes
from .language.sparse import activate, append, deactivate, is_active, length, no_activate, rescale_index
from .runtime.ad import Tape, clear_all_gradients
from .language.frontend import (atomic_add, atomic_and, atomic_max, atomic_min, atomic_or, atomic_sub, atomic_xor,
                            block_local, func, grouped, loop_config, ndrange, real_func, static,
                            static_assert, static_print, stop_grad, template)
from .runtime.kernels import Kernel, NdarrayType, data_oriented, kernel
from .language.linalg import eig, polar_decompose, solve, svd, sym_eig
from .language.math import assume_in_range, bit_shr, one, raw_div, raw_mod, zero
from .language.math import (abs, acos, asin, atan2, bit_and, bit_or, bit_xor, cast, ceil, cos, exp, floor, log,
                        max, min, pow, random, randn, round, rsqrt, select, sin, sqrt, tan, tanh)
from .gui import GUI, hex_to_rgb, rgb_to_hex
from . import graph, tools, types
from .language import linalg, math  # ti.math, ti.linalg
from .backend import cache as _cache
from .unsupported import refuse as _refuse
from .language.pyfunc import pyfunc
from .language.matrix import Matrix, Vector
from .language.structs import Struct, StructType, dataclass
from .language.struct_fields import StructField
from .runtime.replay import CaptureError, capture
from .core.program import init as _init, reset as _reset
from .core.dtypes import (f32, f64, float32, float64, i8, i16, i32, i64, int8, int16, int32, int64, u8, u16,
                          u32, u64, uint8, uint16, uint32, uint64)
from .core.program import set_logging_level

# The Taichi release whose API the engine follows (programs compare it with a tuple, as
# Taichi's is); the engine's own version is its package's (pyproject.toml).
__version__ = (1, 7, 4)

cpu = 'cpu'
x64 = 'cpu'
arm64 = 'cpu'
# Taichi's GPU backends: ti.init(arch=...) runs on the CPU with one warning until there is one here
gpu, cuda, vulkan, metal, opengl, gles, dx11, dx12, amdgpu, cc = (
    'gpu', 'cuda', 'vulkan', 'metal', 'opengl', 'gles', 'dx11', 'dx12', 'amdgpu', 'cc')

# Taichi's log levels (ti.init(log_level=ti.ERROR) silences the engine's warnings of ti.init)
TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL = 'trace', 'debug', 'info', 'warn', 'error', 'critical'


class _FieldKind(type):
    def __instancecheck__(cls, value):
        return isinstance(value, (Field, ComponentField)) and cls.accepts(value)


class ScalarField(metaclass=_FieldKind):
    """isinstance(x, ti.ScalarField): a field of scalars."""
    accepts = staticmethod(lambda f: f.element_shape == ())


class MatrixField(metaclass=_FieldKind):
    """isinstance(x, ti.MatrixField): a field of vectors or matrices."""
    accepts = staticmethod(lambda f: f.element_shape != ())


def init(arch=None, **kwargs):
    """Start a fresh program: drops all fields and compiled kernels. Taichi's keywords are
    accepted (engine/core/options.py says which apply here), an unknown one is a TypeError."""
    try:
        _init(arch, **kwargs)
    except _USER_ERRORS as exc:
        _user_frames_only(exc)
        raise


def reset():
    _reset()


class experimental:      # noqa: N801 (Taichi's namespace of features it has not settled)
    """`ti.experimental.real_func`: where Taichi 1.6 kept real functions."""
    real_func = staticmethod(real_func)


def sync():
    """Kernels finish before their launch returns: nothing to wait for."""


def clear_cache(path=None):
    """Delete the compiled kernels on disk (the directory of ti.init's offline_cache_file_path,
    $ENGINE_CACHE_DIR or ~/.cache/engine-kernels); returns how many entries were removed."""
    return _cache.clear(path)


class extension:
    """Taichi's optional features, for ti.is_extension_supported(arch, ti.extension.X)."""
    sparse, quant, quant_basic, mesh, data64 = 'sparse', 'quant', 'quant_basic', 'mesh', 'data64'
    adstack, bls, assertion, extfunc, dynamic_index = 'adstack', 'bls', 'assertion', 'extfunc', 'dynamic_index'


_EXTENSIONS = {
    extension.data64: True,             # f64, i64, u64
    extension.adstack: True,            # reverse mode through loops that update locals
    extension.assertion: True,          # `assert` in kernels, checked in debug mode
    extension.dynamic_index: True,      # run-time indices into vectors and matrices
    extension.sparse: False, extension.quant: False, extension.quant_basic: False, extension.mesh: False,
    extension.bls: False,               # ti.block_local is accepted and changes nothing
    extension.extfunc: False,
}


def is_extension_supported(arch, ext):
    """Every arch runs on the CPU here, so the answer depends on the extension alone."""
    if ext not in _EXTENSIONS:
        raise ValueError(f'is_extension_supported: {ext!r} is not one of ti.extension\'s names')
    return _EXTENSIONS[ext]


def __getattr__(name):
    """Taichi's names this engine lacks fail with what they are, other names with the closest
    one the engine has (engine/unsupported.py)."""
    _refuse(name, known=list(globals()))
