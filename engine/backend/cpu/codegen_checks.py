"""What lowered kernels check and report at run time (engine/backend/cpu/codegen.py's emitter builds
on it): the exact rule check's shadow words (engine/autodiff/rules.py), errors recorded in the
runtime words (indices out of range, debug mode's NaN/Inf and division checks, failed
asserts), run-time prints, and the random-number streams (splitmix64).
"""
from llvmlite import ir as llir

from ..llvm_ops import llvm_type

from ...core import program as rt
from ...autodiff import rules
from ...language.fields import Field
from ...ir.nodes import walk

I8P = llir.IntType(8).as_pointer()
I64 = llir.IntType(64)
I32 = llir.IntType(32)
I1 = llir.IntType(1)


def gradient_term_checks(body, unchecked):
    """Debug mode's NaN/Inf check of gradient and tangent terms, moved to where they land.

    A term (ops.chain's `nan_guard` select) may be infinite and still give a finite
    gradient: the adjoint of sqrt(max(x, 0)) at x = -1 is inf at the max, which passes 0
    of it to x (ops.chain's one_operand rule); the normal build gives 0. So the values
    computed from a term (through locals and loops too) are not checked where they are
    made: the guard, and a select passing one on, are exempt, and a store, atomic or return
    of one is checked instead (the gradient written must be finite). Returns (the exempt
    selects, the writes to check)."""
    stmts = list(walk(body))
    derived = {s for s in stmts if s.attrs.get('nan_guard')}
    if not derived:
        return frozenset(), frozenset()
    changed = True
    while changed:
        changed = False
        for s in stmts:
            if s.op in ('local_store', 'local_atomic') and s.args[1] in derived and s.args[0] not in derived:
                derived.add(s.args[0])          # the local holds a term: its loads carry it
                changed = True
            if s not in derived and s.dtype is not None and s.dtype.is_float and s.op != 'alloca' \
                    and any(a in derived for a in s.args):
                derived.add(s)
                changed = True
    exempt = frozenset(s for s in derived if s.op == 'select' and (
        s.attrs.get('nan_guard') or any(a in unchecked for a in s.args)))
    writes = frozenset(s for s in stmts if s.op in ('global_store', 'atomic', 'return') and any(
        a in derived and a.dtype.is_float for a in (s.args if s.op == 'return' else s.args[-1:])))
    return exempt, writes


