"""ti.init's keywords: Taichi's are accepted (applied where they mean something here,
ignored with a reason where they do not), the engine's own are `Config`'s parameters,
and anything else is an error naming it. A keyword left out of the call may come from
Taichi's environment variable for it (`TI_DEBUG=1`, `TI_KERNEL_PROFILER=1`, ...)."""
import difflib
import os

from .errors import TaichiInitError

# Taichi keywords applied here (Config takes them as parameters), and what they do
APPLIED = {
    'default_fp': 'the type of float literals and `float` annotations',
    'default_ip': 'the type of int literals and `int` annotations',
    'debug': 'index, NaN/Inf and division checks (engine/backend/cpu/codegen_checks.py)',
    'check_out_of_bound': "index checks: the engine's check_bounds (on by default here)",
    'cpu_max_num_threads': 'the size of the thread pool',
    'random_seed': 'the seed of ti.random in kernels',
    'offline_cache': 'the compile cache on disk',
    'offline_cache_file_path': "the compile cache's directory",
    'kernel_profiler': 'per-kernel launch counts and times (ti.profiler)',
    'print_ir': "prints each kernel's IR when it is built",
    'log_level': "'error' or 'critical' silence the engine's warnings of ti.init",
    'print_full_traceback': "errors keep the engine's frames in their tracebacks",
    'fast_math': 'float arithmetic may be reassociated, contracted into FMAs and divided by '
                 'reciprocals (NaN and Inf stay as IEEE has them); off by default here',
}

_GPU = 'there is no GPU backend: kernels run on the CPU'
_OPT = "kernels always compile at LLVM's O3 after the engine's own passes"
_IR = "there is no such intermediate form here (print_ir prints the engine's IR)"
_CACHE = 'the cache is emptied by `python -m engine clear-cache`, not by policy'
_MESH = 'there are no meshes (ti.Mesh) here'

# Taichi keywords accepted and ignored, with the reason
IGNORED = {
    'advanced_optimization': _OPT, 'cfg_optimization': _OPT, 'opt_level': _OPT,
    'external_optimization_level': _OPT, 'constant_folding': _OPT, 'flatten_if': _OPT,
    'lower_access': _OPT, 'simplify_before_lower_access': _OPT, 'simplify_after_lower_access': _OPT,
    'move_loop_invariant_outside_if': _OPT, 'cache_loop_invariant_global_vars': _OPT,
    'demote_dense_struct_fors': _OPT, 'make_thread_local': _OPT, 'make_block_local': _OPT,
    'detect_read_only': _OPT, 'real_matrix_scalarize': 'vectors and matrices are always scalarized',
    'force_scalarize_matrix': 'vectors and matrices are always scalarized',
    'half2_vectorization': _GPU, 'num_compile_threads': 'kernels compile on the calling thread',
    'device_memory_GB': _GPU, 'device_memory_fraction': _GPU, 'use_unified_memory': _GPU,
    'default_gpu_block_dim': _GPU, 'saturating_grid_dim': _GPU, 'max_block_dim': _GPU,
    'gpu_max_reg': _GPU, 'cuda_stack_limit': _GPU, 'vk_api_version': _GPU,
    'ndarray_use_cached_allocation': 'ndarrays are numpy arrays',
    'default_cpu_block_dim': 'the thread pool sizes its own chunks',
    'cpu_block_dim_adaptive': 'the thread pool sizes its own chunks',
    'make_cpu_multithreading_loop': 'outer loops always run on the thread pool',
    'packed': 'fields are always stored without padding',
    'dynamic_index': 'run-time indices into vectors and matrices always work',
    'ad_stack_size': 'the autodiff stacks of loops grow on demand',
    'default_ad_stack_size': 'the autodiff stacks of loops grow on demand',
    'verbose': 'the engine prints nothing unasked',
    'verbose_kernel_launches': 'see ti.profiler for launches',
    'print_preprocessed_ir': _IR, 'print_ir_dbg_info': _IR, 'print_accessor_ir': _IR,
    'print_evaluator_ir': _IR, 'print_struct_llvm_ir': _IR, 'print_kernel_llvm_ir': _IR,
    'print_kernel_llvm_ir_optimized': _IR, 'print_kernel_nvptx': _GPU, 'print_kernel_amdgcn': _GPU,
    'print_kernel_asm': _IR, 'print_benchmark_stat': 'see ti.profiler',
    'offline_cache_cleaning_policy': _CACHE, 'offline_cache_max_size_of_files': _CACHE,
    'offline_cache_cleaning_factor': _CACHE,
    'excepthook': "errors a program causes already end at its own frames",
    'gdb_trigger': 'there is no C++ runtime to debug',
    'short_circuit_operators': '`and`/`or` in kernels evaluate as the engine defines them',
    'unrolling_limit': 'ti.static loops unroll without a limit',
    'experimental_real_function': 'ti.func calls are inlined',
    'use_mesh': _MESH, 'make_mesh_block_local': _MESH, 'mesh_localize_to_end_mapping': _MESH,
    'mesh_localize_from_end_mapping': _MESH, 'optimize_mesh_reordered_mapping': _MESH,
    'mesh_localize_all_attr_mappings': _MESH, 'demote_no_access_mesh_fors': _MESH,
    'experimental_auto_mesh_local': _MESH, 'auto_mesh_local_default_occupacy': _MESH,
    'quant_opt_store_fusion': 'there are no quantized types', 'quant_opt_atomic_demotion':
    'there are no quantized types',
    'cc_compile_cmd': _GPU, 'cc_link_cmd': _GPU, 'default_up': 'there are no unsigned defaults',
    'enable_fallback': 'every arch runs on the CPU', 'require_version': 'the engine has its own versions',
    '_test_mode': "Taichi's own test suite's switch",
}

LOG_LEVELS = ('trace', 'debug', 'info', 'warn', 'error', 'critical')


def resolve(arch, kwargs, own):
    """(arch, keywords for Config): unknown keywords raise TaichiInitError (a TypeError
    and, as in Taichi, a KeyError) naming them with the closest known one; Taichi's
    ignored ones are dropped; applied ones missing from the call come from TI_<NAME>."""
    known = set(APPLIED) | set(IGNORED) | set(own)
    unknown = sorted(k for k in kwargs if k not in known)
    if unknown:
        raise TaichiInitError(_unknown_message(unknown, known))
    kept = {k: v for k, v in kwargs.items() if k not in IGNORED}
    for name in APPLIED.keys() - {'default_fp', 'default_ip'}:       # types do not come as text
        value = os.environ.get('TI_' + name.upper(), '')
        if name not in kept and value:
            kept[name] = _parse(value)
    if arch is None:
        arch = os.environ.get('TI_ARCH') or None
    return ('cpu' if arch in ('x64', 'arm64') else arch), kept


def _unknown_message(unknown, known):
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, sorted(known), n=1)
        parts.append(f'{name!r}' + (f' (did you mean {close[0]!r}?)' if close else ''))
    return f'ti.init got unknown keyword argument(s): {", ".join(parts)}'


def _parse(text):
    """An environment variable's value: an int (TI_DEBUG=1) or a string."""
    try:
        return int(text)
    except ValueError:
        return text


def check_log_level(level, what='ti.init: log_level'):
    if level is not None and str(level).lower() not in LOG_LEVELS:
        raise TaichiInitError(f'{what} must be one of {", ".join(LOG_LEVELS)}, got {level!r}')
    return None if level is None else str(level).lower()
