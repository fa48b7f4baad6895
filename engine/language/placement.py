"""Where fields come from: `ti.field`, `ti.Vector.field`, ..., and the axes of Taichi's
layout API (`ti.root.dense(ti.ij, shape).place(x)`: engine/language/snodes.py)."""
from . import structs
from ..core.errors import TaichiRuntimeError
from .fields import Field, Ndarray, as_shape, guess_name
from .matrix import Matrix, Vector
from .snodes import Axis, root  # noqa: F401 (ti.root)
from .struct_fields import StructField

# ----------------------------------------------------------------------------
# Public constructors

def field(dtype, shape=None, name=None, offset=None, needs_grad=False, needs_dual=False):
    if offset is not None:
        raise TaichiRuntimeError('field offsets are not supported')
    if isinstance(dtype, structs.StructType):
        return StructField(dtype, as_shape(shape) if shape is not None else None, name or guess_name(),
                           needs_grad, needs_dual)
    if isinstance(dtype, tuple) and dtype and dtype[0] in ('vector', 'matrix'):   # ti.math.vec3, ...
        element = dtype[1:2] if dtype[0] == 'vector' else dtype[1:3]
        return Field(dtype[-1], element, shape, name or guess_name(), needs_grad, needs_dual)
    return Field(dtype, (), shape, name or guess_name(), needs_grad, needs_dual)


class Layout:
    """Taichi's layouts of vector and matrix fields: entries of an element together (AOS)
    or each entry in an array of its own (SOA). Accepted: a field here is one array of
    shape + element shape whatever the layout, and no result depends on it."""
    AOS, SOA = 'aos', 'soa'


def vector_field(n, dtype, shape=None, name=None, needs_grad=False, needs_dual=False, layout=Layout.AOS,
                 offset=None, **_):
    _check_layout(layout, offset)
    return Field(dtype, (n,), shape, name or guess_name(), needs_grad, needs_dual)


def matrix_field(n, m, dtype, shape=None, name=None, needs_grad=False, needs_dual=False, layout=Layout.AOS,
                 offset=None, **_):
    _check_layout(layout, offset)
    return Field(dtype, (n, m), shape, name or guess_name(), needs_grad, needs_dual)


def _check_layout(layout, offset):
    if layout not in (Layout.AOS, Layout.SOA):
        raise ValueError(f'layout must be ti.Layout.AOS or ti.Layout.SOA, got {layout!r}')
    if offset is not None:
        raise TaichiRuntimeError('field offsets are not supported')



# ----------------------------------------------------------------------------
# Layout: ti.root.dense(ti.ij, (4, 4)).dense(...).place(x, y) (engine/language/snodes.py)

def axes(*dims):
    """`ti.axes(0, 1)` is `ti.ij`."""
    return Axis(*dims)


i, j, k, l = Axis(0), Axis(1), Axis(2), Axis(3)  # noqa: E741
ij, ik, jk, ijk, ijkl = Axis(0, 1), Axis(0, 2), Axis(1, 2), Axis(0, 1, 2), Axis(0, 1, 2, 3)


# Vector.field / Matrix.field and the ndarray counterparts build on this module.
Matrix.field = staticmethod(matrix_field)
Vector.field = staticmethod(vector_field)
Matrix.ndarray = staticmethod(lambda n, m, dtype, shape, needs_grad=False, needs_dual=False:
                              Ndarray(dtype, shape, (n, m), needs_grad, needs_dual))
Vector.ndarray = staticmethod(lambda n, dtype, shape, needs_grad=False, needs_dual=False:
                              Ndarray(dtype, shape, (n,), needs_grad, needs_dual))
