"""Random differentiable programs for property-based autodiff tests, drawn with hypothesis.

`case_source()` draws one *case*: the source of a Python module whose `build(F)` defines
several kernels over the fields of F (made by tests/test_autodiff_properties.py) and
returns `run(mode)`, which launches them in order. A case holds about 22 *programs*
(`case_source(hessian=True)`: about 10, and its Hessians are checked too): a program is the
code that computes one output row (y[c, :], o[q, :], yf[r, :], ya, z or loss) from the
inputs x (N), X (N x N), z (0-D) and the ndarray xa (N). Programs share top-level loops: a
parallel loop costs far more to compile than the statements in it.

What the programs are made of:
- mutable float locals v, w, p, q carried through branches and serial loops; tuple
  assignments and swaps (`p, q = q, p + q`, `p, q = q, p`), explicit temporaries
  (`t = p + q; p = q; q = t`), so locals are stored after their last read in a loop body;
- a 2-vector u and a 2x2 matrix M carried across loops (@, dot, norm of vectors that may be
  exactly zero, transpose, rotation, determinant, trace, component stores);
- serial loops (nested) whose trip counts are constants or read at run time from the
  integer field cnt, the integer ndarray ca or the argument m, forward or reversed, and
  ti.static loops; bounded `while` loops, `break` and `continue` on data;
- `a if c else b` (only the side taken is evaluated: it guards out-of-range reads such as
  `x[i - 1] if i > 0 else 0.5`), ti.select, short-circuit `and` / `or` guarding a read,
  and functions that are singular off the path taken (sqrt / log of a negative number,
  1 / 0) behind a select or a branch: an untaken path must never make a gradient NaN;
- `@ti.func`s with early returns inside `if`, called from the kernels, also on carried locals
  whose value they update (`v = 0.5 * v + 0.5 * ti.tanh(f0(v, w))`, `v, w = ti.tanh(f0(w, v)), v`),
  with run-time vector components as arguments;
- locals read before `break` / `continue` and used after it (`rb = x[i]; if rb > 0.5: continue;
  v += rb * ...`), in serial inner loops and (`continue`) in the top-level parallel loops,
  whose last program may skip the rest of an iteration; serial loops of 16-24 trips (constant
  or run-time, `range(cnt[i] + 16)`) with that pattern: LLVM vectorizes loops in chunks of 8
  and 16, which loops of N = 3 never reach;
- top-level loops over the field xw of NW entries (NW in WIDE_SIZES, mostly >= 17): `range(nw)`,
  struct-for, serialized, run-time `range(m + nw - 2)`, writing rows of yw (the loss reads
  them; xw's gradient is checked by the dot-product test of test_autodiff_properties.py);
- a carried int local kc in [0, 3] changed on data or in loop bodies (`kc = (kc + 1) % 4`)
  and the counters of finished `while` loops, used as trip counts (`for k2 in range(kc):`,
  also inside the loop that changes kc) and as run-time indices;
- `while` loops bounded by a counter (`it < 4`, `it < kc + 1`) whose conditions read fields at
  the counter, carried locals, matrices and run-time components
  (`while it < 4 and (v < x[(i + it) % n] + 0.5):`, `... and (ti.Vector([v, X[it % n, i], p])[it % 3] > 0.5)`);
- run-time components of local vectors and matrices in expressions and conditions
  (`if ti.Vector([a, a * 2.0, b])[kc % 3] > 0.1:`, `M[kc % 2, 1]`, `u[it % 2]`);
- ti.pow and ** (`ti.pow(ti.tanh(v), 3)`, `ti.tanh(v) ** 2`, `ti.pow(ti.tanh(v) ** 2 + 0.5, 2.5)`,
  `v = ti.tanh(v ** 3 + w)`) on carried locals, also in loops of run-time trip counts and on
  matrix entries; bounded by tanh or positive bases;
- the 2x2 matrix M updated in branches: a component store (also at a run-time row) in the
  `if`, a whole-matrix update in the `else`; M read in `while` conditions;
- several top-level loops per kernel (1-D `range`, struct-for over a field, 2-D ndrange
  and struct-for over X (`for i, j in X:`, with all of the above), serialized loops) whose accesses are transposed or shifted
  (X[i, j] and X[j, i], x[(i + 1) % n]), scatters into other iterations' elements, and
  intermediate rows h[c, :] written by one loop and read, shifted, by later loops;
- overwrites with a well-defined answer: a plain store to an output after accumulations
  into it, several stores to one element (also inside loops), a later top-level loop that
  stores over an accumulated row, and chains of kernels on one tape that each store to
  the same element (no read of it in between): the derivative is that of the last write;
- a 0-D field z read by the main kernel, accumulated into by a later kernel and read again
  by the loss (the tape must restore it for the backward pass, also for Hessians);
- ndarray arguments: xa (differentiable input), ca (trip counts), ya (an output written by
  a reverse-only kernel: ndarrays have no forward-mode tangent);
- a forward-only kernel: the old value returned by ti.atomic_add (in a serialized loop: the
  engine refuses it in a parallel one), a kernel-scope local accumulated in a parallel loop
  (reverse mode refuses both with an AutodiffError, so this kernel is checked in forward mode
  and by finite differences only).

Domains stay safe for finite differences: smooth functions of bounded growth, log and sqrt
of E*E + 1, exp of tanh, singular functions only where a guard with a margin keeps them
off; comparisons on data switch branches at a few isolated points, which the checker
detects by comparing step sizes and counts.

`race_source()` draws kernels over large N with transposed and shifted accesses in
parallel loops, for the two-thread race check (test_parallel_adjoints_do_not_race).
"""
import os

from hypothesis import strategies as st

# Constructs left out while a known engine bug is open (development only; the normal run
# leaves out nothing): early_return, zero_norm (norms of zero vectors, singular functions on
# the untaken side), overwrite (stores over stores / accumulations, chains of kernels),
# atomic_old, reduction (forward-only kernel), bump (0-D read, then accumulated), hessian,
# ifexp (conditional expressions, short-circuit guards), carried (swaps, tuples, temporaries),
# vectors, two_d (2-D parallel loops), kernel_scope, funcs; and skip_read (a local read before
# `break` / `continue` and used after it, `continue` in top-level loops), wide (top-level loops
# over the NW-entry field xw, serial loops of 16-24 trips), while_fields (`while` conditions on
# fields, carried locals, matrices, vectors indexed by the counter), int_trips (carried int
# locals and while counters as trip counts), runtime_index (run-time components of local
# vectors and matrices), pow (ti.pow / ** on carried locals), func_carried (ti.func calls that
# update carried locals), matrix_branch (2x2 matrices updated in if / else).
EXCLUDE = frozenset(filter(None, os.environ.get('AUTODIFF_GRAMMAR_EXCLUDE', '').split(',')))


def _on(construct):
    return construct not in EXCLUDE


N = 3                     # x has N entries, X is N x N
CONSTANTS = ['0.5', '-1.25', '2.0', '0.3', '-0.7', '1.5', 'sc']
THRESHOLDS = ['0.5', '-0.3', '0.1', '0.8', '-0.9', '1.2']
UNARY = ['ti.sin({0})', 'ti.cos({0})', 'ti.tanh({0})', 'ti.sqrt(({0}) ** 2 + 1.0)',
         'ti.log(({0}) ** 2 + 1.0)', 'ti.exp(ti.tanh({0}))', 'ti.atan2({0}, 2.0)', '(-{0})',
         '(0.5 * {0})']
