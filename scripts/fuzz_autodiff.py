"""Property-based autodiff fuzzing at scale: generated programs vs finite differences.

Usage: python scripts/fuzz_autodiff.py [--programs 10000] [--threads 1|2] [--keep-going]
           [--out DIR] [--shrink] [--seed S] [--batch CASES] [--passes rotate|all|none|a,b]

Draws cases with tests/kernel_grammar.py (about 20 programs each) with fresh randomness and
checks them as tests/test_autodiff_properties.py does (reverse and forward mode vs float64
finite differences, the dot-product test <J v, w> = <v, J^T w> between forward and reverse
mode; small cases also with Hessians and against the IR interpreter; each case again with
optional compile passes disabled, --passes: one variant a case in turn by default, see
pass_variants there).
Batches run in child processes: with --threads 2 every parallel loop is split across both
threads (which needs a fresh process), and a crash ends only its batch. A failing case is
written to --out (default: $TMPDIR/autodiff_fuzz_failures) and can be rerun alone with
`python tests/test_autodiff_properties.py CASE.py`. Prints how many programs were checked
and how long it took.
"""
import argparse
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
    """One batch, in this (fresh) process; the last line of output is `STATS {json}`."""
    sys.path.insert(0, TESTS)
    import test_autodiff_properties as tp     # reads the AUTODIFF_* environment set by main()
    from hypothesis import seed
    failure = None
    for check in (tp.check_generated_cases, tp.check_hessian_cases):
        run = check if args.seed is None else seed(args.seed)(check)
        try:
            run()
        except BaseException as exc:       # noqa: B036 - reported to the parent, which goes on
            failure = f'{type(exc).__name__}: {exc}'
            break
    s = tp.STATS
    print('STATS ' + json.dumps({'programs': s.programs, 'cases': s.cases, 'entries': s.entries,
                                 'hessian_cases': s.hessian_cases, 'oracle_cases': s.oracle_cases,
                                 'dot_checks': s.dot_checks, 'pass_variants': sum(s.pass_variants.values()),
                                 'unstable': len(s.unstable), 'large': len(s.large),
                                 'skipped_programs': s.skipped_programs(), 'failure': failure}), flush=True)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--programs', type=int, default=10000, help='programs to check (default 10000)')
    parser.add_argument('--threads', type=int, default=2, choices=(1, 2),
                        help='threads of the engine; 2 splits every parallel loop across them (default)')
    parser.add_argument('--batch', type=int, default=20,
                        help='cases per child process (default 20, and a quarter as many small Hessian cases)')
    parser.add_argument('--keep-going', action='store_true', help='go on after a failure')
    parser.add_argument('--shrink', action='store_true', help='let hypothesis shrink a failing case (slow)')
    parser.add_argument('--seed', type=int, default=None, help='seed of the first batch (then +1 each)')
    parser.add_argument('--passes', default='rotate',
                        help="optional passes to disable: 'rotate' (one variant a case, default), 'all' "
                             "(every variant on every case), 'none', or names separated by commas")
    parser.add_argument('--out', default=os.path.join(tempfile.gettempdir(), 'autodiff_fuzz_failures'))
    parser.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    return parser.parse_args()


def child_env(args):
    env = dict(os.environ, AUTODIFF_FUZZ_RANDOM='1', AUTODIFF_FUZZ_THREADS=str(args.threads),
               AUTODIFF_FUZZ_EXAMPLES=str(args.batch), AUTODIFF_FUZZ_HESSIAN_EXAMPLES=str(max(1, args.batch // 4)),
               AUTODIFF_FORCE_SPLIT='1' if args.threads > 1 else '0', AUTODIFF_PASSES=args.passes)
    if args.shrink:
        env['AUTODIFF_FUZZ_SHRINK'] = '1'
    return env


def save_failure(message, child, out, failures):
    """Write the failing case's source to a file in `out` and print what failed."""
    checking = re.findall(r'^checking (\S+)$', child.stderr, re.M)
    fd, where = tempfile.mkstemp(prefix=f'failure_{len(failures)}_', suffix='.py', dir=out)
    os.close(fd)
    source = message.split('--- generated case ---\n', 1)[1] if '--- generated case ---' in message else \
        (open(checking[-1]).read() if checking else '')
    with open(where, 'w') as f:
        f.write(source)
    failures.append(where)
    print(f'FAILURE ({where}):\n{message.split("--- generated case ---")[0].strip()[:3000]}\n', flush=True)


def main():
    args = parse_args()
    if args.worker:
        return worker(args)
    env = child_env(args)
    # compiled kernels go to a cache of this run (generated kernels rarely come back)
    cache = None if 'ENGINE_CACHE_DIR' in os.environ else tempfile.mkdtemp(prefix='autodiff_fuzz_cache_')
    if cache:
        env['ENGINE_CACHE_DIR'] = cache
    os.makedirs(args.out, exist_ok=True)
    totals = dict(programs=0, cases=0, entries=0, hessian_cases=0, oracle_cases=0, dot_checks=0,
                  pass_variants=0, unstable=0, large=0, skipped_programs=0)
    failures, batch, start = [], 0, time.perf_counter()
    while totals['programs'] < args.programs:
        # about 19 programs a case: the last batch draws only what is still missing
        cases = min(args.batch, max(1, -(-(args.programs - totals['programs']) // 19)))
        env.update(AUTODIFF_FUZZ_EXAMPLES=str(cases), AUTODIFF_FUZZ_HESSIAN_EXAMPLES=str(max(1, cases // 4)))
        result, child = run_worker(__file__, env, None if args.seed is None else args.seed + batch)
        batch += 1
        for key in totals if result else ():
            totals[key] += result[key]
        message = result['failure'] if result else \
            f'the batch process ended with status {child.returncode}:\n{child.stderr[-3000:]}'   # a crash
        if message:
            save_failure(message, child, args.out, failures)
            if not args.keep_going:
                break
        print(f'{totals["programs"]} programs in {totals["cases"]} cases, '
              f'{time.perf_counter() - start:.0f} s', flush=True)
    if cache:
        shutil.rmtree(cache, ignore_errors=True)
    report(totals, failures, time.perf_counter() - start, args.threads)


def report(totals, failures, elapsed, threads):
    print(f'checked {totals["programs"]} generated programs ({totals["cases"]} cases, {totals["entries"]} '
          f'derivative entries, {totals["hessian_cases"]} cases with Hessians, {totals["oracle_cases"]} '
          f'against a second oracle, {totals["dot_checks"]} dot-product tests, {totals["pass_variants"]} runs '
          f'with passes disabled) in {elapsed:.1f} s on {threads} thread(s); skipped '
          f'{totals["unstable"]} unstable finite-difference entries and {totals["large"]} too-large rows '
          f'({totals["skipped_programs"]} programs); {len(failures)} failure(s)'
          + (': ' + ', '.join(failures) if failures else ''))
    sys.exit(1 if failures else 0)


if __name__ == '__main__':
    main()
