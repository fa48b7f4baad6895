"""The crash test at scale: generated programs with indices that may be anything
(tests/crash_grammar.py) in child processes, as tests/test_crash_generated.py runs 200.

Usage: python scripts/fuzz_crash.py [--programs 5000] [--seed S] [--workers 2] [--out DIR]

Seeds are S, S + 1, ... (S: from the clock unless given). A program that kills its child
(a signal), does not finish, or raises an exception that means the engine broke is
copied to --out (default: $TMPDIR/crash_fuzz_failures). Prints the counts of each run's
outcome and the failures.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'tests'))

from test_crash_generated import run_programs  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--programs', type=int, default=5000)
    parser.add_argument('--seed', type=int, default=None)
    parser.add_argument('--workers', type=int, default=2)
    parser.add_argument('--out', default=os.path.join(tempfile.gettempdir(), 'crash_fuzz_failures'))
    args = parser.parse_args()
    first = args.seed if args.seed is not None else int(time.time() * 1000) % 2 ** 31
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix='engine_crash_') as directory:
        failures, outcomes = run_programs(directory, range(first, first + args.programs), args.workers)
        if failures:
            os.makedirs(args.out, exist_ok=True)
        for path, what in failures:
            if path and os.path.exists(path):
                shutil.copy(path, args.out)
            print(f'FAILED {path}: {what[:500]}')
    print(f'{args.programs} programs (seeds {first}..{first + args.programs - 1}) in '
          f'{time.perf_counter() - started:.0f} s: {len(failures)} failures; runs by outcome: {outcomes}')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