BINARY = ['({0} + {1})', '({0} - {1})', '({0} * {1})', '({0} / (({1}) ** 2 + 1.0))',
          'ti.Vector([{0}, {1}]).dot(ti.Vector([0.3, 0.5]))', 'ti.Vector([{0}, {1}]).norm_sqr()',
          'ti.Vector([{0}, {1}]).norm()', 'ti.max({0}, {1})', 'ti.min({0}, {1})',
          '(ti.Matrix([[{0}, 0.5], [-0.5, 1.0]]) @ ti.Vector([{1}, 0.7]))[1]']
# Exactly-zero vectors under a norm, and functions that are singular on the side not taken:
# their derivative must be 0 (FD says so), never NaN.
GUARDED = ['ti.Vector([{g} - {g}, 0.0]).norm()',
           '(ti.Vector([{g}, {1}]) - ti.Vector([{g}, {1}])).norm()',
           'ti.select({g} > 0.1, ti.sqrt({g}), {0})',
           'ti.select({g} > 0.1, ti.log({g}), {0})',
           'ti.select(ti.abs({g}) > 0.2, 1.0 / {g}, {0})',
           '(ti.sqrt({g}) if {g} > 0.1 else {0})',
           '(ti.log({g}) if {g} > 0.1 else {1})',
           'ti.select({g} > 0.3, ti.Vector([{g}, 0.0]), ti.Vector([0.0, 0.0])).norm()',
           'ti.select({g} > 0.1, {g} ** 0.5, 0.0)']
MUTABLE = ('v', 'w', 'p', 'q')
# ti.pow and ** of bounded arguments (tanh, positive bases): finite differences stay valid
POW = ['ti.pow(ti.tanh({0}), 3)', 'ti.tanh({0}) ** 2', 'ti.pow(0.75 + 0.5 * ti.tanh({0}), 2.5)',
       '(0.5 * ti.tanh({0})) ** 3', 'ti.pow(ti.tanh({0}) ** 2 + 0.5, 1.5)']
# ... and on carried locals themselves, in place ({0} the local, {1} another one)
POW_UPDATES = ['{0} = ti.tanh(ti.pow({0}, 3))', '{0} = ti.tanh({0} ** 2) - 0.5 * {0}',
               '{0} = ti.pow(ti.tanh({0}) ** 2 + 0.5, 2.5) - 1.0', '{0} *= ti.pow(0.75 + 0.2 * ti.tanh({1}), 2.5)',
               '{0} = ti.tanh({0} ** 3 + {1})', '{0} = 0.5 * ti.tanh({0}) ** 2 + 0.3 * ti.tanh({1})',
               '{0} += 0.2 * ti.pow(ti.tanh({1}), 3)', '{0} = ti.tanh({0} ** 2 + 0.5 * {0} ** 3)']
LONG_TRIPS = ('16', '17', '19', '24')     # LLVM vectorizes loops in chunks of 8 / 16
WIDE_SIZES = (5, 16, 17, 17, 19, 24, 33)     # entries of xw (NW): the size of the wide top-level loops
MATRIX_UPDATES = ['M = ti.Matrix([[{0}, {1}], [0.5, {0}]])',
                  'M = M @ ti.Matrix([[ti.cos({0}), -ti.sin({0})], [ti.sin({0}), ti.cos({0})]])',
                  'M = M.transpose() + ti.Matrix([[{0}, 0.0], [0.0, {1}]]) * 0.5',
                  'M += u.outer_product(ti.Vector([{0}, 0.3])) * 0.25',
                  'M = 0.5 * M + 0.5 * ti.Matrix([[{1}, {0}], [{0}, {1}]])']


class Env:
    """What code at one position may use: names, reads, loop variables, the output."""

    def __init__(self, **kw):
        self.scalars = ()       # readable float names
        self.mutable = ()       # assignable float names
        self.vectors = False    # the 2-vector u and 2x2 matrix M are defined
        self.reads = ()         # float reads valid here (field and ndarray elements)
        self.ints = ()          # integer expressions valid here
        self.trips = ('1', '2', '3')
        self.index = None       # the parallel loop index (for guarded reads), if any
        self.out = None         # the output element this program writes
        self.stores = False     # the program owns `out` (plain stores allowed)
        self.in_loop = False    # break / continue allowed
        self.loop_depth = 0
        self.depth = 2          # nesting budget for if / loops
        self.funcs = ()
        self.in_func = False
        self.ndarray = False    # the kernel has the ndarray argument xa
        self.plain = False      # smooth arithmetic only (no guards, selects, vectors, funcs)
        self.names = None       # shared counter for fresh temporaries
        self.kernel_scope = False   # code outside any loop: a `for` here is a top-level loop
        self.int_mutable = ()   # assignable int locals (carried, in [0, 3]: trip counts too)
        self.top_jump = False   # directly in a top-level loop: `continue` allowed
        self.long = False       # in a serial loop of 16-24 trips: no exponential growth (fib)
        self.wide = False       # the program's loop runs over xw (NW entries)
        self.__dict__.update(kw)

    def but(self, **kw):
        env = Env(**self.__dict__)
        env.__dict__.update(kw)
        return env

    def fresh(self, prefix):
        self.names[prefix] = self.names.get(prefix, 0) + 1
        return f'{prefix}{self.names[prefix]}'


def _pick(draw, items):
    return draw(st.sampled_from(list(items)))


@st.composite
def leaf(draw, env):
    kind = draw(st.integers(0, 9))
    if kind <= 4 and env.scalars:
        return _pick(draw, env.scalars)
    if kind <= 6 and env.reads:
        return _pick(draw, env.reads)
    if kind == 7 and env.vectors:
        return _pick(draw, ['u[0]', 'u[1]', 'M[0, 1]', 'M[1, 0]', 'M[0, 0]'])
    if kind == 8 and env.loop_depth:
        return f'(0.3 * k{draw(st.integers(1, env.loop_depth))})'
    return _pick(draw, CONSTANTS[:3] + (['sc'] if 'sc' in env.scalars else []))


@st.composite
def expression(draw, env, depth=2):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(leaf(env))
    kind = draw(st.integers(0, 14 if env.plain else 21))
    sub = expression(env, depth - 1)
    if kind == 20:      # a run-time component of a local vector (or of u, M)
        ints = env.ints + env.int_mutable
        if ints and _on('runtime_index'):
            k = _pick(draw, ints)
            if env.vectors and draw(st.booleans()):
                return _pick(draw, [f'u[{k} % 2]', f'M[{k} % 2, 1]', f'M[({k} + 1) % 2, {k} % 2]'])
            return f'ti.Vector([{draw(sub)}, {draw(sub)} * 2.0, {draw(sub)}])[{k} % 3]'
        kind = 0
    if kind == 21:
        if _on('pow'):
            return _pick(draw, POW).format(draw(sub))
        kind = 0
    if kind < 8:
        return _pick(draw, UNARY).format(draw(sub))
    if kind < 15 or kind >= 17 and not _on('zero_norm') or kind in (15, 16) and not _on('ifexp'):
        return _pick(draw, BINARY).format(draw(sub), draw(sub))
    if kind < 17:
        cond = draw(condition(env))
        if draw(st.booleans()):
            return f'({draw(sub)} if {cond} else {draw(sub)})'
        return f'ti.select({cond}, {draw(sub)}, {draw(sub)})'
    if kind == 17 and env.vectors:
        return _pick(draw, ['u.dot(ti.Vector([{0}, {1}]))', '(M @ u).norm()', 'u.norm()',
                            '(M.transpose() @ ti.Vector([{0}, {1}]))[0]', 'M.determinant()',
                            '(M @ M.transpose()).trace()', '(u * {0}).sum()'] +
                           (['(u - u).norm()'] if _on('zero_norm') else [])).format(draw(sub), draw(sub))
    if kind == 18 and env.funcs:
        return f'{_pick(draw, env.funcs)}({draw(sub)}, {draw(sub)})'
    # the guard's operand is a variable or a read: constant operands are folded at compile time
    operands = [a for a in env.scalars if a != 'sc'] + list(env.reads)
    if not operands:
        return _pick(draw, BINARY).format(draw(sub), draw(sub))
    return _pick(draw, GUARDED).format(draw(sub), draw(sub), g=_pick(draw, operands))


