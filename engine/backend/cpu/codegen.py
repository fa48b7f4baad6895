"""IR -> LLVM IR (llvmlite).

A kernel becomes one module: `<name>_main(fields, args, runtime)` runs the
top-level statements on the calling thread, and each top-level parallel `for`
is outlined into a task function `(closure, begin, end)` handed to the native
thread pool (`engine_parallel_for`). Values the loop body uses from outside
travel in the closure by value.
"""
from llvmlite import ir as llir

from ..llvm_ops import LOWER, llvm_type

from ...ir import ops
from ...language import printing
from ...core import passes, program as rt
from ..bounds import IndexRanges, grouped_checks, unproven_axes
from . import gathers, ordering
from .aliasing import tag_field_accesses
from .fast_math import with_fast_math
from .codegen_checks import I8P, I32, I64, ChecksEmitter
from .wide_indices import WIDE_OPS, WideIndexEmitter
from .codegen_ordered import BufferStore, OrderedLoopsEmitter
from ...language.fields import Field
from ...ir.nodes import used_from_outside, walk

TASK_TYPE = llir.FunctionType(llir.VoidType(), [I8P, I64, I64])
MAIN_TYPE = llir.FunctionType(llir.VoidType(), [I8P.as_pointer(), I8P, I8P])



class KernelModule:
    """Builds the LLVM module of one kernel."""

    def __init__(self, name, body, ret_offset=None, debug=False, program=None, shadow=(), check_bounds=True):
        self.name, self.body = name, body
        # indices not proven in range are checked (engine/backend/bounds.py); debug mode checks all
        self.index_ranges = None if debug or not check_bounds else IndexRanges(body)
        self.ranges = self.index_ranges or IndexRanges(body)      # for wide indices (FunctionEmitter.widen)
        self.wide_indices = passes.enabled('wide_indices')
        self.scalar_loops = gathers.scalar_loops(body) if passes.enabled('scalar_gathers') else frozenset()
        self.check_bounds = debug or check_bounds
        self.group_checks, self.covered_checks = ({}, set()) if self.index_ranges is None else \
            grouped_checks(body, self.index_ranges)
        # fields and ndarrays whose accesses keep shadow words (engine/autodiff/rules.py): slot each
        self.shadow = {target: slot for slot, target in enumerate(shadow)}
        self.ret_offset, self.debug, self.program = ret_offset, debug, program
        self.module = llir.Module(name=name)
        self.locations = location_table(body)
        self._location_ids = {_location_key(loc): k for k, loc in enumerate(self.locations)}
        self.tasks = 0
        self.field_bases = {}         # id(base pointer) -> field, for aliasing.tag_field_accesses
        self.uses_random = any(s.op == 'random' for s in walk(body))
        # run-time prints and asserts, by their index in the kernel's tables (printing.table)
        self.sites = {s: k for op in ('print', 'assert_fail') for k, s in enumerate(printing.table(body, op))}
        self.unchecked = values_that_only_feed_select_arms(body) if debug else frozenset()
        # parallel loops whose float atomics depend on the order of iterations (ordering.py)
        self.plans = ordering.plan_loops(body) if program is None or program.config.deterministic else {}
        self.realloc = llir.Function(self.module, llir.FunctionType(I8P, [I8P, I64]), name='realloc')
        self.free = llir.Function(self.module, llir.FunctionType(llir.VoidType(), [I8P]), name='free')
        self.parallel_for = llir.Function(
            self.module, llir.FunctionType(llir.VoidType(), [TASK_TYPE.as_pointer(), I8P, I64, I64, I64,
                                                            I64.as_pointer()]),
            name='engine_parallel_for')

    def location_id(self, loc):
        """The index of a source line in this kernel's table (`location_table`): native code
        reports errors by it, the same in every process, so the build can be cached."""
        return self._location_ids[_location_key(loc)]

    @property
    def main_symbol(self):
        return self.main_symbol_of(self.name)

    @staticmethod
    def main_symbol_of(name):
        return f'{name}_main'

    def generate(self) -> str:
        fn = llir.Function(self.module, MAIN_TYPE, name=self.main_symbol)
        fields, args, rt_ptr = fn.args
        emitter = FunctionEmitter(self, fn, fields, args, rt_ptr, in_task=False)
        if self.uses_random:
            counter = emitter.rt_word(rt.RT_RNG_COUNTER)
            old = emitter.b.load(counter)
            emitter.b.store(emitter.b.add(old, I64(1)), counter)
            emitter.seed_rng(I64(0xFFFFFFFF))
        emitter.emit_block(self.body)
        emitter.finish()
        if passes.enabled('field_noalias'):
            tag_field_accesses(self.module, self.field_bases)
        return str(self.module)

    def runtime_function(self, name, ret, params):
        """A C library function, declared once."""
        try:
            return self.module.get_global(name)
        except KeyError:
            return llir.Function(self.module, llir.FunctionType(ret, params), name=name)

    def new_task(self):
        self.tasks += 1
        return llir.Function(self.module, TASK_TYPE, name=f'{self.name}_task{self.tasks}')


