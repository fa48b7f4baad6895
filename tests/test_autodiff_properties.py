"""Property-based autodiff tests: generated programs (tests/kernel_grammar.py) whose reverse-
and forward-mode Jacobians, and for a subset Hessians, must agree with float64 central
finite differences.

test_generated_programs checks about 530 programs (21 cases of about 22, and 5 small cases
whose Hessians are checked too and which are compared with the IR interpreter) in a child process
in which every parallel loop is split across 2 threads (engine/backend/cpu/threadpool.py sends a loop to
the pool only above ~10 us of measured work; the child lowers that to 0 before the pool is
built, which only a fresh process can do). test_parallel_adjoints_do_not_race runs large
transposed / shifted parallel loops on 2 threads and compares their gradients and tangents
with the same kernels serialized. scripts/fuzz_autodiff.py runs any number of programs
with fresh randomness.

Environment switches (all optional):
  AUTODIFF_FUZZ_EXAMPLES=K    cases to draw (default 21; each holds about 22 programs)
  AUTODIFF_FUZZ_HESSIAN_EXAMPLES=K  small cases whose Hessians are checked too (default 5)
  AUTODIFF_FUZZ_RANDOM=1      fresh randomness instead of the derandomized normal run
  AUTODIFF_FUZZ_THREADS=1|2   threads of the engine's pool (default 2)
  AUTODIFF_FORCE_SPLIT=1      split every parallel loop (set in the child; needs a fresh process)
  AUTODIFF_IN_PROCESS=1       run the cases in this process (no child, loops not forced to split)
  AUTODIFF_FUZZ_SHRINK=1      let hypothesis shrink a failing case (slow: every step compiles)
  AUTODIFF_GRAMMAR_EXCLUDE=a,b  leave constructs out while a known bug is open (kernel_grammar.py)
  AUTODIFF_ORACLES=interpret  also compare with `ti.init(interpret=True)` (default: when
                              engine/backend/interpret.py exists), on the small cases (those whose
                              Hessians are checked) or every AUTODIFF_ORACLE_EVERY-th case

A failing case can be rerun alone: `python tests/test_autodiff_properties.py case.py`.
"""
import importlib.util
import itertools
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import engine as ti                                     # noqa: E402
from engine.backend.cpu import threadpool  # noqa: E402
from ad_helpers import generated_source_path             # noqa: E402
from kernel_grammar import N, case_source, race_source  # noqa: E402

EXAMPLES = int(os.environ.get('AUTODIFF_FUZZ_EXAMPLES', 21))
HESSIAN_EXAMPLES = int(os.environ.get('AUTODIFF_FUZZ_HESSIAN_EXAMPLES', 5))
MIN_PROGRAMS = 500 if 'AUTODIFF_FUZZ_EXAMPLES' not in os.environ else 0
RANDOM = bool(os.environ.get('AUTODIFF_FUZZ_RANDOM'))
THREADS = int(os.environ.get('AUTODIFF_FUZZ_THREADS', 2))
FORCE_SPLIT = os.environ.get('AUTODIFF_FORCE_SPLIT') == '1'
IN_PROCESS = FORCE_SPLIT or THREADS == 1 or bool(os.environ.get('AUTODIFF_IN_PROCESS'))
SHRINK = bool(os.environ.get('AUTODIFF_FUZZ_SHRINK'))
ORACLE_EVERY = int(os.environ.get('AUTODIFF_ORACLE_EVERY', 0))    # 0: the small cases
RACE_N = int(os.environ.get('AUTODIFF_RACE_N', 640))

if FORCE_SPLIT:
    # Every parallel loop of this process goes to the pool (a loop of n >= 2 iterations is
    # cut in one chunk per thread). The threshold is compiled into the pool's runtime when
    # the first ti.init loads it, so it can only be changed before that.
    if threadpool._address is not None:
        raise RuntimeError('AUTODIFF_FORCE_SPLIT=1 needs a process in which no ti.init ran yet')
    threadpool.PARALLEL_MIN_US = 0

VALUE_LIMIT = 1e6       # an output beyond this (or not finite) is counted and not compared
STEP = 1e-6             # finite-difference step; 1e-5 and 1e-7 when checking its stability
HESSIAN_STEP = 1e-5
_counter = itertools.count()


