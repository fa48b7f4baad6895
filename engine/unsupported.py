"""Taichi's public names this engine does not have: `ti.<name>` raises an AttributeError
that says what the feature is and that it is missing, instead of Python's bare "module has
no attribute". docs/taichi_programs.md lists the same names."""

SPARSE = 'sparse data structures (pointer, bitmasked and dynamic SNodes are refused too)'
MISSING = {
    'ui': 'GGUI (ti.ui.Window, Canvas, Scene); ti.GUI is here and draws off screen',
    'graph': 'compute graphs (ti.graph)',
    'aot': 'ahead-of-time modules (ti.aot)',
    'Mesh': 'meshes (ti.Mesh, MeshTaichi)',
    'mesh_local': 'meshes (ti.Mesh, MeshTaichi)',
    'mesh_patch_idx': 'meshes (ti.Mesh, MeshTaichi)',
    'algorithms': 'ti.algorithms (parallel_sort, PrefixSumExecutor)',
    'simt': 'GPU warp and block intrinsics (ti.simt)',
    'quant': 'quantized types (ti.quant)',
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


def refuse(name):
    what = MISSING.get(name)
    if what is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    raise AttributeError(f'ti.{name} is not supported by this engine: {what} '
                         f'(docs/taichi_programs.md lists what is missing)')