class ChecksEmitter:
    """Mixed into FunctionEmitter: `self.b` is its IR builder, `self.km` its KernelModule."""

    # --- the exact rule check: two shadow words per element (engine/autodiff/rules.py) -----------
    def shadow_pointers(self, target):
        """(last read: line + 1, i32; last write: loop << 32 | iteration << 1 | is store, i64)
        arrays of a checked target, from the table the launch puts in the runtime."""
        if target not in self.shadows:
            eb, slot = self.entry_builder, self.km.shadow[target]
            words = eb.bitcast(self.rt, I64.as_pointer())
            table = eb.inttoptr(eb.load(eb.gep(words, [I64(rt.RT_SHADOW)])), I64.as_pointer())
            reads = eb.inttoptr(eb.load(eb.gep(table, [I64(2 * slot)])), I32.as_pointer())
            writes = eb.inttoptr(eb.load(eb.gep(table, [I64(2 * slot + 1)])), I64.as_pointer())
            self.shadows[target] = (reads, writes)
        return self.shadows[target]

    def shadow_access(self, stmt, offset):
        """Reports the first access that breaks a rule inside this launch: a modification of
        an element read before (rule 1; rule 2 if it was written before that read), or, in a
        parallel loop, an element touched by two iterations where one of them writes."""
        b, target = self.b, stmt.attrs['target']
        reads, writes = self.shadow_pointers(target)
        read_ptr, write_ptr = b.gep(reads, [offset]), b.gep(writes, [offset])
        loc = self.km.location_id(stmt.loc)
        phase = I64(self.phase)
        iteration = I64(0) if self.iteration is None else \
            b.add(b.sext(self.values[self.iteration], I64), I64(1))
        last_write = b.load(write_ptr)
        same_loop = b.and_(I1(self.phase != 0), b.icmp_unsigned('==', b.lshr(last_write, I64(32)), phase))
        writer = b.and_(b.lshr(last_write, I64(1)), I64(0x7FFFFFFF))
        other_iteration = b.and_(same_loop, b.icmp_unsigned('!=', writer, iteration))
        if stmt.op == 'global_load':
            self.report(stmt, other_iteration, rt.ERROR_RACE, target, (I64(-1), offset, I64(0)))
            b.store(I32(loc + 1), read_ptr)
            return
        is_store = rules.access_kind(stmt) == rules.STORE
        last_read = b.sext(b.load(read_ptr), I64)
        rule = b.select(b.icmp_unsigned('!=', last_write, I64(0)), I64(rt.ERROR_RULE2), I64(rt.ERROR_RULE1))
        kind = 1 if is_store else 2
        self.report(stmt, b.icmp_unsigned('!=', last_read, I64(0)), rule, target,
                    (b.sub(last_read, I64(1)), offset, I64(kind)))
        stored_before = b.icmp_unsigned('!=', b.and_(last_write, I64(1)), I64(0))
        race = b.and_(other_iteration, b.or_(I1(is_store), stored_before))
        self.report(stmt, race, rt.ERROR_RACE, target, (I64(-1), offset, I64(kind)))
        sticky = b.and_(b.and_(same_loop, b.not_(other_iteration)), stored_before)
        flag = b.zext(b.or_(I1(is_store), sticky), I64)
        stamp = b.or_(b.or_(b.shl(phase, I64(32)), b.shl(iteration, I64(1))), flag)
        b.store(stamp, write_ptr)

    def report(self, stmt, bad, code, target=None, words=()):
        """If `bad`: record error `code` (`record`) and go on."""
        with self.b.if_then(bad, likely=False):
            self.record(stmt, code, target, words)

    def record(self, stmt, code, target=None, words=(), ident=None, line=None):
        """Record error `code` at stmt's source line (or `line`, an index of the kernel's
        table of lines computed at run time), the field or ndarray it names (`target`; or
        another `ident`) and up to 8 more words (the first error wins)."""
        b = self.b
        flag = self.rt_word(rt.RT_ERROR_FLAG)
        code = code if isinstance(code, llir.Value) else I64(code)
        first = b.extract_value(b.cmpxchg(flag, I64(0), code, 'monotonic', 'monotonic'), 1)
        with b.if_then(first):
            b.store(line if line is not None else I64(self.km.location_id(stmt.loc)), self.rt_word(rt.RT_ERROR_LOC))
            if ident is None:
                ident = -1 if target is None else target.id if isinstance(target, Field) else -1 - target.index
            b.store(I64(ident), self.rt_word(rt.RT_ERROR_FIELD))
            for k, word in enumerate(words[:rt.RT_ERROR_WORDS]):
                b.store(word, self.rt_word(rt.RT_ERROR_INDEX + k))

    def debug_check_op(self, stmt, args, result):
        """Debug mode: NaN/Inf made from finite operands; integer division by zero; an integer
        raised to a negative integer power."""
        b = self.b
        if stmt.op in ('floordiv', 'mod') and not stmt.dtype.is_float:
            divisor = args[1]
            self.report(stmt, b.icmp_signed('==', divisor, llir.Constant(divisor.type, 0)), rt.ERROR_ZERO_DIVISION)
        if stmt.op == 'pow' and not stmt.dtype.is_float and stmt.dtype.signed:
            exponent = args[1]
            self.report(stmt, b.icmp_signed('<', exponent, llir.Constant(exponent.type, 0)), rt.ERROR_NEGATIVE_POWER)

        def finite(v):      # v - v is 0 for finite v, NaN for NaN and +-Inf
            d = b.fsub(v, v)
            return b.fcmp_ordered('==', d, d)
        if stmt in self.km.unchecked or stmt.dtype is None or not stmt.dtype.is_float:
            return          # integers are never NaN or infinite
        if stmt in self.gradient_checks()[0]:
            if stmt.attrs.get('nan_guard'):     # a non-finite term: its line, to name if it is written
                with b.if_then(b.not_(finite(result)), likely=False):
                    b.store(I64(self.km.location_id(stmt.loc)), self.term_line())
            return          # a gradient term: checked where it is written (gradient_term_checks)
        if stmt.attrs.get('nan_guard') or (stmt.op == 'select' and any(a in self.km.unchecked for a in stmt.args)):
            # a gradient term (ops.chain), or a select that takes an unchecked arm: the value
            # leaving it must be finite
            self.report(stmt, b.not_(finite(result)), rt.ERROR_NON_FINITE)
            return
        if stmt.op in ('select', 'stop_grad'):
            return
        inputs_ok = I1(1)
        for a, v in zip(stmt.args, args):
            if a.dtype.is_float:
                inputs_ok = b.and_(inputs_ok, finite(v))
        self.report(stmt, b.and_(inputs_ok, b.not_(finite(result))), rt.ERROR_NON_FINITE)

    def gradient_checks(self):
        """(exempt selects, checked writes) of gradient_term_checks, once per kernel."""
        km = self.km
        if not hasattr(km, 'gradient_term_checks'):
            km.gradient_term_checks = gradient_term_checks(km.body, km.unchecked)
        return km.gradient_term_checks

    def debug_check_write(self, stmt):
        """Debug mode, before a store, atomic or return: a gradient or tangent term it writes
        must be finite (gradient_term_checks)."""
        if stmt not in self.gradient_checks()[1]:
            return
        b = self.b
        for a in (stmt.args if stmt.op == 'return' else stmt.args[-1:]):
            if a.dtype.is_float:
                v = self.values[a]
                d = b.fsub(v, v)
                with b.if_then(b.not_(b.fcmp_ordered('==', d, d)), likely=False):
                    # named by the line of the last non-finite term (else the write's own)
                    origin = b.load(self.term_line())
                    line = b.select(b.icmp_signed('>=', origin, I64(0)), origin,
                                    I64(self.km.location_id(stmt.loc)))
                    self.record(stmt, rt.ERROR_NON_FINITE, line=line)

    def term_line(self):
        """A local of this function: the line of the last gradient term found non-finite (-1)."""
        slot = getattr(self, '_term_line', None)
        if slot is None:
            slot = self._term_line = self.entry_builder.alloca(I64)
            self.entry_builder.store(I64(-1), slot)
        return slot

    def emit_check_component(self, s):
        if not self.km.check_bounds:
            return
        b = self.b
        index = self.as_i64(s.args[0])
        with b.if_then(b.icmp_unsigned('>=', index, I64(s.attrs['extent'])), likely=False):
            self.record(s, rt.ERROR_COMPONENT, None, [index, I64(s.attrs['extent'])])
            b.branch(self.abort_block())

    # --- run-time print and assert (engine/language/printing.py) ----------------------------------
    def word_of(self, value):
        """A value as one i64 word of a print record or an error: integers widened by their
        signedness, floats as the bits of a double (printing.Format.decode)."""
        b, v = self.b, self.values[value]
        if value.dtype.is_float:
            return b.bitcast(v if value.dtype.bits == 64 else b.fpext(v, llir.DoubleType()), I64)
        if value.dtype.bits == 64:
            return v
        return b.sext(v, I64) if value.dtype.signed else b.zext(v, I64)

    def emit_print(self, s):
        """Reserve a record's words with one atomic add (threads' records never mix) and
        fill them; a record that does not fit is counted, and the first one marks where it
        would have begun (printing.PrintBuffer.drain stops there)."""
        b = self.b
        size = I64(1 + len(s.args))
        words = b.inttoptr(b.load(self.rt_word(rt.RT_PRINT_BUFFER)), I64.as_pointer())
        capacity = b.load(self.rt_word(rt.RT_PRINT_CAPACITY))
        start = b.atomic_rmw('add', self.rt_word(rt.RT_PRINT_USED), size, 'monotonic')
        fits = b.icmp_signed('<=', b.add(start, size), capacity)
        with b.if_else(fits, likely=True) as (then, otherwise):
            with then:
                launch = b.load(self.rt_word(rt.RT_PRINT_LAUNCH))
                b.store(b.or_(b.shl(launch, I64(32)), I64(self.km.sites[s])), b.gep(words, [start]))
                for k, value in enumerate(s.args):
                    b.store(self.word_of(value), b.gep(words, [b.add(start, I64(1 + k))]))
            with otherwise:
                with b.if_then(b.icmp_signed('<', start, capacity)):
                    b.store(I64(-1), b.gep(words, [start]))
                b.atomic_rmw('add', self.rt_word(rt.RT_PRINT_DROPPED), I64(1), 'monotonic')

    def emit_assert_fail(self, s):
        """A failed assert (debug mode): record it with its message's values and stop."""
        self.record(s, rt.ERROR_ASSERT, words=[self.word_of(v) for v in s.args], ident=self.km.sites[s])
        self.b.branch(self.abort_block())

    def bounds_check(self, stmt, target, indices, extents, axes):
        """One unsigned compare per unproven axis (a negative index is a huge unsigned one).
        An index out of range records the error and stops this function before the access:
        the branch leaves every loop, so where the index does not change inside a loop LLVM
        moves the check in front of it and the loop keeps its vector code."""
        b = self.b
        bad = I1(0)
        reported, line = list(indices), I64(self.km.location_id(stmt.loc))
        for axis in axes:
            low, high, at_low, at_high = self.km.group_checks.get((stmt, axis), (0, 0, stmt, stmt))
            first, last = b.add(indices[axis], I64(low)), b.add(indices[axis], I64(high))
            first_bad, last_bad = (b.icmp_unsigned('>=', v, extents[axis]) for v in (first, last))
            if (low, high) != (0, 0):          # name the member of the group that is out of range, and its line
                reported[axis] = b.select(first_bad, first, b.select(last_bad, last, indices[axis]))
                line = b.select(b.and_(b.not_(bad), first_bad), I64(self.km.location_id(at_low.loc)),
                                b.select(b.and_(b.not_(bad), last_bad), I64(self.km.location_id(at_high.loc)), line))
            bad = b.or_(bad, b.or_(first_bad, last_bad))
        with b.if_then(bad, likely=False):
            self.record(stmt, rt.ERROR_INDEX, target, reported, line=line)
            b.branch(self.abort_block())

    # --- random numbers: splitmix64 over a per-iteration state ----------------------
    def seed_rng(self, salt):
        b = self.b
        if self.rng is None:
            self.rng = self.alloca(I64)
        seed = b.load(self.rt_word(rt.RT_RNG_SEED))
        counter = b.load(self.rt_word(rt.RT_RNG_COUNTER))
        state = b.add(b.mul(seed, I64(rt.RNG_MIX1)), b.mul(counter, I64(rt.RNG_GOLDEN)))
        state = self.mix64(b.xor(state, b.mul(salt, I64(rt.RNG_MIX2))))
        b.store(state, self.rng)

    def mix64(self, z):
        b = self.b
        z = b.mul(b.xor(z, b.lshr(z, I64(30))), I64(rt.RNG_MIX1))
        z = b.mul(b.xor(z, b.lshr(z, I64(27))), I64(rt.RNG_MIX2))
        return b.xor(z, b.lshr(z, I64(31)))

    def random(self, dtype):
        b = self.b
        state = b.add(b.load(self.rng), I64(rt.RNG_GOLDEN))
        b.store(state, self.rng)
        bits = self.mix64(state)
        if dtype.is_float:
            mantissa = 24 if dtype.bits == 32 else 53
            value = b.uitofp(b.lshr(bits, I64(64 - mantissa)), llvm_type(dtype))
            return b.fmul(value, llir.Constant(llvm_type(dtype), 2.0 ** -mantissa))
        return b.trunc(bits, llvm_type(dtype)) if dtype.bits < 64 else bits
