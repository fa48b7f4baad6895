"""Layer 2, IR: statements and blocks (nodes.py), the op table (ops.py), the printer,
the verifier and the simplify passes. Imports core only (docs/architecture.md)."""
