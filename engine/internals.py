"""The few of Taichi's internals (`ti.lang`, `ti._lib.core`) that published programs call,
and a clear refusal for the rest: DiffTaichi's smoke_taichi_gpu.py prints
`ti.lang.impl.get_runtime().prog.get_total_compilation_time()` after each iteration, and
Taichi's examples ask its compiled core which backends it was built with
(`_ti_core.GGUI_AVAILABLE`, `ti._lib.core.with_vulkan()`) to pick a GUI and an arch. This
module is also `taichi._lib` (engine/taichi_shim.py): `from taichi._lib import core`."""
from .runtime import pipeline


class _Internals:
    """A namespace of Taichi's internals: its listed members, an AttributeError naming the rest."""

    def __init__(self, path, **members):
        self._path = path
        self.__dict__.update(members)

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        raise AttributeError(f'{self._path}.{name} is not supported by this engine: Taichi\'s internals; '
                             f'programs use the public ti.* names (docs/taichi_programs.md lists what is missing)')


_program = _Internals('ti.lang.impl.get_runtime().prog',
                      get_total_compilation_time=lambda: pipeline.compile_seconds)
_runtime = _Internals('ti.lang.impl.get_runtime()', prog=_program)
lang = _Internals('ti.lang', impl=_Internals('ti.lang.impl', get_runtime=lambda: _runtime))


def _without(backend):
    return lambda: False     # the engine runs on the CPU only; `backend` names what is asked


__path__ = []       # a package to the import system: `import taichi._lib.X` gets the engine's message

# which of Taichi's backends and GUIs this build has: none but the CPU and ti.GUI
core = _Internals('ti._lib.core', GGUI_AVAILABLE=False,
                  **{f'with_{name}': _without(name) for name in ('cuda', 'vulkan', 'metal', 'opengl', 'gles', 'dx11',
                                                                 'dx12', 'amdgpu')})


def __getattr__(name):
    """`ti._lib.<name>` (this module is taichi._lib): the rest of Taichi's compiled core."""
    if name.startswith('__'):
        raise AttributeError(name)
    raise AttributeError(f"ti._lib.{name} is not supported by this engine: Taichi's compiled core; only "
                         f"ti._lib.core's backend queries are here (docs/taichi_programs.md lists what is missing)")