@st.composite
def condition(draw, env):
    kind = draw(st.integers(0, 8))
    if kind == 4 and not _on('ifexp'):
        kind = 0
    ints = env.ints + env.int_mutable
    if kind == 7 and ints and _on('runtime_index'):     # `ti.Vector([a, a * 2, b])[w % 3] > 0.1`
        k = _pick(draw, ints)
        a = draw(expression(env, 1))
        return (f'ti.Vector([{a}, {a} * 2.0, {draw(expression(env, 1))}])[{k} % 3] '
                f'{_pick(draw, [">", "<"])} {_pick(draw, THRESHOLDS)}')
    if kind == 8 and env.vectors and _on('matrix_branch'):
        forms = ['M[0, 1] > {t}', 'M.determinant() > {t}', 'u[1] < {t}', '(M @ u)[0] > {t}']
        if ints and _on('runtime_index'):
            k = _pick(draw, ints)
            forms += [f'M[{k} % 2, 0] < {{t}}', f'u[{k} % 2] > {{t}}', f'M[1, ({k} + 1) % 2] > {{t}}']
        return _pick(draw, forms).format(t=_pick(draw, THRESHOLDS))
    if kind >= 7:
        kind = 0
    if kind <= 2 or not env.ints:
        op = _pick(draw, ['>', '<'])
        return f'{draw(expression(env, 1))} {op} {_pick(draw, THRESHOLDS)}'
    if kind == 3:
        a, b = _pick(draw, env.ints), _pick(draw, env.ints)
        return _pick(draw, [f'({a} + {b}) % 2 == 0', f'{a} > {b}', f'{a} != 1'])
    if kind == 4 and env.index is not None:     # short-circuit `and` / `or` guarding a read
        i = env.index
        return _pick(draw, [f'({i} > 0 and x[{i} - 1] > {_pick(draw, THRESHOLDS)})',
                            f'({i} + 1 >= n or x[{i} + 1] < {_pick(draw, THRESHOLDS)})',
                            f'({i} + 1 < n and X[{i}, {i} + 1] > {_pick(draw, THRESHOLDS)})'])
    if kind == 5:
        return f'not ({draw(expression(env, 1))} > {_pick(draw, THRESHOLDS)})'
    return (f'({draw(expression(env, 1))} > {_pick(draw, THRESHOLDS)} '
            f'{_pick(draw, ["and", "or"])} {draw(expression(env, 1))} < {_pick(draw, THRESHOLDS)})')


def _loop_reads(env, k):
    """Reads that use the loop variable k (always in range, or guarded)."""
    reads = [f'x[{k} % n]'] + ([f'xa[{k} % n]'] if env.ndarray else []) + \
        ([f'(x[{k}] if {k} < n else 0.5)'] if _on('ifexp') else [])
    if env.index is not None:
        i = env.index
        reads += [f'X[{i}, {k} % n]', f'X[{k} % n, {i}]', f'x[({i} + {k}) % n]']
        if _on('ifexp'):
            reads.append(f'(X[{i}, {k} - 1] if {k} > 0 and {k} <= n else {i} * 0.1)')
    return reads


