"""Random programs that break the global data access rules on purpose, drawn with hypothesis.

`program_source()` draws the source of one *program*: a Python module whose `build()`
declares fields and ndarrays, defines kernels and returns a dict the checker
(tests/test_rules_generated.py) uses:

    {'forward': fn, 'prepare': fn, 'loss': field, 'state': {name: field or ndarray},
     'grads': [names with a gradient], 'modified': [names something writes],
     'kernels': [kernel names]}

`forward()` is the body of the tape (launches, writes from Python, captured segments, the
loss kernel last); `prepare()` calls each `ti.capture`d segment once, outside the tape.
The module also defines VALID (see below), N and SEED (the initial values).

Two classes:
- may_break (VALID = False): reads, plain stores and accumulations (`+=`,
  ti.atomic_add) of the same fields through constant, argument (`m`), computed
  (`(i + 1) % n`, `n - 1 - i`, `(i + j) % n`) and integer-field (`idx[i]`) indices, in
  several top-level loops, serial inner loops with `if j == 0` branches, serialized
  top-level loops and kernel-scope code; several kernels, repeated launches with other
  arguments, `@ti.ad.no_grad` kernels (writing constants), writes from Python between
  launches, captured segments; fields without a gradient used as scratch (`w`) and as
  constants (`c`), ndarrays with (`p`) and without (`r`) a gradient, a 2-vector field (`u`)
  read and written one component at a time (`u[i][0] = f(u[i][1])` is valid). The tape must give
  the finite-difference gradient or raise AutodiffRuleError naming a field. A program with
  writes of constants (from Python, by a no_grad kernel) first launches `touch`, which
  reads every element: a constant written over an element no launch used yet sets an
  input, whose .grad is the gradient w.r.t. the value written, not a finite difference
  of the value before the tape (docs/rules.md); those are left to the valid class.
- valid (VALID = True): every element is read only after its last modification:
  intermediates written by stores and/or accumulations before anything reads them,
  time-major rollouts `X[t + 1, i] = f(X[t, i])` and `Y[i, t + 1] = f(Y[i, t])`,
  accumulation kernels launched with several arguments, constants written before use
  (whose gradients, w.r.t. the values written, are not compared). The tape must not raise
  and must give the finite-difference gradient.

The forward program is deterministic: in a parallel loop (the outermost loop of a kernel)
each field is either only read, or only touched at the elements the iteration owns
(`a[i]`, `B[i, ...]`), or only accumulated into; arbitrary patterns live in serial code.
Only smooth functions are used and no control flow depends on float values.
"""
import os

from hypothesis import strategies as st

# Constructs left out while a known engine bug is open (development only; the normal run leaves
# out nothing): python (writes from Python), capture, no_grad, ndarray, index (the integer
# field idx), scratch (the field w without a gradient), vector (the vector field u).
EXCLUDE = frozenset(filter(None, os.environ.get('RULES_GRAMMAR_EXCLUDE', '').split(',')))

UNARY = ['ti.sin({0})', 'ti.tanh({0})', '0.5 * {0}', 'ti.sin({0}) ** 2', 'ti.exp(ti.tanh({0}))',
         '({0}) ** 2 * 0.25']
COEF = ['0.5', '-0.7', '1.3', '0.25', '-0.4']
VALUES = ['0.25', '-0.5', '0.75', '1.1', '-0.9', '0.0']


class F:
    """A field or ndarray of a generated program."""

    def __init__(self, name, dims, grad=True, role='data', nd=False, dtype='ti.f64', shape=None, slot=None,
                 comps=0):
        self.slot, self.comps = slot, comps     # comps: a vector field of that many components
        self.name, self.dims, self.grad, self.role, self.nd, self.dtype = name, dims, grad, role, nd, dtype
        self.shape = shape or {0: '()', 1: 'n', 2: '(n, n)'}[dims]
        self.ref = name + 'a' if nd else name      # the kernel parameter of an ndarray

    def decl(self):
        if self.comps:
            return f'{self.name} = ti.Vector.field({self.comps}, {self.dtype}, shape={self.shape}, needs_grad=True)'
        if self.nd:
            return f'{self.name} = ti.ndarray({self.dtype}, shape={self.shape}, needs_grad={self.grad})'
        return f'{self.name} = ti.field({self.dtype}, shape={self.shape}' + (', needs_grad=True)' if self.grad else ')')


