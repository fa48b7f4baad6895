"""A Taichi program using min/max with NaN, svd, sym_eig, more of ti.math, Taichi's
ti.init keywords and the kernel profiler runs unchanged through `python -m engine run`."""
import os
import subprocess
import sys

import engine
from test_taichi_compat import HERE, engine_run


def test_semantics_and_the_profiler():
    out, err = engine_run('semantics_profiler.py')
    lines = out.splitlines()
    assert 'max/min nan 1.0 1.0' in lines
    assert 'svd S 2.0 -1.0' in lines                 # Taichi's signs: U, V rotations
    assert 'sym_eig [5.0, 3.0, 1.0]' in lines        # decreasing
    assert 'math [93.0, 2.0, 2.0, 3.0]' in lines
    assert 'grad [0.0, 2.0, 4.0, 6.0]' in lines
    assert 'counts 3 3 1' in lines                   # compute_loss, compute_loss.grad, semantics
    assert 'total positive True' in lines and 'after clear 0.0' in lines
    table = lines[lines.index('total positive True') + 1:]
    assert table[0].startswith('Kernel profiler (count): 3 kernels, 7 launches')
    assert [row.split()[-1] for row in table[2:5]].count('compute_loss.grad') == 1
    assert 'GPU' not in err and 'Traceback' not in err


def test_an_unknown_init_keyword_is_a_short_error():
    done = subprocess.run([sys.executable, '-m', 'engine', 'run', os.path.join(HERE, 'semantics_profiler.py'),
                           'bad-init'], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    err = done.stderr.strip().splitlines()
    assert len(err) <= 5, done.stderr
    assert err[-1].endswith("unknown keyword argument(s): 'kernel_profile' (did you mean 'kernel_profiler'?)")
    assert 'semantics_profiler.py", line 11' in done.stderr
    assert os.path.dirname(os.path.abspath(engine.__file__)) not in done.stderr     # no engine frames