class Stats:
    """What the checks covered: reported at the end of a run, skips must stay rare."""

    def __init__(self):
        self.cases = self.programs = self.entries = self.hessian_cases = self.oracle_cases = 0
        self.unstable = []          # (case, row, column): FD disagrees with itself across steps
        self.large = []             # (case, row): output not finite or beyond VALUE_LIMIT
        self.started = time.perf_counter()

    def skipped_programs(self):
        return len({(c, r) for c, r, *_ in self.unstable + self.large})

    def summary(self):
        return (f'{self.programs} generated programs in {self.cases} cases checked in '
                f'{time.perf_counter() - self.started:.1f} s ({THREADS} threads'
                f'{", every parallel loop split" if FORCE_SPLIT else ""}): {self.entries} derivative '
                f'entries vs finite differences, {self.hessian_cases} cases with Hessians, '
                f'{self.oracle_cases} compared with a second oracle; skipped: '
                f'{len(self.unstable)} entries where finite differences are unstable, '
                f'{len(self.large)} output rows too large, {self.skipped_programs()} programs touched')


STATS = Stats()


def load_generated(source, announce=False):
    path = generated_source_path(f'generated_{next(_counter)}.py')
    with open(path, 'w') as f:
        f.write(source)
    if announce:        # a crash of the process (not an exception) still names the case
        print(f'checking {path}', file=sys.stderr, flush=True)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------
# One generated case in a fresh program