def _pick(draw, items):
    return draw(st.sampled_from(list(items)))


class Ctx:
    """Where a statement goes: loop variables, serial or parallel, per-field modes."""

    def __init__(self, i=False, j=False, serial=True, modes=None, idx=False):
        self.i, self.j, self.serial, self.modes, self.idx = i, j, serial, modes or {}, idx

    def but(self, **kw):
        c = Ctx(self.i, self.j, self.serial, self.modes, self.idx)
        c.__dict__.update(kw)
        return c

    def general(self):
        out = ['0', '1', 'n - 1', 'm', '(m + 1) % n'] + (['idx[m]', 'idx[0]'] if self.idx else [])
        if self.i:
            out += ['i', '(i + 1) % n', 'n - 1 - i'] + (['idx[i]'] if self.idx else [])
        if self.j:
            out += ['j'] + (['(i + j) % n'] if self.i else [])
        return out


@st.composite
def ref(draw, ctx, f, owned=False):
    if f.dims == 0:
        return f'{f.ref}[None]'
    if f.role == 'roll':        # read after the rollout: a fixed time slot
        k = _pick(draw, ctx.general())
        return f'{f.name}[{f.slot}, {k}]' if f.name == 'X' else f'{f.name}[{k}, {f.slot}]'
    first = 'i' if owned else _pick(draw, ctx.general())
    if f.dims == 1:
        element = f'{f.ref}[{first}]'
    else:
        element = f'{f.ref}[{first}, {_pick(draw, ctx.general())}]'
    return element + (f'[{draw(st.integers(0, f.comps - 1))}]' if f.comps else '')


@st.composite
def expression(draw, ctx, readable):
    """readable: [(field, owned)]: the reads allowed here."""
    terms = []
    for _ in range(draw(st.integers(1, 2))):
        if readable and draw(st.integers(0, 5)):
            f, owned = _pick(draw, readable)
            r = draw(ref(ctx, f, owned))
            if draw(st.integers(0, 3)) == 0:
                g, owned2 = _pick(draw, readable)
                terms.append(f'{r} * ti.tanh({draw(ref(ctx, g, owned2))})')
            else:
                terms.append(_pick(draw, UNARY).format(r))
        else:
            terms.append(_pick(draw, ['0.3'] + (['(0.1 * i)'] if ctx.i else []) + ['(0.2 * m)']))
    return f'{_pick(draw, COEF)} * ({" + ".join(terms)})'


def _condition(draw, ctx):
    conds = ['m > 0', 'm == 1']
    if ctx.i:
        conds += ['i == m', 'i % 2 == 0', 'i > 0']
    if ctx.j:
        conds += ['j == 0', 'j == 0', 'j < 2', 'j == m']
    return _pick(draw, conds)


