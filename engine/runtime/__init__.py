"""Layer 6, runtime: the compile pipeline, @ti.kernel, the tape, native replay and
ti.capture, the ti.ad API, the profiler (docs/architecture.md)."""
