"""The compile pipeline: a kernel's Python source to loaded native code, stage by stage.

    build       Python AST -> IR (engine/language/frontend/)
    simplify    store forwarding, constant folding, CSE, dead code (engine/ir/simplify.py)
    jumps       break/continue -> guard flags, for the reverse pass (engine/autodiff/jumps.py)
    reverse     the adjoint kernel (engine/autodiff/reverse.py), or
    forward     the primal + tangent kernel (engine/autodiff/forward.py)
    lower       IR -> LLVM IR (engine/backend/cpu/codegen.py)
    compile     LLVM IR -> object code -> loaded (engine/backend/cpu/jit.py; the disk cache is
                engine/backend/cache.py)

`compile_kernel` runs them for a kernel's first launch; `adjoint_of`, `tangents_of`,
`no_grad_adjoint_of` and `checked_of` derive the other kernels from the primal IR on
first use. Each stage's IR is verified (debug mode, $ENGINE_VERIFY_IR) and printed
(`ti.init(print_ir=True)`, $ENGINE_PRINT_IR).
"""
import contextlib
import itertools
import os
import sys
import time

from ..backend import cache
from ..backend.cpu import codegen, jit, ordering, threadpool
from ..autodiff import forward, jumps, reverse
from ..ir import printer, simplify, verify
from . import profiler
from ..language.abi import ArgLayout
from ..core import passes
from ..core.errors import TaichiSyntaxError
from ..language.fields import Field
from ..language.frontend import KernelBuilder
from ..backend.interpret import InterpretedKernel
from ..backend.launch import CompiledKernel

_symbol_ids = itertools.count()
compile_count = 0   # kernels compiled by LLVM in this process (tests check laziness with it)
compile_seconds = 0.0   # time spent building kernels (compiling or loading from the cache)
_loaded = {}        # cache key -> address of code already loaded in this process


# --- the stages ------------------------------------------------------------------------
def compile_kernel(kernel, args, prog):
    """The primal kernel for these arguments: built, simplified, lowered and compiled."""
    layout = ArgLayout(kernel.specs, args, kernel.return_type)
    with too_deep_for_the_compiler(kernel.name):
        body = stage(prog, kernel.name, 'build', _build(kernel, layout))
        # The interpreter, a second oracle, runs the IR as built; so does debug mode, whose
        # checks name the line of each statement (a merged one has its first line).
        if not (prog.config.interpret or prog.config.debug) and passes.enabled('simplify'):
            body = stage(prog, kernel.name, 'simplify', simplify.simplify(body))
    return lower_and_load(kernel, body, layout, prog)


def derive(compiled, kind, shadow=()):
    """A kernel derived from a compiled primal's IR, same arguments: 'adjoint', 'no_grad'
    (the adjoint of a no_grad launch), 'tangents' (forward mode) or 'checked' (shadow
    words for the rules)."""
    name, body = compiled.kernel.name, compiled.body
    with too_deep_for_the_compiler(name + SUFFIXES[kind]):
        if kind in ('adjoint', 'no_grad'):
            body = stage(compiled.program, name, 'jumps', jumps.without_jumps(body))
            body = stage(compiled.program, name, 'reverse',
                         reverse.adjoint_of_jump_free(body, constant=kind == 'no_grad'))
        elif kind == 'tangents':
            body = stage(compiled.program, name, 'forward', forward.tangent_kernel(body))
    return lower_and_load(compiled.kernel, body, compiled.layout, compiled.program, kind, shadow)


def lower_and_load(kernel, body, layout, prog, kind='primal', shadow=()):
    """IR -> loaded native code (from the disk cache when there), wrapped for launching;
    with ti.init(interpret=True), the interpreter instead."""
    global compile_seconds
    suffix = SUFFIXES[kind]
    if prog.config.interpret:       # no native code, no disk cache
        return profiler.instrument(InterpretedKernel(kernel, layout, prog, body), suffix)
    threadpool.install_for(prog)    # the pool starts with a program's first kernel (not compile time)
    start = time.perf_counter()
    with too_deep_for_the_compiler(kernel.name + suffix):
        address = _load_or_compile(f'{kernel.name}{suffix}', body, layout, prog, shadow)
    compile_seconds += time.perf_counter() - start
    compiled = CompiledKernel(kernel, address, layout, prog, body, kernel.name + LABELS[kind])
    compiled.check_errors |= kind == 'checked'
    return profiler.instrument(compiled, suffix)


SUFFIXES = {'primal': '', 'adjoint': '_grad', 'no_grad': '_nograd', 'tangents': '_fwd', 'checked': '_checked'}
# how errors name the kernels derived from a user's kernel
LABELS = {'primal': '', 'adjoint': ' (its adjoint)', 'no_grad': ' (its adjoint)',
          'tangents': ' (its forward-mode tangent)', 'checked': ''}


