"""Property-based autodiff tests: generated programs (tests/kernel_grammar.py) whose reverse-
and forward-mode Jacobians, and for a subset Hessians, must agree with float64 central
finite differences.

Besides finite differences, every case gets the dot-product test <J v, w> = <v, J^T w>: one
forward-mode pass with every input (x, X, z, xw) seeded along a random direction v against
one reverse-mode pass with every output (y, o, z, loss, yw) seeded with random weights w
(float64, relative tolerance 1e-9 of the terms' magnitudes), and both against a central
difference along v. No generator shares this oracle with the engine: it seeds all inputs
and outputs at once where the Jacobians seed one entry at a time, and it covers xw, whose
Jacobian is not computed entry by entry. Every case is then run again with optional compile
passes disabled (ti.init(disable_passes=...), the names in engine.runtime.pipeline's
OPTIONAL_PASSES or engine.core.passes.OPTIONAL): its Jacobians, Hessians and dot-product
test against the same finite differences, the native engine with every pass on and the
interpreter where that ran (pass_variants: each pass alone and all together in turn, two
variants on each small case and one on every third other case, so that a normal run turns
each pass off on about three cases).

test_generated_programs checks about 330 programs (13 cases of about 22, and 4 small cases
whose Hessians are checked too and which are compared with the IR interpreter; the long runs
are scripts/fuzz_autodiff.py's) in a child process in which every parallel loop is split across
2 threads, and every other case runs on one thread (whole loops, as LLVM vectorized them) (engine/backend/cpu/threadpool.py sends a loop to
the pool only above ~10 us of measured work; the child lowers that to 0 before the pool is
built, which only a fresh process can do). test_parallel_adjoints_do_not_race runs large
transposed / shifted parallel loops on 2 threads and compares their gradients and tangents
with the same kernels serialized. scripts/fuzz_autodiff.py runs any number of programs
with fresh randomness.

Environment switches (all optional):
  AUTODIFF_FUZZ_EXAMPLES=K    cases to draw (default 13; each holds about 22 programs)
  AUTODIFF_FUZZ_HESSIAN_EXAMPLES=K  small cases whose Hessians are checked too (default 4)
  AUTODIFF_FUZZ_RANDOM=1      fresh randomness instead of the derandomized normal run
  AUTODIFF_FUZZ_THREADS=1|2   threads of the engine's pool (default 2)
  AUTODIFF_FORCE_SPLIT=1      split every parallel loop (set in the child; needs a fresh process)
  AUTODIFF_IN_PROCESS=1       run the cases in this process (no child, loops not forced to split)
  AUTODIFF_FUZZ_SHRINK=1      let hypothesis shrink a failing case (slow: every step compiles)
  AUTODIFF_GRAMMAR_EXCLUDE=a,b  leave constructs out while a known bug is open (kernel_grammar.py)
  AUTODIFF_ORACLES=interpret  also compare with `ti.init(interpret=True)` (default: when
                              engine/backend/interpret.py exists), on the small cases (those whose
                              Hessians are checked) or every AUTODIFF_ORACLE_EVERY-th case
  AUTODIFF_PASSES=rotate|all|none|a,b  the optional passes disabled in a second run of a case
                              (default rotate: two variants on each small case, one on every
                              AUTODIFF_PASS_EVERY-th (3) other case; all: every variant, every case)
  AUTODIFF_FAILURES=DIR       where a failing case is saved (default $TMPDIR/autodiff_property_failures)

A failing case can be rerun alone: `python tests/test_autodiff_properties.py case.py`, with
passes off: `python tests/test_autodiff_properties.py --disable-passes simplify,nan_guards case.py`.
"""
import hashlib
import importlib.util
import itertools
import os
import re
import subprocess
import sys
import tempfile
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

