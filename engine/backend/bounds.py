"""Which field and ndarray indices are provably in range, so that their bounds checks can
be left out (codegen checks every other index, by default).

An integer value's interval comes from the IR alone: constants; the index of a loop whose
bounds have intervals (a loop over a field's shape, `range(c)`, `ti.ndrange`); +, -, *,
// and % by a positive constant, `ti.min`/`ti.max` clamps and non-negative bit masks of
those; a local's value, one of the values stored into it (a local that feeds its own
stores, `k += 1` in a loop, may be anything); a select's arms, each where its condition
does (not) hold (`ti.select(k == n - 1, 0, k + 1)` stays below n). Any other value (a
field's value, an argument) may be anything its type holds. Arithmetic whose exact result
could leave the type's range may have wrapped, so its result may be anything too. An ndarray's extent is known only at run time: there an
index is proven only when it is the index of a loop whose end is that very extent
(`for i in range(a.shape[0])`).
"""
from ..language.fields import Field
from ..core import passes
from ..ir.nodes import walk


def type_range(dtype):
    if dtype.signed:
        return -2 ** (dtype.bits - 1), 2 ** (dtype.bits - 1) - 1
    return 0, 2 ** dtype.bits - 1


class IndexRanges:
    def __init__(self, body):
        self.loop_of = {s.attrs['index']: s for s in walk(body) if s.op == 'for'}
        # a local's value is one of the values stored into it (a kernel reads a name only after
        # binding it); locals changed by atomics are not followed
        self.stores = {}
        for s in walk(body):
            if s.op in ('local_store', 'local_atomic'):
                self.stores.setdefault(s.args[0], []).append(s)
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
            self.memo[value] = whole             # a cycle (a local feeding its own stores) proves nothing
            low, high = self._interval(value, whole)
            self.memo[value] = (low, high) if whole[0] <= low <= high <= whole[1] else whole
        return self.memo[value]

    def _interval(self, s, whole, assumed=None):
        """`assumed`: {local cell or value: interval} known to hold where `s` is used (the arm
        of a select whose condition bounds them)."""
        op = s.op
        if assumed is not None:
            key = s.args[0] if op == 'local_load' else s
            if key in assumed:
                return assumed[key]
        if op == 'local_load':
            stores = self.stores.get(s.args[0], ())
            if not stores or any(st.op != 'local_store' for st in stores):
                return whole
            bounds = [self.interval(st.args[1]) for st in stores]
            return min(b[0] for b in bounds), max(b[1] for b in bounds)
        if op == 'select' and s.dtype.is_int:
            return self._select(s, assumed)
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
        if rule is None or any(not a.dtype.is_int for a in s.args):
            return whole
        return rule(s, [self.under(a, assumed) for a in s.args])

    def under(self, value, assumed):
        """The interval of `value` where `assumed` holds."""
        if not assumed:
            return self.interval(value)
        whole = type_range(value.dtype)
        low, high = self._interval(value, whole, assumed)
        return (low, high) if whole[0] <= low <= high <= whole[1] else whole

    def _select(self, s, assumed):
        """select(a < c, x, y) and the like: each arm is bounded where the condition (does
        not) hold: `select(i == n - 1, 0, i + 1)` stays below n when i does."""
        cond, then, other = s.args
        taken, untaken = dict(assumed or {}), dict(assumed or {})
        narrowed = self.condition(cond, assumed)
        if narrowed is not None:
            key, when_true, when_false = narrowed
            taken[key], untaken[key] = when_true, when_false
        a, b = self.under(then, taken), self.under(other, untaken)
        return min(a[0], b[0]), max(a[1], b[1])

    def condition(self, cond, assumed):
        """(subject, its interval if cond holds, if not) for `subject OP constant`, or None."""
        if cond.op == 'ne' and cond.args[1].op == 'const' and int(cond.args[1].attrs['value']) == 0 \
                and cond.args[0].op in _NARROW:
            cond = cond.args[0]                        # truth(a < c)
        if cond.op not in _NARROW:
            return None
        a, b = cond.args
        op = cond.op
        if a.op == 'const' and b.op != 'const':
            a, b, op = b, a, _FLIPPED[op]
        if b.op != 'const' or not a.dtype.is_int:
            return None
        c = int(b.attrs['value'])
        low, high = self.under(a, assumed)
        true, false = _NARROW[op](low, high, c)
        key = a.args[0] if a.op == 'local_load' else a
        return key, true, false


def _narrow_eq(low, high, c):
    false = (low + 1, high) if c == low else (low, high - 1) if c == high else (low, high)
    return (c, c), false


