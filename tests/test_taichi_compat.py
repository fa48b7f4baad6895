"""Taichi programs run unchanged: the programs in tests/taichi_compat/ are written as
Taichi's documentation writes them (`import taichi as ti`) and run through
`python -m engine run`, as users run theirs."""
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'taichi_compat')


def engine_run(script, *args, cwd=None):
    done = subprocess.run([sys.executable, '-m', 'engine', 'run', os.path.join(HERE, script), *args],
                          capture_output=True, text=True, timeout=300, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, done.stderr


def test_a_taichi_program_runs_with_its_arguments_on_the_cpu_with_one_warning():
    out, err = engine_run('run_unchanged.py', 'first', '--second')
    assert "args ['first', '--second']" in out
    assert 'hidden (3, 5) 24.0' in out             # dense(ti.l, 5).dense(ti.i, 3): hidden[i, t]
    assert 'v (4,) -3.0' in out                    # placed component by component
    assert 'randn mean, std 0.0 1.0' in out
    assert out.count('compiling fill') == 1        # ti.static_print: at compile time, once
    assert err.count('no GPU backend yet') == 1 and 'run_unchanged.py' in err


def test_gui_writes_frames_and_a_video_without_a_display(tmp_path):
    env_display = os.environ.pop('DISPLAY', None)
    try:
        out, _ = engine_run('gui_frames.py', str(tmp_path))
    finally:
        if env_display is not None:
            os.environ['DISPLAY'] = env_display
    assert 'running True color 0xff7f00' in out
    import imageio.v3 as iio
    frame = iio.imread(tmp_path / '0002.png')
    assert frame.shape == (48, 64, 3)
    assert tuple(frame[29, 32]) == (255, 0, 0)               # the circle around the centre
    assert tuple(frame[1, 62]) != (0x11, 0x22, 0x33)         # the line reaches the top right
    image = iio.imread(tmp_path / 'image.png')
    assert tuple(image[10, 5]) == (255, 0, 0) and tuple(image[10, 60]) == (0, 0, 0)   # x is the first axis
    assert (tmp_path / 'video.gif').stat().st_size > 0


def test_ndarray_arguments_with_vector_elements():
    out, _ = engine_run('ndarray_elements.py')
    assert out.strip().splitlines()[-1] == '[19.0, 21.0, 23.0]'


def test_engine_run_reports_a_missing_script_and_bad_usage():
    done = subprocess.run([sys.executable, '-m', 'engine', 'run', 'no_such_script.py'], capture_output=True,
                          text=True)
    assert done.returncode == 2 and 'no such file' in done.stderr
    done = subprocess.run([sys.executable, '-m', 'engine', 'frobnicate'], capture_output=True, text=True)
    assert done.returncode == 2 and 'usage' in done.stderr


def test_ti_math_helpers_and_vector_types():
    out, _ = engine_run('math_types.py')
    lines = out.strip().splitlines()
    assert lines[-2] == '(4,) [3.0, 1.0, 1.5]'            # ti.field(ti.math.vec3, ...)
    assert lines[-1] == '[1.0, 2.5, 0.5, 5.0, 1.0, 1.0, 1.75, 3.1416]'