EXAMPLES = int(os.environ.get('AUTODIFF_FUZZ_EXAMPLES', 13))
HESSIAN_EXAMPLES = int(os.environ.get('AUTODIFF_FUZZ_HESSIAN_EXAMPLES', 4))
MIN_PROGRAMS = 300 if 'AUTODIFF_FUZZ_EXAMPLES' not in os.environ else 0
RANDOM = bool(os.environ.get('AUTODIFF_FUZZ_RANDOM'))
THREADS = int(os.environ.get('AUTODIFF_FUZZ_THREADS', 2))
FORCE_SPLIT = os.environ.get('AUTODIFF_FORCE_SPLIT') == '1'
IN_PROCESS = FORCE_SPLIT or THREADS == 1 or bool(os.environ.get('AUTODIFF_IN_PROCESS'))
SHRINK = bool(os.environ.get('AUTODIFF_FUZZ_SHRINK'))
ORACLE_EVERY = int(os.environ.get('AUTODIFF_ORACLE_EVERY', 0))    # 0: the small cases
RACE_N = int(os.environ.get('AUTODIFF_RACE_N', 640))
FAILURES = os.environ.get('AUTODIFF_FAILURES', os.path.join(tempfile.gettempdir(), 'autodiff_property_failures'))
PASSES = os.environ.get('AUTODIFF_PASSES', 'rotate')
PASS_OFFSET = int.from_bytes(os.urandom(2), 'little') if RANDOM else 0
PASS_EVERY = int(os.environ.get('AUTODIFF_PASS_EVERY', 3))    # big cases run with passes off: 1 in this many
CASE_THREADS = THREADS      # the threads of the case being checked (_check_generated_kernel)

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
        self.dot_checks = 0
        self.pass_variants = {}     # disabled passes -> cases checked with them
        self.big_seen = self.small_seen = self.turn = 0
        self.unstable = []          # (case, row, column): FD disagrees with itself across steps
        self.large = []             # (case, row): output not finite or beyond VALUE_LIMIT
        self.started = time.perf_counter()

    def _variants(self):
        return ', '.join(f'{"+".join(off)} x{count}' for off, count in sorted(self.pass_variants.items())) or 'none'

    def skipped_programs(self):
        return len({(c, r) for c, r, *_ in self.unstable + self.large})

    def summary(self):
        return (f'{self.programs} generated programs in {self.cases} cases checked in '
                f'{time.perf_counter() - self.started:.1f} s ({THREADS} threads'
                f'{", every parallel loop split" if FORCE_SPLIT else ""}): {self.entries} derivative '
                f'entries vs finite differences, {self.hessian_cases} cases with Hessians, '
                f'{self.oracle_cases} compared with a second oracle, {self.dot_checks} dot-product tests; '
                f'with passes disabled: {self._variants()}; skipped: '
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
        ti.init(**{'default_fp': ti.f64, 'cpu_max_num_threads': CASE_THREADS, **(init or {})})
        self.n = N

        def f(name, shape):
            return ti.field(ti.f64, shape=shape, needs_grad=True, name=name)
        self.x, self.X, self.z, self.loss = f('x', N), f('X', (N, N)), f('z', ()), f('loss', ())
        self.y, self.h = f('y', (m.Y_ROWS, N)), f('h', (m.Y_ROWS, N))
        self.o, self.yf = f('o', (m.O_ROWS, N)), f('yf', (max(m.F_ROWS, 1), N))
        self.acc = f('acc', (max(m.A_ROWS, 1), N))
        # the wide loops' field xw (NW entries) and their output rows yw: checked through the
        # loss (one row of the Jacobian) and the dot-product test (check_dot_product)
        self.nw = getattr(m, 'NW', 4)
        self.xw, self.yw = f('xw', self.nw), f('yw', (max(getattr(m, 'W_ROWS', 0), 1), self.nw))
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
        self.base['xw'] = rng.uniform(-1.5, 1.5, self.nw)
        self.inputs = [('x', self.x), ('X', self.X), ('z', self.z), ('xa', self.xa)]
        self.outputs = [('y', self.y), ('o', self.o), ('yf', self.yf), ('ya', self.ya),
                        ('z', self.z), ('loss', self.loss)]
        # the dot-product test: the float field inputs and the outputs both modes write
        self.dot_inputs = [('x', self.x), ('X', self.X), ('z', self.z), ('xw', self.xw)]
        self.dot_outputs = [('y', self.y), ('o', self.o), ('z', self.z), ('loss', self.loss), ('yw', self.yw)]
        self.scratch = [self.y, self.h, self.o, self.yf, self.acc, self.loss, self.ya, self.yw]
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
        self.load()
        self._run(mode)

    def load(self):
        for name, obj in self.inputs + [('xw', self.xw)]:
            obj.from_numpy(self.base[name])
        self.xa_const.from_numpy(self.base['xa'])
        for obj in self.scratch:
            obj.fill(0)

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

    def along(self, direction, h, fn):
        """fn() with the inputs moved by h * direction ({input name: array})."""
        saved = {name: self.base[name].copy() for name in direction}
        for name, d in direction.items():
            self.base[name] = self.base[name] + h * d
        try:
            return fn()
        finally:
            self.base.update(saved)

    def dot_values(self, mode='value'):
        self.run(mode)
        return {name: obj.to_numpy() for name, obj in self.dot_outputs}

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

    def tangents(self, v):
        """Forward mode: the outputs' tangents J v for the input direction v ({name: array}),
        every input seeded at once (one ti.ad.FwdMode)."""
        (first, param) = self.dot_inputs[0]
        with ti.ad.FwdMode(loss=self.y, param=param, seed=v[first].reshape(-1)):
            self.load()         # (a write from Python zeroes the tangents of what it writes)
            for name, obj in self.dot_inputs:
                obj.dual.from_numpy(v[name])
            self._run('forward')
        return {name: obj.dual.to_numpy() for name, obj in self.dot_outputs}

    def cotangents(self, w):
        """Reverse mode: the inputs' adjoints J^T w for the output weighting w ({name: array}),
        every output seeded at once (one ti.ad.Tape)."""
        ti.ad.clear_all_gradients()
        for nd in (self.xa, self.ya):
            nd.grad.fill(0)
        for name, obj in self.dot_outputs:      # z is an input and an output: its seed is w['z']
            obj.grad.from_numpy(w[name])
        with ti.ad.Tape(loss=None, clear_gradients=False):
            self.run('reverse')
        return {name: obj.grad.to_numpy() for name, obj in self.dot_inputs}

    def dot_product(self):
        """What the dot-product test compares (check_dot_product): a random input direction v and
        output weighting w (from the case's seed: the same under every engine configuration), the
        outputs' values, J v (forward mode) and J^T w (reverse mode). Outputs whose values are too
        large or not finite get weight 0."""
        rng = np.random.default_rng(self.module.SEED + 1)
        v = {name: np.array(rng.uniform(-1, 1, obj.shape)) for name, obj in self.dot_inputs}
        values = self.dot_values()
        w = {}
        for name, obj in self.dot_outputs:
            live = np.isfinite(values[name]) & (np.abs(values[name]) <= VALUE_LIMIT)
            w[name] = np.where(live, rng.uniform(-1, 1, obj.shape), 0.0)
        return {'v': v, 'w': w, 'values': values, 'jv': self.tangents(v), 'jtw': self.cotangents(w)}

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
    result = {'case': case, 'values': values, 'reverse': reverse, 'forward': forward, 'dot': case.dot_product(),
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


def check_against_finite_differences(d, case_id=None, fd=None):
    """Reverse and forward Jacobians (and Hessians) vs central differences at STEP; fd: those
    already computed for this case by the native engine, for a pass-off variant (whose Hessians
    are then compared with the native ones only); returns fd."""
    hessian = fd is None
    case, values = d['case'], d['values']
    case_id = STATS.cases if case_id is None else case_id
    large = ~np.isfinite(values) | (np.abs(values) > VALUE_LIMIT)
    skip_rows = {case.labels[r] for r in np.flatnonzero(large)}
    if fd is None:
        STATS.large += [(case_id, label) for label in sorted(skip_rows)]
    live = np.array([label not in skip_rows for label in case.labels])
    scale = np.abs(np.where(np.isfinite(values), values, 0))
    if fd is None:
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
    if d['hessian'] is not None and hessian:
        check_hessian(d, case_id)
    return fd


def _dot(a, b):
    """sum a * b over {name: array} pairs (entries where a is 0 count 0, NaN or not), and the
    sum of the terms' magnitudes."""
    terms = np.concatenate([np.where(a[k] != 0, a[k] * b[k], 0.0).reshape(-1) for k in a])
    return terms.sum(), np.abs(terms).sum(), terms


def check_dot_product(d, case_id=None):
    """The dot-product test <J v, w> = <v, J^T w>: forward mode (every input seeded with v at
    once) against reverse mode (every output seeded with w at once) in float64, and both
    against a central difference along v (which also covers xw, whose Jacobian is not
    computed entry by entry)."""
    case, dot = d['case'], d['dot']
    case_id = STATS.cases if case_id is None else case_id
    lhs, lhs_scale, lhs_terms = _dot(dot['w'], dot['jv'])
    rhs, rhs_scale, rhs_terms = _dot(dot['v'], dot['jtw'])
    STATS.dot_checks += 1
    dropped = any((w == 0).any() for w in dot['w'].values())    # outputs too large: adjoints may be NaN
    if not np.isfinite(lhs_terms).all() or not np.isfinite(rhs_terms).all():
        if dropped and np.isfinite(lhs_terms).all():
            STATS.unstable.append((case_id, 'dot product', -1))
            return
        raise AssertionError(f'dot-product test: not finite: <J v, w> = {lhs!r} (forward mode), '
                             f'<v, J^T w> = {rhs!r} (reverse mode)\n--- generated case ---\n{case.source}')
    if not abs(lhs - rhs) <= 1e-9 * (lhs_scale + rhs_scale) + 1e-12:
        raise AssertionError(f'dot-product test: <J v, w> = {lhs!r} (forward mode) but <v, J^T w> = {rhs!r} '
                             f'(reverse mode), difference {lhs - rhs:.3g}, magnitudes {lhs_scale:.3g}, '
                             f'{rhs_scale:.3g}\n--- generated case ---\n{case.source}')

    def along(h):
        plus = case.along(dot['v'], h, case.dot_values)
        minus = case.along(dot['v'], -h, case.dot_values)
        return _dot(dot['w'], {k: (plus[k] - minus[k]) / (2 * h) for k in plus})

    value_scale = _dot(dot['w'], dot['values'])[1]

    def close(a, b, scale, rtol, atol):
        return abs(a - b) <= rtol * scale + atol + 1e-8 * value_scale

    fd, fd_scale, _ = along(STEP)
    if not close(lhs, fd, fd_scale, 1e-5, 1e-6):
        others = [along(STEP * 10)[0], along(STEP / 10)[0]]
        if all(close(o, fd, fd_scale, 1e-4, 1e-5) for o in others):
            raise AssertionError(f'dot-product test: <J v, w> = {lhs!r} (forward mode; reverse mode: {rhs!r}) '
                                 f'but finite differences along v give {fd!r} (steps {STEP * 10:g}, '
                                 f'{STEP / 10:g}: {others})\n--- generated case ---\n{case.source}')
        STATS.unstable.append((case_id, 'dot product', -1))


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
    for key in ('values', 'reverse', 'forward', 'jv', 'jtw'):
        if key in ('jv', 'jtw'):    # the dot-product test's J v and J^T w (same v and w)
            x, y = (np.concatenate([np.asarray(r['dot'][key][k]).reshape(-1) for k in sorted(r['dot'][key])])
                    for r in (a, b))
        else:
            x, y = a[key], b[key]
        same = (np.isnan(x) == np.isnan(y)) & ~np.isnan(x)
        bad = np.isnan(x) != np.isnan(y)
        finite = np.abs(x[np.isfinite(x)])
        atol = 1e-12 + 1e-11 * (finite.max() if finite.size else 0)     # rounding of large entries
        with np.errstate(invalid='ignore'):
            bad |= same & (x != y) & ~(np.abs(x - y) <= 1e-9 * np.abs(x) + atol)
        if bad.any():
            idx = tuple(np.argwhere(bad)[0])
            raise AssertionError(f'{what}: {key} differs at {idx}: {y[idx]!r} vs {x[idx]!r} (reference); '
                                 f'{int(bad.sum())} entries differ\n--- generated case ---\n{case.source}')
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


def optional_passes():
    """The compile passes that ti.init(disable_passes=(...)) can turn off (none before the
    engine has the keyword)."""
    from engine.runtime import pipeline
    if hasattr(pipeline, 'OPTIONAL_PASSES'):
        return tuple(pipeline.OPTIONAL_PASSES)
    try:
        from engine.core import passes
    except ImportError:
        return ()
    return tuple(getattr(passes, 'OPTIONAL', ()))


def pass_variants(small):
    """The sets of passes to disable for the next case (AUTODIFF_PASSES): 'rotate' (default)
    the variants in turn (each optional pass alone, then all of them), two on each small case
    (those compared with the interpreter) and one on every PASS_EVERY-th other case, so that
    the normal run turns each pass off on a few cases; 'all' every variant on every case;
    'none'; or names separated by commas: that set on every case."""
    passes = optional_passes()
    if not passes or PASSES == 'none':
        return []
    variants = [(p,) for p in passes] + ([passes] if len(passes) > 1 else [])
    if PASSES == 'rotate':
        take = 2 if small else int(STATS.big_seen % PASS_EVERY == 0)
        turn, STATS.turn = STATS.turn, STATS.turn + take
        return [variants[(turn + k + PASS_OFFSET) % len(variants)] for k in range(take)]
    if PASSES == 'all':
        return variants
    return [tuple(filter(None, PASSES.split(',')))]


def check_generated_kernel(source, case_id=None, variants=None):
    """_check_generated_kernel; a failing case is saved to a file (FAILURES) that the
    message names."""
    try:
        _check_generated_kernel(source, case_id, variants)
    except AssertionError as exc:
        os.makedirs(FAILURES, exist_ok=True)
        path = os.path.join(FAILURES, f'case_{hashlib.sha1(source.encode()).hexdigest()[:12]}.py')
        with open(path, 'w') as f:
            f.write(source)
        head = str(exc).split('--- generated case ---')[0].rstrip()
        raise AssertionError(f'{head}\n(the case: {path}; rerun it alone: python tests/test_autodiff_properties.py '
                             f'{path})\n--- generated case ---\n{source}') from None


def _check_generated_kernel(source, case_id=None, variants=None):
    """Reverse and forward mode (and Hessians for a subset) vs finite differences and the
    dot-product test; then, every ORACLE_EVERY-th case (default: the small cases), the same
    derivatives from each second oracle (engine configuration) vs the native ones; then the
    case with passes disabled (pass_variants, or `variants`: a list of tuples of pass names)
    vs the same finite differences, the dot-product test, the native engine with every pass
    on and the second oracles where they ran."""
    global CASE_THREADS
    case_id = STATS.cases if case_id is None else case_id
    # every other case on one thread: loops run whole, as LLVM vectorized them (split across
    # two threads, a loop of 16 iterations is two of 8, below the vector loop's minimum)
    CASE_THREADS = 1 if case_id % 2 else THREADS

    def computed(init=None, hessian=None):
        try:
            return derivatives(source, init, hessian)
        except AssertionError:
            raise
        except Exception as exc:
            raise AssertionError(f'{type(exc).__name__}: {exc}{" under ti.init(**" + repr(init) + ")" if init else ""}'
                                 f'\n--- generated case ---\n{source}') from exc

    native = computed()
    small = bool(native['case'].module.HESSIAN)
    fd = check_against_finite_differences(native, case_id)
    check_dot_product(native, case_id)
    oracles = {}
    if (case_id % ORACLE_EVERY == 0) if ORACLE_EVERY else small:
        for init in second_oracles():
            other = computed(init, hessian=False)       # Jacobians only: Hessians interpreted are slow
            compare_oracles(native, other, what=','.join(init))
            oracles[','.join(init)] = other
            STATS.oracle_cases += 1
    for off in (pass_variants(small) if variants is None else [tuple(v) for v in variants]):
        what = f'ti.init(disable_passes={off!r})'
        other = computed({'disable_passes': off})
        try:
            check_against_finite_differences(other, case_id, fd=fd)
            check_dot_product(other, case_id)
        except AssertionError as exc:
            raise AssertionError(f'{what}: {exc}') from None
        compare_oracles(native, other, what=what + ' (vs every pass on)')
        for name, result in oracles.items():
            compare_oracles(result, other, what=f'{what} (vs {name})')
        STATS.pass_variants[off] = STATS.pass_variants.get(off, 0) + 1
    if small:
        STATS.small_seen += 1
    else:
        STATS.big_seen += 1
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
    # every optional pass is turned off in every run (of enough cases), alone and all together
    passes = optional_passes()
    if PASSES == 'rotate' and passes and STATS.turn >= len(passes):
        missing = [(p,) for p in passes if (p,) not in STATS.pass_variants]
        assert not missing, f'passes never turned off in this run: {missing}; {STATS.summary()}'
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
    out = child.stdout + child.stderr
    heads = re.findall(r'AssertionError: (.*?)--- generated case ---', out, re.S)    # the messages first
    assert child.returncode == 0, (heads[0][:4000] + '\n...\n' if heads else '') + out[-20000:]


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


if __name__ == '__main__':      # python tests/test_autodiff_properties.py [--disable-passes a,b] case.py [...]
    args, variants = sys.argv[1:], None
    if args and args[0].startswith('--disable-passes'):
        names = args[0].split('=', 1)[1] if '=' in args[0] else args.pop(1)
        args, variants = args[1:], [tuple(filter(None, names.split(',')))]
    for path in args:
        with open(path) as f:
            check_generated_kernel(f.read(), variants=variants)
        print(f'{path}: ok')
    print(STATS.summary())
