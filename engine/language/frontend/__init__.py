"""Frontend: Python AST of a kernel -> IR (builder.py composes it).

What the rest of the engine imports from `engine.language.frontend` is re-exported here.
"""
from .builder import KernelBuilder
from .markers import (BoundFunc, Func, Template, atomic_add, atomic_and, atomic_max, atomic_min, atomic_or,
                      atomic_sub, atomic_xor, block_local, func, grouped, loop_config, ndrange, real_func,
                      static, static_assert, static_print, stop_grad, template)
from .source import FunctionSource
from .values import NdarrayArg
