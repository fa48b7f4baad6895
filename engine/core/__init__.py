"""Layer 1, core: errors, data types, ti.init's options, the program and the modes.
Imports nothing else of the engine (docs/architecture.md)."""
