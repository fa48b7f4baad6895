"""Codegen of the loops ordering.py buffers: fixed chunks, each into buffers of its own,
added into the fields in chunk order by the calling thread (docs/performance.md, "Same
answer every run"). A mixin of codegen.FunctionEmitter."""
from llvmlite import ir as llir

from . import ordering
from .codegen_checks import I8P, I32, I64
from ..llvm_ops import LOWER, llvm_type
from ...core import program as rt


class OrderedLoopsEmitter:
    """The FunctionEmitter's part for buffered loops: the calling thread cuts the loop in
    chunks, takes the loop's buffers, launches, commits; the task runs its chunks."""

    def chunking(self, begin, end, bounds):
        """(chunks, iterations per chunk, one chunk?) of a buffered loop, from its length
        alone; "one chunk?" is True or False when the bounds are constants (the task then
        has one kind of add only), else None."""
        if all(x.op == 'const' for x in bounds):      # the loop's bounds in the kernel's IR
            n = max(0, bounds[1].attrs['value'] - bounds[0].attrs['value'])
            chunks = min(max(-(-n // ordering.CHUNK_MIN), 1), ordering.MAX_CHUNKS)
            return I64(chunks), I64(-(-n // chunks)), chunks == 1
        b = self.b
        n = b.sub(end, begin)
        n = b.select(b.icmp_signed('<', n, I64(0)), I64(0), n)
        chunks = b.sdiv(b.add(n, I64(ordering.CHUNK_MIN - 1)), I64(ordering.CHUNK_MIN))
        chunks = b.select(b.icmp_signed('<', chunks, I64(1)), I64(1), chunks)
        chunks = b.select(b.icmp_signed('>', chunks, I64(ordering.MAX_CHUNKS)), I64(ordering.MAX_CHUNKS), chunks)
        return chunks, b.sdiv(b.add(n, b.sub(chunks, I64(1))), chunks), None

    def acquire(self, lock):
        """The loop's buffers are one set per loop: a launch of the same kernel from another
        Python thread waits here until this one has added them up."""
        b = self.b
        head, done = self.fn.append_basic_block('lock'), self.fn.append_basic_block('locked')
        b.branch(head)
        b.position_at_end(head)
        won = b.extract_value(b.cmpxchg(lock, I32(0), I32(1), 'acquire', 'monotonic'), 1)
        with b.if_then(b.not_(won), likely=False):
            b.call(self.km.runtime_function('sched_yield', I32, []), [])
        b.cbranch(won, done, head)
        b.position_at_end(done)

    def commit(self, store, chunks):
        """After a buffered loop, on the calling thread: each chunk's buffers in chunk order
        into the fields, leaving the buffers' flags clear and their lists empty. One call
        per chunk and field to a helper per (dtype, combine): LLVM unrolled an inline loop
        over the chunks, 780 instructions per field and kernel to compile."""
        b = self.b
        with self.counted_loop(I64(0), chunks) as c:
            for t, (field, combine) in enumerate(store.plan.targets.items()):
                helper = commit_helper(self.km, field.dtype, combine)
                b.call(helper, [b.bitcast(self.base_pointer(field), I8P), b.gep(store.table, [I32(0), c, I32(t)])])

    def counted_loop(self, begin, end):
        """`with counted_loop(a, b) as i:` emits the body for i in [a, b)."""
        return _CountedLoop(self, begin, end)

    def run_chunks(self, s, c0, c1, store, begin, end, size, direct):
        """A buffered loop's task: its chunks c0 <= c < c1 in order, each into its buffers."""
        b = self.b
        self.direct = store.direct if store.direct is not None else b.icmp_unsigned('!=', direct, I64(0))
        with self.counted_loop(c0, c1) as c:
            lo = b.add(begin, b.mul(c, size))
            hi = b.add(lo, size)
            hi = b.select(b.icmp_signed('<', end, hi), end, hi)
            self.buffers = {} if store.direct is True else \
                {field: store.buffers(self, c, t) for t, field in enumerate(store.plan.targets)}
            self.chunk = (lo, hi)
            self.serial_loop(lo, hi, s, seed_rng=self.km.uses_random)
        self.buffers, self.chunk = {}, None

    def buffered_rmw(self, s, ptr, value, kind):
        """An order-dependent float atomic of a buffered loop (ordering.py): into the chunk's
        buffer, or a plain read-modify-write when the loop is one chunk (known at compile
        time where its bounds are constants). Its result is never used."""
        b, dtype = self.b, s.dtype
        offset = b.ptrtoint(ptr, I64)
        offset = b.udiv(b.sub(offset, b.ptrtoint(self.base_pointer(s.attrs['target']), I64)),
                        I64(dtype.np.itemsize))
        if self.direct is True:
            self._serial_rmw(ptr, value, kind, dtype)
        elif self.direct is False:
            self._buffer_rmw(s, value, kind, offset)
        else:
            with b.if_else(self.direct) as (direct, chunked):
                with direct:
                    self._serial_rmw(ptr, value, kind, dtype)
                with chunked:
                    self._buffer_rmw(s, value, kind, offset)
        return llir.Constant(llvm_type(dtype), llir.Undefined)

    def _buffer_rmw(self, s, value, kind, offset):
        """Into the chunk's buffer: the first touch of an element stores and lists it."""
        b, dtype = self.b, s.dtype
        buf, flags, listed, length = self.buffers[s.attrs['target']]
        contribution = b.fneg(value) if kind == 'sub' else value
        combine = ordering.BUFFERED_KINDS[kind]
        slot, flag = b.gep(buf, [offset]), b.gep(flags, [offset])
        first = b.icmp_unsigned('==', b.load(flag), llir.Constant(llir.IntType(8), 0))
        with b.if_else(first) as (fresh, again):
            with fresh:
                b.store(llir.Constant(llir.IntType(8), 1), flag)
                n = b.load(length)
                b.store(offset, b.gep(listed, [n]))
                b.store(b.add(n, I64(1)), length)
                b.store(contribution, slot)
            with again:
                b.store(LOWER[combine](b, [b.load(slot), contribution], dtype, dtype), slot)


class _CountedLoop:
    def __init__(self, emitter, begin, end):
        self.e, self.begin, self.end = emitter, begin, end

    def __enter__(self):
        e, b = self.e, self.e.b
        self.counter = e.alloca(I64)
        b.store(self.begin, self.counter)
        self.head, body = e.fn.append_basic_block('count'), e.fn.append_basic_block('counted')
        self.exit = e.fn.append_basic_block('counted_end')
        b.branch(self.head)
        b.position_at_end(self.head)
        i = b.load(self.counter)
        b.cbranch(b.icmp_signed('<', i, self.end), body, self.exit)
        b.position_at_end(body)
        return i

    def __exit__(self, *exc):
        if exc[0] is None:
            b = self.e.b
            if not b.block.is_terminated:
                b.store(b.add(b.load(self.counter), I64(1)), self.counter)
                b.branch(self.head)
            b.position_at_end(self.exit)


class BufferStore:
    """A buffered loop's buffers (ordering.py): per chunk and field, {buffer, flags, list of
    touched offsets, its length}, in a global of the kernel's module, allocated on first
    use (calloc: pages a chunk never touches cost nothing) and kept for later launches."""
    ENTRY = llir.LiteralStructType([I8P, I8P, I64.as_pointer(), I64])

    def __init__(self, km, name, plan, location):
        self.km, self.plan, self.location = km, plan, location
        self.direct = None          # True / False: the loop is / is not one chunk, known at compile time
        table = llir.ArrayType(llir.ArrayType(self.ENTRY, len(plan.targets)), ordering.MAX_CHUNKS)
        self.table = llir.GlobalVariable(km.module, table, name=f'{name}_buffers')
        self.table.linkage, self.table.initializer = 'internal', table(None)
        self.lock = llir.GlobalVariable(km.module, I32, name=f'{name}_lock')
        self.lock.linkage, self.lock.initializer = 'internal', I32(0)

    def entry(self, b, c, t):
        return [b.gep(self.table, [I32(0), c, I32(t), I32(k)]) for k in range(4)]

    def buffers(self, e, c, t):
        """(buffer typed as the field, flags, list, length pointer) of chunk c's field t,
        allocated when first used."""
        b, km = e.b, self.km
        field = list(self.plan.targets)[t]
        buf, flags, listed, length = self.entry(b, c, t)
        count = 1
        for n in tuple(field.shape) + tuple(field.element_shape):
            count *= n
        calloc = km.runtime_function('calloc', I8P, [I64, I64])
        with b.if_then(b.icmp_unsigned('==', b.load(buf), llir.Constant(I8P, None)), likely=False):
            parts = [b.call(calloc, [I64(count), I64(size)]) for size in (field.dtype.np.itemsize, 1, 8)]
            failed = b.or_(b.or_(*[b.icmp_unsigned('==', p, llir.Constant(I8P, None)) for p in parts[:2]]),
                           b.icmp_unsigned('==', parts[2], llir.Constant(I8P, None)))
            with b.if_then(failed, likely=False):
                b.store(I64(rt.ERROR_OUT_OF_MEMORY), e.rt_word(rt.RT_ERROR_FLAG))
                b.store(I64(self.location), e.rt_word(rt.RT_ERROR_LOC))
                b.store(I64(-1), e.rt_word(rt.RT_ERROR_FIELD))
                b.branch(e.abort_block())
                b.position_at_end(b.append_basic_block('unreachable'))
            b.store(parts[1], flags)
            b.store(b.bitcast(parts[2], I64.as_pointer()), listed)
            b.store(parts[0], buf)
        typed = b.bitcast(b.load(buf), llvm_type(field.dtype).as_pointer())
        return typed, b.load(flags), b.load(listed), length


def commit_helper(km, dtype, combine):
    """`commit_<dtype>_<combine>(field base, buffer entry)`: the entry's listed elements
    combined into the field, its flags cleared, its list emptied. Not inlined."""
    name = f'engine_commit_{dtype.name}_{combine}'
    fn = km.module.globals.get(name)
    if fn is not None:
        return fn
    fn = llir.Function(km.module, llir.FunctionType(llir.VoidType(), [I8P, BufferStore.ENTRY.as_pointer()]), name=name)
    fn.linkage = 'internal'
    fn.attributes.add('noinline')
    base, entry = fn.args
    b = llir.IRBuilder(fn.append_basic_block('entry'))
    ty = llvm_type(dtype).as_pointer()
    parts = [b.gep(entry, [I32(0), I32(k)]) for k in range(4)]
    buf, flags, listed = (b.load(p) for p in parts[:3])
    length, n = parts[3], b.load(parts[3])
    base, buf = b.bitcast(base, ty), b.bitcast(buf, ty)
    head, body, done = (fn.append_basic_block(x) for x in ('head', 'body', 'done'))
    start = b.block
    b.branch(head)
    b.position_at_end(head)
    j = b.phi(I64)
    j.add_incoming(I64(0), start)
    b.cbranch(b.icmp_signed('<', j, n), body, done)
    b.position_at_end(body)
    offset = b.load(b.gep(listed, [j]))
    at = b.gep(base, [offset])
    b.store(LOWER[combine](b, [b.load(at), b.load(b.gep(buf, [offset]))], dtype, dtype), at)
    b.store(llir.Constant(llir.IntType(8), 0), b.gep(flags, [offset]))
    j.add_incoming(b.add(j, I64(1)), body)
    b.branch(head)
    b.position_at_end(done)
    b.store(I64(0), length)
    b.ret_void()
    return fn