def stage(prog, name, what, body):
    """After a stage: verify its IR (debug mode, $ENGINE_VERIFY_IR) and print it
    (ti.init(print_ir=True), $ENGINE_PRINT_IR)."""
    verify.check(body, f'of {name} after {what}', always=prog.config.debug)
    if prog.config.print_ir or PRINT_EVERY_STAGE:
        print(f'kernel {name}, after {what}:\n{printer.text(body, indent=1)}')
    return body


PRINT_EVERY_STAGE = os.environ.get('ENGINE_PRINT_IR', '') not in ('', '0')


def _build(kernel, layout):
    builder = KernelBuilder(kernel.source)
    builder.return_type = kernel.return_type
    return builder.build(layout.bind_params)


# --- the kernels derived from a primal, each built on first use ------------------------
def adjoint_of(compiled):
    """The adjoint kernel, built again when a .grad has been placed since (the old one
    would drop its contributions)."""
    epoch = compiled.program.grad_epoch
    if compiled.adjoint is None or compiled.adjoint[0] != epoch:
        compiled.adjoint = (epoch, derive(compiled, 'adjoint'))
    return compiled.adjoint[1]


def no_grad_adjoint_of(compiled):
    """The backward pass of a no_grad launch: its stores end the gradient of what they
    overwrote (their values are constants to the tape), nothing flows into its inputs."""
    epoch = compiled.program.grad_epoch
    if compiled.constant_adjoint is None or compiled.constant_adjoint[0] != epoch:
        compiled.constant_adjoint = (epoch, derive(compiled, 'no_grad'))
    return compiled.constant_adjoint[1]


def tangents_of(compiled):
    """The kernel in forward mode (primal and tangents), built again when a .dual has been
    allocated since (its tangents must not be dropped)."""
    epoch = compiled.program.dual_epoch
    if compiled.tangents is None or compiled.tangents[0] != epoch:
        compiled.tangents = (epoch, derive(compiled, 'tangents'))
    return compiled.tangents[1]


def checked_of(compiled, targets):
    """The kernel with shadow words for `targets`, the fields and ndarray arguments it may
    access against the rules (engine/autodiff/rules.py)."""
    key = tuple(targets)
    if compiled.checked is None or compiled.checked[0] != key:
        compiled.checked = (key, derive(compiled, 'checked', shadow=key))
    return compiled.checked[1]


def launch_checked(compiled, args, targets):
    """A launch that reports the first rule broken inside it (an AutodiffRuleError);
    arguments naming one array share its shadow words."""
    return compiled.launch_with_shadows(checked_of(compiled, targets), args, targets)


# --- compiling -------------------------------------------------------------------------
@contextlib.contextmanager
def too_deep_for_the_compiler(name):
    """The compiler walks expressions and ti.func calls recursively: one nested more deeply
    than Python's recursion limit allows is a clear error, not a RecursionError from inside."""
    try:
        yield
    except RecursionError:
        raise TaichiSyntaxError(f'kernel {name} nests too deeply to compile (Python\'s recursion limit, '
                                f'{sys.getrecursionlimit()}, was reached): split long expressions into '
                                f'several statements') from None


def _load_or_compile(name, body, layout, prog, shadow=()):
    """The entry address of the kernel's native code. With a cache key, the symbol names
    derive from the key, so an entry compiled by another process loads unchanged."""
    global compile_count
    config = prog.config
    # a checked build's shadow slots are part of its code (codegen.shadow_access)
    kind = name + ''.join(f'|f{t.id}' if isinstance(t, Field) else f'|a{t.index}' for t in shadow)
    kind += '' if config.check_bounds else '|unchecked'
    kind += f'|chunks-of-{ordering.CHUNK_MIN}' if config.deterministic else '|any-order'
    kind += ''.join(sorted(f'|no-{name}' for name in config.disable_passes))
    kind += '|fast-math' if config.fast_math else ''
    key = None if config.debug or not config.offline_cache else cache.key(kind, body, layout.ret_offset)
    if key is not None and key in _loaded:
        return _loaded[key]
    symbol = f'{name}_{key[:24]}' if key else f'{name}_{next(_symbol_ids)}'
    entry = codegen.KernelModule.main_symbol_of(symbol)
    obj = cache.load(config.cache_dir or cache.default_dir(), key) if key else None
    if obj is None:
        llvm_ir, entry = codegen.generate(symbol, body, layout.ret_offset, config.debug, prog, shadow,
                                          config.check_bounds)
        obj = jit.compile_ir(llvm_ir)
        compile_count += 1
        if key:
            cache.store(config.cache_dir or cache.default_dir(), key, obj)
    address = jit.load_object(obj, [entry])[entry]
    if key:
        _loaded[key] = address
    return address
