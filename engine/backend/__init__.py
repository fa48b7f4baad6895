"""Layer 5, backend: IR -> native code and its launch. cpu/ holds the CPU's code
generation, JIT and thread pool; what every LLVM backend shares (op lowering, the
launch of a compiled kernel, the disk cache, the interpreter) sits here (docs/architecture.md)."""
