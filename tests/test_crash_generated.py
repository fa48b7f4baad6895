"""The crash test: generated programs with indices that may be anything (out of range,
negative, cast from NaN, divided by zero; tests/crash_grammar.py) run in child processes,
a batch per child; none may die by a signal, and none may fail with an exception that
means the engine broke (crash_grammar.ENGINE_FAILURES).

CRASH_FUZZ_PROGRAMS=K draws K programs (default 200, derandomized); scripts/fuzz_crash.py
runs any number with fresh randomness.
"""
import concurrent.futures
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from crash_grammar import ENGINE_FAILURES, program_source  # noqa: E402

PROGRAMS = int(os.environ.get('CRASH_FUZZ_PROGRAMS', 200))
BATCH = 25
RUNNER = """
import runpy, sys
for path in sys.argv[1:]:
    print('#start', path, flush=True)
    runpy.run_path(path, run_name='__main__')
    print('#end', path, flush=True)
"""


def run_batch(paths, timeout=600):
    """(failures, outcomes) of one child running `paths` in order: a failure is a program
    that killed the child, did not finish, or raised an engine failure."""
    done = subprocess.run([sys.executable, '-c', RUNNER] + paths, capture_output=True, text=True, timeout=timeout)
    failures, outcomes, current = [], {}, None
    for line in done.stdout.splitlines():
        if line.startswith('#start '):
            current = line.split(' ', 1)[1]
        elif line.startswith('#end '):
            current = None
        elif current is not None and ' ' in line:
            outcome = line.split()[-1]
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if outcome in ENGINE_FAILURES or outcome.rstrip() in ENGINE_FAILURES:
                failures.append((current, line))
    if done.returncode != 0:
        what = f'signal {-done.returncode}' if done.returncode < 0 else f'exit {done.returncode}'
        failures.append((current, f'{what}: {done.stderr[-1500:]}'))
    return failures, outcomes


def write_programs(directory, seeds):
    paths = []
    for seed in seeds:
        path = os.path.join(directory, f'crash_{seed}.py')
        with open(path, 'w') as handle:
            handle.write(program_source(seed))
        paths.append(path)
    return paths


def run_programs(directory, seeds, workers=2):
    paths = write_programs(directory, seeds)
    batches = [paths[k:k + BATCH] for k in range(0, len(paths), BATCH)]
    failures, outcomes = [], {}
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for batch_failures, batch_outcomes in pool.map(run_batch, batches):
            failures += batch_failures
            for key, count in batch_outcomes.items():
                outcomes[key] = outcomes.get(key, 0) + count
    return failures, outcomes


def test_generated_programs_never_kill_the_process():
    with tempfile.TemporaryDirectory(prefix='engine_crash_') as directory:
        failures, outcomes = run_programs(directory, range(PROGRAMS))
        report = '\n'.join(f'{path}: {what}\n{open(path).read() if path and os.path.exists(path) else ""}'
                           for path, what in failures[:3])
    assert not failures, f'{len(failures)} of {PROGRAMS} programs failed:\n{report}'
    assert outcomes.get("ok", 0) > PROGRAMS // 4 and outcomes.get('TaichiIndexError', 0) > PROGRAMS // 4, outcomes
