"""Errors raised for user programs, formatted like Python's own tracebacks."""
import difflib
import linecache
import os
import sys
import types

from .context import ctx


class SourceLocation:
    __slots__ = ('filename', 'lineno', 'col', 'end_col', 'function')

    def __init__(self, filename, lineno, col=0, end_col=None, function='<kernel>'):
        self.filename, self.lineno, self.col = filename, lineno, col
        self.end_col, self.function = end_col, function

    def __str__(self):
        return f'{self.filename}:{self.lineno}'

    def render(self):
        """`File "...", line N, in f` plus the source line and a caret."""
        text = f'  File "{self.filename}", line {self.lineno}, in {self.function}'
        line = linecache.getline(self.filename, self.lineno)
        if line:
            stripped = line.lstrip()
            indent = len(line) - len(stripped)
            text += '\n    ' + stripped.rstrip()
            start = max(self.col - indent, 0)
            end = self.end_col - indent if self.end_col and self.end_col > self.col else start + 1
            text += '\n    ' + ' ' * start + '^' * max(end - start, 1)
        return text


class TaichiCompilationError(Exception):
    """A kernel could not be compiled; the message points at the user's line."""

    def __init__(self, message, location=None):
        self.message, self.location = message, location
        super().__init__(self._format())

    def _format(self):
        if self.location is None:
            return self.message
        return f'\n{self.location.render()}\n{type(self).__name__}: {self.message}'


class TaichiSyntaxError(TaichiCompilationError, SyntaxError):
    """Python that the kernel language does not support."""

    def __str__(self):
        return self._format()


class TaichiNameError(TaichiCompilationError, NameError):
    pass


class TaichiTypeError(TaichiCompilationError, TypeError):
    pass


class TaichiRuntimeError(RuntimeError):
    pass


class TaichiNotImplementedError(TaichiRuntimeError, NotImplementedError):
    """A Taichi feature this engine lacks, refused where going on would compute something
    else than Taichi does."""


class TaichiIndexError(IndexError):
    """An out-of-range field index caught in debug mode."""


class TaichiNonFiniteError(TaichiRuntimeError, FloatingPointError):
    """Debug mode: a kernel produced NaN or Inf from finite operands."""


class TaichiZeroDivisionError(TaichiRuntimeError, ZeroDivisionError):
    """Debug mode: integer division or modulo by zero in a kernel."""


class TaichiAssertionError(TaichiRuntimeError, AssertionError):
    """Debug mode: a run-time `assert` in a kernel failed."""


class AutodiffRuleError(TaichiCompilationError, TaichiAssertionError):
    """A global data access rule is broken: the gradient would be wrong. Also a
    TaichiAssertionError: what Taichi's checker (Tape(validation=True)) raises for it."""


class TaichiInitError(TypeError, KeyError):
    """ti.init got a keyword it does not know: a TypeError, and a KeyError as in Taichi."""
    __str__ = Exception.__str__         # not KeyError's quoting


# --- tracebacks of errors a program causes ----------------------------------------
# The public entry points (a kernel's launch, kernel.grad, a tape's backward pass,
# ti.capture, ti.init) pass the errors below to `user_frames_only` before they re-raise
# them: the traceback then ends at the program's own frames, as Taichi's does. Other
# exceptions are engine bugs and keep every frame; so do all with ENGINE_FULL_TRACEBACK=1
# or ti.init(print_full_traceback=True).
class AutodiffError(TaichiCompilationError):
    """The engine cannot differentiate this construct correctly, so it refuses (engine/autodiff/refusals.py)."""


USER_ERRORS = (TaichiCompilationError, TaichiRuntimeError, TaichiIndexError, TaichiInitError)
ENGINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep   # engine/


def user_frames_only(exc):
    """Drop the engine's frames from exc's traceback (re-raise it with a bare `raise`,
    which keeps that traceback, from Python 3.11 on)."""
    if getattr(exc, 'internal', False) or full_traceback():
        return
    kept = []
    tb = exc.__traceback__
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(ENGINE_DIR):
            kept.append(tb)
        tb = tb.tb_next
    trimmed = None
    for tb in reversed(kept):
        trimmed = types.TracebackType(trimmed, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
    exc.__traceback__ = trimmed


def user_line():
    """`file:line` of the innermost frame outside the engine: the program's line that
    called into it (for messages about Python-scope calls)."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(ENGINE_DIR):
        frame = frame.f_back
    return '<unknown>' if frame is None else f'{frame.f_code.co_filename}:{frame.f_lineno}'


def full_traceback():
    if os.environ.get('ENGINE_FULL_TRACEBACK', '0') not in ('', '0'):
        return True
    return ctx.program is not None and ctx.program.config.print_full_traceback


WHERE = '(docs/taichi_programs.md lists what is missing)'


def unknown_name(namespace, name, known, what='the engine has no such name'):
    """The AttributeError for `namespace.name`, a name the engine does not have: the
    closest of `known` as a hint (engine/unsupported.py lists Taichi's names it lacks)."""
    public = [k for k in known if not k.startswith('_')]
    close = difflib.get_close_matches(name, public, n=1)
    hint = f'; did you mean {close[0]!r}?' if close else ''
    # `name=` set: Python's traceback adds no "Did you mean" of its own to the engine's
    return AttributeError(f'{namespace}.{name} is not supported by this engine: {what}{hint} {WHERE}', name=name)


def missing_attribute(namespace, name, known):
    """A module's __getattr__ (ti.math, ti.ad, ...): Python's protocol names (`__path__`)
    get Python's plain error, as callers probe them; others the engine's message."""
    if name.startswith('__'):
        return AttributeError(name)
    return unknown_name(namespace, name, known)

