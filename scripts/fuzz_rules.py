"""Fuzz the global data access rules: generated programs that break them on purpose.

Usage: python scripts/fuzz_rules.py [--programs 5000] [--batch 100] [--out DIR] [--seed S]
       python scripts/fuzz_rules.py --minimize CASE.py [CASE.py ...]

Draws programs with tests/rule_grammar.py with fresh randomness and checks them as
tests/test_rules_generated.py does (the finite-difference gradient, or an AutodiffRuleError
naming a written field, a kernel and a line; programs valid by construction must not
raise). Batches run in child processes, so a crash (a segfault) ends only its batch and is
reported with the program it was checking. Every failing program is written to --out
(default: $TMPDIR/rule_fuzz_failures) with the failure in its docstring; rerun one with
`python tests/test_rules_generated.py CASE.py`. --minimize deletes lines of saved programs
while they fail the same way and writes CASE.min.py next to each.
Prints a summary line with the counts (programs, valid, raised, compared entries, skipped,
failures by kind).
"""
import argparse
import collections
import json
import os
import re
import shutil
import sys
import tempfile
import time

from batches import run_worker

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, 'tests')


def worker(args):
    """One batch in this (fresh) process; the last line of output is `STATS {json}`."""
    sys.path.insert(0, TESTS)
    import test_rules_generated as tr           # reads the RULES_FUZZ_* environment set by main()
    from hypothesis import seed
    run = tr.check_generated_programs if args.seed is None else seed(args.seed)(tr.check_generated_programs)
    error = None
    try:
        run()
    except BaseException as exc:        # noqa: B036 - reported to the parent, which goes on
        error = f'{type(exc).__name__}: {exc}'[:3000]
    print('STATS ' + json.dumps(dict(tr.STATS.as_dict(), error=error)), flush=True)


def kind_of(source):
    """The failure kind of a program (None: it passes), checked in this process."""
    sys.path.insert(0, TESTS)
    import test_rules_generated as tr
    try:
        tr.check_program(source)
    except tr.RuleFailure as failure:
        return failure.kind
    except Exception as exc:     # noqa: BLE001 - an edit that breaks the program
        return f'harness {type(exc).__name__}'
    return None


def minimize(path):
    """Delete single lines (then kernel statements in pairs) while the failure stays the same."""
    with open(path) as f:
        source = f.read()
    body = source.split('"""', 2)[2] if source.startswith('"""') else source
    header = '"""A minimized generated program; rerun: python tests/test_rules_generated.py THIS.py"""'
    want = kind_of(body)
    if want is None:
        print(f'{path}: passes now, nothing to minimize')
        return
    lines = body.split('\n')
    protected = re.compile(r'^\s*(def |@|return|grads=|import|VALID|N =|SEED|n = |loss = |seg\d+ = ti.capture|$)')
    changed = True
    while changed:
        changed = False
        for k in range(len(lines) - 1, -1, -1):
            if k >= len(lines) or protected.match(lines[k]):
                continue
            trial = lines[:k] + lines[k + 1:]
            # a block header goes with its body
            if re.match(r'^\s*(for|if|else)\b.*:\s*$', lines[k]):
                pad = len(lines[k]) - len(lines[k].lstrip())
                stop = k + 1
                while stop < len(lines) and lines[stop].strip() and len(lines[stop]) - len(lines[stop].lstrip()) > pad:
                    stop += 1
                trial = lines[:k] + lines[stop:]
                if lines[k].strip().startswith('for') and k > 0 and 'loop_config' in lines[k - 1]:
                    trial = lines[:k - 1] + lines[stop:]
            if kind_of('\n'.join(trial)) == want:
                lines, changed = trial, True
    out = path[:-3] + '.min.py'
    with open(out, 'w') as f:
        f.write(f'{header}\n# failure: {want}\n' + '\n'.join(lines))
    print(f'{path}: [{want}] minimized to {out} ({len(lines)} lines)')


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--programs', type=int, default=5000, help='programs to check (default 5000)')
    parser.add_argument('--batch', type=int, default=100, help='programs per child process (default 100)')
    parser.add_argument('--seed', type=int, default=None, help='seed of the first batch (then +1 each)')
    parser.add_argument('--out', default=os.path.join(tempfile.gettempdir(), 'rule_fuzz_failures'))
    parser.add_argument('--minimize', nargs='+', metavar='CASE', help='minimize saved failing programs')
    parser.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    return parser.parse_args()


def main():
    args = parse_args()
    if args.worker:
        return worker(args)
    if args.minimize:
        os.environ.setdefault('ENGINE_CACHE_DIR', tempfile.mkdtemp(prefix='rule_fuzz_cache_'))
        for path in args.minimize:
            minimize(path)
        return
    os.makedirs(args.out, exist_ok=True)
    env = dict(os.environ, RULES_FUZZ_RANDOM='1', RULES_FUZZ_COLLECT=os.path.abspath(args.out))
    cache = None if 'ENGINE_CACHE_DIR' in os.environ else tempfile.mkdtemp(prefix='rule_fuzz_cache_')
    if cache:
        env['ENGINE_CACHE_DIR'] = cache
    totals, kinds = collections.Counter(), collections.Counter()
    batch, start = 0, time.perf_counter()
    while totals['programs'] < args.programs:
        count = min(args.batch, args.programs - totals['programs'])
        env['RULES_FUZZ_EXAMPLES'] = str(count)
        result, child = run_worker(__file__, env, None if args.seed is None else args.seed + batch)
        batch += 1
        if result:
            add_batch(result, totals, kinds, batch)
        else:
            record_crash(child, count, totals, kinds, batch, args.out)
        print(f'{totals["programs"]} programs, {sum(kinds.values())} failures, '
              f'{time.perf_counter() - start:.0f} s', flush=True)
    if cache:
        shutil.rmtree(cache, ignore_errors=True)
    print(f'checked {totals["programs"]} generated rule programs ({totals["valid"]} valid by construction) in '
          f'{time.perf_counter() - start:.1f} s: {totals["raised"]} raised AutodiffRuleError, {totals["compared"]} '
          f'gradient entries compared, {totals["skipped"]} unstable entries skipped, {totals["large"]} too-large '
          f'losses; {sum(kinds.values())} failure(s){": " + json.dumps(dict(kinds)) if kinds else ""}'
          f'{" in " + args.out if kinds else ""}')
    sys.exit(1 if kinds else 0)


def add_batch(result, totals, kinds, batch):
    for key in ('programs', 'valid', 'raised', 'compared', 'skipped', 'large'):
        totals[key] += result[key]
    kinds.update(result['failures'])
    if result['error']:
        print(f'batch {batch}: the harness stopped: {result["error"]}', flush=True)
        kinds['harness error'] += 1


def record_crash(child, count, totals, kinds, batch, out):
    """The batch process died (a crash in native code, or killed): keep the program it was
    checking, count half the batch as run, go on."""
    checking = re.findall(r'^checking (\S+)$', child.stderr, re.M)
    kinds['crash'] += 1
    totals['programs'] += max(1, count // 2)
    where = os.path.join(out, f'crash_{batch}.py')
    if checking:
        shutil.copy(checking[-1], where)
    print(f'CRASH (batch {batch}, status {child.returncode}) while checking {where}:\n'
          f'{child.stderr[-2000:]}', flush=True)


if __name__ == '__main__':
    main()
