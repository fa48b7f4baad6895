"""The operator tables: Python's AST operators as the engine computes them.

BINOPS and COMPARE apply to compile-time and run-time operands alike (IR values and
matrices overload the operators); INT_BINOPS names the ops.fold_ints operation for two
compile-time integers; COMBINE is what an atomic (or `+=`) of each kind computes.
"""
import ast
import operator

from .. import math as tmath


BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
          ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
          ast.Pow: tmath.pow, ast.MatMult: operator.matmul, ast.BitAnd: operator.and_,
          ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift,
          ast.RShift: operator.rshift}
INT_BINOPS = {ast.Add: 'add', ast.Sub: 'sub', ast.Mult: 'mul', ast.FloorDiv: 'floordiv', ast.Mod: 'mod',
              ast.Pow: 'pow', ast.BitAnd: 'bit_and', ast.BitOr: 'bit_or', ast.BitXor: 'bit_xor',
              ast.LShift: 'shl', ast.RShift: 'shr'}
COMBINE = {'add': operator.add, 'sub': operator.sub, 'min': tmath.min, 'max': tmath.max,
           'and': operator.and_, 'or': operator.or_, 'xor': operator.xor}
COMPARE = {ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
           ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
           ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
           ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
