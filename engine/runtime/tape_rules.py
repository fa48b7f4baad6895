"""The global data access rules across the launches of a tape (engine/autodiff/rules.py states
them and checks one kernel): `TapeChecker` computes what a tape must save, rather than
refusing, when a launch, a no_grad launch or a Python write modifies elements that
earlier launches on the tape read.
"""
import functools

import numpy as np

from ..language.abi import ExternalArray, as_array, memory_key
from ..language.fields import Field, Ndarray
from ..core.errors import AutodiffRuleError
from ..autodiff.rules import READ, STORE, has_grad, target_name


class Target:
    """A field, or the array behind an ndarray argument, as the tape sees it."""

    def __init__(self, data, name, dual=None, grad=None, shape=None):
        self.data, self.name, self.dual, self.grad = data, name, dual, grad
        self.shape = data.shape if shape is None else shape
        self.marks = np.zeros(self.shape, dtype=bool)   # elements an earlier launch read
        self.written = np.zeros(self.shape, dtype=bool)  # elements an earlier launch modified
        self.by_python = np.zeros(self.shape, dtype=bool)  # ... last by a write from Python
        self.aliases = []       # other arrays' Targets over some of the same memory (views)

    @functools.cached_property
    def address(self):
        """Where its data starts (the tape's native saves copy from there)."""
        return self.data.ctypes.data


def plain_target(obj, name='ndarray'):
    """The Target of a field, or of an ndarray (ti.ndarray or numpy array)."""
    if isinstance(obj, Field):
        return field_target(obj)
    # (a numpy array's .data is a new memoryview at every access: as_array, never getattr)
    array, grad, dual = as_array(obj), getattr(obj, 'grad', None), getattr(obj, 'dual', None)
    element = len(getattr(obj, 'element_shape', ()))
    # the tape saves and puts back the tangents of what it saves, too (forward over reverse)
    return Target(array, name, None if dual is None else as_array(dual), None if grad is None else as_array(grad),
                  array.shape[:array.ndim - element] if element else array.shape)


def field_target(field):
    dual = field.dual._data if field.dual is not None and field.dual.placed else None
    grad = field.grad._data if has_grad(field) else None
    return Target(field._data, field.name, dual, grad, field.shape)


class Save:
    """Elements a step must save: `index` of `obj` (a field, an NdarrayArg or a Target). For
    a field whose elements are contiguous, also where they are: `view` (a numpy index of
    the view), `offset` and `nbytes` (from the field's start). A plan's saves serve every
    tape that follows it, so a save costs a copy of bytes, not an index computation."""
    __slots__ = ('obj', 'index', 'view', 'offset', 'nbytes', 'padding')

    def __init__(self, obj, index, data=None):
        self.obj, self.index, self.view, self.offset = obj, index, None, None
        if isinstance(obj, Field) and isinstance(index, tuple):
            view = data[index + (Ellipsis,)]
            if view.flags.c_contiguous:
                self.view = index + (Ellipsis,)
                self.offset = view.__array_interface__['data'][0] - data.__array_interface__['data'][0]
                self.nbytes = view.nbytes
                self.padding = b'\0' * (-view.nbytes % 8)      # the next launch's arguments stay aligned


class PlanNode:
    """What the tape did at one step of a sequence of launches it has seen (the saves, and
    whether the step modified what earlier steps used), and the steps seen after it.
    `summary`: the access summary of the step's kernel (None: a step other than a launch)."""
    __slots__ = ('plan', 'next', 'summary')
    count = 0               # nodes in all programs' memos
    LIMIT = 1_000_000       # beyond it, sequences are checked without being memoized

    def __init__(self, plan=None, summary=None):
        self.plan, self.next, self.summary = plan, {}, summary


def memo_of(prog):
    """What tapes of this program did for each sequence of launches they saw (see
    TapeChecker); forgotten when a gradient is placed."""
    if prog.rule_memo[0] != prog.grad_epoch:
        prog.rule_memo = (prog.grad_epoch, PlanNode())
    return prog.rule_memo[1]


def forget_memo(prog):
    """Every sequence of launches is checked again from now on."""
    prog.rule_memo = (None, None)


