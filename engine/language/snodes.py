"""Taichi's layout tree: `ti.root.dense(ti.ij, n).pointer(...).bitmasked(...).dynamic(...)
.place(x)`.

Storage stays dense whatever the tree: a field is one numpy array of its full extent
(engine/language/fields.py), so a sparse field costs the memory of a dense one. What a
sparse node adds is its *activity*, kept in an i32 field of its own that kernels and the
tape treat like any other field:
- pointer and bitmasked nodes: `activity`, 1 per active cell of the node;
- dynamic nodes: `lengths`, the length of the list under each cell of the parent.
A cell is active iff the innermost sparse node above it says so: activating a cell
activates its ancestors, and deactivating one zeroes its descendants' activity and the
values of the fields under it (Taichi zero-fills the memory it recycles), so an inactive
cell reads 0. engine/language/sparse.py emits the kernel side.
"""
import numpy as np

from ..core import dtypes as T
from ..core.errors import TaichiRuntimeError, user_line
from ..core.program import current as current_program
from . import sparse
from .fields import ComponentField, Field, as_shape
from .struct_fields import StructField

SPARSE_KINDS = ('pointer', 'bitmasked', 'dynamic')


class Axis:
    def __init__(self, *dims):
        self.dims = dims


class SNode:
    """A node of the layout tree. `extents`: the total extent of each axis down to this
    node (`dense(ti.j, n).dense(ti.i, m)` is an (m, n) field: indices follow the axis
    order, whatever the nesting, as in Taichi)."""

    def __init__(self, parent=None, kind='root', sizes=None):
        self._parent, self.kind = parent, kind
        self.sizes = dict(sizes or {})      # this node's own extent of each of its axes
        self.extents = dict(parent.extents if parent is not None else {})
        for axis, n in self.sizes.items():
            self.extents[axis] = self.extents.get(axis, 1) * n
        self.placed = []        # what place() got: fields and struct fields
        self.activity = self.lengths = None
        if kind in ('pointer', 'bitmasked'):
            self.activity = Field(T.i32, (), self.shape, f'{kind} activity ({_where()})')
        elif kind == 'dynamic':
            self.lengths = Field(T.i32, (), parent.shape, f'dynamic lengths ({_where()})')
        for counter in (self.activity, self.lengths):
            if counter is not None:
                counter.activity_of = self      # engine/autodiff/rules.py names the node in its errors
        if parent is not None:
            current_program().snodes.append(self)

    # --- building the tree ------------------------------------------------------
    def dense(self, axes, shape):
        return self._child('dense', axes, shape)

    def pointer(self, axes, shape):
        return self._child('pointer', axes, shape)

    def bitmasked(self, axes, shape):
        return self._child('bitmasked', axes, shape)

    def dynamic(self, axis, shape, chunk_size=None):
        """A list along one axis, at most `shape` long (chunk_size: Taichi's allocation unit;
        storage here is the whole extent, allocated up front)."""
        dims = axis.dims
        if len(dims) != 1:
            raise TaichiRuntimeError(f'dynamic(...) at {user_line()}: a dynamic node has one axis, got {len(dims)}')
        if any(a >= dims[0] for a in self.extents):
            raise TaichiRuntimeError(f'dynamic(...) at {user_line()}: the axis of a dynamic node must come after '
                                     f'the axes above it (Taichi\'s rule), got axis {dims[0]} under {sorted(self.extents)}')
        return self._child('dynamic', axis, shape)

    def _child(self, kind, axes, shape):
        if self.kind == 'dynamic':
            raise TaichiRuntimeError(f'{kind}(...) at {user_line()}: nothing but fields goes under a dynamic node')
        shape = as_shape(shape)
        if len(shape) == 1 and len(axes.dims) > 1:
            shape = shape * len(axes.dims)
        if len(shape) != len(axes.dims):
            raise TaichiRuntimeError(f'{kind} over {len(axes.dims)} axes needs as many extents, got {shape}')
        return SNode(self, kind, dict(zip(axes.dims, shape)))

    def place(self, *fields, offset=None):
        if offset is not None:
            raise TaichiRuntimeError(f'place(..., offset=...) at {user_line()}: field offsets are not supported')
        for f in fields:
            if isinstance(f, StructField):
                self.place(*f.leaves())
                self.placed[-len(f.leaves()):] = [f]
                continue
            if isinstance(f, ComponentField):
                f.place(self.shape)
                f.parent.container = self
                if f.parent not in self.placed:
                    self.placed.append(f.parent)
                continue
            if not isinstance(f, Field):
                raise TypeError(f'place() takes fields, got {type(f).__name__}')
            self._check_companion(f)
            f._allocate(self.shape)
            f.container = self
            self.placed.append(f)
        return self

    def _check_companion(self, f):
        """A gradient (or dual) shares its primal's activity: under a sparse node it goes in the
        primal's node (`place(x, x.grad)`, needs_grad=True or lazy_grad())."""
        partner = f.primal if f.primal is not None else f.grad
        where = sparse.container_of(partner) if partner is not None and partner.placed else None
        if where is not None and where is not self and (self.sparse_path() or where.sparse_path()):
            raise TaichiRuntimeError(f'place({f.name}) at {user_line()}: {f.name} must go in the node of '
                                     f'{partner.name} ({where!r}), whose activity it shares; place them together')

    def lazy_grad(self):
        """Allocate .grad for every float field placed so far."""
        for f in current_program().fields:
            if f.role == 'primal' and f.placed and f.grad is not None and not f.grad.placed:
                f.grad._allocate(f.shape, by_user=False)

    def lazy_dual(self):
        """Allocate .dual for every float field placed so far."""
        current_program().allocate_duals(roles=('primal',))

    # --- what the tree says -----------------------------------------------------
    @property
    def shape(self):
        return tuple(self.extents[a] for a in sorted(self.extents))

    def parent(self, n=1):
        node = self
        for _ in range(n):
            node = node._parent if node is not None else None
        return node

    @property
    def list_axis(self):
        """The axis of a dynamic node (its only one); None for other kinds."""
        return next(iter(self.sizes)) if self.kind == 'dynamic' else None

    def list_position(self):
        """Where the list axis sits among this dynamic node's coordinates."""
        return sorted(self.extents).index(self.list_axis)

    @property
    def sparse(self):
        return self.kind in SPARSE_KINDS

    def path(self):
        """This node's ancestors (the root left out) and itself, outermost first."""
        return ([] if self._parent is None else self._parent.path()) + ([self] if self._parent is not None else [])

    def sparse_path(self):
        return [n for n in self.path() if n.sparse]

    def subtree(self):
        """This node and every node below it (of the current program)."""
        return [n for n in current_program().snodes if self in n.path()]

    def fields(self):
        """The fields stored under this node, at any depth (members of struct fields one by one)."""
        out = []
        for node in self.subtree():
            for f in node.placed:
                out.extend(f.leaves() if isinstance(f, StructField) else [f])
        return out

    # --- Python scope -----------------------------------------------------------
    def deactivate_all(self):
        """Deactivate every cell of this node and of the sparse nodes below it: their activity
        and the values of the fields they hold become 0."""
        nodes = self.subtree()
        for node in nodes:
            for counter in (node.activity, node.lengths):
                if counter is not None:
                    counter._write(Ellipsis, 0)
        for f in self.fields():
            if any(n.sparse for n in f.container.path() if n in nodes):
                f._write_values(Ellipsis, 0)

    def activate_python(self, index):
        """After a write from Python into a field placed here, at `index` (a tuple of ints,
        or Ellipsis: every cell, as from_numpy writes)."""
        for level in self.path():
            if not level.sparse:
                continue
            counter = level.activity if level.activity is not None else level.lengths
            if index is Ellipsis:
                counter._write(Ellipsis, 1 if level.activity is not None else level.extents[level.list_axis])
                continue
            cell = tuple(int(c) for c in sparse.rescale(self.extents, level.extents, list(index)))
            value = 1
            if level.activity is None:
                k = level.list_position()
                cell, value = cell[:k] + cell[k + 1:], cell[k] + 1
            if counter.data[cell] < value:
                counter._write(cell, value)

    def active_cells(self):
        """A boolean array of this node's shape: which cells are active (None: all are)."""
        levels = [n for n in self.path() if n.sparse]
        if not levels:
            return None
        inner = levels[-1]
        if inner.activity is not None:
            mask = inner.activity.data != 0
        else:
            k = inner.list_position()
            positions = np.arange(inner.extents[inner.list_axis]).reshape(
                [-1 if a == k else 1 for a in range(len(inner.extents))])
            mask = positions < np.expand_dims(inner.lengths.data, k)
        for position, axis in enumerate(sorted(self.extents)):
            if axis in inner.extents:
                mask = np.repeat(mask, self.extents[axis] // inner.extents[axis], axis=position)
            else:
                mask = np.repeat(np.expand_dims(mask, position), self.extents[axis], axis=position)
        return mask

    def __repr__(self):
        sizes = ', '.join(f'{"ijkl"[a] if a < 4 else a}={n}' for a, n in sorted(self.sizes.items()))
        return f'<SNode {self.kind}({sizes}), shape {self.shape}>'


def _where():
    return user_line().rsplit('/', 1)[-1]


class _Root(SNode):
    """`ti.root`: always the root of the current program."""

    def subtree(self):
        return list(current_program().snodes)

    def fields(self):
        return [f for f in current_program().fields if getattr(f, 'container', None) is not None]


root = _Root()


def deactivate_all_snodes():
    """`ti.deactivate_all_snodes()`: every sparse node of the program, from Python scope."""
    root.deactivate_all()


