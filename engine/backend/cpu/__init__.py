"""The CPU backend: IR -> LLVM IR (codegen.py), LLVM -> loaded object code (jit.py), the
native thread pool for parallel loops (threadpool.py)."""
