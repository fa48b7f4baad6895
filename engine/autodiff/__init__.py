"""Layer 4, autodiff: IR -> adjoint IR (reverse.py) and primal + tangent IR (forward.py),
the data access rules, what is refused and why (docs/architecture.md)."""
