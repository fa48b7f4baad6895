"""Generated programs that break the global data access rules on purpose (tests/rule_grammar.py):
under a ti.ad.Tape every program must give the float64 finite-difference gradient of its
loss w.r.t. the initial value of every differentiable field and ndarray, or raise
ti.ad.AutodiffRuleError naming (`field NAME `) a field the program writes, a kernel of the
program and a source line. Programs marked VALID (every element read only after its last
modification) must not raise at all.

test_generated_rule_programs checks about 330 programs (derandomized). Environment:
  RULES_FUZZ_EXAMPLES=K   programs to draw (default 330)
  RULES_FUZZ_RANDOM=1     fresh randomness instead of the derandomized normal run
  RULES_FUZZ_COLLECT=DIR  record each failure (written to DIR) and go on (scripts/fuzz_rules.py)
  RULES_FUZZ_SHRINK=1     let hypothesis shrink a failing program (slow: every step compiles)

A saved program is rerun alone with `python tests/test_rules_generated.py CASE.py [...]`;
scripts/fuzz_rules.py runs any number of programs with fresh randomness in child processes.
"""
import collections
import importlib.util
import itertools
import os
import re
import sys
import tempfile
import time
import traceback

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import engine as ti                         # noqa: E402
from ad_helpers import generated_source_path  # noqa: E402
from rule_grammar import program_source     # noqa: E402

EXAMPLES = int(os.environ.get('RULES_FUZZ_EXAMPLES', 330))
MIN_PROGRAMS = 300 if 'RULES_FUZZ_EXAMPLES' not in os.environ else 0
RANDOM = bool(os.environ.get('RULES_FUZZ_RANDOM'))
COLLECT = os.environ.get('RULES_FUZZ_COLLECT')
SHRINK = bool(os.environ.get('RULES_FUZZ_SHRINK'))
STEP = 1e-6                 # central differences; 1e-5 and 1e-7 to tell an unstable entry
VALUE_LIMIT = 1e6           # a loss beyond this (or not finite): the program is counted, not compared
_counter = itertools.count()


class Stats:
    def __init__(self):
        self.programs = self.valid = self.raised = self.compared = self.skipped = self.large = 0
        self.failures = collections.Counter()   # kind -> count (collect mode)
        self.started = time.perf_counter()

    def as_dict(self):
        return dict(programs=self.programs, valid=self.valid, raised=self.raised, compared=self.compared,
                    skipped=self.skipped, large=self.large, failures=dict(self.failures))

    def summary(self):
        return (f'{self.programs} generated rule programs ({self.valid} valid by construction) in '
                f'{time.perf_counter() - self.started:.1f} s: {self.raised} raised AutodiffRuleError, '
                f'{self.compared} gradient entries compared with finite differences, {self.skipped} unstable '
                f'entries skipped, {self.large} programs with a too-large loss; failures: {dict(self.failures) or 0}')


STATS = Stats()


class RuleFailure(AssertionError):
    def __init__(self, kind, message, source):
        super().__init__(f'[{kind}] {message}\n--- generated program ---\n{source}')
        self.kind = kind


def load(source):
    path = generated_source_path(f'rule_program_{next(_counter)}.py')
    with open(path, 'w') as f:
        f.write(source)
    print(f'checking {path}', file=sys.stderr, flush=True)     # a crash still names the program
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Program:
    """One generated program in a fresh ti.init, with random initial values."""

    def __init__(self, source):
        self.source = source
        self.module = load(source)
        ti.init(arch=ti.cpu, default_fp=ti.f64)
        self.p = self.module.build()
        self.state, self.loss = self.p['state'], self.p['loss']
        rng = np.random.default_rng(self.module.SEED)
        self.init = {}
        for name, obj in self.state.items():
            shape = obj.to_numpy().shape          # (vector fields: with their components)
            if 'i32' in str(obj.dtype) or name == 'idx':
                self.init[name] = rng.integers(0, self.module.N, size=shape).astype(np.int32)
            else:
                self.init[name] = rng.uniform(-1.0, 1.0, size=shape)

    def restore(self):
        for name, obj in self.state.items():
            obj.from_numpy(self.init[name].copy())
        self.loss[None] = 0

    def evaluate(self):
        self.restore()
        self.p['forward']()
        return self.loss[None]

    def fd(self, name, index, h):
        saved = self.init[name]
        values = []
        for sign in (1, -1):
            moved = saved.copy()
            moved[index] += sign * h
            self.init[name] = moved
            values.append(self.evaluate())
        self.init[name] = saved
        return (values[0] - values[1]) / (2 * h)


def _fail(kind, message, source):
    raise RuleFailure(kind, message, source)


