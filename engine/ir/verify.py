"""The IR verifier: `verify(body, stage)` checks a kernel's IR and raises VerifyError naming
the stage, the statement (as engine/ir/printer.py prints it) and what is wrong.

It checks
- structure: the blocks of `if`, `for` and `while` are there; `break` and `continue` are in
  loops; a `for` has its own index (a `loop_index` defined by it alone), a loop's `exit` test
  is a statement of its body; no statement appears twice;
- definitions: every operand is a statement with a value, defined before its use in its
  block or an enclosing one (a loop's index inside the loop);
- arity: as many operands as the op table says (or the statement kind: a field access has
  one index per axis of its field or ndarray, and a store or atomic one value more);
- types: effect statements have no type, values do; the result type follows the op's rule
  in the op table ('same', 'float': the operands' type; 'bool': i32; 'int': an integer
  type), operands that must have one type have it (a select's arms, a binary op's two
  operands), loads and stores agree with their local, field or ndarray, conditions, indices
  and loop bounds are integers.

Debug mode verifies every kernel it builds; ENGINE_VERIFY_IR=1 makes every compile verify
the IR after each stage (as built, simplified, differentiated), as the test suite does.
"""
import os

from ..core import dtypes as T
from . import ops
from .nodes import BLOCK_ATTRS, EFFECT_OPS, Block, Stmt
from .printer import Printer


class VerifyError(Exception):
    pass


def enabled():
    """Whether ENGINE_VERIFY_IR asks every compile to verify its IR after each stage."""
    return os.environ.get('ENGINE_VERIFY_IR', '') not in ('', '0')


def verify(body, stage='as built'):
    """Check the IR `body`; raise VerifyError at the first problem."""
    _Verifier(body, stage).block(body, frozenset(), in_loop=False)


def check(body, stage, always=False):
    """`verify` where asked: always, or by ENGINE_VERIFY_IR."""
    if always or enabled():
        verify(body, stage)


# Statements outside the op table: how many operands they take (None: any number).
_ARITY = {'const': 0, 'arg': 0, 'ndarray_shape': 0, 'random': 0, 'alloca': 0, 'stack_pop': 0,
          'local_load': 1, 'local_store': 2, 'local_atomic': 2, 'stack_push': 1, 'check_component': 1,
          'if': 1, 'for': 2, 'while': 0, 'break': 0, 'continue': 0,
          'return': None, 'print': None, 'assert_fail': None}
_ACCESSES = {'global_load': 0, 'global_store': 1, 'atomic': 1}     # operands beyond the indices
_REQUIRED_ATTRS = {'const': ('value',), 'arg': ('offset',), 'ndarray_shape': ('target', 'axis'),
                   'local_atomic': ('kind',), 'global_load': ('target', 'component'),
                   'global_store': ('target', 'component'), 'atomic': ('target', 'component', 'kind'),
                   'stack_push': ('stack',), 'stack_pop': ('stack',), 'check_component': ('extent',),
                   'for': ('index', 'parallel'), 'print': ('format',), 'assert_fail': ('format',)}