@st.composite
def statements(draw, env, indent):
    lines = []
    pad = ' ' * indent
    for _ in range(draw(st.integers(1, 3 if env.depth == 2 else 2))):     # nested blocks are shorter
        kinds = ['assign', 'assign', 'add', 'scale'] + (['tuple'] if _on('carried') else []) + \
            (['ifexp'] if _on('ifexp') else [])
        if len(env.mutable) >= 2 and _on('carried'):
            kinds += ['swap'] + ([] if env.long else ['fib', 'fib', 'temp'])
        if env.depth:
            kinds += ['if', 'loop', 'loop', 'while']
            if _on('while_fields'):
                kinds += ['while']
            if _on('wide') and not env.in_func and not env.kernel_scope:
                kinds += ['long']
        if env.in_loop:
            kinds += ['break', 'continue']
        if env.top_jump and not env.in_loop and _on('skip_read'):
            kinds += ['continue']
        if (env.in_loop or env.top_jump) and _on('skip_read'):
            kinds += ['skip', 'skip']
        if env.vectors:
            kinds += ['vector', 'matrix', 'from_vector']
            if env.depth and _on('matrix_branch'):
                kinds += ['matrix_if', 'matrix_if']
        if env.int_mutable and _on('int_trips'):
            kinds += ['int_update']
        if _on('pow') and env.mutable:
            kinds += ['pow', 'pow']
        if env.funcs and _on('func_carried'):
            kinds += ['call', 'call']
        if env.out is not None:
            kinds += ['out', 'out']
        if env.in_func and not env.in_loop and _on('early_return'):
            kinds += ['return']
        kind = _pick(draw, kinds)
        e = lambda d=2: draw(expression(env, d))        # noqa: E731
        t = _pick(draw, env.mutable)
        if kind == 'assign':
            lines.append(f'{pad}{t} = {e()}')
        elif kind == 'add':
            lines.append(f'{pad}{t} {_pick(draw, ["+=", "-="])} {e()}')
        elif kind == 'scale':
            lines.append(f'{pad}{t} *= 0.5 + 0.25 * ti.tanh({e()})')
        elif kind == 'ifexp':
            lines.append(f'{pad}{t} = {e(1)} if {draw(condition(env))} else {e(1)}')
        elif kind == 'tuple':
            s = _pick(draw, env.mutable)
            lines.append(f'{pad}{t}, {s} = {e(1)}, {e(1)}')
        elif kind == 'swap':
            s, r = draw(st.permutations(env.mutable))[:2]
            lines.append(f'{pad}{s}, {r} = {r}, {s}')
        elif kind == 'fib':     # the carried locals are stored after their last read
            s, r = draw(st.permutations(env.mutable))[:2]
            update = _pick(draw, [f'{s} + {r}', f'0.5 * {s} - {r}', f'{s} * 0.7 + ti.sin({r})'])
            lines.append(f'{pad}{s}, {r} = {r}, {update}')
        elif kind == 'temp':
            s, r = draw(st.permutations(env.mutable))[:2]
            tmp = env.fresh('t')
            lines += [f'{pad}{tmp} = {s} + {r}', f'{pad}{s} = {r}', f'{pad}{r} = {tmp}']
        elif kind == 'if':
            inner = env.but(depth=env.depth - 1)
            lines.append(f'{pad}if {draw(condition(env))}:')
            lines += draw(statements(inner, indent + 4))
            if draw(st.booleans()):
                lines.append(f'{pad}else:')
                lines += draw(statements(inner, indent + 4))
        elif kind in ('break', 'continue'):
            lines.append(f'{pad}if {draw(condition(env))}:')
            lines.append(f'{pad}    {kind}')
        elif kind == 'loop':
            lines += draw(_loop(env, indent))
        elif kind == 'while':   # at most 4 trips, fewer if the condition on the data fails first
            c = env.fresh('it')
            lines.append(f'{pad}{c} = 0')
            lines.append(f'{pad}while {c} < {draw(while_bound(env))} and ({draw(while_condition(env, c))}):')
            lines.append(f'{pad}    {c} += 1')
            lines += draw(statements(env.but(depth=env.depth - 1, in_loop=True, top_jump=False,
                                             ints=env.ints + (c,)), indent + 4))
            if _on('int_trips'):    # the counter (0..4) is a trip count and an index from here on
                env = env.but(ints=env.ints + (c,), trips=env.trips + (c,))
        elif kind == 'skip':    # a local read before `break` / `continue`, used after it
            r = env.fresh('rb')
            jump = _pick(draw, ['break', 'continue']) if env.in_loop else 'continue'
            lines.append(f'{pad}{r} = {_pick(draw, env.reads) if env.reads and draw(st.booleans()) else e(1)}')
            with_r = env.but(scalars=env.scalars + (r,))
            lines.append(f'{pad}if {draw(_jump_condition(with_r, r))}:')
            lines.append(f'{pad}    {jump}')
            if env.out is not None and draw(st.booleans()):
                op = '=' if env.stores and _on('overwrite') and draw(st.booleans()) else '+='
                lines.append(f'{pad}{env.out} {op} {r} * {_pick(draw, CONSTANTS[:6])}')
            else:
                lines.append(f'{pad}{t} {_pick(draw, ["=", "+="])} {r} * {draw(expression(with_r, 1))}')
            env = with_r
        elif kind == 'long':    # a serial loop of 16-24 trips: read, jump on it, use it
            lines += draw(_long_loop(env, indent))
        elif kind == 'int_update':
            k = _pick(draw, env.int_mutable)
            ints = [a for a in env.ints if a != k]
            update = _pick(draw, [f'({k} + 1) % 4', f'3 - {k}', f'ti.min({k} + 1, 3)', f'ti.max({k} - 1, 0)'] +
                           ([f'({k} + {_pick(draw, ints)}) % 4'] if ints else []))
            if draw(st.booleans()):
                lines.append(f'{pad}{k} = {update}')
            else:       # changed on data
                lines.append(f'{pad}if {draw(condition(env))}:')
                lines.append(f'{pad}    {k} = {update}')
        elif kind == 'pow':     # pow on a carried local (bounded: tanh, positive bases)
            if env.vectors and draw(st.integers(0, 3)) == 0:
                r, c = draw(st.integers(0, 1)), draw(st.integers(0, 1))
                lines.append(pad + _pick(draw, [f'M[{r}, {c}] = ti.tanh(ti.pow(M[{r}, {c}], 3))',
                                                f'M = M * ti.pow(0.8 + 0.1 * ti.tanh(M[{r}, {c}]), 2.5)',
                                                f'u[{r}] = ti.tanh(u[{r}] ** 2 + {t})']))
            else:
                lines.append(pad + _pick(draw, POW_UPDATES).format(t, _pick(draw, env.scalars)))
        elif kind == 'call':    # a ti.func of carried locals updates them
            f = _pick(draw, env.funcs)
            s2 = _pick(draw, env.scalars)
            ints = env.ints + env.int_mutable
            arg = (f'ti.Vector([{t}, {s2}, {e(1)}])[{_pick(draw, ints)} % 3]'
                   if ints and _on('runtime_index') and draw(st.integers(0, 2)) == 0 else s2)
            lines.append(pad + _pick(draw, [
                f'{t} = 0.5 * {t} + 0.5 * ti.tanh({f}({t}, {arg}))', f'{t} = ti.tanh({f}({t}, {arg}))',
                f'{t} += 0.3 * ti.tanh({f}({arg}, {t}))', f'{t} = {f}({arg}, {t}) * 0.5']))
            if len(env.mutable) >= 2 and draw(st.booleans()):
                r = _pick(draw, [m for m in env.mutable if m != t])
                lines.append(f'{pad}{t}, {r} = ti.tanh({f}({r}, {t})), {t}')
        elif kind == 'matrix_if':   # M updated in a branch: component stores / whole-matrix updates
            inner = env.but(depth=env.depth - 1)
            ints = env.ints + env.int_mutable
            row = f'{_pick(draw, ints)} % 2' if ints and _on('runtime_index') and draw(st.integers(0, 2)) else \
                str(draw(st.integers(0, 1)))
            lines.append(f'{pad}if {draw(condition(env))}:')
            lines.append(f'{pad}    M[{row}, {draw(st.integers(0, 1))}] = {e(1)}')
            if draw(st.booleans()):
                lines += draw(statements(inner, indent + 4))
            lines.append(f'{pad}else:')
            lines.append(pad + '    ' + _pick(draw, MATRIX_UPDATES).format(e(1), e(1), draw(st.integers(0, 1))))
        elif kind == 'vector':
            lines.append(pad + _pick(draw, [
                'u = ti.Vector([{0}, {1}])', 'u = M @ u * 0.5', 'u = M.transpose() @ u * 0.5',
                'u += ti.Vector([{0}, {1}]) * 0.5', 'u[{2}] = {0}', 'u = u * ti.tanh({0})',
                'u, M = M @ u * 0.5, M.transpose()']).format(e(1), e(1), draw(st.integers(0, 1))))
        elif kind == 'matrix':
            lines.append(pad + _pick(draw, MATRIX_UPDATES + ['M[{2}, 1] = {0}']).format(
                e(1), e(1), draw(st.integers(0, 1))))
        elif kind == 'from_vector':
            lines.append(f'{pad}{t} {_pick(draw, ["=", "+="])} ' + _pick(draw, [
                'u.dot(ti.Vector([{0}, 1.0]))', '(M @ u).norm()', 'u.norm() + {0}',
                'ti.Vector([{0}, {0}]).normalized(1e-6).dot(u)', 'M.determinant() * 0.5',
                '(M.transpose() @ u)[1]', 'u.norm_sqr() * 0.25'] +
                (['(u - u).norm() + {0}'] if _on('zero_norm') else [])).format(e(1)))
        elif kind == 'out':
            if env.stores and _on('overwrite') and draw(st.booleans()):
                lines.append(f'{pad}{env.out} = {e()}')
            elif draw(st.booleans()):
                lines.append(f'{pad}{env.out} += {e()}')
            else:
                lines.append(f'{pad}ti.atomic_add({env.out}, {e()})')
        elif kind == 'return':
            lines.append(f'{pad}if {draw(condition(env))}:')
            lines.append(f'{pad}    return {e()}')
    return lines


@st.composite
def _loop(draw, env, indent):
    pad = ' ' * indent
    d = env.loop_depth + 1
    k = f'k{d}'
    carried = [t for t in env.trips if t in env.int_mutable or t.startswith('it')]
    trip = _pick(draw, carried if carried and draw(st.integers(0, 2)) == 0 else env.trips)
    form = draw(st.integers(0, 4 if env.in_func else 5))
    static = form == 5
    if form <= 2:
        header = f'for {k} in range({trip}):'
    elif form == 3:
        header = f'for {k} in range(1, {trip} + 1):'
    elif form == 4:
        header = f'for {k} in range({trip} - 1, -1, -1):'
    else:
        header = f'for {k} in ti.static(range({draw(st.integers(1, 2))})):'
    # at kernel scope a `for` (also inside a ti.static loop) is a top-level, parallel loop
    config = [f'{pad}ti.loop_config(serialize=True)'] if env.kernel_scope and not static else []
    inner = env.but(depth=env.depth - 1, loop_depth=d, in_loop=not static, kernel_scope=env.kernel_scope and static,
                    top_jump=False,
                    reads=env.reads + tuple(_loop_reads(env, k)) if not env.in_func else env.reads,
                    ints=env.ints + (k,),
                    trips=env.trips + ((f'cnt[{k} % n]',) if not env.in_func else ()))
    return config + [f'{pad}{header}'] + draw(statements(inner, indent + 4))