@st.composite
def statements(draw, ctx, fields, indent, written, depth=1, count=(1, 3)):
    """Statements of a may_break kernel at this position; `written` collects the names of
    constant and index fields that get written."""
    pad = ' ' * indent
    floats = [f for f in fields if f.dtype == 'ti.f64' and f.role != 'loss']
    loss = next(f for f in fields if f.role == 'loss')
    if ctx.serial:
        readable = [(f, False) for f in floats]
        targets = [(f, False, True) for f in floats if f.role != 'const']
    else:
        readable = [(f, ctx.modes.get(f.name) == 'own') for f in floats if ctx.modes.get(f.name, 'read') in ('read', 'own')]
        targets = [(f, ctx.modes[f.name] == 'own', ctx.modes[f.name] == 'own') for f in floats
                   if ctx.modes.get(f.name) in ('own', 'acc')]
    targets.append((loss, False, False))
    lines = []
    for _ in range(draw(st.integers(*count))):
        kind = _pick(draw, ['write'] * 4 + ['loss'] + (['branch'] if depth and (ctx.i or ctx.j) else []) +
                     (['inner'] if depth and ctx.i and not ctx.j else []) +
                     (['index'] if ctx.serial and ctx.idx else []))
        if kind == 'branch':
            lines.append(f'{pad}if {_condition(draw, ctx)}:')
            lines += draw(statements(ctx, fields, indent + 4, written, 0, (1, 2)))
            if draw(st.booleans()):
                lines.append(f'{pad}else:')
                lines += draw(statements(ctx, fields, indent + 4, written, 0, (1, 2)))
        elif kind == 'inner':       # a serial loop inside the iteration
            lines.append(f'{pad}for j in range({_pick(draw, ["2", "3"])}):')
            lines += draw(statements(ctx.but(j=True), fields, indent + 4, written, 1, (1, 3)))
        elif kind == 'index':       # an index field (maybe read before) is changed
            k = _pick(draw, ctx.general())
            lines.append(f'{pad}idx[{k}] = (idx[{k}] + {_pick(draw, ["1", "m", "2"])}) % n')
            written.add('idx')
        else:
            f, owned, can_store = (loss, False, False) if kind == 'loss' else _pick(draw, targets)
            target = draw(ref(ctx, f, owned))
            e = draw(expression(ctx, readable))
            op = _pick(draw, ['=', '+=', 'atomic'] if can_store else ['+=', 'atomic'])
            lines.append(f'{pad}ti.atomic_add({target}, {e})' if op == 'atomic' else f'{pad}{target} {op} {e}')
    return lines


def _signature(fields):
    return 'm: ti.i32' + ''.join(f', {f.ref}: ti.types.ndarray()' for f in fields if f.nd)


def _args(fields, m):
    return f'{m}' + ''.join(f', {f.name}' for f in fields if f.nd)


@st.composite
def may_break_kernel(draw, name, fields, has_idx, written):
    lines = ['    @ti.kernel', f'    def {name}({_signature(fields)}):']
    for _ in range(draw(st.integers(1, 3))):
        block = _pick(draw, ['par', 'par', 'par', 'ser', 'scope'])
        if block == 'scope':        # serial code outside loops
            lines += draw(statements(Ctx(idx=has_idx), fields, 8, written, 0, (1, 2)))
            continue
        if block == 'ser':
            lines.append('        ti.loop_config(serialize=True)')
            ctx = Ctx(i=True, idx=has_idx)
        else:       # parallel: each field only read, only touched where owned, or only accumulated
            modes = {}
            for f in fields:
                if f.role in ('data', 'scratch'):
                    modes[f.name] = _pick(draw, ['read', 'acc'] if f.dims == 0 else ['read', 'own', 'own', 'acc'])
            ctx = Ctx(i=True, serial=False, modes=modes, idx=has_idx)
        lines.append('        for i in range(n):')
        lines += draw(statements(ctx, fields, 12, written, 1, (1, 3)))
    return lines


@st.composite
def no_grad_kernel(draw, name, fields, has_idx, written):
    """Writes constants (stores or accumulations) into any field: no gradient to lose."""
    targets = [f for f in fields if f.dtype == 'ti.f64' and f.role != 'loss']
    lines = ['    @ti.ad.no_grad', '    @ti.kernel', f'    def {name}({_signature(fields)}):']
    for _ in range(draw(st.integers(1, 2))):
        f = _pick(draw, targets)
        written.add(f.name)
        op = _pick(draw, ['=', '+='])
        value = f'{_pick(draw, VALUES)} + 0.1 * m'
        if draw(st.booleans()) and f.dims:
            lines += ['        for i in range(n):', f'            {draw(ref(Ctx(i=True), f, True))} {op} {value} + 0.2 * i']
        else:
            lines.append(f'        {draw(ref(Ctx(), f, False))} {op} {value}')
    if has_idx and draw(st.booleans()):
        lines.append(f'        idx[{_pick(draw, ["0", "m", "n - 1"])}] = (m + 1) % n')
        written.add('idx')
    return lines


