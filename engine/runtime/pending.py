"""The state a pending backward pass needs, kept safe from later writes.

A wrapped function (engine/runtime/interop.py) runs its kernels on a tape in its forward
call; another framework (PyTorch, JAX) asks for the backward pass later, after other calls
may have overwritten the same fields: the same simulator called twice in one graph, two
layers sharing a field. Fields are the tape's checkpoints, so such a backward pass would
read the later call's values and return a wrong gradient.

`Watch` (ctx.watch, set while a call records or a call is pending) sees every kernel
launch, replay of a captured function and write from Python before it happens:
- the recording call adds the elements the launch reads and writes to its `Footprint`;
- a pending call whose footprint the write overlaps copies those elements first (copy on
  write: no memory is spent unless two calls really share elements), and puts them back
  for its backward pass (`Call.own_state`);
- a recording call that reads elements a pending call wrote, without having written them
  itself (from an input), depends on that call through a field, where no gradient can
  follow: an error, rather than a silently missing gradient.

Elements are named per axis by an index or None (the whole axis), as the data access
rules name them (engine/autodiff/rules.py, Box); the elements a launch touches are found
from its kernel's access summary and its arguments.
"""
import weakref

import numpy as np

from ..core.context import ctx
from ..core.errors import AutodiffError
from ..autodiff.rules import READ, STORE
from ..language.abi import as_array
from ..language.fields import Field


class Target:
    """A field, or an ndarray's array: its values, its gradient's and the gradient's
    tangent's (forward over reverse), or None, and its name."""
    __slots__ = ('data', 'grad', 'grad_dual', 'name', 'ndim')

    def __init__(self, data, grad, grad_dual, name, ndim):
        self.data, self.grad, self.grad_dual, self.name, self.ndim = data, grad, grad_dual, name, ndim


def field_target(field):
    grad = field.grad if field.grad is not None and field.grad.placed else None
    dual = grad.dual if grad is not None and grad.dual is not None and grad.dual.placed else None
    return Target(field._data, None if grad is None else grad._data, None if dual is None else dual._data,
                  f'field {field.name}', len(field.shape))


def array_target(value, ndim):
    """An ndarray argument or object: a ti.ndarray, a numpy array, a tensor's view."""
    grad = getattr(value, 'grad', None)
    dual = getattr(grad, 'dual', None)
    return Target(as_array(value), None if grad is None else as_array(grad),
                  None if dual is None else as_array(dual), getattr(value, 'name', 'ndarray'), ndim)


def element_key(index):
    """A numpy index of a Box (ints and slices) as a hashable key; None when it is empty."""
    key = []
    for i in index:
        if isinstance(i, slice):
            if i != slice(None):
                return None         # a point out of range: no element
            key.append(None)
        else:
            key.append(int(i))
    return tuple(key)


def key_index(key):
    return tuple(slice(None) if i is None else i for i in key)


def key_text(key):
    return ', '.join(':' if i is None else str(i) for i in key)


def overlaps(a, b):
    return all(x is None or y is None or x == y for x, y in zip(a, b))


class Regions:
    """Keys of one target, found by their first index (None: the whole first axis)."""

    def __init__(self):
        self.by_first = {}

    def add(self, key):
        self.by_first.setdefault(key[0] if key else None, set()).add(key)

    def keys(self):
        return [k for keys in self.by_first.values() for k in keys]

    def overlapping(self, key):
        if not key or key[0] is None:
            candidates = self.keys()
        else:
            candidates = list(self.by_first.get(key[0], ())) + list(self.by_first.get(None, ()))
        return [k for k in candidates if overlaps(k, key)]


class Footprint:
    """The elements a call's launches read and wrote, per target."""

    def __init__(self):
        self.targets = {}       # id(data) -> [Target, read Regions, written Regions]

    def entry(self, target):
        found = self.targets.get(id(target.data))
        if found is None:
            found = self.targets[id(target.data)] = [target, Regions(), Regions()]
        return found

    def add(self, target, key, written):
        self.entry(target)[2 if written else 1].add(key)

    def wrote(self, target, key):
        found = self.targets.get(id(target.data))
        return bool(found and found[2].overlapping(key))


def read_only(footprint):
    """[(Target, key)] of the elements a call read and never wrote: the state, besides its
    inputs, that a run again from the inputs depends on."""
    out = []
    for target, reads, writes in footprint.targets.values():
        out += [(target, key) for key in reads.keys() if not writes.overlapping(key)]
    return sorted(out, key=lambda pair: (pair[0].name, repr(pair[1])))


def launch_accesses(compiled, args):
    """[(Target, key, kind)] of the elements one launch reads (READ), stores (STORE) or
    accumulates into (ADD: reads and writes)."""
    out = []
    for obj, kind, box, _ in compiled.access_summary().accesses:
        if isinstance(obj, Field):
            target = field_target(obj)
        else:
            target = array_target(args[obj.index], obj.ndim)
        key = element_key(box.index(args, target.data.shape[:target.ndim]))
        if key is not None:
            out.append((target, key, kind))
    return out