@st.composite
def _long_loop(draw, env, indent):
    """A serial loop of 16-24 trips (LLVM vectorizes in chunks of 8 / 16) whose body reads a
    local, jumps on it and uses it after the jump; carried locals contract (no blow-up)."""
    pad = ' ' * indent
    d = env.loop_depth + 1
    k = f'k{d}'
    trip = _pick(draw, LONG_TRIPS + ((f'cnt[{env.index}] + 16',) if env.index is not None else ()) +
                 ((f'{env.int_mutable[0]} + 16',) if env.int_mutable and _on('int_trips') else ()))
    reads = [f'xw[{k} % nw]', f'xw[({k} * 3 + 1) % nw]'] + _loop_reads(env, k)
    inner = env.but(depth=0, loop_depth=d, in_loop=True, top_jump=False, long=True, reads=env.reads + tuple(reads),
                    ints=env.ints + (k,))
    r = env.fresh('rb')
    with_r = inner.but(scalars=inner.scalars + (r,))
    t = _pick(draw, env.mutable)
    lines = [f'{pad}for {k} in range({trip}):',
             f'{pad}    {r} = {_pick(draw, reads) if draw(st.booleans()) else draw(expression(inner, 1))}',
             f'{pad}    if {draw(_jump_condition(with_r, r))}:',
             f'{pad}        {_pick(draw, ["continue", "continue", "break"])}',
             f'{pad}    {t} = 0.8 * {t} + 0.2 * ti.tanh({r} + {draw(expression(with_r, 1))})']
    if draw(st.booleans()):
        lines += draw(statements(with_r, indent + 4))
    return lines


@st.composite
def _jump_condition(draw, env, r):
    """The condition of a `break` / `continue` after the local r was read: on r, mostly."""
    if draw(st.integers(0, 2)) == 0:
        return draw(condition(env))
    return f'{r} {_pick(draw, [">", "<"])} {_pick(draw, THRESHOLDS)}'


@st.composite
def while_bound(draw, env):
    bounds = ['1', '2', '3', '4']
    if env.int_mutable and _on('int_trips'):
        bounds += [f'{k} + 1' for k in env.int_mutable]
    return _pick(draw, bounds)


@st.composite
def while_condition(draw, env, c):
    """The data part of a while condition: on fields (indexed by the counter c), carried
    locals, matrices and run-time components (the counter bounds the loop)."""
    if not _on('while_fields') or draw(st.integers(0, 2)) == 0:
        return draw(condition(env))
    i = env.index
    reads = [f'x[({i} + {c}) % n]', f'X[{i}, {c} % n]', f'X[{c} % n, {i}]'] if i is not None else \
        [f'x[{c} % n]', f'X[{c} % n, 1]']
    if env.wide:
        reads.append(f'xw[(i + {c}) % nw]')
    reads += list(env.reads[:4])
    local = _pick(draw, [a for a in env.scalars if a != 'sc'] or ['0.5'])
    read = _pick(draw, reads)
    thr = _pick(draw, THRESHOLDS)
    forms = [f'{local} < {read} + {thr}', f'{read} > {thr} or {local} > {thr}', f'{local} * {read} < {thr}',
             f'{local} < {draw(expression(env, 1))} and {read} > {thr}']
    if _on('runtime_index'):
        forms.append(f'ti.Vector([{local}, {read}, {_pick(draw, env.scalars or ("0.5",))}])[{c} % 3] > {thr}')
    if env.vectors and draw(st.booleans()):
        forms = [f'M[{c} % 2, 0] < {thr} + 1.0' if _on('runtime_index') else f'M[0, 0] < {thr} + 1.0',
                 f'M.determinant() > {thr} - 1.0', f'(M @ u).norm() < 2.0 + {local} * 0.1',
                 f'M[0, 1] * {read} < {thr} and {local} > -1.5']
    return _pick(draw, forms)


# ---------------------------------------------------------------------------------------
# Programs and kernels

@st.composite
def func_source(draw, name):
    """A ti.func of two floats with early returns inside `if`."""
    env = Env(scalars=('s', 't', 'r'), mutable=('r',), in_func=True, depth=1, names={},
              trips=('2', '3'))
    start = env.but(scalars=('s', 't'))
    lines = ['    @ti.func', f'    def {name}(s, t):', f'        r = {draw(expression(start))}']
    lines += draw(statements(env, 8))
    if _on('early_return'):
        lines.append(f'        if {draw(condition(env))}:')
        lines.append(f'            return {draw(expression(env))} + 0.5 * r')
    lines.append(f'        return {draw(expression(env))} - 0.25 * r')
    return lines


def _index_reads(i, j=None, ndarray=True):
    reads = [f'x[{i}]', f'x[({i} + 1) % n]', f'x[n - 1 - {i}]'] + ([f'xa[{i}]'] if ndarray else []) + [f'X[{i}, {i}]',
             f'X[({i} + 1) % n, {i}]', f'X[{i}, n - 1 - {i}]', 'z[None]']
    if _on('ifexp'):    # reads guarded by a conditional expression: out of range on the other side
        reads += [f'(x[{i} - 1] if {i} > 0 else 0.5)', f'(x[{i} + 1] if {i} + 1 < n else x[0])',
                  f'(X[{i} - 1, {i}] if {i} >= 1 else 0.25)']
    if j is not None:
        reads += [f'X[{i}, {j}]', f'X[{j}, {i}]', f'x[{j}]', f'x[({i} + {j}) % n]', f'X[({i} + 1) % n, {j}]']
        if _on('ifexp'):
            reads.append(f'(X[{i}, {j} - 1] if {j} > 0 else x[{i}])')
    return reads


def _combination(names, vectors):
    """Every carried local reaches the output (with its own weight)."""
    terms = [f'{w} * {t}' for w, t in zip(('0.5', '0.25', '-0.3', '0.2'), names)]
    if vectors:
        terms += ['0.1 * u.dot(ti.Vector([0.5, -0.3]))', '0.1 * M.trace()']
    return ' + '.join(terms)