class TapeChecker:
    """Per field and ndarray: which elements launches on the tape read and modified. Before
    a write that modifies read elements, names what the tape must save.

    The elements an access can touch depend only on the kernel and its arguments, so what
    a sequence of launches needs is the same every time it recurs: `memo` (a PlanNode per
    program) remembers it, and a tape that repeats a sequence seen before follows the memo
    (a dict lookup per launch) and marks nothing until it diverges from it."""

    def __init__(self, memo=None):
        self.targets = {}       # id(field) or abi.memory_key(array) -> Target
        self.cut = {}           # float field without a gradient -> (kernel, fields) that wrote it from fields with one
        self.cursor = memo      # the memo's node of the steps so far; None once off the memo
        # the steps followed on the memo whose marks are not applied yet: their nodes, and
        # each launch's args or another step's (mark, operands). Appending existing objects
        # allocates nothing: a tape following the memo leaves the garbage collector idle.
        self.unmarked_nodes, self.unmarked = [], []
        self.new_step = True    # the last step was not in the memo (its launch is checked inside)

    def _step(self, key, mark, *operands, check=None, summary=None):
        """The plan of one step: from the memo when this sequence was seen; else `check()`
        (may raise), then `mark(*operands)`, which marks what the step reads and modifies
        and returns the plan. `summary`: a launch's (its operands are (summary, args))."""
        node = self.cursor.next.get(key) if self.cursor is not None else None
        self.new_step = node is None
        if node is not None:
            self.cursor = node
            self.unmarked_nodes.append(node)
            self.unmarked.append(operands[1] if summary is not None else (mark, operands))
            return node.plan
        self._catch_up()
        if check is not None:
            check()
        plan = mark(*operands)
        if self.cursor is not None and PlanNode.count < PlanNode.LIMIT:
            PlanNode.count += 1
            self.cursor.next[key] = self.cursor = PlanNode(plan, summary)
        else:
            self.cursor = None
        return plan

    def _catch_up(self):
        """Off the memo: apply the marks of the steps followed on it."""
        for node, pending in zip(self.unmarked_nodes, self.unmarked):
            if node.summary is not None:
                self._mark_launch(node.summary, pending)
            else:
                pending[0](*pending[1])
        self.unmarked_nodes, self.unmarked = [], []

    def target(self, obj, args=None):
        """The Target of a Field, of an ndarray, or of an ndarray argument (an NdarrayArg
        and the launch's args)."""
        if isinstance(obj, Field):
            key = id(obj)
            found = self.targets.get(key)
            if found is None or found.data is not obj._data:
                found = self.targets[key] = field_target(obj)
            return found
        value = obj if args is None else args[obj.index]
        array = as_array(value)
        key = memory_key(array)
        found = self.targets.get(key)
        if found is None or found.data is not array:
            # a new view of the same memory (a tensor's, made at each launch): the marks stay
            fresh = self.targets[key] = plain_target(value, getattr(obj, 'name', 'ndarray'))
            if found is not None:
                fresh.marks, fresh.written, fresh.by_python = found.marks, found.written, found.by_python
                fresh.aliases = found.aliases
            else:
                self._find_aliases(key, fresh)
            found = fresh
        return found

    def _find_aliases(self, key, fresh):
        """Arrays the tape saw that share memory with a new one, under another memory key:
        `a` and `a[2:]`, a reshaped view. (Their elements do not match index for index.)"""
        for other_key, other in self.targets.items():
            if isinstance(other_key, tuple) and other_key != key and _overlap(other.data, fresh.data):
                fresh.aliases.append(other)
                other.aliases.append(fresh)

    def launch(self, summary, args, kernel_name, kernel_id):
        """Before a launch of the compiled kernel with id `kernel_id`: ([Save] of read elements
        it will modify; whether it modifies elements earlier launches read or modified).
        Raises when a gradient would be lost. `kernel_name` None: a no_grad kernel.
        Runs at every launch: the common case, a sequence seen before, is _step inlined."""
        try:
            node = self.cursor.next.get((kernel_id, args))
        except (AttributeError, TypeError):     # off the memo (no cursor), or args that do not hash
            node = None
        if node is not None:
            self.cursor, self.new_step = node, False
            self.unmarked_nodes.append(node)
            self.unmarked.append(args)
            return node.plan
        check = None if kernel_name is None else lambda: self._check_gradient_flow(summary, kernel_name, args)
        return self._step((kernel_id, _args_key(args)), self._mark_launch, summary, args, check=check, summary=summary)

    def _mark_launch(self, summary, args):
        saves, touched, writes = [], False, []
        for obj, kind, box, stmt in summary.accesses:
            if kind != READ:
                target = self.target(obj, args)
                if target.aliases:
                    _refuse_aliased_write(target, obj, stmt)
                index = box.index(args, target.shape)
                if target.marks[index].any():
                    saves.append(Save(obj, index, target.data))
                touched = touched or target.written[index].any()
                writes.append((target, index))
        for obj, kind, box, _ in summary.accesses:
            if kind == READ:
                target = self.target(obj, args)
                target.marks[box.index(args, target.shape)] = True
        for target, index in writes:
            target.written[index] = True
            target.by_python[index] = False
        return saves, touched or bool(saves)

    def replay(self, recording):
        """Before a replay of a captured function (checked once, launch by launch): the
        saves its writes need of what earlier launches read."""
        if recording.footprint is None:
            recording.footprint = _footprint(recording.calls, recording.launches.kernels)
        saves = self._step(('replay', id(recording)), self._mark_replay, recording.footprint)
        return [Save(self.target(obj, args), mask) for obj, args, mask in saves]

    def _mark_replay(self, footprint):
        saves = []
        for obj, args, kind, mask in footprint:
            target = self.target(obj, args)
            if kind != READ and (target.marks & mask).any():
                saves.append((obj, args, mask))
        for obj, args, kind, mask in footprint:
            target = self.target(obj, args)
            if kind == READ:
                target.marks |= mask
            else:
                target.written |= mask
                target.by_python &= ~mask
        return saves

    def caller_read(self, obj, mask):
        """Elements a caller loaded as inputs before the launches (engine/runtime/interop.py):
        read, as by a launch, so that a later write from Python over them is a constant that
        ends their gradient rather than a new input."""
        target = self.target(obj)

        def mark():
            target.marks |= mask
        self._step(('caller', id(target.data), hash(mask.tobytes())), mark)

    def python_write(self, obj, index):
        """Before a write from Python to `obj[index]`: (its Target, whether earlier launches
        read those elements, whether they read or modified them). Elements only written
        from Python before are not touched: a second write sets the input again."""
        target = self.target(obj)

        def mark():
            read = bool(target.marks[index].any())
            touched = read or bool((target.written[index] & ~target.by_python[index]).any())
            target.written[index] = True
            target.by_python[index] = True
            return read, touched
        key = ('python', id(target.data), repr(index))     # (slices are not hashable)
        return (target,) + tuple(self._step(key, mark))

    def _check_gradient_flow(self, summary, kernel_name, args):
        """A float field or ndarray without a gradient written from values with one, and
        read by a later kernel into results with one, cuts the gradient: an error (the
        gradient would be silently zero)."""
        flowing, sources, plain_writes = summary.gradient_flow()
        if self.cut:
            for obj in flowing:
                cut = self.cut.get(_identity(obj, args))
                if cut is not None:
                    writer, names = cut
                    raise AutodiffRuleError(
                        f'the gradient would be lost: kernel {writer} writes {target_name(obj)} from '
                        f'{names}, which have gradients, and kernel {kernel_name} reads it here into '
                        f'results with gradients, but {obj.name} has no gradient. Declare it with '
                        f'needs_grad=True (or place {obj.name}.grad); if it is meant as a constant, '
                        f'compute it before the tape or in a ti.ad.no_grad kernel', summary.reads[obj].loc)
        for obj in plain_writes:
            self.cut[_identity(obj, args)] = (kernel_name, sources)


