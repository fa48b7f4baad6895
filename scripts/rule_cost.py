"""What the tape's rule checking costs a Taichi program, measured in one process.

    python scripts/rule_cost.py PROGRAM.py [ARGS...]

runs PROGRAM as `python -m engine run` does, with every `ti.ad.Tape` alternately checked
and unchecked (`validation=True` / `False`), and prints the median time from one tape's
start to the next (a whole training iteration) for each. Alternating within one process
keeps out the noise between processes, which on a shared machine is larger than the
cost measured. The first four iterations (compiling, the first checked sequence) are left
out. Stop a long program with its own iteration flag, or Ctrl-C: the medians print at exit.
"""
import atexit
import statistics
import sys
import time

import engine as ti
from engine.taichi_shim import run_script

_Tape = ti.ad.Tape
gaps = {True: [], False: []}
state = {'tapes': 0, 'started': None, 'checked': None}


class AlternatingTape(_Tape):
    def __init__(self, loss=None, *args, validation=None, **kwargs):
        now = time.perf_counter()
        if state['started'] is not None and state['tapes'] > 4:
            gaps[state['checked']].append(now - state['started'])
        state['tapes'] += 1
        state['started'], state['checked'] = now, state['tapes'] % 2 == 0
        super().__init__(loss, *args, validation=state['checked'], **kwargs)


def report():
    if not (gaps[True] and gaps[False]):
        print(f'rule_cost: {state["tapes"]} tapes, too few to compare', file=sys.stderr)
        return
    checked, unchecked = statistics.median(gaps[True]), statistics.median(gaps[False])
    print(f'rule_cost: s / iteration checked {checked:.5f}, unchecked {unchecked:.5f}, '
          f'ratio {checked / unchecked:.3f} ({len(gaps[True])} and {len(gaps[False])} iterations)')


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    ti.ad.Tape = AlternatingTape
    atexit.register(report)
    sys.exit(run_script(sys.argv[1], sys.argv[2:]))