class Case:
    """The fields of one generated case (see kernel_grammar.case_source) and its kernels,
    built in a fresh program by ti.init(**init)."""

    def __init__(self, source, init=None):
        self.source = source
        m = self.module = load_generated(source, announce=not init)
        ti.init(**{'default_fp': ti.f64, 'cpu_max_num_threads': THREADS, **(init or {})})
        self.n = N

        def f(name, shape):
            return ti.field(ti.f64, shape=shape, needs_grad=True, name=name)
        self.x, self.X, self.z, self.loss = f('x', N), f('X', (N, N)), f('z', ()), f('loss', ())
        self.y, self.h = f('y', (m.Y_ROWS, N)), f('h', (m.Y_ROWS, N))
        self.o, self.yf = f('o', (m.O_ROWS, N)), f('yf', (max(m.F_ROWS, 1), N))
        self.acc = f('acc', (max(m.A_ROWS, 1), N))
        self.cnt = ti.field(ti.i32, shape=N, name='cnt')
        self.cnt.from_numpy(np.array(m.COUNTS, dtype=np.int32))
        self.xa = ti.ndarray(ti.f64, shape=N, needs_grad=True)
        self.xa_const = ti.ndarray(ti.f64, shape=N)        # xa's values, without a gradient
        self.ya = ti.ndarray(ti.f64, shape=N, needs_grad=True)
        self.ca = ti.ndarray(ti.i32, shape=N)
        self.ca.from_numpy(np.array(m.ND_COUNTS, dtype=np.int32))
        rng = np.random.default_rng(m.SEED)
        self.base = {'x': rng.uniform(-1.5, 1.5, N), 'X': rng.uniform(-1.5, 1.5, (N, N)),
                     'z': np.array(rng.uniform(-1.0, 1.0)), 'xa': rng.uniform(-1.5, 1.5, N)}
        self.inputs = [('x', self.x), ('X', self.X), ('z', self.z), ('xa', self.xa)]
        self.outputs = [('y', self.y), ('o', self.o), ('yf', self.yf), ('ya', self.ya),
                        ('z', self.z), ('loss', self.loss)]
        self.scratch = [self.y, self.h, self.o, self.yf, self.acc, self.loss, self.ya]
        self.in_cols = _slices(self.inputs)
        self.out_rows = _slices(self.outputs)
        self.labels = []            # the program (output row) of each output entry
        for name, obj in self.outputs:
            rows = obj.shape[0] if name in ('y', 'o', 'yf') else 1
            per = obj.data.size // rows
            self.labels += [f'{name}[{r}]' if name in ('y', 'o', 'yf') else name
                            for r in range(rows) for _ in range(per)]
        self._run = m.build(self)

    def run(self, mode):
        """Load the inputs, zero the outputs and intermediates, launch the kernels."""
        for name, obj in self.inputs:
            obj.from_numpy(self.base[name])
        self.xa_const.from_numpy(self.base['xa'])
        for obj in self.scratch:
            obj.fill(0)
        self._run(mode)

    def values(self, mode='value'):
        self.run(mode)
        return np.concatenate([obj.to_numpy().reshape(-1) for _, obj in self.outputs])

    def perturbed(self, col, delta, fn):
        """fn() with input entry `col` (of the concatenated inputs) moved by delta."""
        name, k = self.input_entry(col)
        saved = self.base[name].copy()
        self.base[name].reshape(-1)[k] += delta
        try:
            return fn()
        finally:
            self.base[name] = saved

    def input_entry(self, col):
        for name, sl in self.in_cols.items():
            if sl.start <= col < sl.stop:
                return name, col - sl.start
        raise IndexError(col)

    def fd_column(self, col, h, mode='value'):
        return (self.perturbed(col, h, lambda: self.values(mode)) -
                self.perturbed(col, -h, lambda: self.values(mode))) / (2 * h)

    # --- derivatives -------------------------------------------------------------------
    def reverse_jacobian(self):
        """One tape per output entry (ndarray outputs too: ti.ad.jacobian zeroes an
        ndarray's gradient when its tape first sees it, which would drop the seed)."""
        J = np.full((len(self.labels), self.in_cols['xa'].stop), np.nan)
        for name, obj in self.outputs:
            if name == 'yf':            # forward mode only
                continue
            rows = self.out_rows[name]
            for e in range(obj.data.size):
                ti.ad.clear_all_gradients()
                for nd in (self.xa, self.ya):
                    nd.grad.fill(0)
                obj.grad.data.reshape(-1)[e] = 1
                with ti.ad.Tape(loss=None, clear_gradients=False):
                    self.run('reverse')
                J[rows.start + e] = np.concatenate([obj_in.grad.to_numpy().reshape(-1)
                                                    for _, obj_in in self.inputs])
        return J

    def forward_jacobian(self):
        """ti.ad.jacobian in forward mode: field inputs and outputs (ndarrays have no tangent)."""
        inputs = [self.x, self.X, self.z]
        outputs = [obj for name, obj in self.outputs if name != 'ya']
        part = ti.ad.jacobian(lambda: self.run('forward'), inputs, outputs, mode='forward')
        J = np.full((len(self.labels), self.in_cols['xa'].stop), np.nan)
        rows = np.concatenate([np.arange(self.out_rows[name].start, self.out_rows[name].stop)
                               for name, _ in self.outputs if name != 'ya'])
        J[np.ix_(rows, np.arange(self.in_cols['xa'].start))] = part
        return J

    def gradient(self):
        """d loss / d (x, X, z) by the classic ti.ad.Tape(loss)."""
        with ti.ad.Tape(self.loss):
            self.run('hessian')
        return np.concatenate([obj.grad.to_numpy().reshape(-1) for obj in (self.x, self.X, self.z)])

    def hessian(self):
        """Columns x[0..N-1] and z of the Hessian of loss w.r.t. (x, X, z), forward over
        reverse: ti.ad.hvp for each x[k], ti.ad.hessian for the 0-D z; after each, every
        input's grad.dual holds its part of the column (the cross terms included)."""
        def run():
            self.run('hessian')

        def column(returned):
            duals = np.concatenate([obj.grad.dual.to_numpy().reshape(-1) for obj in (self.x, self.X, self.z)])
            return duals, np.asarray(returned).reshape(-1)

        columns, own = {}, {}
        for k in range(N):
            col = self.in_cols['x'].start + k
            columns[col], own[col] = column(ti.ad.hvp(run, self.loss, self.x, np.eye(N)[k]))
            own[col] = (own[col], self.in_cols['x'])
        col = self.in_cols['z'].start
        columns[col], returned = column(ti.ad.hessian(run, self.loss, self.z))
        own[col] = (returned, self.in_cols['z'])
        for col, (returned, where) in own.items():     # what the API returns is what it left in the duals
            np.testing.assert_allclose(returned, columns[col][where], rtol=1e-12, atol=0,
                                       err_msg=f'ti.ad.hvp / hessian column {col}')
        return columns


def _slices(named):
    out, at = {}, 0
    for name, obj in named:
        out[name] = slice(at, at + obj.data.size)
        at += obj.data.size
    return out


