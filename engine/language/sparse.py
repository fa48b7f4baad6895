"""Sparse SNodes in kernels: writes activate, struct-fors visit active cells only, and
`ti.activate`, `ti.deactivate`, `ti.is_active`, `ti.append`, `ti.length`, `ti.rescale_index`.

Activity lives in i32 fields (engine/language/snodes.py), so what is emitted here is
ordinary IR: activation is an integer `atomic max` (1 into a pointer's or bitmask's
activity, j + 1 into a dynamic list's length), whose result nothing uses: integer max
commutes, so it never orders a parallel loop (engine/backend/cpu/ordering.py), and the
tape saves and restores activity as it does any field it sees written. A struct-for is
a loop over the whole extent with the body under `if <the cell is active>`.

A write in a struct-for to the very cell the loop is at activates nothing: the cell is
active, or the loop would not be there. This keeps `for I in ti.grouped(x): x[I] = ...`
free of activity writes, so the loop's read of the activity (its guard) does not make it
a loop whose iterations read what others write.
"""
import contextlib
import math

from ..core import dtypes as T
from ..core.errors import TaichiSyntaxError
from ..ir import ops
from ..ir.nodes import Block, Builder, building
from . import printing
from .matrix import Matrix


def container_of(field):
    """The layout node a field (or struct field) was placed under (its primal's, for a .grad
    or .dual); None for a field made with shape=, which is dense."""
    if hasattr(field, 'leaves'):            # a struct field: where its members are
        return container_of(field.leaves()[0])
    node = getattr(field, 'container', None)
    if node is None and getattr(field, 'primal', None) is not None:
        return container_of(field.primal)
    return node


def is_sparse_node(node):
    return node is not None and any(n.sparse for n in node.path())


