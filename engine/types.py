"""`ti.types`, also a module (`from taichi.types import ndarray, template`): the types of
kernel signatures, fields and ndarrays, and Taichi's names of the scalar types."""
from .core.dtypes import (f32, f64, float32, float64, i8, i16, i32, i64, int8, int16, int32, int64, u8, u16,
                          u32, u64, uint8, uint16, uint32, uint64)
from .language.frontend import template  # noqa: F401
from .language.frontend.triplets import SparseMatrixBuilderType
from .runtime.kernels import NdarrayType as ndarray  # noqa: F401
from .language.math import MatrixType, VectorType
from .language.structs import StructType
from .unsupported import refuse


sparse_matrix_builder = SparseMatrixBuilderType     # `A: ti.types.sparse_matrix_builder()` in kernels


def vector(n, dtype=float):
    """A vector type: a field, ndarray, argument or return dtype, and a constructor."""
    return VectorType(('vector', n, dtype))


def matrix(n, m, dtype=float):
    return MatrixType(('matrix', n, m, dtype))


def struct(**members):
    """`ti.types.struct(a=ti.f32, v=ti.math.vec3)`: a struct type (engine/language/structs.py)."""
    return StructType(members)


def __getattr__(name):
    """Taichi's types this engine lacks fail saying what they are (engine/unsupported.py)."""
    refuse(name, 'ti.types')
