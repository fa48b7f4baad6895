"""Where fields come from: `ti.field`, `ti.Vector.field`, ..., and Taichi's layout API
(`ti.root.dense(ti.ij, shape).place(x)`).

A dense layout tree only determines a field's shape: nested `dense` blocks multiply the
extent of their axes, and the logical indexing is the same whatever the nesting, so
each field stays one numpy array (engine/language/fields.py). Sparse SNodes are refused.
"""
from . import structs
from ..core.errors import TaichiNotImplementedError, TaichiRuntimeError, user_line
from .fields import ComponentField, Field, Ndarray, as_shape, guess_name
from .matrix import Matrix, Vector
from ..core.program import current as current_program
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
# Layout: ti.root.dense(ti.ij, (4, 4)).dense(...).place(x, y)

class Axis:
    def __init__(self, *dims):
        self.dims = dims


def axes(*dims):
    """`ti.axes(0, 1)` is `ti.ij`."""
    return Axis(*dims)


i, j, k, l = Axis(0), Axis(1), Axis(2), Axis(3)  # noqa: E741
ij, ik, jk, ijk, ijkl = Axis(0, 1), Axis(0, 2), Axis(1, 2), Axis(0, 1, 2), Axis(0, 1, 2, 3)


class SNode:
    """A node of the layout tree; it only accumulates the extent of each axis."""

    def __init__(self, extents=None):
        self.extents = dict(extents or {})

    def dense(self, axes, shape):
        shape = as_shape(shape)
        if len(shape) == 1 and len(axes.dims) > 1:
            shape = shape * len(axes.dims)
        if len(shape) != len(axes.dims):
            raise TaichiRuntimeError(f'dense over {len(axes.dims)} axes needs as many extents, got {shape}')
        extents = dict(self.extents)
        for axis, n in zip(axes.dims, shape):
            extents[axis] = extents.get(axis, 1) * n
        return SNode(extents)

    # Sparse SNodes track which cells are active; this engine does not, and allocating them
    # densely would make struct-fors visit inactive cells: refused rather than wrong.
    def pointer(self, axes, shape):
        raise _sparse_refusal('pointer')

    def bitmasked(self, axes, shape):
        raise _sparse_refusal('bitmasked')

    def dynamic(self, axis, shape, chunk_size=None):
        raise _sparse_refusal('dynamic')

    @property
    def shape(self):
        """Indices follow the axis order (ti.i, ti.j, ti.k, ti.l), whatever the nesting, as
        in Taichi: `dense(ti.j, n).dense(ti.i, m)` is an (m, n) field, and DiffTaichi's
        `dense(ti.l, steps).dense(ti.i, n)` an (n, steps) one, indexed `x[i, t]`."""
        return tuple(self.extents[a] for a in sorted(self.extents))

    def place(self, *fields, offset=None):
        for f in fields:
            if isinstance(f, StructField):
                self.place(*f.leaves())
                continue
            if isinstance(f, ComponentField):
                f.place(self.shape)
                continue
            if not isinstance(f, Field):
                raise TypeError(f'place() takes fields, got {type(f).__name__}')
            f._allocate(self.shape)
        return self

    def lazy_grad(self):
        """Allocate .grad for every float field placed so far."""
        for f in current_program().fields:
            if f.role == 'primal' and f.placed and f.grad is not None and not f.grad.placed:
                f.grad._allocate(f.shape, by_user=False)

    def lazy_dual(self):
        """Allocate .dual for every float field placed so far."""
        current_program().allocate_duals(roles=('primal',))


def _sparse_refusal(kind):
    return TaichiNotImplementedError(
        f'{kind}(...) at {user_line()}: sparse SNodes (pointer, bitmasked, dynamic) are not '
        f'supported by this engine, which does not track which cells are active; use dense(...) '
        f'where every cell is meant to exist (docs/taichi_programs.md, "Not there yet")')


class _Root(SNode):
    """`ti.root`: always the root of the current program."""


root = _Root()


# Vector.field / Matrix.field and the ndarray counterparts build on this module.
Matrix.field = staticmethod(matrix_field)
Vector.field = staticmethod(vector_field)
Matrix.ndarray = staticmethod(lambda n, m, dtype, shape, needs_grad=False, needs_dual=False:
                              Ndarray(dtype, shape, (n, m), needs_grad, needs_dual))
Vector.ndarray = staticmethod(lambda n, dtype, shape, needs_grad=False, needs_dual=False:
                              Ndarray(dtype, shape, (n,), needs_grad, needs_dual))
