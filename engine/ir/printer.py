"""The one text form of the IR: for people (`ti.init(print_ir=True)`, golden tests, the
verifier's messages) and for the disk cache's keys.

Statements are renumbered `%0, %1, ...` in order of definition, so the text does not depend
on the global statement ids; a loop's index is defined at its loop, and a statement that an
attribute names (a loop's `exit` test) is numbered too. Nested blocks are indented under
their statement; a loop's body directly, an `if`'s blocks under `then:` and `else:` (an
empty block is left out). Attributes follow the operands, sorted by name, and the result
type ends the line:

    %0 = arg() offset=0 : f32
    %1 = const() value=2.0 : f32
    %2 = mul(%0, %1) : f32
    return(%2)

An attribute value is shown by its `ir_text()` method where it has one (fields, ndarray
arguments), numbered by identity where it is an `ir.Identity` (autodiff stacks: `stack#0`),
and otherwise by its repr. `text(body, strict=True)` refuses a value whose repr is not a
stable description (an object shown by address): it raises Unstable, which the disk cache
takes as "do not cache this kernel".
"""
from ..core import dtypes as T
from .nodes import BLOCK_ATTRS, Identity, Stmt, walk


class Unstable(Exception):
    """An attribute value without a stable text (strict printing)."""


def text(body, strict=False, indent=0):
    """The text of a block, one statement a line."""
    printer = Printer(strict)
    printer.number_block(body)
    return '\n'.join(printer.lines(body, indent))


class Printer:
    def __init__(self, strict=False):
        self.strict = strict
        self.numbers = {}       # statement -> its number
        self.objects = {}       # id of an Identity -> (number, the object: keeps the id unique)

    # --- numbering ------------------------------------------------------------------
    def number_block(self, body):
        named = {v for s in walk(body) for v in s.attrs.values() if isinstance(v, Stmt)}
        for s in walk(body):
            if s.dtype is not None or s in named:
                self.number(s)
            if s.op == 'for':
                self.number(s.attrs['index'])

    def number(self, stmt):
        if stmt not in self.numbers:
            self.numbers[stmt] = len(self.numbers)
        return self.numbers[stmt]

    def ref(self, stmt):
        number = self.numbers.get(stmt)
        if number is not None:
            return f'%{number}'
        if self.strict:
            raise Unstable(f'a statement not defined in the body: {stmt.op}')
        return f'%?{stmt.id}'       # not defined in the body: named by its global id

    # --- lines -----------------------------------------------------------------------
    def lines(self, block, depth):
        pad = '  ' * depth
        for s in block.stmts:
            yield pad + self.line(s)
            names = BLOCK_ATTRS.get(s.op, ())
            for name in names:
                inner = s.attrs[name]
                if not inner.stmts:
                    continue
                if len(names) > 1:
                    yield f'{pad}  {name}:'
                yield from self.lines(inner, depth + (2 if len(names) > 1 else 1))

    def line(self, s):
        head = f'{self.ref(s)} = ' if s in self.numbers else ''
        args = ', '.join(self.ref(a) if isinstance(a, Stmt) else f'<{a!r}>' for a in s.args)
        blocks = BLOCK_ATTRS.get(s.op, ())
        attrs = ''.join(f' {k}={self.describe(v)}' for k, v in sorted(s.attrs.items()) if k not in blocks)
        dtype = f' : {s.dtype}' if s.dtype is not None else ''
        return f'{head}{s.op}({args}){attrs}{dtype}'

    def describe(self, value):
        if isinstance(value, Stmt):
            return self.ref(value)
        if isinstance(value, Identity):
            number = self.objects.setdefault(id(value), (len(self.objects), value))[0]
            return f'{value.kind}#{number}'
        ir_text = getattr(value, 'ir_text', None)
        if callable(ir_text):
            return ir_text()
        if isinstance(value, (bool, int, float, str, type(None), T.DataType)):
            return repr(value)
        if isinstance(value, (tuple, list)):
            return '(' + ', '.join(self.describe(v) for v in value) + (',)' if len(value) == 1 else ')')
        if hasattr(value, 'item') and getattr(value, 'shape', None) == ():      # numpy scalars
            return repr(value.item())
        shown = repr(value)
        if self.strict and (' at 0x' in shown or shown.startswith('<')):
            raise Unstable(shown)
        return shown
