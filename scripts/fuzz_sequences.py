"""Feature-sequence fuzzing at scale: random sequences of API calls (tests/sequence_grammar.py)
whose derivatives are checked against float64 finite differences of the whole sequence.

Usage: python scripts/fuzz_sequences.py [--count 5000] [--threads 1|2] [--seed S]
           [--known-open NAMES] [--verbose] [--stop]

Sequence k uses seed S + k (default S: a random one, printed), so any mismatch is rerun
with `--seed SEED --count 1 --verbose`. --threads 2 splits every parallel loop across two
threads (as tests/test_autodiff_properties.py's child does). --known-open replaces
sequence_grammar.KNOWN_OPEN ('' turns every element on). Prints the counts (sequences,
checks, skipped points, drivers, gated elements) and every failure with its seed; exit
status 1 when any failed.
"""
import argparse
import os
import random
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'tests'))
sys.path.insert(0, ROOT)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--count', type=int, default=5000)
    parser.add_argument('--threads', type=int, default=1, choices=(1, 2))
    parser.add_argument('--seed', type=int, default=None, help='first seed (default: random)')
    parser.add_argument('--known-open', default=None, help="comma-separated; '' for none")
    parser.add_argument('--verbose', action='store_true', help='print each sequence and its result')
    parser.add_argument('--stop', action='store_true', help='stop at the first failure')
    args = parser.parse_args()
    if args.known_open is not None:
        os.environ['SEQUENCE_KNOWN_OPEN'] = args.known_open
    if args.threads > 1:
        from engine.backend.cpu import threadpool
        threadpool.PARALLEL_MIN_US = 0          # every parallel loop goes to the pool
    warnings.simplefilter('ignore')
    import sequence_grammar as sg
    first = args.seed if args.seed is not None else random.randrange(10 ** 9)
    print(f'seeds {first}..{first + args.count - 1}, {args.threads} thread(s), '
          f'KNOWN_OPEN = {sorted(sg.KNOWN_OPEN)}', flush=True)
    started = time.perf_counter()
    world = sg.make_world(threads=args.threads)
    stats = sg.Stats()
    failures = []
    report_every = max(1, args.count // 10)
    for k in range(args.count):
        seed = first + k
        if args.verbose:
            print(sg.generate(seed).describe(), flush=True)
        _, failed = sg.run_seeds(world, [seed], stats)
        for s, message in failed:
            failures.append((s, message))
            print(f'FAILED seed {s}: {message}\n', flush=True)
        if args.verbose and not failed:
            print('ok')
        if failed and args.stop:
            break
        if (k + 1) % report_every == 0:
            print(f'  {k + 1} sequences, {len(failures)} failed, {time.perf_counter() - started:.0f} s',
                  flush=True)
    print(f'{stats.summary()}\nelements {dict(sorted(stats.elements.items()))}')
    print(f'{len(failures)} failed of {stats.sequences} in {time.perf_counter() - started:.1f} s'
          + (f': seeds {[s for s, _ in failures]}' if failures else ''))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