@st.composite
def python_write(draw, f, written):
    written.add(f.name)
    v = _pick(draw, VALUES)
    if f.dtype == 'ti.i32':
        return _pick(draw, [f'idx[{draw(st.integers(0, 2))}] = {draw(st.integers(0, 2))}',
                            'idx.from_numpy(np.arange(n, dtype=np.int32)[::-1].copy())', 'idx.fill(1)'])
    if f.nd:
        return _pick(draw, [f'{f.name}.from_numpy(np.full(n, {v}))', f'{f.name}.from_numpy(np.linspace(-0.5, {v}, n))'])
    index = {0: 'None', 1: str(draw(st.integers(0, 2))), 2: f'{draw(st.integers(0, 2))}, {draw(st.integers(0, 2))}'}
    full = {0: '()', 1: 'n', 2: '(n, n)'}[f.dims] if not f.comps else f'(n, {f.comps})'
    return _pick(draw, [f'{f.name}[{index[f.dims]}] = {v}', f'{f.name}.fill({v})',
                        f'{f.name}.from_numpy(np.full({full}, {v}))'])


def loss_kernel(fields, name='total'):
    """Reads every float field into the loss (`total`: nothing on the tape comes after it;
    `touch`: launched first, so that every element is used before any write of a constant)."""
    body, scope = [], []
    for k, f in enumerate(f for f in fields if f.dtype == 'ti.f64' and f.role != 'loss'):
        w = ['0.5', '-0.3', '0.7', '0.2', '-0.6'][k % 5]
        if f.dims == 0:
            scope.append(f'        loss[None] += {w} * ti.sin({f.ref}[None])')
        elif f.comps:
            body.append(f'            loss[None] += {w} * ti.sin({f.ref}[i][0]) + 0.1 * {f.ref}[i][1] ** 2')
        elif f.dims == 1:
            body.append(f'            loss[None] += {w} * ti.sin({f.ref}[i]) + 0.1 * {f.ref}[i] ** 2')
        elif f.name == 'X':     # time-major rollout (T + 1, n)
            body += [f'            for j in range({f.slot + 1}):',
                     f'                loss[None] += {w} * ti.sin({f.ref}[j, i] + 0.1 * j)']
        else:
            body += [f'            for j in range({f.slot + 1 if f.role == "roll" else "n"}):',
                     f'                loss[None] += {w} * ti.sin({f.ref}[i, j] + 0.1 * j)']
    return (['    @ti.kernel', f'    def {name}({_signature(fields)}):', '        for i in range(n):'] + body +
            (['            pass'] if not body else []) + scope)


def _kernel_names(kernel_lines):
    return [line.split('def ', 1)[1].split('(')[0] for line in kernel_lines if line.startswith('    def ')]