def derivatives(source, init=None, hessian=None):
    """Everything the checks compare, computed by the engine configured with ti.init(**init):
    {'case', 'values', 'reverse', 'forward', 'hessian' (or None)}. A second oracle (e.g. the
    IR interpreter, init={'interpret': True}) is compared with the native one entry by entry."""
    case = Case(source, init)
    values = case.values()
    reverse = case.reverse_jacobian()
    forward = case.forward_jacobian()
    want = case.module.HESSIAN if hessian is None else hessian
    result = {'case': case, 'values': values, 'reverse': reverse, 'forward': forward,
              'hessian': case.hessian() if want else None,
              'gradient': case.gradient() if want else None}
    return result


# ---------------------------------------------------------------------------------------
# Comparisons

def _tol(fd, value_scale, rtol=1e-5, atol=1e-6):
    return rtol * np.abs(fd) + atol + 1e-8 * value_scale


def _fail(case, what, row, col, got, want, extra=''):
    name, k = case.input_entry(col)
    raise AssertionError(
        f'{what} disagrees in program {case.labels[row] if row is not None else "loss"} '
        f'(output entry {row}) w.r.t. {name}[{k}]: {got!r} vs {want!r}{extra}\n'
        f'--- generated case ---\n{case.source}')


def check_against_finite_differences(d, case_id=None):
    case, values = d['case'], d['values']
    case_id = STATS.cases if case_id is None else case_id
    large = ~np.isfinite(values) | (np.abs(values) > VALUE_LIMIT)
    skip_rows = {case.labels[r] for r in np.flatnonzero(large)}
    STATS.large += [(case_id, label) for label in sorted(skip_rows)]
    live = np.array([label not in skip_rows for label in case.labels])
    scale = np.abs(np.where(np.isfinite(values), values, 0))
    fd = np.stack([case.fd_column(col, STEP) for col in range(case.in_cols['xa'].stop)], axis=1)
    for what in ('reverse', 'forward'):
        J = d[what]
        mask = np.repeat(live[:, None], J.shape[1], axis=1)
        if what == 'reverse':
            mask[case.out_rows['yf']] = False       # forward-only kernel
            if case.module.HESSIAN:                 # xa is passed without a gradient there
                mask[:, case.in_cols['xa']] = False
        else:
            mask[case.out_rows['ya']] = False       # ndarrays have no tangents
            mask[:, case.in_cols['xa']] = False
        STATS.entries += int(mask.sum())
        bad = mask & ~(np.abs(J - fd) <= _tol(fd, scale[:, None]))
        for row, col in zip(*np.nonzero(bad)):
            _confirm(case, case_id, what, row, col, J[row, col], fd[row, col], scale[row])
    # the two modes against each other, also where finite differences were unstable
    both = live[:, None] & ~np.isnan(d['reverse']) & ~np.isnan(d['forward'])
    both[case.out_rows['yf']] = False
    both[case.out_rows['ya']] = False
    both[:, case.in_cols['xa']] = False
    rev, fwd = d['reverse'], d['forward']
    bad = both & ~(np.abs(rev - fwd) <= 1e-9 * np.abs(rev) + 1e-11 * (1 + scale[:, None]))
    for row, col in zip(*np.nonzero(bad)):
        _fail(case, 'forward mode vs reverse mode', row, col, fwd[row, col], rev[row, col])
    if d['hessian'] is not None:
        check_hessian(d, case_id)


def _confirm(case, case_id, what, row, col, got, fd, scale):
    """A disagreement with finite differences at STEP: a bug, unless finite differences
    disagree with themselves at steps 10x larger and smaller (a kink or a branch switch
    within the step), which is counted as a skip. A NaN derivative is never skipped."""
    others = [case.fd_column(col, STEP * 10)[row], case.fd_column(col, STEP / 10)[row]]
    stable = all(abs(o - fd) <= _tol(fd, scale, 1e-4, 1e-5) for o in others)
    if stable or not np.isfinite(got):
        _fail(case, f'{what} mode vs finite differences', row, col, got, fd,
              f' (finite differences at steps {STEP * 10:g}, {STEP / 10:g}: {others[0]!r}, {others[1]!r})')
    STATS.unstable.append((case_id, case.labels[row], col))


