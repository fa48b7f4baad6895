"""The few of Taichi's internals (`ti.lang`) that published programs call, and a clear
refusal for the rest: DiffTaichi's smoke_taichi_gpu.py prints
`ti.lang.impl.get_runtime().prog.get_total_compilation_time()` after each iteration."""
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
