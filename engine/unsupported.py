"""Taichi's public names this engine does not have: `ti.<name>` (and `ti.types.<name>`)
raises an AttributeError that says what the feature is and that it is missing, instead of
Python's bare "module has no attribute"; `import taichi.<name>` of a missing submodule says
the same (engine/taichi_shim.py). A name neither Taichi's list below nor the engine knows
(a typo, an internal) gets the same kind of message, with the closest name it has.
docs/taichi_programs.md lists the same names."""
from .core.errors import WHERE, unknown_name  # noqa: F401 (engine/taichi_shim.py, engine/gui.py use them from here)

QUANT = 'quantized types (ti.types.quant, ti.BitpackedFields)'
MISSING = {
    'ui': 'GGUI (ti.ui.Window, Canvas, Scene); ti.GUI is here and draws off screen',
    'aot': 'ahead-of-time modules (ti.aot)',
    'Mesh': 'meshes (ti.Mesh, MeshTaichi)',
    'mesh_local': 'meshes (ti.Mesh, MeshTaichi)',
    'mesh_patch_idx': 'meshes (ti.Mesh, MeshTaichi)',
    'algorithms': 'ti.algorithms (parallel_sort, PrefixSumExecutor)',
    'simt': 'GPU warp and block intrinsics (ti.simt)',
    'quant': QUANT, 'BitpackedFields': QUANT,
    'texture': 'textures', 'Texture': 'textures',
    'f16': 'half-precision floats (ti.f16)', 'float16': 'half-precision floats (ti.f16)',
    'u1': '1-bit integers (ti.u1)',
    'bit_cast': 'ti.bit_cast',
    'get_addr': ("ti.get_addr (the address of a cell in Taichi's SNode blocks: the engine stores each field as "
                 "one row-major array, so Taichi's addresses have no counterpart)"),
    'global_thread_idx': 'ti.global_thread_idx',
    'FieldsBuilder': 'ti.FieldsBuilder (layout trees built apart from ti.root); ti.root builds them',
}
MISSING_TYPES = {
    'quant': QUANT,
    'argpack': 'argument packs (ti.types.argpack)',
    'f16': 'half-precision floats (ti.f16)', 'float16': 'half-precision floats (ti.f16)',
    'texture': 'textures', 'rw_texture': 'textures',
}


def refuse(name, namespace='ti', known=()):
    """Raise the AttributeError for `namespace.name`: what the feature is when it is one of
    Taichi's listed above, else that the engine lacks it, naming the closest of `known`.
    Python's own protocol names (`__path__`, ...) get Python's plain error: callers probe them."""
    what = (MISSING_TYPES if namespace == 'ti.types' else MISSING).get(name)
    if what is None and name.startswith('__'):
        module = 'engine' if namespace == 'ti' else 'engine.' + namespace[3:]
        raise AttributeError(f'module {module!r} has no attribute {name!r}')
    if what is None:
        raise unknown_name(namespace, name, known)
    raise AttributeError(f'{namespace}.{name} is not supported by this engine: {what} {WHERE}', name=name)
