"""ti.GUI programs off screen, run as users run them: `python -m engine run --frames N
--video PATH program.py` ends a `while gui.running:` loop (or a program that ignores
`running`) after N shown frames and writes them as a video; without --frames the first
warning says so. Input calls answer as a display with no events would. Taichi's names the
engine lacks fail with the engine's words. The programs are in tests/taichi_compat/."""
import os
import subprocess
import sys

import imageio.v3 as iio
import numpy as np
import pytest

import engine as ti
from engine.__main__ import main

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'taichi_compat')


def engine_run(*args, expect=0):
    done = subprocess.run([sys.executable, '-m', 'engine', 'run', *args], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == expect, done.stderr[-3000:]
    return done.stdout, done.stderr


def program(name):
    return os.path.join(HERE, name)


def frames_of(video):
    return np.stack(list(iio.imiter(video)))


# --- --frames and --video -------------------------------------------------------------------

def test_a_running_loop_ends_after_n_frames_and_the_video_has_them(tmp_path):
    video = str(tmp_path / 'loop.mp4')
    out, err = engine_run('--frames', '5', '--video', video, program('gui_running_loop.py'))
    assert out.strip() == 'left the loop after 5 frames'          # the loop ended; the code after it ran
    assert f'wrote 5 frames to {video}' in err and 'draws off screen' not in err
    frames = frames_of(video)
    assert frames.shape == (5, 64, 64, 3)
    greys = frames.reshape(5, -1).mean(axis=1)
    assert np.allclose(greys, [0, 25.5, 51, 76.5, 102], atol=4)     # frame k is k/10 grey, in order


def test_a_program_that_ignores_running_ends_at_its_next_frame_with_status_0(tmp_path):
    video = str(tmp_path / 'grow.gif')
    out, err = engine_run('--frames', '4', '--video', video, program('gui_ignores_running.py'))
    assert out.split() == ['shown', '1', 'shown', '2', 'shown', '3', 'shown', '4']
    assert 'ended the program at its frame 5' in err and 'did not end its loop' in err
    frames = frames_of(video)
    assert frames.shape == (4, 64, 64, 3)
    white = (frames.sum(axis=-1) > 600).reshape(4, -1).sum(axis=1)
    assert all(np.diff(white) > 0)                                 # the circle grows frame by frame


def test_a_program_that_reads_running_but_loops_on_ends_one_frame_later(tmp_path):
    script = tmp_path / 'reads_running.py'
    script.write_text('import taichi as ti\n'
                      'gui = ti.GUI("reads", res=32)\n'
                      'while True:\n'
                      '    print(gui.running)\n'
                      '    gui.show()\n')
    out, err = engine_run('--frames', '3', str(script))
    assert out.split() == ['True', 'True', 'True', 'False', 'False']    # one last frame, then the end
    assert 'ended the program at its frame 5' in err


def test_sys_exit_with_a_message_prints_it_and_a_gui_closes_as_a_context(tmp_path):
    script = tmp_path / 'exits.py'
    script.write_text('import sys\nimport taichi as ti\n'
                      'with ti.GUI("ctx", res=32) as gui:\n'
                      '    gui.show()\n'
                      'print(gui.running)\n'
                      'sys.exit("stopped on purpose")\n')
    out, err = engine_run(str(script), expect=1)
    assert out.strip() == 'False' and 'stopped on purpose' in err


def test_a_program_that_ends_first_gets_the_frames_it_showed(tmp_path):
    video = str(tmp_path / 'few.mp4')
    _, err = engine_run('--frames', '100', '--video', video, program('gui_frames.py'), str(tmp_path / 'png'))
    assert f'wrote 4 frames to {video}' in err
    assert frames_of(video).shape == (4, 48, 64, 3)


def test_input_calls_off_screen_have_no_events(tmp_path):
    out, _ = engine_run('--frames', '3', program('gui_input.py'))
    lines = out.strip().splitlines()
    assert lines[0] == ("keys ['Escape', ' ', 'Return', 'BackSpace', 'Up', 'Down', 'Left', 'Right', 'Shift', "
                        "'Control', 'Alt', 'LMB', 'RMB', 'Wheel', 'WMClose']")
    assert lines[1] == 'types Press Release Motion'
    assert lines[2] == 'event None None [] (0.5, 0.5)'             # no event was ever taken
    assert lines[3] == 'pressed False cursor (0.5, 0.5) center [0.5, 0.5] frames 3'


# --- bad flags: one line, status 2, nothing run or written ------------------------------------

@pytest.mark.parametrize('flags, words', [
    (['--frames', '0'], 'whole number from 1 up'),
    (['--frames', 'x'], "whole number from 1 up, not 'x'"),
    (['--frames'], 'expected one argument'),
    (['--video', '{tmp}/no_such_folder/out.mp4'], 'does not exist'),
    (['--video', '{tmp}/out.avi'], 'must be a .mp4 or .gif'),
    (['--video', '{tmp}/folder.mp4'], 'is a folder'),
    (['--bogus'], "unrecognized arguments: --bogus (the program's own arguments go after SCRIPT)"),
])
def test_bad_flags_are_one_line_and_status_2(flags, words, tmp_path, capsys):
    (tmp_path / 'folder.mp4').mkdir()
    existing = tmp_path / 'existing.mp4'
    existing.write_bytes(b'kept')
    flags = [f.format(tmp=tmp_path) for f in flags]
    script = [] if flags == ['--frames'] else [program('gui_ignores_running.py')]
    with pytest.raises(SystemExit) as exit_:
        main(['run', '--video', str(existing), *flags, *script])     # the program would never end
    printed = capsys.readouterr()
    assert exit_.value.code == 2 and printed.out == ''
    assert printed.err.count('\n') == 1 and printed.err.startswith('python -m engine run: ') and words in printed.err
    assert existing.read_bytes() == b'kept'


def test_a_bad_flag_exits_with_status_2_from_the_command_line(tmp_path):
    _, err = engine_run('--frames', '-2', '--video', str(tmp_path / 'v.mp4'), program('gui_running_loop.py'),
                        expect=2)
    assert err.strip().splitlines() == [
        "python -m engine run: argument --frames: the number of frames must be a whole number from 1 up, not '-2'"]
    assert not (tmp_path / 'v.mp4').exists()


def test_help_documents_the_flags(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(['run', '--help'])
    text = capsys.readouterr().out
    assert exit_.value.code == 0
    assert '--frames N' in text and '--video PATH' in text and 'gui.running' in text


# --- without --frames, and names the engine lacks ---------------------------------------------

@pytest.fixture(scope='module')
def missing_names_run():
    return engine_run(program('missing_names.py'))


def test_the_first_warning_says_how_to_end_and_record_the_loop(missing_names_run):
    _, err = missing_names_run
    first = err[:err.index('Warning:') + 300]
    assert 'RuntimeWarning: ti.GUI draws off screen' in first and '--frames N --video out.mp4' in err
    assert err.count('ti.GUI draws off screen') == 1


def test_taichi_logo_is_there(missing_names_run):
    out, _ = missing_names_run
    assert out.splitlines()[0].split()[1:] == ['628', '0', '1', '1', '[0,', '1]']   # Taichi's: dark left, light right and around


@pytest.mark.parametrize('what, words', [
    ('ti._lib.utils', "AttributeError: ti._lib.utils is not supported by this engine: Taichi's compiled core"),
    ('ti.GUI.set_title', "AttributeError: ti.GUI.set_title is not supported by this engine: ti.GUI draws off "
                         "screen and has no such method; did you mean 'set_image'?"),
    ('import taichi.examples.simulation', 'ModuleNotFoundError: taichi.examples.simulation is not supported by '
                                          "this engine: Taichi's example programs"),
    ('import taichi.lang', "ModuleNotFoundError: taichi.lang is not supported by this engine: Taichi's internals"),
    ('import taichi._lib.core', "ModuleNotFoundError: taichi._lib.core is not supported by this engine: Taichi's "
                                "compiled core"),
])
def test_missing_names_say_so_in_the_engines_words(missing_names_run, what, words):
    """(`ti._lib.core` answers the backend queries Taichi's examples make: none but the CPU.)"""
    out, _ = missing_names_run
    line = next(line for line in out.splitlines() if line.startswith(what + ' '))
    assert line.startswith(f'{what} {words}') and line.endswith('(docs/taichi_programs.md lists what is missing)')


@pytest.mark.parametrize('statement, words', [
    ('from taichi import feild', "ImportError: ti.feild is not supported by this engine: the engine has no such "
                                 "name; did you mean 'field'?"),
    ('from taichi.examples.patterns import logo', 'ImportError: taichi.examples.logo is not supported by this '
                                                  "engine: Taichi's example programs"),
])
def test_from_imports_of_missing_names_say_so(statement, words, tmp_path):
    script = tmp_path / 'imports.py'
    script.write_text(f'import sys\n{statement}\n')
    _, err = engine_run(str(script), expect=1)
    assert words in err and 'cannot import name' not in err and 'line 2' in err


def test_missing_names_in_python(recwarn):
    with pytest.raises(AttributeError, match="ti.feild is not supported by this engine: .*did you mean 'field'"):
        ti.feild
    assert not hasattr(ti, '__wrapped__') and not hasattr(ti, 'no_such_name')
    gui = ti.GUI('t', 16)
    with pytest.raises(AttributeError, match="ti.GUI.is_presed .*did you mean 'is_pressed'"):
        gui.is_presed('a')
    assert (gui.get_event(), list(gui.get_events(ti.GUI.PRESS)), gui.get_cursor_pos()) == (False, [], (0.5, 0.5))


@pytest.mark.parametrize('namespace', ['math', 'ad', 'linalg', 'profiler', 'tools'])
def test_missing_names_in_the_sub_namespaces(namespace):
    module = getattr(ti, namespace)
    with pytest.raises(AttributeError, match=f'ti.{namespace}.no_such_name is not supported by this engine'):
        module.no_such_name
    assert getattr(module, 'no_such_name', 5) == 5 and not hasattr(module, '__wrapped__')


# --- set_image: Taichi's sizes and dtypes ---------------------------------------------------

def test_set_image_takes_taichis_dtypes_and_refuses_another_size_or_dtype(recwarn):
    ti.init(arch=ti.cpu)
    gui = ti.GUI('images', res=(4, 2), show_gui=False)
    rg = np.zeros((4, 2, 2), dtype=np.float32)
    rg[0, 0] = [1.0, 0.5]                                   # red and green; no blue channel
    gui.set_image(rg)
    assert gui.get_image()[0, 0, :3].tolist() == pytest.approx([1.0, 0.5, 0.0], abs=1 / 255)
    gui.set_image(np.full((4, 2), 65535, dtype=np.uint16))  # unsigned: scaled by their maximum
    assert gui.get_image()[3, 1, :3].tolist() == pytest.approx([1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match='the image is 8 x 2, the window 4 x 2'):
        gui.set_image(np.zeros((8, 2), dtype=np.float32))
    for dtype in (np.int32, np.bool_):
        with pytest.raises(ValueError, match='is not supported'):
            gui.set_image(np.zeros((4, 2), dtype=dtype))
