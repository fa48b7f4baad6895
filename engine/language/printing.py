"""Run-time `print` and `assert` messages of kernels: formats made at compile time, text
made in Python from the values a launch recorded.

A kernel's `print(...)` becomes one `print` statement whose operands are its run-time
values; its Format holds the rest: the text known at compile time (string literals,
constants, separators) and the type and format spec of each value. Native code appends
one record per print to the program's PrintBuffer (codegen.emit_print): a header word
(the print's index in the kernel's print table, and for a replayed list of launches the
launch that made it) and one word per value. After the launch (also one that stops with
an error, before the error is raised) `PrintBuffer.drain` writes the records' text to
sys.stdout in the order they were made. The interpreter renders the same Formats with
the values it computes. A failed run-time assert (debug mode) renders its message with
the same machinery, from the values it left in the runtime's error words.
"""
import re
import string
import sys

import numpy as np

from ..ir import ops
from ..core import dtypes as T
from ..core import program as rt
from ..core.errors import TaichiAssertionError
from ..ir.nodes import current_builder, walk
from .matrix import Matrix

CAPACITY = 1 << 16      # words of the print buffer: 32768 prints of one value between drains


# --- compile time: f-strings and print arguments -> text and slots -------------------
class Slot:
    """A run-time value in a text, with its format spec."""
    __slots__ = ('value', 'spec')

    def __init__(self, value, spec):
        if spec:        # a spec the type cannot take fails here, at the user's line
            format(0.0 if value.dtype.is_float else 0, spec)
        self.value, self.spec = value, spec


class Text:
    """An f-string with run-time values: printed, or the message of an assert."""

    def __init__(self, pieces):
        self.pieces = tuple(pieces)

    def __str__(self):
        return ''.join(p if isinstance(p, str) else '{...}' for p in self.pieces)

    def __add__(self, other):           # 'x = ' + str(v): still a Text
        if not isinstance(other, (str, Text)):
            return NotImplemented
        return joined([self, other])

    def __radd__(self, other):
        if not isinstance(other, str):
            return NotImplemented
        return joined([other, self])


_CONVERSIONS = {ord('s'): str, ord('r'): repr, ord('a'): ascii}


def formatted(value, spec, conversion=-1):
    """One replacement field `{value!conversion:spec}` of an f-string in a kernel: text when
    the value is known at compile time, else a Text (a run-time number is shown the same by
    str, repr and ascii, so the conversion does not matter there)."""
    if isinstance(value, (Matrix, Text)) or ops.is_value(value) or has_values(value):
        return Text(pieces_of(value, spec))
    convert = _CONVERSIONS.get(conversion)
    return format(convert(value) if convert else value, spec)


def joined(parts):
    """An f-string's parts (text and Texts) as one str, or a Text if any value is run-time."""
    if all(isinstance(p, str) for p in parts):
        return ''.join(parts)
    return Text(piece for p in parts for piece in (p.pieces if isinstance(p, Text) else (p,)))


def str_format(template, args, kwargs):
    """`template.format(*args, **kwargs)` in a kernel with run-time values: a Text (the
    same as the f-string with those fields). Fields may be automatic (`{}`), numbered or
    named, with attribute and index access (`{0.x}`, `{v[1]}`) and a compile-time spec."""
    formatter, parts, numbering = string.Formatter(), [], []
    for literal, field, spec, conversion in formatter.parse(template):
        parts.append(literal)
        if field is None:
            continue
        automatic = field == '' or field[0] in '.['
        if field[:1].isdigit() or automatic:
            numbering.append(automatic)
            if len(set(numbering)) > 1:
                raise ValueError('cannot mix automatic ({}) and manual ({0}) field numbering')
        if automatic:
            field = f'{len(numbering) - 1}{field}'
        value, _ = formatter.get_field(field, args, kwargs)
        spec = _nested_spec(formatter, spec, args, kwargs) if '{' in spec else spec
        parts.append(formatted(value, spec, ord(conversion) if conversion else -1))
    return joined(parts)


def _nested_spec(formatter, spec, args, kwargs):
    """A spec with fields in it (`{:>{w}}`): they must be named or numbered, and known at
    compile time."""
    text = []
    for literal, field, inner, conversion in formatter.parse(spec):
        text.append(literal)
        if field is None:
            continue
        if field == '' or field[0] in '.[':
            raise ValueError('a field inside a format spec in a kernel must be named or numbered ({w} or {1})')
        value, _ = formatter.get_field(field, args, kwargs)
        if has_values(value):
            raise TypeError('the format spec must be known at compile time')
        text.append(formatter.format_field(formatter.convert_field(value, conversion), inner))
    return ''.join(text)