class FunctionEmitter(ChecksEmitter, OrderedLoopsEmitter, WideIndexEmitter):
    """Emits IR statements into one LLVM function."""

    def __init__(self, km, fn, fields, args, rt_ptr, in_task):
        self.km, self.fn = km, fn
        self.fields, self.args, self.rt = fields, args, rt_ptr
        self.in_task = in_task
        self.entry = fn.append_basic_block('entry')
        self.entry_builder = llir.IRBuilder(self.entry)
        self.b = llir.IRBuilder(fn.append_basic_block('start'))
        self.values = {}
        self.wide = {}                # index values also computed in 64 bits (widen)
        self.bases = {}
        self.loop_targets = []
        self.rng = None
        self.stacks = {}
        self.phase = 0                # which parallel loop this code belongs to (0: serial code)
        self.iteration = None         # that loop's index statement
        self.shadows = {}
        self.abort = None             # abort_block
        self.chunk = None             # in a task: the [lo, hi) of iterations this call runs
        self.near_mode = None         # emit_body_twice: how the copy being emitted adds `near`
        self.buffers = {}             # a buffered loop's task: field -> its chunk's (buf, flags, list, len)
        self.direct = None            # ... and whether the loop is one chunk (plain read-modify-writes)
        self.plain = frozenset()      # in a task: atomics its loop's plan lowers without atomics (ordering.Plan)

    def finish(self):
        if not self.b.block.is_terminated:
            self.ret()
        if self.abort is not None:
            self.b.position_at_end(self.abort)
            self.ret()
        self.entry_builder.branch(self.fn.basic_blocks[1])

    def abort_block(self):
        """Where this function goes after recording an error that stops the launch."""
        if self.abort is None:
            self.abort = self.fn.append_basic_block('abort')
        return self.abort

    def stop_if_failed(self):
        """Leave this function when a launch's other code has recorded an error."""
        failed = self.b.icmp_unsigned('!=', self.b.load(self.rt_word(rt.RT_ERROR_FLAG)), I64(0))
        with self.b.if_then(failed, likely=False):
            self.b.branch(self.abort_block())

    def ret(self):
        for data, _, _ in self.stacks.values():
            self.b.call(self.km.free, [self.b.load(data)])
        self.b.ret_void()

    # --- autodiff stacks: per-thread, growing with realloc --------------------------
    def stack(self, key):
        if key not in self.stacks:
            eb = self.entry_builder
            data, top, cap = eb.alloca(I8P), eb.alloca(I64), eb.alloca(I64)
            eb.store(llir.Constant(I8P, None), data)
            eb.store(I64(0), top)
            eb.store(I64(0), cap)
            self.stacks[key] = (data, top, cap)
        return self.stacks[key]

    def emit_stack_push(self, s):
        b = self.b
        data, top, cap = self.stack(s.attrs['stack'])
        need = b.add(b.load(top), I64(8))
        with b.if_then(b.icmp_unsigned('>', need, b.load(cap)), likely=False):
            grown = b.select(b.icmp_unsigned('<', b.load(cap), I64(4096)), I64(4096),
                             b.mul(b.load(cap), I64(2)))
            fresh = b.call(self.km.realloc, [b.load(data), grown])
            failed = b.icmp_unsigned('==', fresh, llir.Constant(I8P, None))
            with b.if_else(failed) as (then, otherwise):
                with then:
                    b.store(I64(rt.ERROR_OUT_OF_MEMORY), self.rt_word(rt.RT_ERROR_FLAG))
                    b.store(I64(self.km.location_id(s.loc)), self.rt_word(rt.RT_ERROR_LOC))
                    b.store(I64(-1), self.rt_word(rt.RT_ERROR_FIELD))
                    self.ret()
                with otherwise:
                    b.store(fresh, data)
                    b.store(grown, cap)
        slot = b.gep(b.load(data), [b.load(top)])
        b.store(self.values[s.args[0]], b.bitcast(slot, llvm_type(s.args[0].dtype).as_pointer()))
        b.store(need, top)

    def emit_stack_pop(self, s):
        b = self.b
        data, top, _ = self.stack(s.attrs['stack'])
        new_top = b.sub(b.load(top), I64(8))
        b.store(new_top, top)
        slot = b.gep(b.load(data), [new_top])
        return b.load(b.bitcast(slot, llvm_type(s.dtype).as_pointer()))

    # --- helpers ------------------------------------------------------------------
    def alloca(self, ty):
        return self.entry_builder.alloca(ty)

    def rt_word(self, slot):
        words = self.b.bitcast(self.rt, I64.as_pointer())
        return self.b.gep(words, [I64(slot)])

    def arg_pointer(self, offset, ty):
        return self.b.bitcast(self.b.gep(self.args, [I64(offset)]), ty.as_pointer())

    def base_pointer(self, target):
        """Typed data pointer of a field or ndarray, loaded once in the entry block."""
        if target in self.bases:
            return self.bases[target]
        eb = self.entry_builder
        if isinstance(target, Field):
            raw = eb.load(eb.gep(self.fields, [I64(target.id)]))
        else:
            raw = eb.load(eb.bitcast(eb.gep(self.args, [I64(target.pointer_offset)]), I8P.as_pointer()))
        base = eb.bitcast(raw, llvm_type(target.dtype).as_pointer())
        self.bases[target] = base
        if isinstance(target, Field):
            self.km.field_bases[id(base)] = target
        return base

    def extent(self, target, axis):
        if isinstance(target, Field):
            return I64(target.shape[axis])
        return self.b.load(self.arg_pointer(target.shape_offset + 8 * axis, I64))

    def address(self, stmt):
        offset = self.flat_offset(stmt)
        if stmt.attrs['target'] in self.km.shadow:
            self.shadow_access(stmt, offset)
        return self.b.gep(self.base_pointer(stmt.attrs['target']), [offset])

    def flat_offset(self, stmt):
        target, comp = stmt.attrs['target'], stmt.attrs['component']
        ndim = len(target.shape) if isinstance(target, Field) else target.ndim
        b = self.b
        indices = [self.as_i64(a) for a in stmt.args[:ndim]]
        extents = [self.extent(target, axis) for axis in range(ndim)]
        if self.km.check_bounds:
            ranges = self.km.index_ranges
            unproven = list(range(ndim)) if ranges is None else \
                [a for a in unproven_axes(ranges, stmt) if (stmt, a) not in self.km.covered_checks]
            if unproven:
                self.bounds_check(stmt, target, indices, extents, unproven)
        offset = I64(0)
        for index, extent in zip(indices, extents):
            offset = b.add(b.mul(offset, extent), index)
        ncomp = 1
        for n in target.element_shape:
            ncomp *= n
        if ncomp > 1 or comp:
            offset = b.add(b.mul(offset, I64(ncomp)), I64(comp))
        return offset

    # --- statements --------------------------------------------------------------------
    def emit_block(self, block):
        for stmt in block.stmts:
            if self.b.block.is_terminated:
                self.b.position_at_end(self.fn.append_basic_block('dead'))
            handler = getattr(self, 'emit_' + stmt.op, None)
            if handler is not None:
                if self.km.debug and stmt.op in ('global_store', 'atomic', 'return'):
                    self.debug_check_write(stmt)
                result = handler(stmt)
            else:
                args = [self.values[a] for a in stmt.args]
                in_dtype = stmt.args[-1].dtype if stmt.args else stmt.dtype
                result = LOWER[stmt.op](self.b, args, in_dtype, stmt.dtype)
                if self.km.debug:
                    self.debug_check_op(stmt, args, result)
                if self.wide and stmt.op in WIDE_OPS:
                    result = self.widen(stmt, result)
            if result is not None:
                self.values[stmt] = result

    def emit_const(self, s):
        return llir.Constant(llvm_type(s.dtype), s.attrs['value'])

    def emit_arg(self, s):
        return self.b.load(self.arg_pointer(s.attrs['offset'], llvm_type(s.dtype)))

    def emit_ndarray_shape(self, s):
        extent = self.extent(s.attrs['target'], s.attrs['axis'])
        return self.b.trunc(extent, I32)

    def emit_random(self, s):
        return self.random(s.dtype)

    def emit_alloca(self, s):
        return self.alloca(llvm_type(s.dtype))

    def emit_local_load(self, s):
        return self.b.load(self.values[s.args[0]])

    def emit_local_store(self, s):
        self.b.store(self.values[s.args[1]], self.values[s.args[0]])

    def emit_global_load(self, s):
        return self.load_frozen(self.address(s))

    def load_frozen(self, ptr):
        """A load of memory that a later store in the same branch may overwrite, behind a
        `freeze`. LLVM 22's InstCombine folds `select(mask, masked.load(p), C)`, which the
        loop vectorizer makes of a load in a branch, into a new masked load *at the select*,
        after a masked store to `p` in that branch: the adjoint's "read .grad, then zero it"
        read the zero (x.grad all 0 for `a = x[i]; if c: continue; y[i] = a` at N >= 16).
        The freeze is free in machine code and keeps the load where it was."""
        b = self.b
        loaded = b.load(ptr)
        frozen = llir.Instruction(b.block, loaded.type, 'freeze', [loaded])
        b._insert(frozen)
        return frozen

    def emit_global_store(self, s):
        self.b.store(self.values[s.args[-1]], self.address(s))

    def emit_local_atomic(self, s):
        return self._atomic(self.values[s.args[0]], self.values[s.args[1]], s.attrs['kind'], s.dtype)

    def emit_atomic(self, s):
        if s.attrs.get('activates_cell'):
            return self._activate(s)
        ptr, value, kind = self.address(s), self.values[s.args[-1]], s.attrs['kind']
        if s.attrs.get('exclusive') or s in self.plain:      # no other iteration touches this element
            return self._serial_rmw(ptr, value, kind, s.dtype)
        if s.attrs.get('near') and self.near_mode == 'plain':     # emit_body_twice
            return self._serial_rmw(ptr, value, kind, s.dtype)
        if s.attrs['target'] in self.buffers:
            return self.buffered_rmw(s, ptr, value, kind)
        return self._atomic(ptr, value, kind, s.dtype)

    def _activate(self, s):
        """A sparse cell's activation (engine/language/sparse.py: an integer max into its
        activity or its list's length) does nothing where the cell is active already, the
        common case: then no atomic runs, and a checked build sees no write to report."""
        b, target = self.b, s.attrs['target']
        offset = self.flat_offset(s)
        ptr = b.gep(self.base_pointer(target), [offset])
        value = self.values[s.args[-1]]
        current = b.load_atomic(ptr, 'monotonic', 4)
        with b.if_then(b.icmp_signed('<', current, value)):
            if target in self.km.shadow:
                self.shadow_access(s, offset)
            self._atomic(ptr, value, 'max', s.dtype)
        return current

    def _atomic(self, ptr, value, kind, dtype):
        if not self.in_task:
            return self._serial_rmw(ptr, value, kind, dtype)
        if dtype.is_float:
            op = {'add': 'fadd', 'sub': 'fsub', 'min': 'fmin', 'max': 'fmax'}.get(kind)
            if op is None:
                raise ops.TaichiTypeError(f'atomic_{kind} needs integer operands')
        else:
            op = {'min': 'min', 'max': 'max'}.get(kind, kind) if dtype.signed else \
                {'min': 'umin', 'max': 'umax'}.get(kind, kind)
        return self.b.atomic_rmw(op, ptr, value, 'monotonic')

    def _serial_rmw(self, ptr, value, kind, dtype):
        """Code outside parallel loops runs on one thread: a plain read-modify-write."""
        b = self.b
        old = self.load_frozen(ptr)
        name = {'and': 'bit_and', 'or': 'bit_or', 'xor': 'bit_xor'}.get(kind, kind)
        if dtype.is_float and name.startswith('bit_'):
            raise ops.TaichiTypeError(f'atomic_{kind} needs integer operands')
        new = LOWER[name](b, [old, value], dtype, dtype)
        b.store(new, ptr)
        return old

    def emit_return(self, s):
        for k, value in enumerate(s.args):      # a vector, struct or tuple: one slot per scalar
            slot = self.arg_pointer(self.km.ret_offset + 8 * k, llvm_type(value.dtype))
            self.b.store(self.values[value], slot)
        self.ret()

    def emit_if(self, s):
        b = self.b
        cond = b.icmp_signed('!=', self.values[s.args[0]], I32(0))
        then_bb, else_bb = self.fn.append_basic_block('then'), self.fn.append_basic_block('else')
        merge = self.fn.append_basic_block('endif')
        b.cbranch(cond, then_bb, else_bb)
        for bb, block in ((then_bb, s.attrs['then']), (else_bb, s.attrs['else'])):
            b.position_at_end(bb)
            self.emit_block(block)
            if not b.block.is_terminated:
                b.branch(merge)
        b.position_at_end(merge)

    def emit_while(self, s):
        b = self.b
        loop_bb, exit_bb = self.fn.append_basic_block('while'), self.fn.append_basic_block('endwhile')
        b.branch(loop_bb)
        b.position_at_end(loop_bb)
        self.loop_targets.append((loop_bb, exit_bb))
        self.emit_block(s.attrs['body'])
        self.loop_targets.pop()
        if not b.block.is_terminated:
            b.branch(loop_bb)
        b.position_at_end(exit_bb)

    def emit_break(self, s):
        self.b.branch(self.loop_targets[-1][1])

    def emit_continue(self, s):
        self.b.branch(self.loop_targets[-1][0])

    def emit_for(self, s):
        if s.attrs['parallel'] and not self.in_task:
            return self.emit_parallel_for(s)
        begin, end = (self.values[a] for a in s.args)
        self.serial_loop(begin, end, s)

    def serial_loop(self, begin, end, s, seed_rng=False):
        """for i in [begin, end): body — with `continue` jumping to the increment."""
        b = self.b
        counter = self.alloca(begin.type)
        b.store(begin, counter)
        head, body_bb = self.fn.append_basic_block('for'), self.fn.append_basic_block('body')
        latch, exit_bb = self.fn.append_basic_block('next'), self.fn.append_basic_block('endfor')
        b.branch(head)
        b.position_at_end(head)
        i = b.load(counter)
        b.cbranch(b.icmp_signed('<', i, end), body_bb, exit_bb)
        b.position_at_end(body_bb)
        self.values[s.attrs['index']] = i if i.type == I32 else b.trunc(i, I32)
        if i.type == I64 and self.km.wide_indices and self.km.ranges.interval(s.attrs['index'])[0] >= 0:
            self.wide[s.attrs['index']] = i
        if seed_rng:
            self.seed_rng(b.sext(self.values[s.attrs['index']], I64))
        self.loop_targets.append((latch, exit_bb))
        spans = {t.attrs['near'] for t in walk(s.attrs['body']) if t.op == 'atomic' and 'near' in t.attrs}
        if self.chunk is not None and s.attrs['index'] is self.iteration and spans:
            self.emit_body_twice(s.attrs['body'], max(spans))
        else:
            self.emit_block(s.attrs['body'])
        self.loop_targets.pop()
        if not b.block.is_terminated:
            b.branch(latch)
        b.position_at_end(latch)
        b.store(b.add(b.load(counter), llir.Constant(begin.type, 1)), counter)
        back_edge = b.branch(head)
        if s in self.km.scalar_loops:
            back_edge.set_metadata('llvm.loop', gathers.scalar_loop_id(self.km.module))
        b.position_at_end(exit_bb)

    def emit_body_twice(self, body, span):
        """A task's iteration whose adds are `near` (reverse._owned_fields): one copy of the
        body with plain adds for the iterations at least `span` from the ends of the chunk,
        one with atomics for the others; the choice is made once per iteration, so the
        inner loops of each copy stay free of branches."""
        b = self.b
        lo, hi = self.chunk
        i = b.sext(self.values[self.iteration], I64)
        inside = b.and_(b.icmp_signed('>=', i, b.add(lo, I64(span))), b.icmp_signed('<', b.add(i, I64(span)), hi))
        with b.if_else(inside, likely=True) as (plain, atomic):
            for mode, branch in (('plain', plain), ('atomic', atomic)):
                with branch:
                    self.near_mode = mode
                    self.emit_block(body)
        self.near_mode = None

    def emit_parallel_for(self, s):
        """Outline the loop body into a task and hand [begin, end) to the thread pool; a
        buffered loop hands it its chunks, then adds their buffers in order; a serial one
        calls the task with all of it (ordering.py, codegen_ordered.py)."""
        b = self.b
        plan = self.km.plans.get(s, ordering.FREE)
        shared = shared_locals(s)
        # constants stay constants in the task: LLVM then knows an inner loop's trip count
        constants = [c for c in captured_values(s) if c.op == 'const']
        captured = [c for c in captured_values(s) if c.op != 'const']
        task = self.km.new_task()
        head = [self.fields, self.args, self.rt]
        begin, end = (b.sext(self.values[a], I64) for a in s.args)
        chunks = direct = None
        if plan.kind == 'buffered':
            chunks, size, direct = self.chunking(begin, end, s.args)
            head += [begin, end, size, b.zext(b.icmp_signed('==', chunks, I64(1)), I64)]
        closure_ty = llir.LiteralStructType(
            [v.type for v in head] + [self.values[c].type if c in shared else llvm_type(c.dtype) for c in captured])
        closure = self.alloca(closure_ty)
        captures = [self.values[c] if c in shared else self._capture(c) for c in captured]
        for k, v in enumerate(head + captures):
            b.store(v, b.gep(closure, [I32(0), I32(k)]))
        store = self._launch(s, plan, task, b.bitcast(closure, I8P), begin, end, chunks)
        if store is not None:
            store.direct = direct
        if self.km.check_bounds:          # a chunk stopped at an index out of range: so does the launch
            self.stop_if_failed()
        self._emit_task(s, task, closure_ty, len(head), captured, shared, store,
                        {c: self.values[c] for c in constants})

    def _launch(self, s, plan, task, closure, begin, end, chunks):
        """Call the task as `plan` says; returns a buffered loop's BufferStore."""
        b = self.b
        # the pool measures the loop's cost per iteration in `site` (engine/backend/cpu/threadpool.py)
        site_type = llir.ArrayType(I64, 3)
        site = llir.GlobalVariable(self.km.module, site_type, name=f'{task.name}_site')
        site.linkage, site.initializer = 'internal', site_type([I64(0)] * 3)
        site = b.bitcast(site, I64.as_pointer())
        if plan.kind == 'serial':
            b.call(task, [closure, begin, end])
        elif plan.kind == 'buffered':
            store = BufferStore(self.km, task.name, plan, self.km.location_id(s.loc))
            self.acquire(store.lock)
            b.call(self.km.parallel_for, [task, closure, I64(0), chunks, I64(1), site])
            self.commit(store, chunks)
            b.store_atomic(I32(0), store.lock, 'release', 4)
            return store
        else:
            b.call(self.km.parallel_for, [task, closure, begin, end, I64(1), site])
        return None

    def _emit_task(self, s, task, closure_ty, n_head, captured, shared, store, constants):
        """The task's body: unpack the closure, run its range of iterations (or chunks)."""
        inner = FunctionEmitter(self.km, task, None, None, None, in_task=True)
        inner.values.update(constants)
        inner.phase, inner.iteration = self.km.tasks, s.attrs['index']
        inner.plain = self.km.plans.get(s, ordering.FREE).plain
        closure_arg, lo, hi = task.args
        eb = inner.entry_builder
        typed = eb.bitcast(closure_arg, closure_ty.as_pointer())
        loaded = [eb.load(eb.gep(typed, [I32(0), I32(k)])) for k in range(n_head + len(captured))]
        inner.fields, inner.args, inner.rt = loaded[:3]
        for c, value in zip(captured, loaded[n_head:]):
            if c in shared:               # updated atomically by all threads: by reference
                inner.values[c] = value
            elif c.op == 'alloca':        # a local only read by the loop: a private copy
                slot = inner.alloca(llvm_type(c.dtype))
                eb.store(value, slot)
                inner.values[c] = slot
            else:
                inner.values[c] = value
        if self.km.check_bounds:
            inner.stop_if_failed()
        if store is None:
            inner.chunk = (lo, hi)
            inner.serial_loop(lo, hi, s, seed_rng=self.km.uses_random)
        else:
            inner.run_chunks(s, lo, hi, store, *loaded[3:n_head])
        inner.finish()

    def _capture(self, stmt):
        value = self.values[stmt]
        return self.b.load(value) if stmt.op == 'alloca' else value


