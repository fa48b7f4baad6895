"""Child-process batches for the fuzzing scripts: a crash in native code ends one batch,
not the run."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_worker(script, env, seed=None):
    """Run `script --worker [--seed S]` in a fresh process; returns (the last `STATS {json}`
    line it printed as a dict, or None if it died, and the finished process)."""
    cmd = [sys.executable, os.path.abspath(script), '--worker'] + ([] if seed is None else ['--seed', str(seed)])
    child = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    stats = [json.loads(line[6:]) for line in child.stdout.splitlines() if line.startswith('STATS ')]
    return (stats[-1] if stats else None), child
