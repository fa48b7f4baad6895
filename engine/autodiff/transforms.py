"""Function transforms of ti.funcs, used inside kernels: ti.ad.grad, ti.ad.jvp, ti.ad.vjp.

    dfdx = ti.ad.grad(f)          # f: scalars / vectors / matrices -> scalar
    @ti.kernel
    def k() -> float:
        return dfdx(1.0)

At compile time the call inlines f once for its value, then once more per
tangent direction through the forward-mode pass (engine/autodiff/forward.py) with the
chosen inputs seeded: derivatives are exact and use the op table's rules, and
f may contain branches and loops. f must not write fields.
"""
from ..core import dtypes as T
from ..ir import ops
from ..core.errors import TaichiSyntaxError
from .forward import TangentPass
from ..language.frontend import Func
from ..ir.nodes import Block, walk
from ..language.matrix import Matrix


def _entries(value):
    """The scalars of a value: a scalar, a vector or matrix, or a tuple of them (a function
    that returns several values)."""
    if isinstance(value, (tuple, list)):
        return [e for v in value for e in _entries(v)]
    return list(value.entries) if isinstance(value, Matrix) else [value]


def _like(template, entries):
    """`entries` shaped as `template` (a scalar, a matrix, or a tuple of them)."""
    if isinstance(template, (tuple, list)):
        parts, start = [], 0
        for t in template:
            n = len(_entries(t))
            parts.append(_like(t, entries[start:start + n]))
            start += n
        return tuple(parts)
    return Matrix._make(template.shape, entries) if isinstance(template, Matrix) else entries[0]


def _is_differentiable(x):
    return isinstance(x, Matrix) or ops.is_value(x)


def _as_float_value(x):
    if isinstance(x, Matrix):
        return Matrix._make(x.shape, [_as_float_value(e) for e in x.entries])
    if ops.is_value(x):      # an integer value is differentiated as the float it converts to
        return x if x.dtype.is_float else ops.cast(x, T.defaults.fp)
    return ops.as_value(x, T.defaults.fp)


class _Transform:
    """A transformed ti.func; `apply` runs when a kernel being compiled calls it."""
    _kernel_transform = True

    def __init__(self, func, argnums=0):
        if not isinstance(func, Func):
            raise TypeError(f'ti.ad.{type(self).__name__.lower()} takes a ti.func, got {func!r}')
        numbers = argnums if isinstance(argnums, (tuple, list)) else (argnums,)
        if not numbers or not all(ops.is_integer(k) for k in numbers):
            raise TaichiSyntaxError(f'ti.ad.grad({func.fn.__name__}, argnums={argnums!r}): argnums is an '
                                    f'argument position or a tuple of them')
        self.func, self.argnums = func, argnums

    @property
    def label(self):
        return f'ti.ad.{type(self).__name__.lower()}({self.func.fn.__name__})'

    def no_keywords(self, kb, node, kwargs):
        if kwargs:
            raise kb.error(node, f'{self.label} takes positional arguments only; keyword arguments '
                                 f'({", ".join(kwargs)}) are not supported', TaichiSyntaxError)

    def __call__(self, *args, **kwargs):
        raise TaichiSyntaxError(f'ti.ad.{type(self).__name__.lower()}({self.func.fn.__name__}) '
                                f'can only be called from a kernel or a ti.func')

    def primal(self, kb, node, args):
        """Inline f once into a detached block; splice it in; return (block, output)."""
        block = Block()
        with kb.builder.open(block):
            out = kb.inline(node, self.func, args, {})
        for s in walk(block):
            if s.op in ('global_store', 'atomic'):
                raise kb.error(node, f'ti.ad transforms need a pure function: '
                                     f'{self.func.fn.__name__} writes a field')
            if s.op == 'random':
                raise kb.error(node, f'ti.ad transforms need a pure function: {self.func.fn.__name__} calls '
                                     f'ti.random(), and each direction would draw different numbers '
                                     f'(draw them in the kernel and pass them in)')
        if out is None:
            raise kb.error(node, f'{self.func.fn.__name__} returns nothing to differentiate')
        kb.builder.block.stmts.extend(block.stmts)
        return block, out

    def directional(self, kb, block, out, seeds):
        """Tangents of f's outputs for the input tangents `seeds` {input value: tangent}."""
        tp = TangentPass(out=kb.builder, tangent=seeds).reusing(block)
        tp.copy_block(block)
        zero = ops.const(0, T.defaults.fp)
        return [tp.tangent.get(o, zero) if ops.is_value(o) else zero for o in _entries(out)]

    def float_args(self, args):
        return [_as_float_value(a) if isinstance(a, Matrix) or ops.is_number(a) or ops.is_value(a) else a
                for a in args]