_PERCENT = re.compile(r'%(?:\((?P<key>[^)]*)\))?(?P<flags>[-+ #0]*)(?P<width>\d*)(?:\.(?P<precision>\d+))?'
                      r'[hlL]?(?P<type>[diouxXeEfFgGrsa%])')


def percent_format(template, operand):
    """`template % operand` in a kernel with run-time values (an assert message): a Text.
    Conversions d i u o x X e E f F g G s r a with flags, width and precision; `%c` and
    `*` widths are not supported."""
    mapping = operand if isinstance(operand, dict) else None
    values = iter(() if mapping is not None else operand if isinstance(operand, tuple) else (operand,))
    parts, pos = [], 0
    for match in _PERCENT.finditer(template):
        parts.append(template[pos:match.start()])
        pos = match.end()
        if match['type'] == '%':
            parts.append('%')
            continue
        value = mapping[match['key']] if match['key'] is not None else next(values, _MISSING)
        if value is _MISSING:
            raise TypeError('not enough arguments for format string')
        kind = match['type']
        conversion = ord(kind) if kind in 'sra' else -1
        parts.append(formatted(_percent_value(value, kind), _percent_spec(match), conversion))
    if _MISSING is not next(values, _MISSING):
        raise TypeError('not all arguments converted during string formatting')
    rest = template[pos:]
    if '%' in rest:
        raise ValueError(f'unsupported format in {template!r} at {rest[rest.index("%"):]!r} (%c and * '
                         f'widths are not supported in kernels)')
    return joined(parts + [rest])


_MISSING = object()


def _percent_value(value, kind):
    """%d of a float truncates it, as Python's % does."""
    if kind in 'diu' and ops.is_value(value) and value.dtype.is_float:
        return ops.cast(value, T.i64)
    if kind in 'diu' and isinstance(value, float):
        return int(value)
    return value


def _percent_spec(match):
    """The format() spec of one %-conversion."""
    kind, flags, width, precision = match['type'], match['flags'], match['width'], match['precision']
    if kind in 'sra':
        return ('<' if '-' in flags else '>') + width if width else ''
    spec = ('<' if '-' in flags else '') + ('+' if '+' in flags else ' ' if ' ' in flags else '')
    spec += '#' if '#' in flags else ''
    spec += '0' if '0' in flags and '-' not in flags else ''
    spec += width + (f'.{precision}' if precision is not None and kind not in 'diuoxX' else '')
    return spec + ('d' if kind in 'iu' else kind)


def pieces_of(arg, spec=''):
    """An argument of print or a value of an f-string as text and Slots. Vectors and matrices
    show as nested lists, each entry with the spec."""
    if isinstance(arg, Text):
        return list(arg.pieces)
    if ops.is_value(arg):
        return [Slot(arg, spec)]
    if isinstance(arg, Matrix):
        return _bracketed(_rows(arg.shape, arg.entries), '[', ']', spec)
    if isinstance(arg, (list, tuple)) and has_values(arg):
        opening, closing = ('[', ']') if isinstance(arg, list) else ('(', ',)' if len(arg) == 1 else ')')
        return _bracketed(arg, opening, closing, spec)
    return [format(arg, spec) if spec else str(arg)]


def has_values(arg):
    if isinstance(arg, (list, tuple)):
        return any(has_values(a) for a in arg)
    return ops.is_value(arg) or isinstance(arg, (Matrix, Text))


def _rows(shape, entries):
    if len(shape) == 1:
        return list(entries)
    width = len(entries) // shape[0]
    return [_rows(shape[1:], entries[k * width:(k + 1) * width]) for k in range(shape[0])]


def _bracketed(items, opening, closing, spec):
    pieces = [opening]
    for k, item in enumerate(items):
        if k:
            pieces.append(', ')
        if isinstance(item, list):
            pieces += _bracketed(item, '[', ']', spec)
        else:
            pieces += pieces_of(repr(item) if isinstance(item, str) else item, spec)
    return pieces + [closing]


def compose(pieces):
    """(Format, the run-time values it shows) of a sequence of text and Slots."""
    values = [p.value for p in pieces if isinstance(p, Slot)]
    return Format([p if isinstance(p, str) else (p.value.dtype, p.spec) for p in pieces]), values