@st.composite
def program(draw, c, loop, earlier_h, funcs, names, reads_z=False, top_jump=False):
    """One program inside a top-level loop of the main kernel: computes row c of y (of yw in
    a loop over xw, loop 'wide'). top_jump: it may `continue` the top-level loop (it is the
    last program of its loop)."""
    two_d = loop in ('ndrange', 'struct2')
    wide = loop == 'wide'
    i, j = ('(i % n)' if wide else 'i'), ('j' if two_d else None)
    reads = _index_reads(i, j) + [f'h[{r}, {i}]' for r in earlier_h] + \
        [f'h[{r}, ({i} + 1) % n]' for r in earlier_h]
    if wide:        # i runs over xw (NW entries), x and X are read at i % n
        reads = ['xw[i]', 'xw[(i + 1) % nw]', 'xw[nw - 1 - i]'] + reads
    ints = ('i', f'cnt[{i}]', f'ca[{i}]', 'm') + (('j',) if two_d else ())
    trips = ('1', '2', '3', f'cnt[{i}]', f'ca[{i}]', 'm', f'cnt[({i} + 1) % n]') + (('cnt[j]',) if two_d else ())
    if wide:
        out, stores = f'yw[{c}, i]', True
    elif two_d:
        out, stores = _pick(draw, [f'y[{c}, i]', f'y[{c}, j]', f'y[{c}, (i + j) % n]']), False
    elif draw(st.integers(0, 3)) == 0:
        out, stores = _pick(draw, [f'y[{c}, i // 2]', f'y[{c}, 0]', f'y[{c}, (i * 2) % n]']), False
    else:
        out, stores = _pick(draw, [f'y[{c}, i]', f'y[{c}, i]', f'y[{c}, (i + 1) % n]', f'y[{c}, n - 1 - i]']), True
    vectors = draw(st.integers(0, 2)) == 0 and _on('vectors')
    int_mutable = ('kc',) if _on('int_trips') else ()
    env = Env(scalars=('a', 'b') + MUTABLE + ('sc',), mutable=MUTABLE, vectors=vectors, reads=tuple(reads),
              ints=ints, trips=trips + int_mutable, index=i, out=out, stores=stores, funcs=funcs, names=names,
              ndarray=True, int_mutable=int_mutable, top_jump=top_jump, wide=wide)
    start = Env(scalars=('a', 'b'), reads=tuple(reads), ints=ints, index=i, names=names)
    lines = [f'# program {"yw" if wide else "y"}[{c}]',
             f'a = {_pick(draw, reads[:5])}',
             f'b = {"z[None] * a" if reads_z else _pick(draw, reads)}']
    for t in MUTABLE:
        lines.append(f'{t} = {draw(expression(start, 1))}')
    if int_mutable:     # a carried int local in [0, 3]: trip count, index, changed on data
        lines.append(f'kc = {_pick(draw, trips[3:])}')
    if vectors:
        lines.append(f'u = ti.Vector([{draw(expression(start, 1))}, b])')
        lines.append(f'M = ti.Matrix([[a, {draw(expression(start, 1))}], [0.5, b]])')
    if funcs and draw(st.integers(0, 2)) == 0:
        call = f'{_pick(draw, funcs)}({draw(expression(start, 1))}, {_pick(draw, MUTABLE)})'
        lines.append(f'{_pick(draw, MUTABLE)} = {call}')
    if top_jump and draw(st.booleans()):    # `a = x[i]; if ...: continue; ... y[i] = ... a`
        lines += [f'if {draw(_jump_condition(env, "a"))}:', '    continue']
    lines += [s.strip('\n') for s in draw(statements(env, 0))]
    op = '=' if stores and _on('overwrite') and draw(st.booleans()) else '+='
    lines.append(f'{out} {op} {draw(expression(env))} + {_combination(MUTABLE, vectors)}' +
                 (' + 0.15 * a' if top_jump else ''))
    exports = not two_d and not wide and draw(st.integers(0, 2)) == 0
    if exports:
        lines.append(f'h[{c}, i] = {_pick(draw, MUTABLE)}')
    return lines, exports


@st.composite
def plain_wide_program(draw, c):
    """A program of arithmetic only (+, -, *, min, max, select: no calls) in a loop over xw,
    which LLVM vectorizes, with a local read before a `continue` of the loop and stored after
    it. Its adjoint reads yw.grad in a branch and then zeroes it: LLVM 22 moved that masked
    load after the masked store (x.grad all zeros for loops of 16 or more iterations)."""
    # reads at i only: each iteration owns its adjoints (no atomics), so the loop vectorizes
    a = _pick(draw, ['xw[i]', 'xw[i]', 'xw[i] * 1.5', 'xw[i] - 0.25'])
    terms = ['a', 'a * a', 'xw[i]', 'ti.max(a, 0.1)', 'ti.min(a, xw[i])', 'ti.select(a > 0.0, a, 0.5 * a)',
             'a * xw[i]', '0.75']
    # `a` itself first: the adjoint passes the loaded gradient through unchanged
    value = ' + '.join(['a'] + [f'{draw(st.sampled_from([-1.0, -0.5, 0.5, 2.0]))} * {_pick(draw, terms)}'
                                for _ in range(draw(st.sampled_from([0, 0, 1, 2])))])
    lines = [f'# program yw[{c}] (arithmetic only)', f'a = {a}']
    if draw(st.integers(0, 5)):
        cond = _pick(draw, ['i == 3', 'i % 5 == 1', f'a > {_pick(draw, THRESHOLDS)}', f'xw[i] < {_pick(draw, THRESHOLDS)}'])
        lines += [f'if {cond}:', '    continue']
    lines.append(f'yw[{c}, i] {_pick(draw, ["=", "="] + (["+="] if _on("overwrite") else []))} {value}')
    return lines


@st.composite
def main_kernel(draw, first_row, programs, funcs, names, reads_z=False):
    """The main kernel: 2-4 top-level loops holding `programs` programs (rows of y), a
    serial kernel-scope program or none, and a final loop that overwrites some rows."""
    loops = draw(st.integers(2, 4))
    sizes = [1] * loops
    for _ in range(programs - loops):
        sizes[draw(st.integers(0, loops - 1))] += 1
    lines = ['    @ti.kernel',
             '    def main(xa: ti.types.ndarray(), ca: ti.types.ndarray(), m: ti.i32, sc: ti.f64):']
    row, exported, overwritten, w_rows = first_row, [], [], 0
    kinds = [_pick(draw, ['range', 'range', 'struct', 'serial'] + (['ndrange', 'struct2', 'struct2'] if _on('two_d') else []))
             for _ in sizes]
    if _on('wide'):     # 0-2 loops over xw (NW entries, often >= 17), each of 1-2 programs (rows of yw)
        for _ in range(draw(st.integers(0, 2))):
            at = draw(st.integers(0, len(kinds)))
            kinds.insert(at, 'wide')
            sizes.insert(at, draw(st.integers(1, 2)))
    for loop, size in zip(kinds, sizes):
        if loop == 'wide':
            loop_kind = _pick(draw, ['range', 'struct', 'serial', 'runtime'])
            header = {'range': 'for i in range(nw):', 'struct': 'for i in xw:', 'serial': 'for i in range(nw):',
                      'runtime': 'for i in range(m + nw - 2):'}[loop_kind]
        else:
            loop_kind = loop
            header = {'range': 'for i in range(n):', 'struct': 'for i in x:', 'serial': 'for i in range(n):',
                      'ndrange': 'for i, j in ti.ndrange(n, n):', 'struct2': 'for i, j in X:'}[loop]
        if loop_kind == 'serial':
            lines.append('        ti.loop_config(serialize=True)')
        lines.append(f'        {header}')
        new_exports = []
        for k in range(size):
            # the last program of a loop may `continue` it
            jump = k == size - 1 and _on('skip_read') and draw(st.booleans())
            if loop == 'wide':
                if size == 1 and _on('skip_read') and draw(st.booleans()):
                    body = draw(plain_wide_program(w_rows))
                else:
                    body, _ = draw(program(w_rows, loop, (), funcs, names, top_jump=jump))
                lines += ['            ' + line if line else '' for line in body]
                w_rows += 1
                continue
            body, exports = draw(program(row, loop, tuple(exported), funcs, names, reads_z and row == first_row,
                                         top_jump=jump))
            lines += ['            ' + line if line else '' for line in body]
            if exports:
                new_exports.append(row)
            if draw(st.integers(0, 4)) == 0 and _on('overwrite'):
                overwritten.append(row)
            row += 1
        exported += new_exports
    if overwritten:     # a plain store over rows that earlier loops accumulated into
        env = Env(scalars=('sc',), reads=tuple(_index_reads('i')), ints=('i', 'cnt[i]'), index='i', names=names,
                  ndarray=True)
        lines.append('        for i in range(n):')
        for r in overwritten:
            lines.append(f'            if {draw(condition(env))}:')
            lines.append(f'                y[{r}, i] = {draw(expression(env))}')
    return lines, row, w_rows