def replay_accesses(recording):
    """The accesses of every launch of a captured function (found once per recording)."""
    found = getattr(recording, 'interop_accesses', None)
    if found is None:
        found = {}
        for (_, args), compiled in zip(recording.calls, recording.launches.kernels):
            for target, key, kind in launch_accesses(compiled, args):
                found[(id(target.data), key, kind)] = (target, key, kind)
        found = recording.interop_accesses = list(found.values())
    return found


class Watch:
    """ctx.watch: the call recording now (or None), and the elements of the calls whose
    backward is pending, found by target and first index (a write or read looks at the
    few calls that touched its row, not at every pending call)."""

    def __init__(self):
        self.recording = None
        self.calls = {}         # id(call) -> weak reference to it
        self.buckets = {}       # id(call) -> the index's buckets holding its keys
        self.index = {}         # (id(data), written) -> {first index or None: {id(call): [key]}}

    def add_pending(self, call):
        cid = id(call)
        self.calls[cid] = weakref.ref(call, lambda _, cid=cid: self.forget(cid))
        buckets = self.buckets[cid] = []
        for target, reads, writes in call.footprint.targets.values():
            for keys, written in ((reads.keys(), False), (writes.keys(), True)):
                by_first = self.index.setdefault((id(target.data), written), {})
                for key in keys:
                    bucket = by_first.setdefault(key[0] if key else None, {})
                    if cid not in bucket:
                        bucket[cid] = []
                        buckets.append(bucket)
                    bucket[cid].append(key)

    def forget(self, cid):
        """A call consumed or collected: its elements need no keeping any more (and its id
        may name another call later: none of its entries stays)."""
        self.calls.pop(cid, None)
        for bucket in self.buckets.pop(cid, ()):
            bucket.pop(cid, None)
        if not self.calls and self.recording is None and ctx.watch is self:
            ctx.watch = None        # nothing to watch for: launches go unobserved again

    def _touching(self, target, key, written):
        """(call, its key) of the pending calls' elements that overlap key of target, among
        those they wrote (written=True) or read."""
        by_first = self.index.get((id(target.data), written))
        if not by_first:
            return
        firsts = list(by_first) if not key or key[0] is None else (key[0], None)
        for first in firsts:
            for cid, keys in list(by_first.get(first, {}).items()):
                call = self.calls[cid]() if cid in self.calls else None
                if call is not None:
                    for mine in keys:
                        if overlaps(mine, key):
                            yield call, mine

    def before_launch(self, compiled, args):
        self._accesses(launch_accesses(compiled, args), getattr(compiled.kernel, 'name', 'kernel'))

    def before_replay(self, recording):
        self._accesses(replay_accesses(recording), recording.name)

    def before_python_write(self, owner, index):
        """A write from Python to owner[index] (a field or ndarray; index as numpy's)."""
        target = field_target(owner) if isinstance(owner, Field) else array_target(owner, len(owner.shape))
        key = python_key(index, target.data.shape[:target.ndim])
        self._accesses([(target, key, STORE)], 'a write from Python')

    def _accesses(self, accesses, what):
        recording = self.recording
        for target, key, kind in accesses:
            written = kind != READ
            if self.calls:
                for call, mine in self._touching(target, key, True):
                    if kind != STORE and recording is not None:     # its value is used: a read or an add
                        _check_dependency(call, recording, target, key, what)
                    if written:
                        call.keep(target, mine)
                if written:
                    for call, mine in self._touching(target, key, False):
                        call.keep(target, mine)
            if recording is not None:
                recording.footprint.add(target, key, written)
        if recording is None and not self.calls:
            ctx.watch = None


def _check_dependency(call, recording, target, key, what):
    """A read of elements a pending call wrote, by a call that has not written them."""
    if not recording.footprint.wrote(target, key):
        raise AutodiffError(
            f'{recording.name}: {what} uses {target.name}[{key_text(key)}] which an earlier, '
            f'pending call of {call.name} wrote, and this call has not written it from one of its '
            f'inputs: the gradient would not flow back through a field. Return it from '
            f'{call.name} as an output and pass it to {recording.name} as an input')


def python_key(index, shape):
    """The key of a Python-scope write's index: ints (negative ones counted from the end)
    name one position of an axis; anything else (a slice, Ellipsis, an array) all of it."""
    index = index if isinstance(index, tuple) else (index,)
    if any(i is Ellipsis or i is None for i in index):
        return (None,) * len(shape)
    key = [int(i) % n if isinstance(i, (int, np.integer)) else None for i, n in zip(index, shape)]
    return tuple(key + [None] * (len(shape) - len(key)))


def watch():
    """The Watch in effect, installed if there was none."""
    if ctx.watch is None:
        ctx.watch = Watch()
    return ctx.watch