def _overlap(a, b):
    if not np.may_share_memory(a, b):
        return False
    try:
        return np.shares_memory(a, b, max_work=100_000)
    except np.exceptions.TooHardError:
        return True


def _refuse_aliased_write(target, obj, stmt):
    """A write through one view over memory an earlier launch read through another: the
    tape saves per array and cannot match elements across views, so it refuses."""
    for other in target.aliases:
        if other.marks.any():
            raise AutodiffRuleError(
                f'the gradient would be wrong: {target_name(obj)} is written here, and shares memory with '
                f'another array (a view of the same memory with another offset, shape or strides: '
                f'`a` and `a[2:]`) that an earlier launch on this tape read. The tape saves what a write '
                f'overwrites array by array and cannot match elements across views. Pass the same '
                f'array to both kernels (the whole array, and index it in the kernel), or pass a copy',
                stmt.loc)


def _args_key(args):
    """A launch's arguments as a key of the memo: themselves when they hash; an array by
    its memory (abi.memory_key: an id could be a freed array's, taken again by a new one)."""
    if not any(isinstance(a, _ARRAYS) for a in args):
        try:
            hash(args)
            return args
        except TypeError:
            pass
    return tuple(_arg_key(a) for a in args)


_ARRAYS = (np.ndarray, Ndarray, ExternalArray)


def _arg_key(value):
    if isinstance(value, _ARRAYS):
        return ('array',) + memory_key(as_array(value))
    try:
        hash(value)
        return value
    except TypeError:
        return ('id', id(value))


def _identity(obj, args):
    """A field, or the memory of an ndarray argument (abi.memory_key)."""
    return id(obj) if isinstance(obj, Field) else memory_key(as_array(args[obj.index]))


def _footprint(calls, compiled):
    """[(field or NdarrayArg, args, READ or a write, mask)]: the union of the elements the
    launches read and modify, per field or ndarray."""
    masks = {}
    for (_, args), kernel in zip(calls, compiled):
        for obj, kind, box, _ in kernel.access_summary().accesses:
            if isinstance(obj, Field):
                data, shape = obj._data, obj.shape
            else:
                data = as_array(args[obj.index])
                shape = data.shape[:obj.ndim]
            key = (id(obj) if isinstance(obj, Field) else memory_key(data), kind == READ)
            if key not in masks:
                masks[key] = (obj, args, READ if kind == READ else STORE, np.zeros(shape, dtype=bool))
            masks[key][3][box.index(args, shape)] = True
    return list(masks.values())


def needs_saves(calls, compiled):
    """Whether launches, run in order on a fresh tape, overwrite what an earlier one read."""
    checker = TapeChecker()
    return any(checker.launch(kernel.access_summary(), args, None, id(kernel))[0]
               for (_, args), kernel in zip(calls, compiled))