def _location_key(loc):
    return (loc.filename, loc.lineno, loc.col) if loc else None


def location_table(body):
    """The source locations of a kernel's statements, each once, in program order: native
    code names a line by its index here (CompiledKernel.locations rebuilds the same table
    from the same body, also for a build loaded from the disk cache)."""
    seen, table = set(), []
    for stmt in walk(body):
        key = _location_key(stmt.loc)
        if key not in seen:
            seen.add(key)
            table.append(stmt.loc)
    return table


def shared_locals(loop):
    """Kernel-scope locals that the loop updates atomically (`s += ...`)."""
    return {s.args[0] for s in walk(loop.attrs['body']) if s.op == 'local_atomic'}


def captured_values(loop):
    """Statements defined outside `loop` whose values its body uses, in first-use order."""
    return used_from_outside(loop.attrs['body'], [loop.attrs['index']])


def values_that_only_feed_select_arms(body):
    """Values whose every use is an arm of a select, or another such value (or none): the
    `ti.select(x > 0, ti.sqrt(x), 0)` guard, a partial derivative in an untaken arm. A
    NaN or Inf there reaches a result only through the select, so debug mode checks the
    select's result instead (the guard of a gradient term, ops.chain, is checked; so is
    the value a select feeds to an op that is not exempt)."""
    users = {}
    for stmt in walk(body):
        for position, arg in enumerate(stmt.args):
            users.setdefault(arg, []).append((stmt, position))
    exempt = set()
    for stmt in reversed(list(walk(body))):
        if stmt.dtype is not None and stmt.op not in ('alloca', 'atomic', 'local_atomic') and all(
                user in exempt or (user.op == 'select' and position > 0)
                for user, position in users.get(stmt, ())):
            exempt.add(stmt)
    return frozenset(exempt)


def generate(name, body, ret_offset=None, debug=False, program=None, shadow=(), check_bounds=True):
    km = KernelModule(name, body, ret_offset, debug, program, shadow, check_bounds)
    text = km.generate()
    if program is not None and program.config.fast_math and not debug:
        text = with_fast_math(text)
    return text, km.main_symbol
