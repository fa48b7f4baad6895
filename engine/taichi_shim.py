"""Running Taichi programs unchanged: `import taichi` (and `import taichi.math`, ...)
resolves to this engine, then the script runs as `__main__` with its own arguments; its
`ti.GUI` frames can end it and be written as a video (engine/gui.py, record_frames)."""
import importlib
import importlib.abc
import importlib.util
import os
import re
import runpy
import sys

from . import gui
from .core.errors import full_traceback
from .unsupported import MISSING, WHERE, unknown_name


# Taichi's modules that programs import (`import taichi.math as tm`), and the engine's
PUBLIC_MODULES = {'math': 'engine.language.math', 'linalg': 'engine.language.linalg', 'ad': 'engine.runtime.ad',
                  'profiler': 'engine.runtime.profiler', 'types': 'engine.types', 'tools': 'engine.tools',
                  'tools.np2ply': 'engine.ply', 'graph': 'engine.graph', '_lib': 'engine.internals',
                  'examples': 'engine.examples', 'examples.patterns': 'engine.examples'}


# Taichi's packages that the engine has only in part
MODULE_WORDS = {'_lib': "Taichi's compiled core; only its backend queries are here, as `from taichi._lib import core`",
                'examples': "Taichi's example programs are not part of the engine; only taichi.examples.patterns "
                            '(taichi_logo) is here',
                'lang': "Taichi's internals; programs use the public ti.* names (the one internal that "
                        'published programs call, ti.lang.impl.get_runtime(), is there as an attribute)'}


class _TaichiAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `taichi` as `engine` and `taichi.X` as the engine's module for X."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != 'taichi' and not fullname.startswith('taichi.'):
            return None
        real = 'engine' if fullname == 'taichi' else PUBLIC_MODULES.get(fullname[len('taichi.'):])
        if real is None:
            return _refuse_missing(fullname)
        return importlib.util.spec_from_loader(fullname, self, origin=real)

    def create_module(self, spec):
        module = importlib.import_module(spec.origin)
        self.specs = getattr(self, 'specs', {})
        self.specs[spec.origin] = module.__spec__       # the import system writes the alias over it
        return module

    def exec_module(self, module):
        module.__spec__ = self.specs[module.__name__]


def _refuse_missing(fullname):
    """`import taichi.ui` or any other `taichi.X` the engine lacks: a ModuleNotFoundError
    saying what it is (engine/unsupported.py), never Python's bare "No module named"."""
    parts = fullname.split('.')
    what = MISSING.get(parts[1]) or MODULE_WORDS.get(parts[1])
    if what is None:
        what = 'not a module the engine has; it has ' + ', '.join(f'taichi.{m}' for m in PUBLIC_MODULES)
    raise ModuleNotFoundError(f'{fullname} is not supported by this engine: {what} {WHERE}', name=fullname)


def install():
    """Make `import taichi` import this engine (idempotent)."""
    if not any(isinstance(f, _TaichiAlias) for f in sys.meta_path):
        sys.meta_path.insert(0, _TaichiAlias())


def _headless_opencv():
    """Without a display, OpenCV's windows cannot open (`cv2.imshow` raises): DiffTaichi's
    examples show frames that way, so under `engine run` they show nothing instead."""
    if os.environ.get('DISPLAY') or os.environ.get('WAYLAND_DISPLAY') or sys.platform != 'linux':
        return
    if importlib.util.find_spec('cv2') is None:
        return
    import cv2
    for name, result in (('imshow', None), ('waitKey', -1), ('namedWindow', None), ('destroyAllWindows', None),
                         ('destroyWindow', None), ('moveWindow', None)):
        if hasattr(cv2, name):
            setattr(cv2, name, lambda *args, _result=result, **kwargs: _result)


def run_script(script, args, frames=None, video=None):
    """Run `script` as `python script args...` would, with `import taichi` resolving here;
    `frames`, `video`: end each ti.GUI after that many shown frames, write them to that file."""
    if not os.path.isfile(script):
        print(f'python -m engine run: no such file: {script}', file=sys.stderr)
        return 2
    install()
    _headless_opencv()
    gui.record_frames(frames, video)
    sys.argv = [script] + list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name='__main__')
    except SystemExit as exit_:
        code = exit_.code
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)        # sys.exit('message'), as Python prints it
        return code if isinstance(code, int) else (0 if code is None else 1)
    except Exception as exc:        # shown as `python script` shows it: from its frames on
        if isinstance(exc, ImportError):
            _say_what_is_missing(exc)
        if not full_traceback():
            exc.__traceback__ = _from_the_script(exc.__traceback__, os.path.abspath(script))
        sys.excepthook(type(exc), exc, exc.__traceback__)
        return 1
    finally:
        gui.finish_recording()      # the frames shown so far, whatever ended the program
    return 0


CANNOT_IMPORT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")


def _say_what_is_missing(exc):
    """`from taichi import X` of a name the engine lacks: Python says only "cannot import
    name"; the engine's words for `ti.X` say what X is, or the closest name it has."""
    found = CANNOT_IMPORT.match(str(exc))
    module = sys.modules.get(found.group(2)) if found else None
    if module is None or not module.__name__.startswith('engine'):
        return
    name = found.group(1)
    try:
        getattr(module, name)
        return                      # it is there after all (a circular import): Python's words stand
    except AttributeError as missing:
        words = str(missing)
    if 'not supported by this engine' not in words:
        taichi = 'ti' if module.__name__ == 'engine' else _taichi_name(module.__name__)
        words = str(unknown_name(taichi, name, dir(module)))
    exc.msg = words
    exc.args = (words,)


def _taichi_name(module):
    """`taichi.math` for engine.language.math: the name the program imported it by."""
    aliases = [f'taichi.{short}' for short, real in PUBLIC_MODULES.items() if real == module]
    return aliases[-1] if aliases else module


def _from_the_script(tb, script):
    """The traceback without the frames of runpy and this module above the script's."""
    start = tb
    while start is not None and os.path.abspath(start.tb_frame.f_code.co_filename) != script:
        start = start.tb_next
    return start or tb
