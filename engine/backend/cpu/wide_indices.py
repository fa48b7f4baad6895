"""Index expressions of a parallel loop's index, also computed in 64 bits.

The task's loop counter is an i64; a kernel's indices are i32 (`i = idx // n`,
`j = idx % n` for a struct-for over a 2D field). Computed in 32 bits from the truncated
counter, they hide from LLVM's scalar evolution that `(i * n + j)` is the counter itself,
so a loop over a field's elements looks like a gather and a scatter and is not vectorized.
Where bounds.IndexRanges proves an expression non-negative and unwrapped, its 64-bit
value equals the sign-extended 32-bit one: addresses use it (as_i64), and LLVM sees
`(idx /u n) * n + idx %u n` as `idx`.
"""
from llvmlite import ir as llir

from ..bounds import type_range

I64 = llir.IntType(64)

# the integer ops computed in 64 bits too, as LLVM instructions on non-negative values
WIDE_OPS = {'floordiv': 'udiv', 'mod': 'urem', 'add': 'add', 'sub': 'sub', 'mul': 'mul'}


class WideIndexEmitter:
    """Mixed into codegen.FunctionEmitter: `self.wide` maps IR values to their i64 form."""

    def widen(self, stmt, narrow):
        """Also compute `stmt` in 64 bits where its operands have 64-bit forms (or are
        non-negative constants) and its interval proves it non-negative and unwrapped.
        Returns its 32-bit value: for // and %, the truncated unsigned result, which LLVM
        computes without the sign corrections of floor division (`narrow` is then dead)."""
        ranges, wide = self.km.ranges, []
        for a in stmt.args:
            if a in self.wide:
                wide.append(self.wide[a])
            elif a.op == 'const' and isinstance(a.attrs['value'], int) and a.attrs['value'] >= 0:
                wide.append(I64(a.attrs['value']))
            else:
                return narrow
        low, high = ranges.interval(stmt)
        if low < 0 or (low, high) == type_range(stmt.dtype) or stmt.dtype.bits > 32:
            return narrow
        if stmt.op in ('floordiv', 'mod') and (stmt.args[1].op != 'const' or stmt.args[1].attrs['value'] <= 0):
            return narrow
        self.wide[stmt] = getattr(self.b, WIDE_OPS[stmt.op])(*wide)
        if stmt.op in ('floordiv', 'mod') and narrow.type != I64:
            return self.b.trunc(self.wide[stmt], narrow.type)
        return narrow

    def as_i64(self, value):
        """An integer index widened to 64 bits by its own signedness."""
        v = self.wide[value] if value in self.wide else self.values[value]
        if v.type == I64:
            return v
        return self.b.sext(v, I64) if value.dtype.signed else self.b.zext(v, I64)