def kernel_print(*args, sep=' ', end='\n'):
    """`print` inside a kernel or ti.func: shown when the kernel runs, with that launch's values."""
    if not isinstance(sep, str) or not isinstance(end, str):
        raise TypeError('sep= and end= of a print in a kernel must be strings known at compile time')
    pieces = []
    for k, arg in enumerate(args):
        if k:
            pieces.append(sep)
        pieces += pieces_of(arg)
    fmt, values = compose(pieces + [end])
    current_builder().emit('print', values, format=fmt)


# --- formats: the text of a record ---------------------------------------------------------
class Format:
    """What a print or an assert message shows: text and typed slots (dtype, spec), in order."""

    def __init__(self, pieces):
        merged = []
        for p in pieces:
            if isinstance(p, str) and merged and isinstance(merged[-1], str):
                merged[-1] += p
            elif p != '':
                merged.append(p)
        self.pieces = tuple(merged)
        self.slots = tuple(p for p in merged if not isinstance(p, str))

    def render(self, values):
        values = iter(values)
        return ''.join(p if isinstance(p, str) else _render(next(values), *p) for p in self.pieces)

    def decode(self, words):
        """The values of the slots from native words (int64: integers widened, floats as
        the bits of a double; codegen.FunctionEmitter.word_of)."""
        floats = words.view(np.float64)
        return [float(floats[k]) if t.is_float else int(words[k]) if t.signed else
                int(words[k]) & ((1 << t.bits) - 1) for k, (t, _) in enumerate(self.slots)]

    def __repr__(self):     # stable: part of the IR's text, so of the disk cache's keys
        text = ''.join(p.replace('{', '{{').replace('}', '}}') if isinstance(p, str) else
                       f'{{{p[0]}:{p[1]}}}' for p in self.pieces)
        return f'Format({text!r})'


def _render(value, dtype, spec):
    if dtype.is_float and not spec:     # the shortest text that reads back as the same value
        return str(np.float32(value)) if dtype.bits == 32 else repr(float(value))
    return format(value, spec)


def table(body, op):
    """The kernel's statements of one kind ('print', 'assert_fail') in program order: native
    code names one by its index here, the same in every process (so builds can be cached)."""
    return [s for s in walk(body) if s.op == op]


def assertion_error(kernel_name, loc, message):
    where = f'\n{loc.render()}\n' if loc else ' '
    return TaichiAssertionError(f'{where}in kernel {kernel_name}: {message}')


# --- run time: the buffer native prints write to ----------------------------------------
def buffer_of(prog):
    """The program's PrintBuffer, made when the first kernel that prints is built."""
    if prog.prints is None:
        prog.prints = PrintBuffer(prog.runtime_buffer)
    return prog.prints


def drain(prog, kernel_of):
    """Print what the launches since the last drain printed."""
    if prog.prints is not None:
        prog.prints.drain(kernel_of)


class PrintBuffer:
    """The words native prints append records to (reserved with an atomic add, so records
    from threads never mix), turned into text after each launch or replayed list."""

    def __init__(self, words):
        self.data = np.zeros(CAPACITY, dtype=np.int64)
        self.rt = words
        words[rt.RT_PRINT_BUFFER] = self.data.ctypes.data
        words[rt.RT_PRINT_CAPACITY] = len(self.data)

    def drain(self, kernel_of):
        """Write the records' text to sys.stdout and empty the buffer. `kernel_of(launch)`:
        the CompiledKernel that made a record (the launch's index in a replayed list)."""
        used = int(self.rt[rt.RT_PRINT_USED])
        if not used:
            return
        dropped = int(self.rt[rt.RT_PRINT_DROPPED])
        self.rt[rt.RT_PRINT_USED] = self.rt[rt.RT_PRINT_DROPPED] = 0
        text = ''.join(self._texts(min(used, len(self.data)), kernel_of))
        if dropped:
            text += (f'... {dropped} prints dropped: the print buffer ({len(self.data)} words) '
                     f'was full; print less per launch\n')
        sys.stdout.write(text)

    def _texts(self, end, kernel_of):
        words, pos = self.data, 0
        while pos < end:
            header = int(words[pos])
            if header < 0:          # where the first record that did not fit would have begun
                return
            fmt = kernel_of(header >> 32).print_formats[header & 0xFFFFFFFF]
            n = len(fmt.slots)
            yield fmt.render(fmt.decode(words[pos + 1:pos + 1 + n]))
            pos += 1 + n
