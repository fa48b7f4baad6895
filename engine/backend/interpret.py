"""A reference interpreter of the kernel IR, in plain Python: `ti.init(interpret=True)`.

Every kernel, and every adjoint and forward-mode kernel derived from it, then runs
here instead of as native code. The interpreter is a second oracle for the autodiff
tests: when native results are wrong, the same IR interpreted tells a transform bug
(engine/autodiff/reverse.py, engine/autodiff/forward.py built wrong IR: the interpreter is wrong too)
from a code-generation bug (engine/backend/cpu/codegen.py lowered right IR wrongly: it is right).

Semantics follow engine/backend/cpu/codegen.py statement by statement. Where Python's arithmetic
differs from native code, the rules below follow the native code: IEEE results
instead of exceptions (1/0, log(0), sqrt(-1)), modulo and floor division as codegen
lowers them, min/max with a NaN operand losing, f32 results rounded after every op,
integers wrapping at their width, integer division by zero dividing by 1.

Deliberately stricter than native code, so that IR without a defined meaning fails
loudly instead of reading garbage:
* using the value of a local before any store (copying it is fine), or popping an empty
  autodiff stack, raises IRError;
* out-of-range field and ndarray indices raise TaichiIndexError (as debug mode does);
* each iteration of a parallel loop runs as a task of its own, in order: fresh locals
  and autodiff stacks, private copies of the kernel-scope locals it reads (shared only
  those it updates with `+=`). That is the finest schedule the thread pool may pick;
  a `return` (or `break`) in a parallel loop's body ends its task, i.e. the iteration.
"""
import math
import struct
import sys

import numpy as np

from ..ir import ops
from ..language import printing
from ..core.context import ctx
from ..core import dtypes as T
from ..core import program as rt
from .cpu.codegen import captured_values, shared_locals, values_that_only_feed_select_arms
from ..core.errors import (TaichiIndexError, TaichiNonFiniteError, TaichiRuntimeError, TaichiTypeError,
                           TaichiZeroDivisionError)
from ..language.fields import Field
from ..ir.nodes import walk
from ..language.abi import as_array as _as_array, companion, scalar_format as _scalar_format
from .native_errors import NEGATIVE_POWER
from .cpu.codegen_checks import gradient_term_checks
from .interpret_scalars import GOLDEN, M64, WRAP, cast_fn, mix64, rounding, same, scalar_fn, seed
from .launch import CompiledKernel
from ..ir.verify import verify


class IRError(TaichiRuntimeError):
    """The IR does something that has no defined result in native code."""
    internal = True         # an engine bug: its traceback keeps the engine's frames


BREAK, CONTINUE, RETURN = 1, 2, 3    # what a statement returns to leave its block
_LEAVE = {BREAK: None, RETURN: RETURN}   # a loop body's signals that end the loop: what the loop returns
STACKS, RNG = object(), object()     # env keys of the running task's autodiff stacks, random state


class Undefined:
    """The value of a local before its first store (LLVM's undef). Loads, stores and autodiff
    stacks copy it like any value (an adjoint snapshots and restores locals that are not
    defined yet, harmlessly); computing with it, branching on it or writing it to a field
    raises IRError: native code would use garbage."""
    __slots__ = ('cell',)

    def __init__(self, cell):
        self.cell = cell

    def _use(self, *_):
        where = f'\n{self.cell.loc.render()}' if self.cell.loc else ''
        raise IRError(f'the local {self.cell!r} is used before any store{where}')


for _name in 'bool float int index eq ne lt le gt ge neg pos abs invert round floor ceil trunc'.split():
    setattr(Undefined, f'__{_name}__', Undefined._use)
for _name in 'add sub mul truediv floordiv mod pow and or xor lshift rshift'.split():
    setattr(Undefined, f'__{_name}__', Undefined._use)
    setattr(Undefined, f'__r{_name}__', Undefined._use)


def _run(block, env):
    """Run compiled statements; return the signal (BREAK, CONTINUE, RETURN) that stopped them."""
    for run in block:
        signal = run(env)
        if signal:
            return signal
    return None