def check_hessian(d, case_id):
    case, H, g0 = d['case'], d['hessian'], d['gradient']
    STATS.hessian_cases += 1
    for col, column in H.items():
        fd = (case.perturbed(col, HESSIAN_STEP, case.gradient) -
              case.perturbed(col, -HESSIAN_STEP, case.gradient)) / (2 * HESSIAN_STEP)
        scale = np.abs(g0)
        bad = ~(np.abs(column - fd) <= _tol(fd, scale, 1e-5, 1e-5))
        for k in np.flatnonzero(bad):
            def other(h, k=k, col=col):
                return ((case.perturbed(col, h, case.gradient) - case.perturbed(col, -h, case.gradient)) / (2 * h))[k]
            others = [other(HESSIAN_STEP * 10), other(HESSIAN_STEP / 10)]
            if all(abs(o - fd[k]) <= _tol(fd[k], scale[k], 1e-3, 1e-4) for o in others) or \
                    not np.isfinite(column[k]):
                name, j = case.input_entry(k)
                _fail(case, f'Hessian (d/d{name}[{j}] of d loss)', None, col, column[k], fd[k],
                      f' (finite differences of the gradient at other steps: {others})')
            STATS.unstable.append((case_id, 'hessian', col))


def compare_oracles(a, b, what='interpreted'):
    """The same case under two engine configurations: every derivative must agree."""
    case = a['case']
    for key in ('values', 'reverse', 'forward'):
        x, y = a[key], b[key]
        same = (np.isnan(x) == np.isnan(y)) & ~np.isnan(x)
        bad = np.isnan(x) != np.isnan(y)
        bad |= same & ~(np.abs(x - y) <= 1e-9 * np.abs(x) + 1e-12)
        if bad.any():
            idx = tuple(np.argwhere(bad)[0])
            raise AssertionError(f'{what} {key} differs from native at {idx}: {y[idx]!r} vs {x[idx]!r}'
                                 f'\n--- generated case ---\n{case.source}')
    if a.get('hessian') is not None and b.get('hessian') is not None:
        for col in a['hessian']:
            np.testing.assert_allclose(b['hessian'][col], a['hessian'][col], rtol=1e-9, atol=1e-12,
                                       err_msg=f'{what} Hessian column {col}\n{case.source}')


def second_oracles():
    """Engine configurations compared with the native one on a subset of cases: the IR
    interpreter once engine/backend/interpret.py exists (AUTODIFF_ORACLES= turns it off)."""
    wanted = os.environ.get('AUTODIFF_ORACLES')
    if wanted is None:
        wanted = 'interpret' if importlib.util.find_spec('engine.backend.interpret') is not None else ''
    return [{name: True} for name in filter(None, wanted.split(','))]


def check_generated_kernel(source, case_id=None):
    """Reverse and forward mode (and Hessians for a subset) vs finite differences; then, every
    ORACLE_EVERY-th case (default: the small cases), the same derivatives from each second
    oracle (engine configuration) vs the native ones."""
    case_id = STATS.cases if case_id is None else case_id
    try:
        native = derivatives(source)
    except AssertionError:
        raise
    except Exception as exc:
        raise AssertionError(f'{type(exc).__name__}: {exc}\n--- generated case ---\n{source}') from exc
    check_against_finite_differences(native, case_id)
    if (case_id % ORACLE_EVERY == 0) if ORACLE_EVERY else native['case'].module.HESSIAN:
        for init in second_oracles():
            other = derivatives(source, init, hessian=False)       # Jacobians only: Hessians interpreted are slow
            compare_oracles(native, other, what=','.join(init))
            STATS.oracle_cases += 1
    STATS.cases += 1
    STATS.programs += native['case'].module.PROGRAMS


