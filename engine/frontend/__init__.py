"""Frontend: Python AST of a kernel -> IR (see builder.py).

What the rest of the engine imports from `engine.frontend` is re-exported here.
"""
from .builder import (BoundFunc, Func, FunctionSource, KernelBuilder, NdarrayArg, Template,
                      atomic_add, atomic_and, atomic_max, atomic_min, atomic_or, atomic_sub,
                      atomic_xor, block_local, func, grouped, loop_config, ndrange, static,
                      static_assert, static_print, stop_grad, template)
