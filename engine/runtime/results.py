"""A kernel's return value on a tape or in forward mode.

A kernel's return value is a plain number to Python: no gradient (or tangent) goes with it
into a later kernel that takes it as an argument. While a tape records or forward mode runs,
a float a kernel returns from differentiable inputs is a KernelResult, which remembers the
kernel, and a later launch refuses it as an argument instead of computing a gradient
silently without its path (docs/fields_and_gradients.md).
"""

import weakref

from ..autodiff.rules import READ
from ..core.context import ctx
from ..core.errors import AutodiffError
from ..language.fields import Field
from ..language.matrix import Matrix


class KernelResult(float):
    """A float a kernel returned while a tape recorded (or forward mode ran) from inputs
    with gradients (tangents). Arithmetic in Python keeps the mark; float(v) drops it."""
    __slots__ = ('origin',)

    def __reduce__(self):           # pickles, copies, sends as the plain float it is
        return float, (float(self),)

    def __repr__(self):
        return float.__repr__(self)


def _marked(value, origin):
    result = KernelResult(value)
    result.origin = origin
    return result


def _arithmetic(name):
    op = getattr(float, name)

    def method(self, *other):
        result = op(self, *other)
        if type(result) is float:
            origins = [self.origin] + [o.origin for o in other if isinstance(o, KernelResult)]
            return _marked(result, origins[0])
        return result
    method.__name__ = name
    return method


for _name in ('__add__', '__radd__', '__sub__', '__rsub__', '__mul__', '__rmul__', '__truediv__',
              '__rtruediv__', '__floordiv__', '__rfloordiv__', '__mod__', '__rmod__', '__pow__',
              '__rpow__', '__neg__', '__pos__', '__abs__'):
    setattr(KernelResult, _name, _arithmetic(_name))


class _Origin:
    """Where a KernelResult came from: the kernel, and the tape or forward mode it ran in."""
    __slots__ = ('kernel', 'modes')

    def __init__(self, kernel, modes):
        self.kernel, self.modes = kernel, tuple(weakref.ref(m) for m in modes)

    def live(self):
        """The modes of its launch still in effect (the gradient through it is still to come)."""
        return [m() for m in self.modes if m() is not None and m() in (ctx.tape, ctx.forward)]


def before_launch(kernel, compiled, args):
    """Before a launch while a tape records or forward mode runs (engine/runtime/kernels.py)."""
    for spec, value in zip(kernel.specs, args):
        if spec.kind in ('scalar', 'compound'):
            _refuse_results(kernel, spec.name, value)
    launching = getattr(ctx.forward, 'launching', None)
    if launching is not None:
        launching(compiled, args)


def _refuse_results(kernel, name, value):
    for number in _numbers(value):
        if not isinstance(number, KernelResult):
            continue
        live = number.origin.live()
        tape = ctx.tape
        if tape is not None and tape in live and tape.skips(kernel) and ctx.forward not in live:
            continue    # a no_grad launch: its results are constants to the tape anyway
        if live:
            source = number.origin.kernel
            what = 'its gradient' if ctx.tape in live else 'its tangent'
            raise AutodiffError(
                f'kernel {kernel.name}() gets argument {name!r} = {float(number)!r}, a value that kernel '
                f'{source}() returned inside this {"ti.ad.Tape" if ctx.tape in live else "ti.ad.FwdMode"}: '
                f'{what} would be lost, as a kernel\'s return value carries none to later kernels. '
                f'Write it to a 0-D field instead (`s = ti.field(float, shape=(), needs_grad=True)`, '
                f'`s[None] = ...` in {source}, `s[None]` read in {kernel.name}); or pass float(value) '
                f'if it is meant as a constant')


def check_written_value(owner, value):
    """A write from Python while a tape records or forward mode runs: a value a kernel
    returned in it would lose its gradient (tangent) in the field, as in a later launch."""
    for number in _numbers(value):
        if isinstance(number, KernelResult) and number.origin.live():
            mode = 'ti.ad.Tape' if ctx.tape in number.origin.live() else 'ti.ad.FwdMode'
            raise AutodiffError(
                f'{getattr(owner, "name", "an ndarray")} is written from Python with {float(number)!r}, a '
                f'value that kernel {number.origin.kernel}() returned inside this {mode}: its '
                f'derivative would be lost, as a kernel\'s return value carries none. Write it to the '
                f'field in {number.origin.kernel}() instead; or write float(value) if it is meant as a '
                f'constant')


ctx.check_written_value = check_written_value


def _numbers(value):
    """The floats in an argument (a scalar, a vector or matrix, a tuple or list of them)."""
    if isinstance(value, float):
        yield value
    elif isinstance(value, Matrix):
        for entry in value.entries:
            yield from _numbers(entry)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _numbers(item)


def returned(kernel, compiled, args, result):
    """A launch's return value while a tape records or forward mode runs: marked when it
    may depend on inputs with gradients (tangents)."""
    modes = []
    tape = ctx.tape
    if tape is not None and not tape.suspended and not tape.skips(kernel) and _reads(compiled, args, 'grad'):
        modes.append(tape)
    if ctx.forward is not None and not isinstance(ctx.forward, str) and _reads(compiled, args, 'dual'):
        modes.append(ctx.forward)
    if not modes:
        return result
    return _mark_numbers(result, _Origin(kernel.name, modes))


def _reads(compiled, args, role):
    for obj, kind, _, _ in compiled.access_summary().accesses:
        if kind != READ:
            continue
        if isinstance(obj, Field):
            other = getattr(obj, role)
            if other is not None and other.placed:
                return True
        elif getattr(args[obj.index], role, None) is not None:
            return True
    return False


def _mark_numbers(value, origin):
    if type(value) is float:
        return _marked(value, origin)
    if isinstance(value, Matrix):
        return Matrix._make(value.shape, [_mark_numbers(e, origin) for e in value.entries])
    if type(value) is tuple:
        return tuple(_mark_numbers(v, origin) for v in value)
    return value