def rescale(from_extents, to_extents, index):
    """Coordinates, in a node of `to_extents`, of the cell at `index` of a node below it
    (Python ints or kernel values)."""
    axes = sorted(from_extents)
    out = []
    for axis in sorted(to_extents):
        coord = index[axes.index(axis)]
        d = from_extents[axis] // to_extents[axis]
        out.append(coord if d == 1 else coord // d)
    return out


def _indices(index, node, what):
    """An index given as a scalar, list, tuple or vector, checked against the node's axes."""
    if index is None:
        index = []
    elif isinstance(index, Matrix):
        index = list(index.entries)
    elif not isinstance(index, (list, tuple)):
        index = [index]
    index = [ops.as_value(i, T.i32) if not ops.is_value(i) or i.dtype.bits < 32 else i for i in index]
    if len(index) != len(node.extents):
        raise TaichiSyntaxError(f'{what}: {node!r} has {len(node.extents)} axes, got {len(index)} indices')
    return index


def _node(obj, what):
    """A layout node, from a node or from a field placed in one (its cells are the node's)."""
    if hasattr(obj, 'extents'):
        return obj
    node = container_of(obj)
    if node is None:
        raise TaichiSyntaxError(f'{what} takes a layout node (x.parent(), or a node built from ti.root), got '
                                f'{getattr(obj, "name", type(obj).__name__)}, which is not placed in a layout')
    return node


def _in_kernel(what):
    if ops.current_builder() is None:
        raise TaichiSyntaxError(f'{what} is called from Python scope: as in Taichi, call it in a kernel')


# ----------------------------------------------------------------------------
# Activity of a cell

def _dynamic_split(node, coords):
    """(the parent cell's coordinates, the list position) of a cell of a dynamic node."""
    k = node.list_position()
    return coords[:k] + coords[k + 1:], coords[k]


def _load(field, coords):
    return ops.emit('global_load', list(coords), field.dtype, target=field, component=0)


def _atomic_max(field, coords, value):
    """An activation: `activates_cell` tells the autodiff rules it commutes (engine/autodiff/rules.py)."""
    ops.emit('atomic', list(coords) + [ops.as_value(value, T.i32)], T.i32, target=field, component=0,
             kind='max', activates_cell=True)


def _store(field, coords, value, component=0, **attrs):
    ops.current_builder().emit('global_store', list(coords) + [ops.as_value(value, field.dtype)],
                               target=field, component=component, **attrs)


def cell_active(node, coords):
    """An i32 kernel value, 1 iff the node's cell at `coords` is active; None where the node
    has no sparse ancestor (every cell exists)."""
    levels = [n for n in node.path() if n.sparse]
    if not levels:
        return None
    inner = levels[-1]
    cell = rescale(node.extents, inner.extents, coords)
    if inner.activity is not None:
        return _load(inner.activity, cell)
    parent_cell, position = _dynamic_split(inner, cell)
    return ops.cast(position < _load(inner.lengths, parent_cell), T.i32)


def activate_cell(node, coords):
    """Activate the node's cell at `coords` and the cells above it."""
    for level in node.path():
        if not level.sparse:
            continue
        cell = rescale(node.extents, level.extents, coords)
        if level.activity is not None:
            _atomic_max(level.activity, cell, 1)
        else:
            parent_cell, position = _dynamic_split(level, cell)
            _atomic_max(level.lengths, parent_cell, position + 1)


def activate_writes(root, struct_fors):
    """After a kernel is built: after every write into a field under a sparse node, activate
    the cell written. `struct_fors`: {loop statement: (node, coordinates)} of its struct-fors."""
    _activate_block(root, struct_fors, [])


def _activate_block(block, struct_fors, enclosing):
    stmts, last = [], None      # last: the cell the statement before activated (the entries of
    for stmt in block.stmts:    # a vector, the members of a struct, fields side by side: once)
        stmts.append(stmt)
        for inner in stmt.blocks():
            _activate_block(inner, struct_fors, enclosing + ([struct_fors[stmt]] if stmt in struct_fors else []))
        cell = _written_cell(stmt)
        if cell is None or any(_same_cell(*cell, loop) for loop in enclosing):
            last = None
            continue
        key = (tuple(map(id, cell[0].path())), tuple(map(id, cell[1])))
        if key != last:
            builder = Builder()
            with building(builder):
                activate_cell(*cell)
            stmts.extend(builder.root.stmts)
        last = key
    block.stmts[:] = stmts


def _written_cell(stmt):
    """(layout node, coordinates) of the sparse cell a write writes, or None."""
    if stmt.op not in ('global_store', 'atomic') or stmt.attrs.get('activates') is False:
        return None
    node = container_of(stmt.attrs['target'])
    return (node, stmt.args[:-1]) if is_sparse_node(node) else None


def _same_cell(node, coords, loop):
    loop_node, loop_coords = loop
    return node.path() == loop_node.path() and len(coords) == len(loop_coords) and \
        all(a is b for a, b in zip(coords, loop_coords))


# ----------------------------------------------------------------------------
# ti.is_active, ti.activate, ti.deactivate, ti.rescale_index

def is_active(node, index):
    _in_kernel('ti.is_active')
    node = _node(node, 'ti.is_active')
    active = cell_active(node, _indices(index, node, 'ti.is_active'))
    return 1 if active is None else active


def activate(node, index):
    _in_kernel('ti.activate')
    node = _node(node, 'ti.activate')
    activate_cell(node, _indices(index, node, 'ti.activate'))


def deactivate(node, index):
    """Deactivate a cell of a pointer or bitmasked node, or empty a dynamic node's list: its
    activity (the list's length) and that of the sparse cells below it become 0, and so do
    the values of the fields under it. These zeroing stores activate nothing (`activates=False`)."""
    _in_kernel('ti.deactivate')
    node = _node(node, 'ti.deactivate')
    if not node.sparse:
        raise TaichiSyntaxError(f'ti.deactivate: {node!r} is not sparse; only pointer, bitmasked and dynamic '
                                f'cells can be deactivated')
    if node.kind == 'dynamic':     # a list: its index is the parent's cell (`x[i].deactivate()`)
        return _clear_list(node, _indices(index, node.parent(), 'ti.deactivate'))
    coords = _indices(index, node, 'ti.deactivate')
    _store(node.activity, coords, 0)
    for below in node.subtree():
        if below is not node and below.sparse:
            counter = below.activity if below.activity is not None else below.lengths
            _zero_region(counter, below if below.activity is not None else below.parent(), node, coords)
    for f in node.fields():
        _zero_region(f, f.container, node, coords)


def _clear_list(node, parent_cell):
    """A dynamic list emptied: the values it held become 0, then its length."""
    length = _load(node.lengths, parent_cell)
    for f in node.fields():
        _zero_region(f, node, node.parent(), parent_cell, {node.list_axis: length})
    _store(node.lengths, parent_cell, 0)


def _zero_region(field, field_node, node, coords, counts=None):
    """Zero the field's elements inside the cell of `node` at `coords` (the field's layout
    node is `field_node`, at or below `node`). `counts`: run-time extents of some axes."""
    spans = []
    node_axes = sorted(node.extents)
    for axis in sorted(field_node.extents):
        if counts and axis in counts:
            spans.append((0, counts[axis]))
        elif axis in node.extents:
            d = field_node.extents[axis] // node.extents[axis]
            c = coords[node_axes.index(axis)]
            spans.append((c if d == 1 else c * d, d))
        else:
            spans.append((0, field_node.extents[axis]))
    def zero(index):
        for k in range(math.prod(field.element_shape)):
            _store(field, index, 0, component=k, activates=False)
    _for_each(spans, zero)


def _for_each(spans, emit, parallel=False):
    """Call emit(index) for every index of a box given as (start, count) per axis: in one
    loop over the box, or directly where it has one element."""
    total = 1
    for _, count in spans:
        total = total * count
    if not ops.is_value(total) and total == 1:
        return emit([ops.as_value(start, T.i32) for start, _ in spans])
    builder = ops.current_builder()
    body = Block()
    flat = ops.Value('loop_index', (), T.i32)
    builder.emit('for', [ops.as_value(0, T.i32), ops.as_value(total, T.i32)], body=body, index=flat,
                 parallel=parallel)
    with builder.open(body):
        index, rest = [], flat
        for start, count in reversed(spans):
            index.append(ops.as_value(start + rest % count, T.i32))
            rest = rest // count
        emit(index[::-1])


def fill(field, value, component=None):
    """`x.fill(v)` in a kernel: a loop over the field's (active) elements that writes v, where
    the call is: parallel at the kernel's top level, as a struct-for there would be."""
    builder = ops.current_builder()
    node = container_of(field)
    count = math.prod(field.element_shape)
    entries = value.entries if isinstance(value, Matrix) else [value] * count
    if len(entries) != count and component is None:
        raise TaichiSyntaxError(f'{field.name}.fill: {len(entries)} values for elements of shape {field.element_shape}')
    targets = [(component, entries[0])] if component is not None else list(enumerate(entries))

    def write(index):
        active = cell_active(node, index) if is_sparse_node(node) and field.role == 'primal' else None
        block = Block()
        if active is not None:
            builder.emit('if', [ops.truth(active)], then=block, **{'else': Block()})
        with builder.open(block) if active is not None else contextlib.nullcontext():
            for k, v in targets:
                _store(field, index, v, component=k, activates=False)
    _for_each([(0, n) for n in field.shape], write, parallel=builder.block is builder.root)


def no_activate(*fields):
    """`ti.no_activate(x)`: Taichi's promise that the kernel's writes to x hit active cells.
    Activation here is an idempotent max, so the hint changes nothing."""


def rescale_index(source, ancestor, index):
    """`ti.rescale_index(x, block, I)`: the coordinates, in the ancestor node, of the cell
    at I of a field or node below it (a vector; kernels and Python alike)."""
    node = container_of(source) if hasattr(source, 'dtype') else source
    if node is None or (ancestor not in node.path() and ancestor.kind != 'root'):
        raise TaichiSyntaxError(f'ti.rescale_index: {ancestor!r} is not above {source!r}')
    index = list(index.entries) if isinstance(index, Matrix) else list(index)
    if len(index) != len(node.extents):
        raise TaichiSyntaxError(f'ti.rescale_index: {source!r} has {len(node.extents)} axes, got {len(index)} indices')
    return Matrix._make((len(ancestor.extents),), rescale(node.extents, ancestor.extents, index))


# ----------------------------------------------------------------------------
# Dynamic lists: ti.append, ti.length

def _list_node(node, what):
    if node.kind != 'dynamic':
        raise TaichiSyntaxError(f'{what} needs a dynamic node (x.parent() of a field placed under '
                                f'.dynamic(...)), got {node!r}')
    return node


def length(node, index=None):
    _in_kernel('ti.length')
    node = _list_node(_node(node, 'ti.length'), 'ti.length')
    return _load(node.lengths, _indices(index, node.parent(), 'ti.length'))


def append(node, index, value):
    """Append to the list at `index` (the parent's cell): its length grows by one and the
    value goes to the old length's position, which is returned. The length is taken with an
    atomic whose result is used, so a parallel loop that appends runs in order: the lists
    come out the same every run (engine/backend/cpu/ordering.py)."""
    _in_kernel('ti.append')
    node = _list_node(_node(node, 'ti.append'), 'ti.append')
    parent_cell = _indices(index, node.parent(), 'ti.append')
    if len(node.placed) != 1:
        raise TaichiSyntaxError(f'ti.append: {node!r} holds {len(node.placed)} fields; append needs one '
                                f'(a struct field counts as one)')
    position = ops.emit('atomic', parent_cell + [ops.as_value(1, T.i32)], T.i32, target=node.lengths,
                        component=0, kind='add')
    axis = node.list_axis
    builder = ops.current_builder()
    branch = builder.emit('if', [ops.truth(position >= node.extents[axis])], then=Block(), **{'else': Block()})
    with builder.open(branch.attrs['then']):        # full: the length stays the extent, the launch stops
        ops.emit('atomic', parent_cell + [ops.as_value(-1, T.i32)], T.i32, target=node.lengths, component=0,
                 kind='add')
        fmt, values = printing.compose(printing.pieces_of(
            f'ti.append: a list of {node!r} is full ({node.extents[axis]} elements, the extent given to dynamic())'))
        builder.emit('assert_fail', values, format=fmt)
    with builder.open(branch.attrs['else']):
        k = node.list_position()
        _write_element(node.placed[0], parent_cell[:k] + [position] + parent_cell[k:], value)
    return position


def _write_element(target, index, value):
    members = getattr(target, 'members', None)
    if members is not None:         # a struct field: each member
        for key, member in members.items():
            _write_element(member, index, value._members[key] if hasattr(value, '_members') else value[key])
        return
    count = math.prod(target.element_shape)
    entries = value.entries if isinstance(value, Matrix) else [value] * count
    if len(entries) != count:
        raise TaichiSyntaxError(f'ti.append: cannot store {len(entries)} values into {target.name}')
    for k, v in enumerate(entries):
        _store(target, index, v, component=k)

