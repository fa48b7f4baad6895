"""Which parallel loops LLVM's loop vectorizer should leave scalar (pass `scalar_gathers`).

A load whose index LLVM cannot write as base + stride * i (a clamped neighbour
`p[max(0, min(n - 1, i - 1)), j]`, a cell found from a position `v[int(x[i] / dx)]`, a
value read from another field) is a gather. When most of a loop's loads are gathers, the
vectorizer still widens it on this CPU family: every gather becomes lane-by-lane scalar
loads and inserts, the widened body runs out of registers and spills, and the loop runs
25-40% slower than the plain scalar one (stable_fluid's Jacobi sweep and its
semi-Lagrangian advection: docs/performance.md). Those
loops get `llvm.loop.vectorize.width 1` on their back edge: no widening, unrolling
(interleaving) still allowed. The metadata changes how the loop is scheduled, never what
an iteration computes.
"""
from llvmlite import ir as llir

from ...autodiff import rules
from ...ir.nodes import walk

# ops through which an index stays base + stride * i for LLVM's scalar evolution
AFFINE_OPS = frozenset({'add', 'sub', 'mul', 'neg', 'floordiv', 'mod', 'shl', 'shr', 'bit_and'})


def scalar_loops(body):
    """The parallel loops of a kernel whose loads are mostly gathers."""
    assigned = rules.single_assignments(body)
    return frozenset(s for s in walk(body) if s.op == 'for' and s.attrs['parallel'] and mostly_gathers(s, assigned))


def mostly_gathers(loop, assigned):
    """Whether at least half of the field loads of the loop's body (inner loops included)
    are gathers, and there is at least one."""
    loads = [s for s in walk(loop.attrs['body']) if s.op == 'global_load']
    gathers = sum(1 for s in loads if any(_gathered(x, assigned, {}) for x in s.args))
    return gathers > 0 and 2 * gathers >= len(loads)


def _gathered(x, assigned, seen):
    """Whether index x depends on a value LLVM cannot follow as an affine function of the
    loop indices: a float converted to int, a loaded value, a min, max or select."""
    x = rules.resolve(x, assigned)
    if id(x) in seen:
        return seen[id(x)]
    seen[id(x)] = False
    if x.op in ('global_load', 'min', 'max', 'select', 'local_load') or (
            x.op == 'cast' and x.args[0].dtype.is_float):
        result = x.op != 'local_load'     # a local written in the loop: unknown, not counted
    else:
        result = x.op in AFFINE_OPS and any(_gathered(a, assigned, seen) for a in x.args)
    seen[id(x)] = result
    return result


def scalar_loop_id(module):
    """The loop ID (self-referencing metadata) that keeps a loop's iterations unwidened."""
    width = module.add_metadata([llir.MetaDataString(module, 'llvm.loop.vectorize.width'), llir.IntType(32)(1)])
    node = module.add_metadata([width])
    node.operands = (node, width)
    return node