# ----------------------------------------------------------------------------
# Fields and ndarrays

class _Memory:
    """One field's or ndarray's values during a launch: a flat view and the extents."""
    __slots__ = ('flat', 'extents', 'what')

    def __init__(self, array, ndim, what):
        self.flat = array.reshape(-1)       # arrays are C-contiguous: a view
        self.extents = array.shape[:ndim]
        self.what = what


# ----------------------------------------------------------------------------
# IR -> closures

class _Compiler:
    """Turns blocks of IR into tuples of closures `run(env) -> signal or None`.

    `env` maps each statement to its value (an alloca to its cell, a one-item list),
    each field or ndarray to its _Memory, and STACKS and RNG to the running task's
    state. One `op_<name>` method per statement kind; other ops come from the op table."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.name = kernel.kernel.name
        self.buffer = kernel.buffer
        self.debug = kernel.program.config.debug
        self.uses_random = kernel.uses_random
        self.in_task = False        # compiling the body of a parallel loop (codegen's task)
        self.constants = {}         # const statement -> its value
        # debug mode: values exempt from the NaN check (codegen's rule)
        self.unchecked = values_that_only_feed_select_arms(kernel.body) if self.debug else frozenset()
        # gradient terms: checked where they are written (codegen_checks.gradient_term_checks)
        self.exempt_terms, self.gradient_writes = gradient_term_checks(kernel.body, self.unchecked) \
            if self.debug else (frozenset(), frozenset())
        self.last_term = None       # the last gradient term found not finite

    def block(self, block):
        return tuple(run for run in map(self.stmt, block.stmts) if run is not None)

    def stmt(self, s):
        handler = _HANDLERS.get(s.op)
        if handler is not None:
            run = handler(self, s)
            return self.checked_write(s, run) if s in self.gradient_writes else run
        opdef = ops.OPS.get(s.op)
        if opdef is None or (opdef.py is None and s.op != 'cast'):
            raise NotImplementedError(f'the IR interpreter does not know the op {s.op!r}')
        return self.value_op(s)

    def error(self, cls, s, message):
        """An exception for statement `s`, pointing at its source line."""
        where = f'\n{s.loc.render()}' if s.loc else ''
        return cls(f'kernel {self.name}: {message}{where}')

    # --- values ----------------------------------------------------------------
    def value_op(self, s):
        ti = s.args[-1].dtype if s.args else s.dtype       # as codegen's in_dtype
        for a in s.args[1:] if s.op == 'select' else s.args:
            if (a.dtype.is_float, a.dtype.bits) != (ti.is_float, ti.bits) and s.op != 'cast':
                raise TaichiTypeError(f'IR: {s.op} mixes {a.dtype} and {ti} operands')
        fn = cast_fn(s.args[0].dtype, s.dtype) if s.op == 'cast' else scalar_fn(s.op, ti, s.dtype)
        if self.debug:
            fn = self.checked(s, fn)
        args = s.args
        if len(args) == 1:
            a, = args

            def run(env):
                env[s] = fn(env[a])
        elif len(args) == 2:
            a, b = args

            def run(env):
                env[s] = fn(env[a], env[b])
        else:
            a, b, c = args

            def run(env):
                env[s] = fn(env[a], env[b], env[c])
        return run

    def checked(self, s, fn):
        """Debug mode's checks, as codegen's debug_check_op: integer division by zero; NaN or
        Inf made from finite operands, except in values that only feed select arms; those
        selects, and the guards of gradient terms (ops.chain), must give a finite value."""
        divides = s.op in ('floordiv', 'mod') and not s.dtype.is_float
        negative_power = s.op == 'pow' and not s.dtype.is_float and s.dtype.signed
        exempt = s in self.unchecked or s in self.exempt_terms
        must_be_finite = not exempt and bool(
            s.attrs.get('nan_guard') or (s.op == 'select' and any(a in self.unchecked for a in s.args)))
        from_finite = s.dtype.is_float and s.op not in ('select', 'stop_grad') and \
            not (exempt or must_be_finite)
        float_args = [k for k, a in enumerate(s.args) if a.dtype.is_float]
        term = s in self.exempt_terms and bool(s.attrs.get('nan_guard'))

        def run(*values):
            if divides and values[1] == 0:
                raise self.error(TaichiZeroDivisionError, s, 'integer division or modulo by zero')
            if negative_power and values[1] < 0:
                raise self.error(TaichiRuntimeError, s, NEGATIVE_POWER)
            result = fn(*values)
            if (must_be_finite or from_finite) and not math.isfinite(result) and \
                    (must_be_finite or all(math.isfinite(values[k]) for k in float_args)):
                raise self.error(TaichiNonFiniteError, s, 'NaN or Inf produced from finite operands')
            if term and not math.isfinite(result):
                self.last_term = s      # named if a gradient written from it is not finite
            return result
        return run

    def checked_write(self, s, run):
        """Debug mode: a gradient or tangent term that a store, atomic or return writes must
        be finite (as codegen's debug_check_write)."""
        values = [a for a in (s.args if s.op == 'return' else s.args[-1:]) if a.dtype.is_float]

        def checked(env):
            if not all(math.isfinite(env[a]) for a in values):
                origin = s if self.last_term is None else self.last_term
                raise self.error(TaichiNonFiniteError, origin, 'NaN or Inf produced from finite operands')
            return run(env)
        return checked

    def op_const(self, s):      # bound once per launch (see `constants`), not run
        value = float(s.attrs['value']) if s.dtype.is_float else int(s.attrs['value'])
        self.constants[s] = (rounding(s.dtype) or same)(value)
        return None

    def op_arg(self, s):        # read from the argument buffer that CompiledKernel.launch packed
        unpack = struct.Struct('=' + _scalar_format(s.dtype)).unpack_from
        offset, buffer = s.attrs['offset'], self.buffer

        def run(env):
            env[s] = unpack(buffer, offset)[0]
        return run

    def op_check_component(self, s):
        index, extent = s.args[0], s.attrs['extent']

        def run(env):
            if not 0 <= env[index] < extent:      # worded as Program.check_errors words it
                where = f'\n{s.loc.render()}\n' if s.loc else ' '
                raise TaichiIndexError(f'{where}in kernel {self.name}: component index {env[index]} is out of '
                                       f'range for a vector or matrix axis of {extent} entries')
        return run

    def op_ndarray_shape(self, s):
        target, axis, wrap = s.attrs['target'], s.attrs['axis'], WRAP[s.dtype]

        def run(env):
            env[s] = wrap(env[target].extents[axis])
        return run

    def op_random(self, s):
        dtype = s.dtype
        if dtype.is_float:
            mantissa = 24 if dtype.bits == 32 else 53
            shift, scale = 64 - mantissa, 2.0 ** -mantissa

            def value(bits):
                return (bits >> shift) * scale
        else:
            value = WRAP[dtype]

        def run(env):
            rng = env[RNG]
            rng[0] = (rng[0] + GOLDEN) & M64
            env[s] = value(mix64(rng[0]))
        return run

    # --- run-time print and assert (engine/language/printing.py): text as native launches print it ---
    def op_print(self, s):
        fmt, values = s.attrs['format'], s.args

        def run(env):
            sys.stdout.write(fmt.render([env[v] for v in values]))
        return run

    def op_assert_fail(self, s):
        fmt, values = s.attrs['format'], s.args

        def run(env):
            raise printing.assertion_error(self.name, s.loc, fmt.render([env[v] for v in values]))
        return run

    # --- locals ----------------------------------------------------------------
    # A fresh, undefined cell each time the alloca runs: codegen hoists the slot out of loops,
    # but IR that relied on a value left there by an earlier iteration would be wrong.
    def op_alloca(self, s):
        def run(env):
            env[s] = [Undefined(s)]
        return run

    def op_local_load(self, s):
        cell = s.args[0]

        def run(env):
            env[s] = env[cell][0]
        return run

    def op_local_store(self, s):
        cell, value = s.args
        self.check_store(s, cell.dtype, value.dtype)

        def run(env):
            env[cell][0] = env[value]
        return run

    def op_local_atomic(self, s):
        cell, value = s.args
        rmw = self.rmw(s)

        def run(env):
            slot = env[cell]
            old = slot[0]
            slot[0] = rmw(old, env[value])
            env[s] = old
        return run

    def check_store(self, s, to, dtype):
        if (to.is_float, to.bits) != (dtype.is_float, dtype.bits):
            raise TaichiTypeError(f'IR: {s.op} of a {dtype} value into {to} storage')

    def rmw(self, s):
        """The read-modify-write of an atomic (codegen's _atomic / _serial_rmw)."""
        kind, dtype = s.attrs['kind'], s.dtype
        name = {'and': 'bit_and', 'or': 'bit_or', 'xor': 'bit_xor'}.get(kind, kind)
        if dtype.is_float and name.startswith('bit_'):
            raise TaichiTypeError(f'atomic_{kind} needs integer operands')
        if name not in ops.OPS:
            raise NotImplementedError(f'the IR interpreter does not know the atomic kind {kind!r}')
        return scalar_fn(name, dtype, dtype)

    # --- fields and ndarrays ---------------------------------------------------------
    def address(self, s):
        """A function env -> (flat array, offset) of the element `s` accesses (codegen's
        `address`), raising TaichiIndexError for an index out of range."""
        target, comp = s.attrs['target'], s.attrs['component']
        ndim = len(target.shape) if isinstance(target, Field) else target.ndim
        indices = s.args[:ndim]
        ncomp = math.prod(target.element_shape)

        def address(env):
            memory = env[target]
            offset = 0
            for a, extent in zip(indices, memory.extents):
                i = env[a]
                if not 0 <= i < extent:     # worded as Program.check_errors words it
                    index = tuple(env[a] for a in indices)
                    where = f'\n{s.loc.render()}\n' if s.loc else ' '
                    raise TaichiIndexError(f'{where}in kernel {self.name}: index {index} is out of range '
                                           f'for {memory.what} of shape {memory.extents}')
                offset = offset * extent + i
            return memory.flat, offset * ncomp + comp
        return address

    def op_global_load(self, s):
        address = self.address(s)

        def run(env):
            flat, offset = address(env)
            env[s] = flat.item(offset)
        return run

    def op_global_store(self, s):
        address, value = self.address(s), s.args[-1]
        self.check_store(s, s.attrs['target'].dtype, value.dtype)

        def run(env):
            flat, offset = address(env)
            flat[offset] = env[value]
        return run

    def op_atomic(self, s):
        address, value, rmw = self.address(s), s.args[-1], self.rmw(s)
        self.check_store(s, s.attrs['target'].dtype, value.dtype)

        def run(env):
            flat, offset = address(env)
            old = flat.item(offset)
            flat[offset] = rmw(old, env[value])
            env[s] = old
        return run

    # --- autodiff stacks: per task, as codegen's per-function stacks -------------------
    def op_stack_push(self, s):
        key, value = s.attrs['stack'], s.args[0]

        def run(env):
            env[STACKS].setdefault(key, []).append(env[value])
        return run

    def op_stack_pop(self, s):
        key = s.attrs['stack']

        def run(env):
            stack = env[STACKS].get(key)
            if not stack:
                raise self.error(IRError, s, f'{s!r} pops an empty autodiff stack')
            env[s] = stack.pop()
        return run

    # --- control flow ------------------------------------------------------------------
    def op_if(self, s):
        cond, then, other = s.args[0], self.block(s.attrs['then']), self.block(s.attrs['else'])

        def run(env):
            return _run(then if env[cond] else other, env)
        return run

    def op_while(self, s):
        body = self.block(s.attrs['body'])

        def run(env):
            while True:
                signal = _run(body, env)
                if signal in _LEAVE:
                    return _LEAVE[signal]
        return run

    def op_break(self, s):
        return lambda env: BREAK

    def op_continue(self, s):
        return lambda env: CONTINUE

    def op_return(self, s):
        if not s.args:
            return lambda env: RETURN
        values, offset, buffer = s.args, self.kernel.layout.ret_offset, self.buffer
        pack = struct.Struct('=' + ''.join(_scalar_format(v.dtype) for v in values)).pack_into

        def run(env):
            pack(buffer, offset, *[env[v] for v in values])
            return RETURN
        return run

    def op_for(self, s):
        if s.attrs['parallel'] and not self.in_task:
            return self.parallel_for(s)
        (begin, end), index = s.args, s.attrs['index']
        body = self.block(s.attrs['body'])
        to_i32 = None if begin.dtype is T.i32 else WRAP[T.i32]     # the index is an i32

        def run(env):
            for i in range(env[begin], env[end]):
                env[index] = i if to_i32 is None else to_i32(i)
                signal = _run(body, env)
                if signal in _LEAVE:
                    return _LEAVE[signal]
        return run

    def parallel_for(self, s):
        """Each iteration is a task: codegen's outlined loop body run on [i, i + 1)."""
        (begin, end), index = s.args, s.attrs['index']
        # kernel-scope locals the body reads travel by value, those it updates atomically by reference
        shared = shared_locals(s)
        private = [c for c in captured_values(s) if c.op == 'alloca' and c not in shared]
        self.in_task = True
        try:
            body = self.block(s.attrs['body'])
        finally:
            self.in_task = False
        uses_random, prog = self.uses_random, self.kernel.program

        def run(env):
            outer = [(c, env[c], env[c][0]) for c in private]
            stacks, rng = env[STACKS], env.get(RNG)
            try:
                for i in range(env[begin], env[end]):
                    for c, _, value in outer:
                        env[c] = [value]
                    env[STACKS] = {}
                    env[index] = i
                    if uses_random:
                        env[RNG] = seed(prog, i & M64)
                    _run(body, env)        # a signal left here ends the task
            finally:
                for c, cell, _ in outer:
                    env[c] = cell
                env[STACKS], env[RNG] = stacks, rng
        return run


_HANDLERS = {name[3:]: fn for name, fn in vars(_Compiler).items() if name.startswith('op_')}


# ----------------------------------------------------------------------------
# The kernel object the runtime launches

class InterpretedKernel(CompiledKernel):
    """A CompiledKernel whose `cfunc` is the interpreter: CompiledKernel.launch packs the
    arguments into the buffer (the interpreter reads scalars and writes the return value
    there), and the derived kernels (engine/runtime/pipeline.py) and access_summary work unchanged."""

    def __init__(self, kernel, layout, prog, body):
        verify(body)
        super().__init__(kernel, 0, layout, prog, body)     # address 0: there is no native code
        self.cfunc = self._execute
        self.check_errors = False           # errors are raised as they happen
        stmts = list(walk(body))
        self.targets = {s.attrs['target'] for s in stmts if 'target' in s.attrs}
        self.uses_random = any(s.op == 'random' for s in stmts)
        self._args = None
        compiler = _Compiler(self)
        with np.errstate(all='ignore'):     # constants rounded to f32 may overflow to inf
            self.code = compiler.block(body)
        self.constants = compiler.constants

    def launch(self, args):
        if ctx.capture is not None:    # replays are native: ti.capture runs the Python again
            ctx.capture.replayable = False
        self._args = args
        try:
            return super().launch(args)
        finally:
            self._args = None

    def _execute(self, fields_address, buffer_address, runtime_address):
        env = dict(self.constants)
        env.update((target, self._memory(target)) for target in self.targets)
        env[STACKS] = {}
        if self.uses_random:        # codegen's main: count the launch, seed with salt 2**32 - 1
            self.program.runtime_buffer[rt.RT_RNG_COUNTER] += 1
            env[RNG] = seed(self.program, 0xFFFFFFFF)
        with np.errstate(all='ignore'):     # f32 overflow gives inf silently, as native code does
            _run(self.code, env)

    def _memory(self, target):
        if isinstance(target, Field):
            if not target.placed:
                raise TaichiRuntimeError(f'field {target.name} is used before it was placed')
            return _Memory(target._data, len(target.shape), f'field {target.name}')
        array = _as_array(companion(self._args[target.index], target.path))   # or its .grad, .dual...
        return _Memory(array, target.ndim, f'ndarray argument {target.name}')