def _module(valid, n, seed, fields, kernel_lines, forward, segments, written, set_inside=()):
    """forward: [('launch', text) | ('python', text) | ('segment', k)]."""
    lines = ['"""A generated program of tests/rule_grammar.py; rerun: python tests/test_rules_generated.py THIS.py"""',
             'import numpy as np', 'import engine as ti', '', f'VALID = {valid}', f'N = {n}', f'SEED = {seed}', '', '',
             'def build():', f'    n = {n}']
    lines += ['    ' + f.decl() for f in fields] + ['']
    lines += kernel_lines
    for k, seg in enumerate(segments):
        lines += ['', f'    def _seg{k}():'] + [f'        {t}' for t in seg] + [f'    seg{k} = ti.capture(_seg{k})']
    lines += ['', '    def prepare():'] + [f'        seg{k}()' for k in range(len(segments))] + ['        pass']
    lines += ['', '    def forward():'] + ['        ' + (t if kind != 'segment' else f'seg{t}()') for kind, t in forward]
    lines += [f'        total({_args(fields, 0)})', '']
    state = ', '.join(f"'{f.name}': {f.name}" for f in fields if f.role != 'loss')
    # A constant written (from Python or by a no_grad kernel) over elements no launch on the
    # tape used yet sets an input: .grad is then the gradient with respect to the value
    # written, not the finite difference of the value before the tape (docs/rules.md).
    grads = [f.name for f in fields if f.grad and f.role != 'loss' and f.name not in set_inside]
    # the fields something writes (a rule error must name one of them)
    modified = sorted({x for f in fields if f.role not in ('const', 'index') or f.name in written
                       for x in (f.name, f.ref)})
    lines += [f'    return dict(forward=forward, prepare=prepare, loss=loss, state={{{state}}},',
              f'                grads={grads!r}, modified={modified!r}, kernels={sorted(_kernel_names(kernel_lines))!r})', '']
    return '\n'.join(lines)


@st.composite
def _segments(draw, forward):
    """Maybe turn a run of consecutive launches into a ti.capture'd segment (captured once by
    prepare(), outside the tape; replayed by forward())."""
    launches = [k for k, (kind, _) in enumerate(forward) if kind == 'launch']
    if not launches or 'capture' in EXCLUDE or draw(st.integers(0, 2)) > 0:
        return forward, []
    start = _pick(draw, launches)
    stop, length = start, draw(st.integers(1, 4))
    while stop + 1 < len(forward) and forward[stop + 1][0] == 'launch' and stop + 1 - start < length:
        stop += 1
    return forward[:start] + [('segment', 0)] + forward[stop + 1:], [[t for _, t in forward[start:stop + 1]]]


@st.composite
def may_break_source(draw):
    n = draw(st.sampled_from([3, 4]))
    fields = [F('a', 1)]
    optional = [F('b', 1), F('B', 2), F('s', 0), F('c', 1, False, 'const'), F('w', 1, False, 'scratch'),
                F('p', 1, True, nd=True), F('r', 1, False, 'const', nd=True), F('u', 1, comps=2)]
    fields += [f for f in optional if draw(st.integers(0, 2)) > 0 and not (f.nd and 'ndarray' in EXCLUDE)
               and not (f.comps and 'vector' in EXCLUDE)
               and not (f.role == 'scratch' and 'scratch' in EXCLUDE)]
    has_idx = draw(st.booleans()) and 'index' not in EXCLUDE
    if has_idx:
        fields.append(F('idx', 1, False, 'index', dtype='ti.i32'))
    fields.append(F('loss', 0, True, 'loss'))
    kernel_lines, names, written = [], [], set()
    for k in range(draw(st.integers(1, 3))):
        kernel_lines += draw(may_break_kernel(f'k{k}', fields, has_idx, written)) + ['']
        names.append(f'k{k}')
    if draw(st.integers(0, 2)) == 0 and 'no_grad' not in EXCLUDE:
        kernel_lines += draw(no_grad_kernel('ng', fields, has_idx, written)) + ['']
        names.append('ng')
    kernel_lines += loss_kernel(fields) + ['']
    forward = []
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.integers(0, 3)) == 0 and 'python' not in EXCLUDE:
            f = _pick(draw, [f for f in fields if f.role != 'loss'])
            forward.append(('python', draw(python_write(f, written))))
        else:
            forward.append(('launch', f'{_pick(draw, names)}({_args(fields, draw(st.integers(0, n - 1)))})'))
    for k in names:                     # every kernel is launched
        if not any(t.startswith(k + '(') for _, t in forward):
            forward.insert(draw(st.integers(0, len(forward))), ('launch', f'{k}({_args(fields, draw(st.integers(0, n - 1)))})'))
    if 'ng' in names or any(kind == 'python' for kind, _ in forward):
        # constants are written over elements launches used (see _module): read them all first
        kernel_lines += loss_kernel(fields, 'touch') + ['']
        forward.insert(0, ('launch', f'touch({_args(fields, 0)})'))
    forward, segments = draw(_segments(forward))
    return _module(False, n, draw(st.integers(0, 2 ** 16)), fields, kernel_lines, forward, segments, written)


