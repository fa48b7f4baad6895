"""A kernel's or ti.func's parsed source, and the names its body sees.

FunctionSource parses a function and points at its lines (for messages, as does
`describe`); FunctionContext is one function being compiled: its stack of local scopes,
then its closure, its globals, the kernel builtins (`_BUILTINS`: `range`, `int`, `min`,
`print`... as kernels mean them) and Python's builtins.
"""
import ast
import builtins
import inspect
import textwrap

from ...ir import ops
from .. import printing
from ...core import dtypes as T
from .. import math as tmath
from ...core.errors import SourceLocation, TaichiSyntaxError
from ..matrix import Matrix
from .values import RuntimeRange


class FunctionSource:
    """Parsed source of a kernel or ti.func, with its file and line offset."""

    def __init__(self, fn):
        self.fn = fn
        self.filename = inspect.getsourcefile(fn) or '<unknown>'
        try:
            lines, self.first_line = inspect.getsourcelines(fn)
        except (OSError, TypeError) as exc:
            raise TaichiSyntaxError(f'the source of {fn.__name__} is not available ({exc}): kernels '
                                    f'and ti.funcs must be defined in a file') from None
        source = textwrap.dedent(''.join(lines))
        self.indent = len(lines[0]) - len(lines[0].lstrip())
        tree = ast.parse(source)
        self.node = tree.body[0]
        self.globals = fn.__globals__
        self.closure = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:
                    pass

    def location(self, node):
        lineno = self.first_line + getattr(node, 'lineno', 1) - 1
        col = getattr(node, 'col_offset', 0) + self.indent
        end = getattr(node, 'end_col_offset', None)
        end = end + self.indent if end is not None and getattr(node, 'end_lineno', None) == getattr(node, 'lineno', None) else None
        return SourceLocation(self.filename, lineno, col, end, self.fn.__name__)


class FunctionContext:
    """One function being inlined: its source and its stack of local scopes."""

    def __init__(self, source, scope):
        self.source = source
        self.scopes = [scope]
        self.return_value = None
        self.has_returned = False
        # A func that returns inside run-time control flow keeps its result in locals and
        # a flag: `returned` (the flag's alloca), `returns` (returns emitted so far) and
        # `guarded` (how many of them the code being emitted is known to come after).
        self.returned = None
        self.result = None            # (shape or None, [alloca per entry])
        self.returns = self.guarded = 0
        self.returned_at_compile_time = False
        self.real = False         # the body of a ti.real_func (inlining.py)   # a return under `if ti.static(...)` at the top: the rest is dead
        self.return_annotation = None
        # ti.template() parameters bound to a value computed at run time, not to a variable:
        # Taichi cannot assign to them (they are no l-values), nor can we
        self.expression_params = set()

    def is_expression_param(self, name):
        holder = next((scope for scope in reversed(self.scopes) if name in scope), None)
        return holder is self.scopes[0] and name in self.expression_params

    def lookup(self, name):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in self.source.closure:
            return self.source.closure[name]
        if name in self.source.globals:
            return self.source.globals[name]
        if name in _BUILTINS:
            return _BUILTINS[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise KeyError(name)


def _py_cast(dtype_getter, pytype):
    def cast(x=0):
        if isinstance(x, Matrix):
            return x.cast(dtype_getter())
        if ops.is_value(x):
            return ops.cast(x, dtype_getter())
        return pytype(x)
    cast.python_type = pytype      # `ti.cast(x, float)` in a kernel: the name means the type
    return cast


def _range(*args):
    if any(ops.is_value(a) for a in args):
        return RuntimeRange(*args)
    return builtins.range(*args)


_BUILTINS = {
    'range': _range, 'len': len, 'int': _py_cast(lambda: T.defaults.ip, int),
    'float': _py_cast(lambda: T.defaults.fp, float), 'abs': tmath.abs,
    'min': tmath.min, 'max': tmath.max, 'enumerate': enumerate, 'zip': zip,
    'isinstance': isinstance, 'list': list, 'tuple': tuple,
    'bool': lambda x: ops.truth(x) if ops.is_value(x) else bool(x), 'pow': tmath.pow,
    'True': True, 'False': False, 'None': None, 'print': printing.kernel_print, 'reversed': reversed,
    'sum': sum, 'type': type, 'round': tmath.round,
    'any': lambda x: x.any() if isinstance(x, Matrix) else any(x),      # Taichi's any(v) of a vector
    'all': lambda x: x.all() if isinstance(x, Matrix) else all(x),
}


def describe(node):
    """How messages name the kind of an AST node (`try` statement, lambda expression, ...)."""
    names = {
        'Try': '`try` statement', 'TryStar': '`try` statement', 'With': '`with` statement',
        'AsyncWith': '`async with` statement', 'Lambda': 'lambda expression',
        'ClassDef': 'class definition', 'FunctionDef': 'nested function definition',
        'AsyncFunctionDef': 'nested function definition', 'Yield': '`yield`',
        'YieldFrom': '`yield from`', 'Await': '`await`', 'Global': '`global` statement',
        'Nonlocal': '`nonlocal` statement', 'SetComp': 'set comprehension',
        'DictComp': 'dict comprehension', 'Set': 'set display', 'Dict': 'dict display',
        'Delete': '`del` statement', 'Import': '`import` statement',
        'ImportFrom': '`import` statement', 'Raise': '`raise` statement', 'Match': '`match` statement',
        'NamedExpr': 'assignment expression (:=)', 'Starred': 'starred expression',
    }
    return names.get(type(node).__name__, f'`{type(node).__name__}`')
