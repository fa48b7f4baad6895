"""Has the engine got slower? Compares bench figures with a stored baseline
(scripts/bench_baseline.json) and names every figure that got worse than the tolerance.

Usage:
    python scripts/bench_check.py                          # runs the bench --repeats times
    python scripts/bench_check.py a.json b.json c.json     # or reads what `bench.py --json` wrote
    python scripts/bench_check.py --write-baseline         # runs the bench, stores the medians
  options: --tolerance 0.05, --repeats 3, --baseline PATH, --bench-args '...'

The bench it runs is `bench.py --quick --sims none --no-taichi` (launch overhead, native
replay, throughput, compile times and the compute-bound programs; not the simulators,
which take minutes, nor Taichi, whose figures are not ours). Prints, per figure: the
baseline, now, now / baseline and a verdict. Exit status 1 if any figure got slower by
more than the tolerance, or a figure of the baseline is missing now (a program that no
longer runs); else 0.

Noise: the 2-core development machine is shared. On it alone, a figure's repeats agree
within about 5%; with other test suites running beside the bench they spread by 30-100%
(other work only ever slows a run down). So each figure is the median of several whole
bench runs (each figure of a run is itself a median of repeats), and a figure counts as
slower only if that median is worse than the baseline's median by more than the
tolerance. The baseline stores how far its runs spread (max - min over the median, per
figure) and the load average before them (--write-baseline warns above 0.5); a figure
whose spread is near the tolerance will sometimes fail on noise alone: rerun with more
repeats before believing it (docs/performance.md, "Has it got slower?").

Which figures are judged: times (`_s`, `_ms`, `_us`) and memory (`_mb`), lower is better;
speedups, higher is better. Printed but not judged: Taichi's and numpy's figures (not the
engine's), ratios and costs (each derived from two figures printed on their own), counts,
sizes and differences between results.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BASELINE = os.path.join(HERE, 'bench_baseline.json')
BENCH_ARGS = ['--quick', '--sims', 'none', '--no-taichi']
REFERENCE_WORDS = {'taichi', 'numpy'}      # figures of other software, measured for comparison


def direction(key):
    """'lower' or 'higher' (which way is better) for a judged figure, None for the others."""
    words = key.split('_')
    if REFERENCE_WORDS & set(words) or 'ratio' in words or key.endswith('_cost'):
        return None
    if 'speedup' in key:
        return 'higher'
    if key.endswith(('_s', '_ms', '_us', '_mb')):
        return 'lower'
    return None


def numeric(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def median_figures(runs):
    """({figure: median over the runs that have it}, {figure: (max - min) / median})."""
    keys = dict.fromkeys(key for run in runs for key, value in run.items() if numeric(value))
    medians, spreads = {}, {}
    for key in keys:
        values = [run[key] for run in runs if numeric(run.get(key))]
        medians[key] = statistics.median(values)
        spreads[key] = (max(values) - min(values)) / abs(medians[key]) if medians[key] else 0.0
    return medians, spreads


def verdict(key, base, now, tolerance):
    """(now / baseline, 'slower' | 'faster' | '' | 'not judged')."""
    ratio = now / base if base else float('inf') if now else 1.0
    better = direction(key)
    if better is None:
        return ratio, 'not judged'
    worse = ratio > 1 + tolerance if better == 'lower' else ratio < 1 / (1 + tolerance)
    improved = ratio < 1 / (1 + tolerance) if better == 'lower' else ratio > 1 + tolerance
    return ratio, 'slower' if worse else 'faster' if improved else ''


def compare(baseline, now, tolerance=0.05):
    """Rows (figure, baseline, now, ratio, verdict) for every figure of either, the figures
    that got slower, and the judged figures of the baseline missing now."""
    rows, slower, missing = [], [], []
    for key, base in baseline.items():
        if key not in now:
            rows.append((key, base, None, None, 'missing'))
            if direction(key):
                missing.append(key)
            continue
        ratio, word = verdict(key, base, now[key], tolerance)
        rows.append((key, base, now[key], ratio, word))
        if word == 'slower':
            slower.append(key)
    rows += [(key, None, value, None, 'new') for key, value in now.items() if key not in baseline]
    return rows, slower, missing


def print_rows(rows, base_spreads, spreads):
    """A row per figure; the spreads: how far the baseline's runs and now's runs varied."""
    width = max([len(row[0]) for row in rows] + [6])
    print(f'{"figure":<{width}} {"baseline":>10} {"now":>10} {"ratio":>6} {"spread":>6} {"now":>5}  verdict')

    def cell(value, spec):
        return '' if value is None else format(value, spec)
    for key, base, now, ratio, word in rows:
        print(f'{key:<{width}} {cell(base, ".4g"):>10} {cell(now, ".4g"):>10} {cell(ratio, ".3f"):>6} '
              f'{cell(base_spreads.get(key), ".0%"):>6} {cell(spreads.get(key), ".0%"):>5}  {word}')


def run_bench(repeats, bench_args):
    """Runs of bench.py (each in a fresh process): what each wrote with --json."""
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        for i in range(repeats):
            out = os.path.join(folder, f'bench{i}.json')
            print(f'bench run {i + 1} of {repeats}: bench.py {" ".join(bench_args)}', file=sys.stderr, flush=True)
            subprocess.run([sys.executable, os.path.join(HERE, 'bench.py'), '--json', out] + bench_args,
                           check=True, stdout=subprocess.DEVNULL)
            with open(out) as f:
                runs.append(json.load(f))
    return runs


def read_json(path):
    with open(path) as f:
        return json.load(f)


def write_baseline(path, runs, bench_args, load):
    medians, spreads = median_figures(runs)
    data = {'about': 'medians of whole bench runs (scripts/bench_check.py --write-baseline); spread: '
                     '(max - min) / median over those runs',
            'command': 'python scripts/bench.py ' + ' '.join(bench_args), 'repeats': len(runs),
            'machine': f'{platform.machine()}, {os.cpu_count()} cores, {platform.processor() or platform.system()}',
            'written': time.strftime('%Y-%m-%d'), 'load_average_before': load,
            'figures': medians, 'spread': {k: round(v, 4) for k, v in spreads.items()}}
    with open(path, 'w') as f:
        json.dump(data, f, indent=1)
        f.write('\n')
    print(f'wrote {path}: {len(medians)} figures, medians of {len(runs)} runs')


def _parser():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('runs', nargs='*', help='JSON files written by bench.py --json (default: run the bench)')
    parser.add_argument('--baseline', default=BASELINE)
    parser.add_argument('--tolerance', type=float, default=0.05, help='slower by more than this share fails')
    parser.add_argument('--repeats', type=int, default=3, help='whole bench runs whose medians are compared')
    parser.add_argument('--bench-args', default=' '.join(BENCH_ARGS), help='what bench.py is run with')
    parser.add_argument('--write-baseline', action='store_true', help='store the medians as the baseline')
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    bench_args = args.bench_args.split()
    load = round(os.getloadavg()[0], 2)
    runs = [read_json(path) for path in args.runs] or run_bench(args.repeats, bench_args)
    if args.write_baseline:
        if load > 0.5:
            print(f'warning: the load average was {load} before the bench: other work ran beside it', file=sys.stderr)
        write_baseline(args.baseline, runs, bench_args, load)
        return 0
    stored = read_json(args.baseline)
    baseline = stored.get('figures', stored)        # a baseline, or a plain bench.py --json
    command = 'python scripts/bench.py ' + ' '.join(bench_args)
    if not args.runs and stored.get('command', command) != command:
        print(f'note: the baseline was measured with `{stored["command"]}`, now `{command}`')
    now, spreads = median_figures(runs)
    rows, slower, missing = compare(baseline, now, args.tolerance)
    print_rows(rows, stored.get('spread', {}), spreads)
    print(f'medians of {len(runs)} run(s) now, of {stored.get("repeats", "?")} in the baseline; tolerance '
          f'{args.tolerance:.0%}; load average before: now {load if not args.runs else "?"}, baseline '
          f'{stored.get("load_average_before", "?")} ({os.cpu_count()} cores; above 0.5 the figures are suspect)')
    for key in slower:
        print(f'SLOWER: {key}: {baseline[key]:.4g} -> {now[key]:.4g} ({now[key] / baseline[key]:.3f}x)')
    for key in missing:
        print(f'MISSING: {key} is in the baseline but was not measured now')
    if not slower and not missing:
        print('no figure got slower than the tolerance')
    return 1 if slower or missing else 0


if __name__ == '__main__':
    sys.exit(main())