_NARROW = {     # interval (low, high) of a when `a OP c` holds, and when it does not
    'eq': _narrow_eq,
    'ne': lambda lo, hi, c: tuple(reversed(_narrow_eq(lo, hi, c))),
    'lt': lambda lo, hi, c: ((lo, min(hi, c - 1)), (max(lo, c), hi)),
    'le': lambda lo, hi, c: ((lo, min(hi, c)), (max(lo, c + 1), hi)),
    'gt': lambda lo, hi, c: ((max(lo, c + 1), hi), (lo, min(hi, c))),
    'ge': lambda lo, hi, c: ((max(lo, c), hi), (lo, min(hi, c - 1))),
}
_FLIPPED = {'eq': 'eq', 'ne': 'ne', 'lt': 'gt', 'le': 'ge', 'gt': 'lt', 'ge': 'le'}


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
    'floordiv': _floordiv,
    'mod': _mod,
    'bit_and': _bit_and,
}


def target_ndim(target):
    return len(target.shape) if isinstance(target, Field) else target.ndim


def unproven_axes(ranges, stmt):
    """The axes of a field access whose index `ranges` cannot prove in range."""
    target = stmt.attrs['target']
    if not passes.enabled('bounds_elision'):
        return list(range(target_ndim(target)))
    return [axis for axis in range(target_ndim(target)) if not ranges.in_range(stmt.args[axis], target, axis)]


def checks_indices(body):
    """Whether a build with bounds checks checks any index of `body` (its launches must
    then look for the error it may record)."""
    ranges = IndexRanges(body)
    return any(s.op == 'check_component' or
               (s.op in ('global_load', 'global_store', 'atomic') and unproven_axes(ranges, s)) for s in walk(body))


_ACCESSES = ('global_load', 'global_store', 'atomic')
_JUMPS = ('break', 'continue', 'return')


def grouped_checks(body, ranges):
    """One check for accesses that index one target at the same unknown value plus
    different constants, one after another in a block (an MPM stencil: `grid[base + o]`
    for nine offsets o): the first checks that the whole run of offsets is in range.

    Returns ({(access, axis): (low, high, at_low, at_high)}: the first of each group checks
    its index plus low .. plus high, and names the line of the member at_low or at_high that
    is out of range; {(access, axis)}: the later ones, already checked). A group ends
    where the block may stop early (a break, continue or return, also inside a branch or
    loop) or the local holding the base is stored again, so every later member would
    have run after the check."""
    leaders, covered = {}, set()
    for block in _blocks(body):
        _group_block(block, ranges, leaders, covered)
    return leaders, covered


def _blocks(block):
    yield block
    for s in block.stmts:
        for key in ('body', 'then', 'else'):
            inner = s.attrs.get(key)
            if inner is not None and hasattr(inner, 'stmts'):
                yield from _blocks(inner)


def _group_block(block, ranges, leaders, covered):
    groups = {}      # (target, axis, base) -> [leader, its constant, lowest, highest, at lowest, at highest]

    def forget_cells(cells):
        for key in [k for k in groups if k[2] in cells]:
            del groups[key]

    for s in block.stmts:
        if s.op in _JUMPS:
            groups.clear()
            continue
        if s.op in ('if', 'for', 'while'):
            inner = [t for t in walk_children(s)]
            if any(t.op in _JUMPS for t in inner):
                groups.clear()
            forget_cells({t.args[0] for t in inner if t.op in ('local_store', 'local_atomic')})
            continue
        if s.op in ('local_store', 'local_atomic'):
            forget_cells({s.args[0]})
            continue
        if s.op not in _ACCESSES:
            continue
        for axis in unproven_axes(ranges, s):
            base, c = _base_and_constant(s.args[axis])
            key = (s.attrs['target'], axis, base.args[0] if base.op == 'local_load' else base)
            if key in groups:
                group = groups[key]
                if c < group[2]:
                    group[2], group[4] = c, s
                if c > group[3]:
                    group[3], group[5] = c, s
                covered.add((s, axis))
                leaders[(group[0], axis)] = (group[2] - group[1], group[3] - group[1], group[4], group[5])
            else:
                groups[key] = [s, c, c, c, s, s]


def walk_children(s):
    for key in ('body', 'then', 'else'):
        inner = s.attrs.get(key)
        if inner is not None and hasattr(inner, 'stmts'):
            yield from walk(inner)


def _base_and_constant(index):
    """(base, c) with index = base + c for a constant c (c = 0 when there is none)."""
    if index.op in ('add', 'sub') and index.args[1].op == 'const':
        c = int(index.args[1].attrs['value'])
        return index.args[0], c if index.op == 'add' else -c
    if index.op == 'add' and index.args[0].op == 'const':
        return index.args[1], int(index.args[0].attrs['value'])
    return index, 0