def check_rule_error(prog, error):
    """An AutodiffRuleError: allowed in a may_break program, naming a field the program
    writes, one of its kernels and a line."""
    message = str(error)
    if prog.module.VALID:
        _fail('valid program raised', f'{type(error).__name__}: {message}', prog.source)
    named = re.findall(r'(?:field|ndarray) (\w+) ', message)
    if not set(named) & set(prog.p['modified']):
        _fail('rule error names no written field',
              f'names {named or "no field"}, the program writes {prog.p["modified"]}: {message}', prog.source)
    if not any(re.search(rf'\b{k}\b', message) for k in prog.p['kernels']) or 'line' not in message:
        _fail('rule error without kernel or line', message, prog.source)


def _describe(exc):
    where = traceback.extract_tb(exc.__traceback__)[-3:]
    return f'{type(exc).__name__}: {exc}\n' + ''.join(traceback.format_list(where))


def check_program(source):
    """Returns 'raised', 'compared' or 'large'; raises RuleFailure (any exception other than
    AutodiffRuleError is a failure: the forward alone must run, and so must the tape)."""
    try:
        prog = Program(source)
        prog.restore()
        prog.p['prepare']()             # ti.capture'd segments are recorded here, outside the tape
        base = prog.evaluate()
    except Exception as exc:        # the forward alone fails: the generator or the engine is wrong
        _fail('forward fails', _describe(exc), source)
    if not np.isfinite(base) or abs(base) > VALUE_LIMIT:
        return 'large'
    prog.restore()
    try:
        with ti.ad.Tape(prog.loss):
            prog.p['forward']()
            taped = prog.loss[None]
    except ti.ad.AutodiffRuleError as error:
        check_rule_error(prog, error)
        return 'raised'
    except Exception as exc:
        _fail(f'{type(exc).__name__} under the tape', _describe(exc), source)
    if not abs(taped - base) <= 1e-9 * (1 + abs(base)):
        _fail('tape changes the forward value', f'loss {taped!r} under the tape, {base!r} without', source)
    grads = {name: prog.state[name].grad.to_numpy() for name in prog.p['grads']}
    bad = []
    for name, grad in grads.items():
        for index in np.ndindex(*grad.shape):
            got = grad[index]
            want = prog.fd(name, index, STEP)
            STATS.compared += 1
            tol = 1e-5 * abs(want) + 1e-6 + 1e-9 * abs(base)
            if abs(got - want) <= tol:
                continue
            others = [prog.fd(name, index, STEP * 10), prog.fd(name, index, STEP / 10)]
            if np.isfinite(got) and not all(abs(o - want) <= 1e-4 * abs(want) + 1e-5 for o in others):
                STATS.skipped += 1          # finite differences disagree with themselves
                continue
            bad.append(f'{name}.grad[{", ".join(map(str, index))}] = {got!r}, finite differences {want!r}')
    if bad:
        _fail('wrong gradient' if not prog.module.VALID else 'wrong gradient (valid program)',
              f'{len(bad)} entries:\n  ' + '\n  '.join(bad[:6]), source)
    return 'compared'


def record(source):
    """check_program with the statistics (and in collect mode, failures written to a folder)."""
    STATS.programs += 1
    STATS.valid += 'VALID = True' in source
    try:
        outcome = check_program(source)
    except RuleFailure as failure:
        if not COLLECT:
            raise
        STATS.failures[failure.kind] += 1
        os.makedirs(COLLECT, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix='rule_failure_', suffix='.py', dir=COLLECT)
        with os.fdopen(fd, 'w') as f:
            f.write(source.replace('"""A generated', '"""' +
                                   str(failure).split('\n--- generated')[0].replace('"""', "'''")[:1500] +
                                   '\n\nA generated', 1))
        print(f'FAILURE {path} [{failure.kind}]', flush=True)
        return
    STATS.raised += outcome == 'raised'
    STATS.large += outcome == 'large'


@settings(max_examples=max(1, EXAMPLES), deadline=None, derandomize=not RANDOM, database=None,
          phases=[Phase.explicit, Phase.generate] + ([Phase.shrink] if SHRINK else []),
          suppress_health_check=list(HealthCheck))
@given(program_source())
def check_generated_programs(source):
    record(source)


def test_generated_rule_programs():
    global STATS
    STATS = Stats()
    check_generated_programs()
    print(STATS.summary())
    assert STATS.programs >= MIN_PROGRAMS, STATS.summary()
    assert STATS.skipped <= max(5, STATS.compared // 200), STATS.summary()
    assert STATS.large <= max(3, STATS.programs // 20), STATS.summary()


if __name__ == '__main__':      # python tests/test_rules_generated.py CASE.py [...]
    for path in sys.argv[1:]:
        with open(path) as f:
            print(f'{path}: {check_program(f.read())}')
    print(STATS.summary())