@st.composite
def scalar_program(draw, q, funcs, names):
    """A program outside any loop of the main kernel (serial code at kernel scope). It calls
    no ti.func: a loop in a ti.func called at kernel scope is a top-level (parallel) loop."""
    funcs = ()
    reads = ('x[0]', f'x[{N - 1}]', 'X[0, 1]', 'X[1, 0]', 'xa[1]', 'z[None]')
    mutable = ('sv', 'sw', 'sp', 'sq')    # kernel scope: the loops' v, w, p, q must stay theirs
    int_mutable = ('skc',) if _on('int_trips') else ()
    env = Env(scalars=mutable + ('sc',), mutable=mutable, reads=reads, ints=('m', 'cnt[0]', 'ca[1]'),
              trips=('2', 'm', 'cnt[0]', 'ca[1]') + int_mutable, out=f'o[{q}, 0]', stores=True, funcs=funcs,
              names=names, kernel_scope=True, ndarray=True, int_mutable=int_mutable)
    start = env.but(scalars=('sc',), int_mutable=())
    lines = [f'# program o[{q}]'] + [f'{t} = {draw(expression(start, 1))}' for t in mutable]
    lines += [f'{k} = {_pick(draw, ["cnt[1]", "ca[0]", "m"])}' for k in int_mutable]
    lines += draw(statements(env, 0))
    op = '=' if _on('overwrite') else '+='
    lines.append(f'o[{q}, 0] {op} {draw(expression(env))} + {_combination(mutable, False)}')
    return ['        ' + line for line in lines]


@st.composite
def loop_program(draw, out, reads, stores, names, ndarray=False):
    """A short program in a `for i in range(n)` loop of a later kernel."""
    env = Env(scalars=('v', 'w'), mutable=('v', 'w'), reads=tuple(reads), ints=('i', 'cnt[i]'), index='i',
              trips=('2', 'cnt[i]'), out=out, stores=stores, depth=1, names=names, ndarray=ndarray, top_jump=True)
    start = env.but(scalars=())
    lines = [f'v = {draw(expression(start, 1))}', f'w = {draw(expression(start, 1))}']
    lines += draw(statements(env, 0))
    op = '=' if stores and (_on('overwrite') or not any('ya[i]' in s for s in lines)) and draw(st.booleans()) else '+='
    lines.append(f'{out} {op} {draw(expression(env))} + {_combination(("v", "w"), False)}')
    return lines


@st.composite
def chain(draw, q, names, loss_free=True):
    """Kernels on one tape that write one element (or row) with plain stores, maybe with
    accumulations between, never reading it: the derivative is that of the last store."""
    kernels = draw(st.integers(2, 3))
    scalar = draw(st.booleans())
    if scalar:
        target = draw(st.sampled_from(['loss[None]', f'o[{q}, 0]'] if loss_free else [f'o[{q}, 0]']))
    else:
        target = f'o[{q}, i]'
    env = Env(reads=('x[0]', 'x[1]', 'X[1, 2]', 'z[None]'), names=names) if scalar else \
        Env(reads=tuple(_index_reads('i', ndarray=False)), ints=('i', 'cnt[i]'), index='i', names=names)
    out = []
    for k in range(kernels):
        name = f'chain{q}_{k}'
        out += ['    @ti.kernel', f'    def {name}():']
        ops = ['='] if k == 0 else [draw(st.sampled_from(['=', '=', '+=']))]
        if draw(st.integers(0, 2)) == 0:
            ops.append(draw(st.sampled_from(['=', '+='])))
        if not _on('overwrite'):
            ops = ['=' if k == 0 else '+='] + ['+='] * (len(ops) - 1)
        pad = '        ' if scalar else '            '
        if not scalar:
            out.append('        for i in range(n):')
        for op in ops:
            out.append(f'{pad}{target} {op} {_pick(draw, CONSTANTS[:6])} * {draw(expression(env))}')
    return out, [f'chain{q}_{k}' for k in range(kernels)], target


@st.composite
def case_source(draw, hessian=False, programs=(14, 18), small=(3, 5)):
    """One case. hessian=True: a small one whose Hessians are checked too (forward over
    reverse compiles a tangent version of every adjoint: expensive)."""
    names = {}
    hessian = hessian and _on('hessian')
    programs = small if hessian else programs
    lines = ['"""A generated case of tests/kernel_grammar.py (see tests/test_autodiff_properties.py)."""',
             'import engine as ti', '']
    funcs = tuple(f'f{k}' for k in range(draw(st.integers(0, 2)))) if _on('funcs') else ()
    func_lines = []
    for f in funcs:
        func_lines += draw(func_source(f)) + ['']
    # Hessian cases read z in the main kernel, then accumulate into it (the tape restores z
    # and its tangent for the backward pass of the main kernel)
    kernel_lines, y_rows, w_rows = draw(main_kernel(0, draw(st.integers(*programs)), funcs, names,
                                                    hessian and _on('bump')))
    o_rows = 0
    # Hessians are forward over reverse: an ndarray's gradient has no tangent to write, so
    # Hessian cases pass the same values in an ndarray without a gradient (XA)
    calls = ['main(XA, F.ca, M_ARG, SC_ARG)']
    count = y_rows
    if draw(st.booleans()) and _on('kernel_scope'):     # serial kernel-scope program in the main kernel
        at = next(k for k, line in enumerate(kernel_lines) if line.startswith('    def main(')) + 1
        kernel_lines[at:at] = draw(scalar_program(o_rows, funcs, names))
        o_rows += 1
        count += 1
    extra = []
    # z: read by the main kernel, accumulated into here, read by the loss
    if (hessian or draw(st.integers(0, 3)) > 0) and _on('bump'):
        rows = [f'y[{r}, i]' for r in range(min(y_rows, 3))]
        body = draw(loop_program('z[None]', _index_reads('i', ndarray=False)[:5] + rows, False, names))
        extra += ['    @ti.kernel', '    def bump():', '        for i in range(n):'] + \
            ['            ' + s for s in body] + ['']
        calls.append('bump()')
        count += 1
    loss_free = True
    for _ in range(draw(st.integers(0, 2))):
        body, kernels, target = draw(chain(o_rows, names, loss_free))
        loss_free = loss_free and target != 'loss[None]'
        extra += body + ['']
        calls += [f'{k}()' for k in kernels]
        o_rows += 1
        count += 1
    loss_weights = [draw(st.sampled_from(['0.5', '-0.3', '0.7', '0.2'])) for _ in range(2)]
    loss = ['    @ti.kernel', '    def total():',
            '        for i in range(n):',
            '            for c in ti.static(range(Y_ROWS)):',
            f'                loss[None] += ({loss_weights[0]} + 0.1 * c) * ti.tanh(0.3 * y[c, i])',
            '            for q in ti.static(range(O_ROWS)):',
            f'                loss[None] += {loss_weights[1]} * ti.sin(o[q, i])'] + \
        (['        for i in range(nw):',
          '            for c in ti.static(range(W_ROWS)):',
          f'                loss[None] += ({loss_weights[0]} - 0.2 * c) * ti.tanh(0.3 * yw[c, i])'] if w_rows else []) + [
            '        loss[None] += 0.5 * ti.sin(z[None]) * z[None]', '']
    count += 1
    nd = ['    @ti.kernel', '    def nd_out(xa: ti.types.ndarray(), ya: ti.types.ndarray()):',
          '        for i in range(n):'] + ['            ' + s for s in draw(loop_program(
              'ya[i]', _index_reads('i')[:6] + ['y[0, i]', f'y[{y_rows - 1}, (i + 1) % n]'], True, names,
              ndarray=True))] + ['']
    count += 1
    fwd, f_rows, a_rows = draw(forward_only_kernel(names))
    count += f_rows
    count += w_rows
    lines += [f'Y_ROWS = {y_rows}', f'O_ROWS = {max(o_rows, 1)}', f'F_ROWS = {f_rows}', f'A_ROWS = {a_rows}',
              f'W_ROWS = {w_rows}', f'NW = {draw(st.sampled_from(WIDE_SIZES)) if w_rows else 4}',
              f'PROGRAMS = {count}',
              f'COUNTS = {[draw(st.integers(0, 3)) for _ in range(N)]}',
              f'ND_COUNTS = {[draw(st.integers(0, 3)) for _ in range(N)]}',
              f'M_ARG = {draw(st.integers(0, 2))}', f'SC_ARG = {draw(st.sampled_from([0.75, -0.5, 1.25]))}',
              f'SEED = {draw(st.integers(0, 2 ** 16))}',
              f'HESSIAN = {hessian}', '', '',
              'def build(F):',
              '    x, X, z, y, o, h, yf, acc, loss, cnt, n = (F.x, F.X, F.z, F.y, F.o, F.h, F.yf, F.acc, F.loss,',
              '                                                F.cnt, F.n)',
              '    xw, yw, nw = F.xw, F.yw, F.nw', '']
    lines += func_lines + kernel_lines + [''] + extra + loss + nd + fwd
    lines += ['    def run(mode):',
              '        """mode: \'value\' launches every kernel; \'reverse\' leaves out the forward-only kernel,',
              '        \'forward\' the kernel that writes an ndarray, \'hessian\' both."""',
              '        XA = F.xa_const if HESSIAN else F.xa']
    lines += [f'        {call}' for call in calls]
    lines += ["        total()",
              "        if mode in ('value', 'reverse'):", '            nd_out(XA, F.ya)',
              "        if mode in ('value', 'forward'):", '            forward_only()',
              '    return run', '']
    return '\n'.join(lines)


