"""The guide's own example simulator (docs/workflow.md, section 5) as a user builds it: its
class, copied from the guide into a package of their own, run through every command of
the command line in a subprocess (train, render, eval, sweep); and what `render` says of
a simulator whose render_frames() gives nothing to show."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parent.parent
GUIDE = ROOT / 'docs' / 'workflow.md'


def _guide_class():
    """The guide's `class Projectile` with its imports, as the guide writes it."""
    text = GUIDE.read_text()
    block = re.search(r'```python\n(from sims\.base import Simulation\n.*?)\nsim = Projectile', text, re.S)
    assert block, 'docs/workflow.md no longer shows the Projectile class'
    return 'import engine as ti\n' + block.group(1)


def _package(tmp_path, source):
    package = tmp_path / 'projectile'
    package.mkdir()
    (package / '__init__.py').write_text(source)
    (package / '__main__.py').write_text('from sims.cli import main\nfrom projectile import Projectile\n'
                                         'main(Projectile)\n')
    return package


def _run(tmp_path, *argv):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]),
               ENGINE_CACHE_DIR=str(tmp_path / 'cache'), MPLBACKEND='Agg')
    return subprocess.run([sys.executable, '-m', 'projectile', *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope='module')
def guide_package(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('guide')
    _package(tmp, _guide_class())
    return tmp


def test_the_guides_example_trains_renders_evaluates_and_sweeps(guide_package):
    tmp = guide_package
    done = _run(tmp, 'train', '--quick', '--fp', 'f64', '--iters', '2', '--out', 'run')
    assert done.returncode == 0, done.stderr
    assert 'next: python -m projectile render' in done.stdout         # the module the user ran
    done = _run(tmp, 'render', '--video', 'gif', '--out', 'run')
    assert done.returncode == 0, done.stderr
    assert (tmp / 'run' / 'projectile.gif').stat().st_size > 0 and '(11 frames)' in done.stdout
    done = _run(tmp, 'eval', '--out', 'run')
    assert done.returncode == 0 and 'best parameters' in done.stdout, done.stderr
    done = _run(tmp, 'sweep', '--quick', '--lr', '0.25,0.5', '--seeds', '0:1', '--iters', '1',
                '--workers', '1', '--out', 'sweep')
    assert done.returncode == 0, done.stderr
    assert (tmp / 'sweep' / 'results.json').exists()


def test_render_refuses_a_folder_without_a_run_unless_asked_for_the_initial_parameters(guide_package):
    tmp = guide_package
    done = _run(tmp, 'render', '--out', 'nothing_here')
    assert done.returncode == 2 and not (tmp / 'nothing_here').exists()
    assert done.stderr.strip().count('\n') == 0 and '--initial' in done.stderr, done.stderr
    done = _run(tmp, 'render', '--initial', '--video', 'gif', '--out', 'initial')
    assert done.returncode == 0 and 'initial parameters' in done.stdout, done.stderr


def test_render_of_a_simulator_without_frames_is_one_line(tmp_path):
    source = _guide_class().replace('        from sims.render import Canvas\n', '        return []\n')
    _package(tmp_path, source)
    done = _run(tmp_path, 'render', '--initial', '--quick', '--out', 'run')
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().count('\n') == 0 and 'gave no frames' in done.stderr, done.stderr


def test_a_package_of_the_users_own_sweeps_on_ray_workers(guide_package):
    """Ray's workers import the simulator from its module, with its folder on their path."""
    pytest.importorskip('ray')
    done = _run(guide_package, 'sweep', '--quick', '--lr', '0.25,0.5', '--seeds', '0:1', '--iters', '1',
                '--workers', '2', '--threads-per-trial', '1', '--out', 'ray_sweep')
    assert done.returncode == 0 and '2 done' in done.stdout, done.stdout + done.stderr
    assert _run(guide_package, 'train', '--help').stdout.startswith('usage: python -m projectile train')
