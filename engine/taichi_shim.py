"""Running Taichi programs unchanged: `import taichi` (and `import taichi.math`, ...)
resolves to this engine, then the script runs as `__main__` with its own arguments."""
import importlib
import importlib.abc
import importlib.util
import os
import runpy
import sys

from .core.errors import full_traceback
from .unsupported import MISSING


# Taichi's modules that programs import (`import taichi.math as tm`), and the engine's
PUBLIC_MODULES = {'math': 'engine.language.math', 'linalg': 'engine.language.linalg', 'ad': 'engine.runtime.ad',
                  'profiler': 'engine.runtime.profiler', 'types': 'engine.types', 'tools': 'engine.tools'}


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
    """`import taichi.ui` of a Taichi module the engine lacks: an ImportError saying what it
    is (engine/unsupported.py); other unknown names are left to the import system."""
    parts = fullname.split('.')
    if len(parts) > 1 and parts[1] in MISSING:
        raise ModuleNotFoundError(f'{fullname} is not supported by this engine: {MISSING[parts[1]]} '
                                  f'(docs/taichi_programs.md lists what is missing)', name=fullname)
    return None


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


def run_script(script, args):
    """Run `script` as `python script args...` would, with `import taichi` resolving here."""
    if not os.path.isfile(script):
        print(f'python -m engine run: no such file: {script}', file=sys.stderr)
        return 2
    install()
    _headless_opencv()
    sys.argv = [script] + list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name='__main__')
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except Exception as exc:        # shown as `python script` shows it: from its frames on
        if not full_traceback():
            exc.__traceback__ = _from_the_script(exc.__traceback__, os.path.abspath(script))
        sys.excepthook(type(exc), exc, exc.__traceback__)
        return 1
    return 0


def _from_the_script(tb, script):
    """The traceback without the frames of runpy and this module above the script's."""
    start = tb
    while start is not None and os.path.abspath(start.tb_frame.f_code.co_filename) != script:
        start = start.tb_next
    return start or tb
