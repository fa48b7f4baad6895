"""Layer 3, language: fields and their placement, vectors, matrices and structs, math,
the argument ABI and the frontend turning a kernel's Python into IR (docs/architecture.md)."""
