"""Which field and ndarray indices are provably in range, so that their bounds checks can
be left out (codegen checks every other index, by default).

An integer value's interval comes from the IR alone: constants; the index of a loop whose
bounds have intervals (a loop over a field's shape, `range(c)`, `ti.ndrange`); and +, -, *,
// and % by a positive constant, `ti.min`/`ti.max` clamps, selects and non-negative bit
masks of those. Any other value (a local, a field's value, an argument) may be anything its
type holds. Arithmetic whose exact result could leave the type's range may have wrapped,
so its result may be anything too. An ndarray's extent is known only at run time: there an
index is proven only when it is the index of a loop whose end is that very extent
(`for i in range(a.shape[0])`).
"""
from .fields import Field
from .ir import walk


def type_range(dtype):
    if dtype.signed:
        return -2 ** (dtype.bits - 1), 2 ** (dtype.bits - 1) - 1
    return 0, 2 ** dtype.bits - 1


class IndexRanges:
    def __init__(self, body):
        self.loop_of = {s.attrs['index']: s for s in walk(body) if s.op == 'for'}
        self.memo = {}

    def in_range(self, index, target, axis):
        """True when `index` (an IR value) lies in [0, extent) along `axis` of `target`."""
        if isinstance(target, Field):
            low, high = self.interval(index)
            return low >= 0 and high < target.shape[axis]
        loop = self.loop_of.get(index)
        if loop is None or self.interval(loop.args[0])[0] < 0:
            return False
        end = loop.args[1]
        return end.op == 'ndarray_shape' and end.attrs['target'] is target and end.attrs['axis'] == axis

    def interval(self, value):
        """(lowest, highest) value the native code can hold, inclusive."""
        if value not in self.memo:
            whole = type_range(value.dtype)
            self.memo[value] = whole             # a cycle (none expected) proves nothing
            low, high = self._interval(value, whole)
            self.memo[value] = (low, high) if whole[0] <= low <= high <= whole[1] else whole
        return self.memo[value]

    def _interval(self, s, whole):
        op = s.op
        if op == 'const':
            return int(s.attrs['value']), int(s.attrs['value'])
        if op == 'loop_index':
            loop = self.loop_of.get(s)
            if loop is None:
                return whole
            return self.interval(loop.args[0])[0], self.interval(loop.args[1])[1] - 1
        if op == 'cast' and s.args[0].dtype.is_int:
            return self.interval(s.args[0])
        rule = _RULES.get(op)
        if rule is None or any(not a.dtype.is_int for a in s.args if op != 'select' or a is not s.args[0]):
            return whole
        return rule(s, [self.interval(a) for a in s.args])


def _product(a, b):
    corners = [x * y for x in a for y in b]
    return min(corners), max(corners)


def _divisor(s):
    d = s.args[1]
    return int(d.attrs['value']) if d.op == 'const' and int(d.attrs['value']) > 0 else None


def _floordiv(s, args):
    c = _divisor(s)
    if c is None:
        return type_range(s.dtype)
    return args[0][0] // c, args[0][1] // c


def _mod(s, args):
    c = _divisor(s)
    if c is None:
        return type_range(s.dtype)
    low, high = args[0]
    return (low, high) if 0 <= low and high < c else (0, c - 1)   # Python's modulo (ops._lower_mod)


def _bit_and(s, args):
    masks = [high for low, high in args if low == high and low >= 0]
    return (0, min(masks)) if masks else type_range(s.dtype)


_RULES = {
    'add': lambda s, a: (a[0][0] + a[1][0], a[0][1] + a[1][1]),
    'sub': lambda s, a: (a[0][0] - a[1][1], a[0][1] - a[1][0]),
    'neg': lambda s, a: (-a[0][1], -a[0][0]),
    'mul': lambda s, a: _product(a[0], a[1]),
    'min': lambda s, a: (min(a[0][0], a[1][0]), min(a[0][1], a[1][1])),
    'max': lambda s, a: (max(a[0][0], a[1][0]), max(a[0][1], a[1][1])),
    'select': lambda s, a: (min(a[1][0], a[2][0]), max(a[1][1], a[2][1])),
    'floordiv': _floordiv,
    'mod': _mod,
    'bit_and': _bit_and,
}


def target_ndim(target):
    return len(target.shape) if isinstance(target, Field) else target.ndim


def unproven_axes(ranges, stmt):
    """The axes of a field access whose index `ranges` cannot prove in range."""
    target = stmt.attrs['target']
    return [axis for axis in range(target_ndim(target)) if not ranges.in_range(stmt.args[axis], target, axis)]


def checks_indices(body):
    """Whether a build with bounds checks checks any index of `body` (its launches must
    then look for the error it may record)."""
    ranges = IndexRanges(body)
    return any(s.op == 'check_component' or
               (s.op in ('global_load', 'global_store', 'atomic') and unproven_axes(ranges, s)) for s in walk(body))