# ---------------------------------------------------------------------------------------
# Valid by construction

@st.composite
def valid_source(draw):
    n = draw(st.sampled_from([3, 4]))
    T = draw(st.integers(2, 3))
    inputs = [F('a', 1)] + [f for f in (F('B', 2), F('s', 0), F('p', 1, nd=True)) if draw(st.booleans())]
    consts = [f for f in (F('c', 1, False, 'const'), F('r', 1, False, 'const', nd=True)) if draw(st.booleans())]
    inputs, consts = ([f for f in group if not (f.nd and 'ndarray' in EXCLUDE)] for group in (inputs, consts))
    has_idx = draw(st.booleans()) and 'index' not in EXCLUDE
    inter = [f for f in (F('h', 1), F('g', 1), F('H', 2)) if draw(st.booleans())] or [F('h', 1)]
    rolls = [f for f in (F('X', 2, shape=f'({T + 1}, n)', role='roll', slot=T),
                         F('Y', 2, shape=f'(n, {T + 1})', role='roll', slot=T)) if draw(st.booleans())]
    scratch = [F('w', 1, False, 'scratch')] if draw(st.booleans()) and 'scratch' not in EXCLUDE else []
    fields = inputs + consts + inter + rolls + scratch + \
        ([F('idx', 1, False, 'index', dtype='ti.i32')] if has_idx else []) + [F('loss', 0, True, 'loss')]
    readable = [(f, False) for f in inputs + consts]
    ctx = Ctx(i=True, serial=False, idx=has_idx)
    written = set()
    pieces = []          # ('loop', lines) | ('scope', lines) | ('kernel', lines, [launch args]) | ('python', text)
    if scratch:          # a float field without a gradient, written from constants before it is read
        if draw(st.booleans()) and 'python' not in EXCLUDE:
            pieces.append(('python', 'w.fill(0.5)'))
        else:
            pieces.append(('loop', ['        for i in range(n):', '            w[i] = 0.3 * i + 0.2 * m']))
        readable.append((scratch[0], False))
    for f in inputs + consts:            # writes from Python before anything reads
        if draw(st.integers(0, 5)) == 0 and 'python' not in EXCLUDE:
            pieces.append(('python', draw(python_write(f, written))))

    def loss_line(c):
        return f'loss[None] += {draw(expression(c, readable))}'

    for z in draw(st.permutations(inter + rolls)):
        if z in rolls:
            def at(t, i, z=z):
                return f'{z.name}[{t}, {i}]' if z.name == 'X' else f'{z.name}[{i}, {t}]'
            if draw(st.booleans()):      # the first slot computed, else an input
                pieces.append(('loop', ['        for i in range(n):', f'            {at(0, "i")} = {draw(expression(ctx, readable))}']))
            own = [at('t', 'i'), at('t', '(i + 1) % n'), at('t', 'n - 1 - i')]
            terms = ' + '.join(_pick(draw, UNARY).format(_pick(draw, own)) for _ in range(2))
            body = ['        for i in range(n):',
                    f'            {at("t + 1", "i")} = 0.6 * {at("t", "i")} + 0.4 * ({terms}) + {draw(expression(ctx, readable))}']
            if draw(st.booleans()):
                body.append(f'            loss[None] += 0.2 * ti.sin({_pick(draw, own)})')
            m = draw(st.integers(0, n - 1))
            pieces.append(('kernel', ['    @ti.kernel', f'    def step_{z.name}(t: ti.i32, {_signature(fields)}):'] + body,
                           [f'{t}, {_args(fields, m)}' for t in range(T)]))
            readable.append((z, False))
            continue
        has_store = draw(st.integers(0, 3)) > 0
        if has_store:
            if z.dims == 1:
                body = [f'            {z.name}[i] = {draw(expression(ctx, readable))}']
            else:
                body = ['            for j in range(n):',
                        f'                {z.name}[i, j] = {draw(expression(ctx.but(j=True), readable))}']
            if draw(st.integers(0, 2)) == 0:
                body.append('            ' + loss_line(ctx))
            pieces.append(('loop', ['        for i in range(n):'] + body))
        elif draw(st.booleans()) and 'python' not in EXCLUDE:
            pieces.append(('python', f'{z.name}.fill({_pick(draw, VALUES)})'))
        for _ in range(draw(st.integers(0 if has_store else 1, 2))):
            how = _pick(draw, ['par', 'inner', 'ser', 'scope', 'kernel'])
            zc = ctx.but(j=how == 'inner', serial=how in ('ser', 'scope', 'kernel'), i=how in ('par', 'inner', 'ser'))
            target = f'{z.name}[{_pick(draw, zc.general())}]' if z.dims == 1 else \
                f'{z.name}[{_pick(draw, zc.general())}, {_pick(draw, zc.general())}]'
            e = draw(expression(zc, readable))
            stmt = f'ti.atomic_add({target}, {e})' if draw(st.booleans()) else f'{target} += {e}'
            if how == 'par':
                pieces.append(('loop', ['        for i in range(n):', f'            {stmt}']))
            elif how == 'inner':
                cond = _pick(draw, ['j == 0', 'j < 2', 'i == m'])
                pieces.append(('loop', ['        for i in range(n):', f'            for j in range({_pick(draw, ["2", "3"])}):',
                                        f'                if {cond}:', f'                    {stmt}',
                                        '                else:', f'                    {loss_line(zc)}']))
            elif how == 'ser':
                pieces.append(('loop', ['        ti.loop_config(serialize=True)', '        for i in range(n):',
                                        f'            {stmt}']))
            elif how == 'scope':
                pieces.append(('scope', [f'        {stmt}']))
            else:       # one kernel launched with several arguments
                launches = draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=3))
                pieces.append(('kernel', ['    @ti.kernel', f'    def acc_{z.name}({_signature(fields)}):', f'        {stmt}'],
                               [_args(fields, m) for m in launches]))
        readable.append((z, False))
    # pack loops and kernel-scope code into kernels, in order
    kernel_lines, forward, current, count = [], [], None, 0
    for piece in pieces:
        if piece[0] in ('loop', 'scope'):
            if current is None or draw(st.integers(0, 2)) == 0:
                current = f'k{count}'
                count += 1
                kernel_lines += ['', '    @ti.kernel', f'    def {current}({_signature(fields)}):']
                forward.append(('launch', f'{current}({_args(fields, draw(st.integers(0, n - 1)))})'))
            kernel_lines += piece[1]
            continue
        current = None
        if piece[0] == 'python':
            forward.append(piece)
        else:
            kernel_lines += [''] + piece[1]
            name = _kernel_names(piece[1])[0]
            forward += [('launch', f'{name}({a})') for a in piece[2]]
    kernel_lines += [''] + loss_kernel(fields) + ['']
    forward, segments = draw(_segments(forward))
    set_inside = {text.split('[')[0].split('.')[0] for kind, text in forward if kind == 'python'}
    return _module(True, n, draw(st.integers(0, 2 ** 16)), fields, kernel_lines, forward, segments, written,
                   set_inside)


@st.composite
def program_source(draw, valid=None):
    """One program: valid by construction (about a third) or may_break."""
    if valid is None:
        valid = draw(st.integers(0, 2)) == 0
    return draw(valid_source() if valid else may_break_source())
