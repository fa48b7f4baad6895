"""scripts/bench_check.py's comparison, on small synthetic bench JSON files: which figures
are judged, the median over runs, the tolerance, the exit status. Nothing is timed."""
import json

import pytest

from scripts import bench_check

BASELINE = {'launch_us': 1.0, 'program_nbody_s': 0.040, 'gravity_speedup_2threads': 1.5,
            'program_nbody_taichi_s': 0.010, 'program_nbody_ratio': 4.0, 'elementwise_numpy_ms': 10.0,
            'program_threads': 2, 'program_nbody_max_rel_diff': 1e-7}


def _write(path, data):
    path.write_text(json.dumps(data))
    return str(path)


def _check(tmp_path, runs, *flags, baseline=None):
    """bench_check's exit status and printout for these runs against the baseline."""
    stored = _write(tmp_path / 'baseline.json', {'figures': baseline or BASELINE, 'load_average_before': 0.5})
    paths = [_write(tmp_path / f'run{i}.json', run) for i, run in enumerate(runs)]
    return bench_check.main(paths + ['--baseline', stored, *flags])


def _run(**changes):
    return {**BASELINE, **changes}


@pytest.mark.parametrize('key, expected', [
    ('launch_us', 'lower'), ('program_nbody_s', 'lower'), ('diffmpm_peak_mb', 'lower'),
    ('elementwise_engine_ms', 'lower'), ('difftaichi_smoke_iter_s', 'lower'),
    ('gravity_speedup_2threads', 'higher'),
    ('program_nbody_taichi_s', None), ('elementwise_numpy_ms', None), ('program_nbody_ratio', None),
    ('program_vortex_ratio_nofastmath', None), ('gravity_bounds_check_cost', None),
    ('program_threads', None), ('elementwise_n', None), ('program_nbody_max_rel_diff', None)])
def test_which_figures_are_judged_and_which_way(key, expected):
    assert bench_check.direction(key) == expected


def test_unchanged_figures_pass(tmp_path, capsys):
    assert _check(tmp_path, [_run()]) == 0
    assert 'no figure got slower' in capsys.readouterr().out


def test_a_figure_slower_than_the_tolerance_is_named(tmp_path, capsys):
    assert _check(tmp_path, [_run(program_nbody_s=0.044)]) == 1          # 10% slower
    out = capsys.readouterr().out
    assert 'SLOWER: program_nbody_s' in out and 'launch_us' not in out.split('SLOWER')[1]


def test_within_the_tolerance_passes_and_the_flag_moves_it(tmp_path):
    assert _check(tmp_path, [_run(launch_us=1.04)]) == 0                 # 4%: noise
    assert _check(tmp_path, [_run(launch_us=1.08)]) == 1
    assert _check(tmp_path, [_run(launch_us=1.08)], '--tolerance', '0.1') == 0


def test_the_median_of_the_runs_counts_not_one_outlier(tmp_path):
    runs = [_run(program_nbody_s=0.080), _run(program_nbody_s=0.041), _run(program_nbody_s=0.039)]
    assert _check(tmp_path, runs) == 0
    runs = [_run(program_nbody_s=0.080), _run(program_nbody_s=0.046), _run(program_nbody_s=0.039)]
    assert _check(tmp_path, runs) == 1


def test_a_smaller_speedup_is_worse(tmp_path, capsys):
    assert _check(tmp_path, [_run(gravity_speedup_2threads=1.3)]) == 1
    assert 'SLOWER: gravity_speedup_2threads' in capsys.readouterr().out
    assert _check(tmp_path, [_run(gravity_speedup_2threads=1.9)]) == 0


def test_reference_and_derived_figures_are_printed_not_judged(tmp_path, capsys):
    run = _run(program_nbody_taichi_s=0.02, program_nbody_ratio=8.0, elementwise_numpy_ms=30.0,
               program_nbody_max_rel_diff=1e-3)
    assert _check(tmp_path, [run]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith('program_nbody_taichi_s')]
    assert lines and lines[0].endswith('not judged')


def test_a_missing_judged_figure_fails_a_new_one_does_not(tmp_path, capsys):
    run = _run(program_fractal_s=0.02)
    del run['program_nbody_s']
    assert _check(tmp_path, [run]) == 1
    out = capsys.readouterr().out
    assert 'MISSING: program_nbody_s' in out and 'program_fractal_s' in out
    run = _run()
    del run['program_nbody_taichi_s']           # Taichi not found this time: fine
    assert _check(tmp_path, [run]) == 0


def test_a_plain_bench_json_serves_as_baseline(tmp_path):
    stored = _write(tmp_path / 'plain.json', BASELINE)
    now = _write(tmp_path / 'now.json', _run(launch_us=1.2))
    assert bench_check.main([now, '--baseline', stored]) == 1


def test_write_baseline_stores_medians_and_spread(tmp_path):
    runs = [_write(tmp_path / f'r{i}.json', _run(launch_us=value, note='text', flag=True))
            for i, value in enumerate([1.0, 1.2, 1.1])]
    out = tmp_path / 'baseline.json'
    assert bench_check.main(runs + ['--baseline', str(out), '--write-baseline']) == 0
    stored = json.loads(out.read_text())
    assert stored['figures']['launch_us'] == pytest.approx(1.1)
    assert stored['spread']['launch_us'] == pytest.approx(0.2 / 1.1, abs=1e-4)
    assert 'note' not in stored['figures'] and 'flag' not in stored['figures'] and stored['repeats'] == 3
