"""Taichi's public names this engine does not have: `ti.<name>` (and `ti.types.<name>`)
raises an AttributeError that says what the feature is and that it is missing, instead of
Python's bare "module has no attribute"; `import taichi.<name>` of a missing submodule says
the same (engine/taichi_shim.py). docs/taichi_programs.md lists the same names."""

SPARSE = 'sparse data structures (pointer, bitmasked and dynamic SNodes are refused too)'
QUANT = 'quantized types (ti.types.quant, ti.BitpackedFields)'
MISSING = {
    'ui': 'GGUI (ti.ui.Window, Canvas, Scene); ti.GUI is here and draws off screen',
    'graph': 'compute graphs (ti.graph)',
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
    'global_thread_idx': 'ti.global_thread_idx',
    'FieldsBuilder': f'ti.FieldsBuilder ({SPARSE})',
    'append': SPARSE, 'length': SPARSE, 'is_active': SPARSE, 'activate': SPARSE,
    'deactivate': SPARSE, 'deactivate_all_snodes': SPARSE, 'rescale_index': SPARSE,
    'real_func': 'real (not inlined, recursive) functions; ti.func inlines',
    'experimental': 'ti.experimental (real_func, ...); ti.func inlines',
}
MISSING_TYPES = {
    'quant': QUANT,
    'argpack': 'argument packs (ti.types.argpack)',
    'sparse_matrix_builder': 'sparse matrices (ti.types.sparse_matrix_builder, ti.linalg.SparseMatrixBuilder)',
    'f16': 'half-precision floats (ti.f16)', 'float16': 'half-precision floats (ti.f16)',
    'texture': 'textures', 'rw_texture': 'textures',
}


def refuse(name, namespace='ti'):
    what = (MISSING_TYPES if namespace == 'ti.types' else MISSING).get(name)
    if what is None:
        module = 'engine' if namespace == 'ti' else 'engine.' + namespace[3:]
        raise AttributeError(f'module {module!r} has no attribute {name!r}')
    raise AttributeError(f'{namespace}.{name} is not supported by this engine: {what} '
                         f'(docs/taichi_programs.md lists what is missing)')
