"""LLVM target machine and in-process loading of compiled object code.

One execution engine per process: kernel modules are optimized at O3 for the
host CPU, emitted as object code (what the disk cache will store) and loaded
into the engine; runtime functions are exported under global symbol names so
that later modules can call them.
"""
import ctypes

import llvmlite.binding as llvm

llvm.initialize_native_target()
llvm.initialize_native_asmprinter()
# GVN's partial redundancy elimination of loads across a loop's back edge makes the loads
# of loop-invariant field elements (a Biot-Savart sum's 4 vortices, once the inner loop is
# unrolled) into values carried from one iteration to the next, which the loop vectorizer
# cannot take: vortex_rings' advection ran scalar, 2.7x slower (docs/performance.md).
# An LLVM option is global to the process: other users of llvmlite in it see it too.
llvm.set_option('', '-enable-load-in-loop-pre=false')

_target_machine = None
_engine = None


def target_machine():
    global _target_machine
    if _target_machine is None:
        target = llvm.Target.from_default_triple()
        _target_machine = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(),
            features=llvm.get_host_cpu_features().flatten(),
            opt=3, reloc='default', codemodel='jitdefault')
    return _target_machine


def host_description():
    """What, besides the source, determines the object code (for cache keys)."""
    return f'{llvm.get_process_triple()}|{llvm.get_host_cpu_name()}|{llvm.llvm_version_info}'


def _execution_engine():
    global _engine
    if _engine is None:
        _engine = llvm.create_mcjit_compiler(llvm.parse_assembly(''), target_machine())
    return _engine


def compile_ir(llvm_ir: str) -> bytes:
    """Verify, optimize at O3 and emit object code for one module of LLVM IR."""
    module = llvm.parse_assembly(llvm_ir)
    module.verify()
    tm = target_machine()
    _set_target(module, tm)
    builder = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    builder.getModulePassManager().run(module, builder)
    return tm.emit_object(module)


def _set_target(module, tm):
    """The optimizer needs the real data layout: without it, vectorized code is wrong."""
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)


def optimized_ir(llvm_ir: str) -> str:
    """The module after O3, for inspection and tests."""
    module = llvm.parse_assembly(llvm_ir)
    tm = target_machine()
    _set_target(module, tm)
    builder = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    builder.getModulePassManager().run(module, builder)
    return str(module)


def load_object(obj: bytes, symbols):
    """Load object code and return {symbol: address} for the requested symbols."""
    engine = _execution_engine()
    engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    return {name: engine.get_function_address(name) for name in symbols}


def export_symbol(name: str, address: int):
    """Make a loaded function callable by name from modules compiled later."""
    llvm.add_symbol(name, address)


def cfunc(address: int, restype, *argtypes):
    return ctypes.CFUNCTYPE(restype, *argtypes)(address)