class Grad(_Transform):
    """ti.ad.grad(f, argnums=0): the gradient of scalar-valued f w.r.t. argument `argnums`."""

    def apply(self, kb, node, args, kwargs):
        """The gradient w.r.t. argument `argnums`, or a tuple of them for a tuple of positions."""
        self.no_keywords(kb, node, kwargs)
        several = isinstance(self.argnums, (tuple, list))
        positions = tuple(self.argnums) if several else (self.argnums,)
        for k in positions:
            if not -len(args) <= k < len(args):
                raise kb.error(node, f'{self.label}: argnums {k} is out of range for {len(args)} argument(s)',
                               TaichiSyntaxError)
        args = self.float_args(args)
        for k in positions:
            if not _is_differentiable(args[k]):
                raise kb.error(node, f'{self.label}: argument {k} is a {type(args[k]).__name__}, not a scalar, '
                                     f'vector or matrix to differentiate with respect to', TaichiSyntaxError)
        block, out = self.primal(kb, node, args)
        if isinstance(out, (tuple, list)):
            raise kb.error(node, f'ti.ad.grad needs a scalar-valued function; {self.func.fn.__name__} returns '
                                 f'{len(out)} values (use ti.ad.jvp or ti.ad.vjp)', TaichiSyntaxError)
        if isinstance(out, Matrix):
            raise kb.error(node, f'ti.ad.grad needs a scalar-valued function; '
                                 f'{self.func.fn.__name__} returns a {out.shape} matrix (use ti.ad.vjp)')
        results = []
        for k in positions:
            wrt = args[k]
            grads = []
            for x in _entries(wrt):
                grads.append(self.directional(kb, block, out, {x: ops.const(1, x.dtype)})[0])
            results.append(_like(wrt, grads))
        return tuple(results) if several else results[0]


class Jvp(_Transform):
    """ti.ad.jvp(f)(primals, tangents) -> (f(*primals), J . tangents)."""

    def apply(self, kb, node, args, kwargs):
        self.no_keywords(kb, node, kwargs)
        if len(args) != 2:
            raise kb.error(node, 'ti.ad.jvp(f) takes (primals, tangents)')
        primals, tangents = (a if isinstance(a, tuple) else (a,) for a in args)
        if len(primals) != len(tangents):
            raise kb.error(node, f'{self.label}: {len(primals)} primal(s) but {len(tangents)} tangent(s)',
                           TaichiSyntaxError)
        primals = self.float_args(primals)
        block, out = self.primal(kb, node, primals)
        seeds = {}
        for x, t in zip(primals, tangents):
            for xe, te in zip(_entries(x), _entries(t)):
                seeds[xe] = ops.as_value(te, xe.dtype)
        return out, _like(out, self.directional(kb, block, out, seeds))


class Vjp(_Transform):
    """ti.ad.vjp(f)(primals, cotangent) -> (f(*primals), cotangent^T J per input)."""

    def apply(self, kb, node, args, kwargs):
        self.no_keywords(kb, node, kwargs)
        if len(args) != 2:
            raise kb.error(node, 'ti.ad.vjp(f) takes (primals, cotangent)')
        single = not isinstance(args[0], tuple)
        primals = self.float_args((args[0],) if single else args[0])
        cotangent = _entries(args[1])
        block, out = self.primal(kb, node, primals)
        if len(cotangent) != len(_entries(out)):
            raise kb.error(node, f'{self.label}: the cotangent has {len(cotangent)} entries, the function\'s '
                                 f'output {len(_entries(out))} (one cotangent per output, a tuple for several)',
                           TaichiSyntaxError)
        results = []
        for x in primals:
            entries = []
            for xe in _entries(x):
                column = self.directional(kb, block, out, {xe: ops.const(1, xe.dtype)})
                total = ops.const(0, xe.dtype)
                for c, d in zip(cotangent, column):
                    total = total + c * d
                entries.append(total)
            results.append(_like(x, entries))
        return out, results[0] if single else tuple(results)


def grad(func, argnums=0):
    return Grad(func, argnums)


def jvp(func):
    return Jvp(func)


def vjp(func):
    return Vjp(func)