@st.composite
def forward_only_kernel(draw, names):
    """Forward mode only: the old value of ti.atomic_add (on elements one iteration owns, so
    it is deterministic) and a kernel-scope local accumulated in a parallel loop."""
    atomics = draw(st.integers(1, 2))
    env = Env(scalars=('v', 'old') if _on('atomic_old') else ('v',), mutable=('v',),
              reads=tuple(_index_reads('i', ndarray=False)[:6]), ints=('i', 'cnt[i]'),
              index='i', depth=0, names=names)
    start = env.but(scalars=())
    lines = ['    @ti.kernel', '    def forward_only():']
    reduce = draw(st.booleans()) and _on('reduction')
    if reduce:      # a kernel-scope local that a parallel loop accumulates into
        lines += ['        s = 0.0', '        for i in range(n):',
                  f'            s += {draw(expression(start, 2))}']
    # the old value of an atomic is deterministic where one thread runs the loop
    lines += ['        ti.loop_config(serialize=True)', '        for i in range(n):']
    for r in range(atomics):
        trip = draw(st.sampled_from(['2', '3', 'cnt[i]']))
        lines += [f'            acc[{r}, i] = {draw(expression(start, 2))}',
                  f'            v = {draw(expression(start, 1))}',
                  f'            for k1 in range({trip}):',
                  f'                {"old = " if _on("atomic_old") else ""}'
                  f'ti.atomic_{draw(st.sampled_from(["add", "add", "sub"]))}(acc[{r}, i], {draw(expression(start, 1))})',
                  f'                v {draw(st.sampled_from(["=", "+="]))} {draw(expression(env, 2))} + '
                  f'{"old" if _on("atomic_old") else "acc[" + str(r) + ", i]"} * {draw(expression(start, 1))}',
                  f'            yf[{r}, i] = v + {draw(expression(env.but(scalars=("v",)), 1))}']
    if reduce:
        lines.append(f'        yf[{atomics}, 0] = s * {draw(expression(Env(reads=("x[0]", "x[1]"), names=names), 1))}')
    return lines + [''], atomics + reduce, atomics


# ---------------------------------------------------------------------------------------
# Large parallel loops for the race check

@st.composite
def race_source(draw):
    """Kernels over large n whose parallel loops read X[i, j] together with X[j, i] (every
    access has the loop index i in it, but at different axes), read shifted x, and scatter
    into other iterations' elements: adjoints (and tangents) accumulate into elements that
    other threads write too. `{serial}` is where the checker puts
    `ti.loop_config(serialize=True)` for the serial reference."""
    names = {}
    rows = draw(st.integers(2, 3))
    lines = ['import engine as ti', '', f'ROWS = {rows}', '', '',
             'def build(F):', '    x, X, y, loss, n = F.x, F.X, F.y, F.loss, F.n', '',
             '    @ti.kernel', '    def main():']
    kinds = draw(st.permutations(['transpose', 'ndrange', 'scatter', 'shift']))[:rows]
    for c, kind in enumerate(kinds):
        lines.append('        {serial}')
        if kind in ('transpose', 'shift'):
            reads = ('X[i, j]', 'X[j, i]', 'x[i]') if kind == 'transpose' else \
                ('x[j]', 'x[(i + j) % n]', 'X[i, j]', 'X[(i + 1) % n, j]')
            env = Env(reads=reads, names=names, plain=True)
            first, second = ('X[i, j]', 'X[j, i]') if kind == 'transpose' else ('x[(i + j) % n]', 'X[(i + 1) % n, j]')
            lines += ['        for i in range(n):', '            acc = 0.0', '            for j in range(n):',
                      f'                acc += {first} * {draw(expression(env, 1))} + '
                      f'{second} * {draw(expression(env, 1))}',
                      f'            y[{c}, i] = acc * '
                      f'{draw(expression(Env(reads=("x[i]",), names=names, plain=True), 1))}']
        elif kind == 'ndrange':
            env = Env(reads=('X[i, j]', 'X[j, i]', 'x[i]', 'x[j]'), names=names, plain=True)
            target = draw(st.sampled_from([f'y[{c}, i]', f'y[{c}, j]']))
            lines += ['        for i, j in ti.ndrange(n, n):',
                      f'            {target} += X[i, j] * X[j, i] * {draw(expression(env, 1))}']
        else:
            env = Env(scalars=('a',), reads=('X[i, j]', 'X[j, i]'), names=names, plain=True)
            lines += ['        for i in range(n):', '            a = x[i]', '            for j in range(n):',
                      f'                y[{c}, j] += X[j, i] * {draw(expression(env, 1))} + a * X[i, j]']
    lines += ['', '    @ti.kernel', '    def total():', '        for i in range(n):',
              '            for c in ti.static(range(ROWS)):',
              '                loss[None] += (0.5 + 0.25 * c) * y[c, i] * x[(i + c) % n]', '',
              '    def run():', '        main()', '        total()', '    return run', '']
    return '\n'.join(lines)