def _settings(examples):
    return settings(max_examples=max(1, examples), deadline=None, derandomize=not RANDOM, database=None,
                    phases=[Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if SHRINK else []),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


@_settings(EXAMPLES)
@given(case_source())
def check_generated_cases(source):
    check_generated_kernel(source)


@_settings(HESSIAN_EXAMPLES)
@given(case_source(hessian=True))
def check_hessian_cases(source):
    check_generated_kernel(source)


def run_generated_cases():
    """Draw and check the cases (this process); returns the statistics."""
    global STATS
    STATS = Stats()
    if EXAMPLES:
        check_generated_cases()
    if HESSIAN_EXAMPLES:
        check_hessian_cases()
    print(STATS.summary())
    assert STATS.programs >= MIN_PROGRAMS, STATS.summary()
    # a skip is a program whose finite differences could not be trusted: must stay rare
    assert STATS.skipped_programs() <= max(3, STATS.programs // 50), STATS.summary()
    return STATS


def test_generated_programs():
    if IN_PROCESS:
        run_generated_cases()
        return
    env = dict(os.environ, AUTODIFF_FORCE_SPLIT='1')
    child = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-s', '-x', '-p', 'no:cacheprovider',
                            f'{os.path.abspath(__file__)}::test_generated_programs'],
                           env=env, cwd=os.path.dirname(HERE), capture_output=True, text=True)
    print(child.stdout[-4000:])
    assert child.returncode == 0, (child.stdout + child.stderr)[-20000:]


# ---------------------------------------------------------------------------------------
# Races: large transposed / shifted parallel loops on 2 threads vs the same loops serialized

class RaceFields:
    def __init__(self, n, rows):
        self.n = n
        self.x = ti.field(ti.f64, shape=n, needs_grad=True)
        self.X = ti.field(ti.f64, shape=(n, n), needs_grad=True)
        self.y = ti.field(ti.f64, shape=(rows, n), needs_grad=True)
        self.loss = ti.field(ti.f64, shape=(), needs_grad=True)


def check_race(source, n=RACE_N, passes=6, seed=0):
    ti.init(default_fp=ti.f64, cpu_max_num_threads=2)
    rows = load_generated(source.replace('{serial}', 'pass')).ROWS
    F = RaceFields(n, rows)
    rng = np.random.default_rng(seed)
    F.x.from_numpy(rng.uniform(-1, 1, n))
    F.X.from_numpy(rng.uniform(-1, 1, (n, n)))
    direction = rng.uniform(-1, 1, (n, n))
    results = {}
    for name, line in (('serial', 'ti.loop_config(serialize=True)'), ('parallel', 'pass')):
        run = load_generated(source.replace('{serial}', line)).build(F)

        def once():
            F.y.fill(0)
            with ti.ad.Tape(F.loss):
                run()
            grads = (F.loss[None], F.x.grad.to_numpy(), F.X.grad.to_numpy())
            F.y.fill(0)
            F.loss[None] = 0
            with ti.ad.FwdMode(loss=F.loss, param=F.X, seed=direction):
                run()
            return grads + (F.loss.dual[None], F.y.dual.to_numpy())
        results[name] = [once() for _ in range(1 if name == 'serial' else passes)]
    want = results['serial'][0]
    assert all(np.isfinite(np.asarray(w)).all() for w in want), f'the serial reference is not finite\n{source}'
    for k, got in enumerate(results['parallel']):
        for what, a, b in zip(('loss', 'x.grad', 'X.grad', 'loss.dual', 'y.dual'), got, want):
            a, b = np.asarray(a), np.asarray(b)
            bad = ~(np.abs(a - b) <= 1e-9 * np.abs(b) + 1e-9 * (1 + np.abs(b).max()))
            assert not bad.any(), (
                f'pass {k} on 2 threads: {what} differs from the serialized loops at '
                f'{np.argwhere(bad)[:5].tolist()} ({int(bad.sum())} entries): '
                f'{a[bad][:3].tolist()} vs {b[bad][:3].tolist()}\n{source}')


@settings(max_examples=int(os.environ.get('AUTODIFF_RACE_EXAMPLES', 3)), deadline=None,
          derandomize=not RANDOM, database=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow])
@given(race_source())
def check_race_cases(source):
    check_race(source)


def test_parallel_adjoints_do_not_race():
    """x[i, j] * x[j, i]-style loops: adjoints and tangents scattered into other iterations'
    elements must be atomic (a lost update shows up as a difference from the serial run)."""
    check_race_cases()


if __name__ == '__main__':      # python tests/test_autodiff_properties.py case.py [...]
    for path in sys.argv[1:]:
        with open(path) as f:
            check_generated_kernel(f.read())
        print(f'{path}: ok')
    print(STATS.summary())