class _Verifier:
    def __init__(self, body, stage):
        self.body, self.stage = body, stage
        self.seen = set()       # every statement met so far, loop indices included

    def fail(self, stmt, problem, *named):
        """The error at `stmt`; `problem` names the statements `named` by {0}, {1}, ... as the
        printed text numbers them."""
        names = Printer()
        names.number_block(self.body)
        if named:
            problem = problem.format(*(names.ref(x) for x in named))
        return VerifyError(f'IR {self.stage}: {problem}\n    at: {names.line(stmt)}')

    def block(self, block, visible, in_loop):
        if not isinstance(block, Block):
            raise VerifyError(f'IR {self.stage}: a block that is a {type(block).__name__}')
        visible = set(visible)
        for s in block.stmts:
            self.define(s, s)
            self.operands(s, visible)
            self.arity(s)
            self.types(s)
            self.nested(s, visible, in_loop)
            if s.op not in EFFECT_OPS:
                visible.add(s)

    def define(self, s, at):
        if not isinstance(s, Stmt):
            raise VerifyError(f'IR {self.stage}: a block holds {s!r}, not a statement')
        if s in self.seen:
            raise self.fail(at, f'{s.op} statement {{0}} appears twice in the IR', s)
        self.seen.add(s)

    def operands(self, s, visible):
        for a in s.args:
            if not isinstance(a, Stmt):
                raise self.fail(s, f'operand {a!r} is not a statement')
            if a.dtype is None:
                raise self.fail(s, f'operand {{0}} ({a.op}) has no value', a)
            if a not in visible:
                where = 'in a block that does not enclose this use' if a in self.seen else \
                    'nowhere before this use'
                raise self.fail(s, f'operand {{0}} ({a.op}) is defined {where}', a)

    def arity(self, s):
        if s.op in ops.OPS:
            wanted = ops.OPS[s.op].arity
        elif s.op in _ACCESSES:
            wanted = s.attrs['target'].ndim + _ACCESSES[s.op] if 'target' in s.attrs else len(s.args)
        elif s.op in _ARITY:
            wanted = _ARITY[s.op]
        else:
            raise self.fail(s, f'unknown op {s.op!r}')
        if wanted is not None and len(s.args) != wanted:
            raise self.fail(s, f'{s.op} takes {wanted} operand(s), has {len(s.args)}')
        missing = [a for a in _REQUIRED_ATTRS.get(s.op, ()) if a not in s.attrs]
        if missing:
            raise self.fail(s, f'{s.op} lacks the attribute(s) {", ".join(missing)}')

    def nested(self, s, visible, in_loop):
        if s.op in ('break', 'continue') and not in_loop:
            raise self.fail(s, f'{s.op} outside a loop')
        for name in BLOCK_ATTRS.get(s.op, ()):
            if name not in s.attrs:
                raise self.fail(s, f'{s.op} has no {name!r} block')
        if s.op == 'for':
            index = s.attrs['index']
            if not isinstance(index, Stmt) or index.op != 'loop_index':
                raise self.fail(s, f'the loop index is a {getattr(index, "op", type(index).__name__)}, '
                                   f'not a loop_index statement')
            self.define(index, s)
            self.types(index)
            visible = visible | {index}
        exit_test = s.attrs.get('exit') if s.op in ('for', 'while') else None
        if exit_test is not None and not any(exit_test is t for t in s.attrs['body'].stmts):
            raise self.fail(s, 'the exit test is not a statement of the loop body')
        for name in BLOCK_ATTRS.get(s.op, ()):
            self.block(s.attrs[name], visible, in_loop or s.op in ('for', 'while'))

    # --- types --------------------------------------------------------------------------
    def types(self, s):
        if s.op in EFFECT_OPS:
            if s.dtype is not None:
                raise self.fail(s, f'{s.op} produces no value but has type {s.dtype}')
        elif not isinstance(s.dtype, T.DataType):
            raise self.fail(s, f'{s.op} produces a value but has type {s.dtype!r}')
        check = getattr(self, 'types_' + s.op, None)
        if check is not None:
            check(s)
        elif s.op in ops.OPS:
            self.table_types(s)

    def table_types(self, s):
        rule = ops.OPS[s.op].type_rule
        operands = {a.dtype for a in s.args}
        if len(operands) > 1:
            raise self.fail(s, f'{s.op} mixes operand types {_names(operands)}')
        (t,) = operands
        wanted = T.i32 if rule == 'bool' else t
        if rule == 'int' and not t.is_int:
            raise self.fail(s, f'{s.op} needs integer operands, has {t}')
        if s.dtype is not wanted:
            raise self.fail(s, f'{s.op} of {t} operands must give {wanted} (rule {rule!r}), gives {s.dtype}')

    def types_select(self, s):
        self.integer(s, s.args[0], 'the condition')
        if not (s.args[1].dtype is s.args[2].dtype is s.dtype):
            raise self.fail(s, f'select of {s.args[1].dtype} and {s.args[2].dtype} arms gives {s.dtype}')

    def types_cast(self, s):
        pass        # any type to any type

    def types_const(self, s):
        value = s.attrs['value']
        if isinstance(value, bool) or not isinstance(value, float if s.dtype.is_float else int):
            raise self.fail(s, f'a {s.dtype} constant holds {value!r}')

    def types_ndarray_shape(self, s):
        self.result(s, T.i32, 'an ndarray extent')

    def types_loop_index(self, s):
        self.result(s, T.i32, 'a loop index')

    def types_local_load(self, s):
        cell = self.cell(s)
        self.result(s, cell.dtype, f'a load of a {cell.dtype} local')

    def types_local_store(self, s):
        self.stored(s, self.cell(s).dtype, s.args[1])

    def types_local_atomic(self, s):
        cell = self.cell(s)
        self.stored(s, cell.dtype, s.args[1])
        self.result(s, cell.dtype, f'an atomic on a {cell.dtype} local')

    def types_global_load(self, s):
        self.indices(s, s.args)
        self.result(s, s.attrs['target'].dtype, 'a load of its target')

    def types_global_store(self, s):
        self.indices(s, s.args[:-1])
        self.stored(s, s.attrs['target'].dtype, s.args[-1])

    def types_atomic(self, s):
        self.types_global_store(s)
        self.result(s, s.attrs['target'].dtype, 'an atomic on its target')

    def types_if(self, s):
        self.integer(s, s.args[0], 'the condition')

    def types_for(self, s):
        for a in s.args:
            self.integer(s, a, 'a loop bound')

    def types_check_component(self, s):
        self.integer(s, s.args[0], 'the component index')

    # --- helpers ------------------------------------------------------------------------
    def cell(self, s):
        cell = s.args[0]
        if cell.op != 'alloca':
            raise self.fail(s, f'{s.op} of {{0}}, a {cell.op}: not a local', cell)
        return cell

    def result(self, s, wanted, what):
        if s.dtype is not wanted:
            raise self.fail(s, f'{what} must be {wanted}, is {s.dtype}')

    def stored(self, s, storage, value):
        if (storage.is_float, storage.bits) != (value.dtype.is_float, value.dtype.bits):
            raise self.fail(s, f'a {value.dtype} value stored into {storage} storage')

    def integer(self, s, value, what):
        if not value.dtype.is_int:
            raise self.fail(s, f'{what} must be an integer, is {value.dtype}')

    def indices(self, s, indices):
        for a in indices:
            self.integer(s, a, 'an index')


def _names(dtypes):
    return ', '.join(sorted(str(t) for t in dtypes))
