"""The intermediate representation: typed scalar statements in structured blocks.

A kernel is a Block. Value-producing statements (arithmetic, loads, constants)
are used directly as operands by later statements; mutable locals are `alloca`
statements read with `local_load` and written with `local_store`. Control flow
is structured: `if`, `for` (parallel or serial), `while` (exits by `break`),
each owning its blocks in `attrs`. Vectors and matrices never reach the IR: the
frontend scalarizes them.
"""
import itertools
import threading

_ids = itertools.count()

# Statements that produce no value.
EFFECT_OPS = frozenset({'local_store', 'global_store', 'if', 'for', 'while', 'break', 'continue',
                        'return', 'print', 'assert_fail', 'stack_push', 'check_component'})
# Statements that own nested blocks, and the attrs they live in.
BLOCK_ATTRS = {'if': ('then', 'else'), 'for': ('body',), 'while': ('body',)}


class Stmt:
    """One IR statement. `args` are other statements; `attrs` hold the rest."""
    __slots__ = ('op', 'args', 'dtype', 'attrs', 'loc', 'id')

    def __init__(self, op, args=(), dtype=None, loc=None, **attrs):
        self.op = op
        self.args = list(args)
        self.dtype = dtype
        self.attrs = attrs
        self.loc = loc
        self.id = next(_ids)

    __hash__ = object.__hash__

    def blocks(self):
        return [self.attrs[name] for name in BLOCK_ATTRS.get(self.op, ())]

    def __repr__(self):
        return f'%{self.id}'


class Identity:
    """An attribute value that the IR names by its identity only (an autodiff stack): the
    printer numbers each one, as it numbers statements."""
    kind = 'object'


class Block:
    __slots__ = ('stmts',)

    def __init__(self, stmts=None):
        self.stmts = stmts if stmts is not None else []

    def __iter__(self):
        return iter(self.stmts)

    def __len__(self):
        return len(self.stmts)


def walk(block):
    """Every statement of a block and its nested blocks, in program order."""
    for stmt in block.stmts:
        yield stmt
        for inner in stmt.blocks():
            yield from walk(inner)


class Builder:
    """Appends statements to the innermost open block."""

    def __init__(self):
        self.root = Block()
        self._stack = [self.root]
        self.loc = None

    @property
    def block(self):
        return self._stack[-1]

    def emit(self, op, args=(), dtype=None, cls=Stmt, **attrs):
        stmt = cls(op, args, dtype, self.loc, **attrs)
        self.block.stmts.append(stmt)
        return stmt

    def insert_at_entry(self, stmt):
        """Allocas go first in the kernel so that every use is dominated."""
        self.root.stmts.insert(0, stmt)
        return stmt

    def open(self, block):
        return _OpenBlock(self, block)


class _OpenBlock:
    def __init__(self, builder, block):
        self.builder, self.target = builder, block

    def __enter__(self):
        self.builder._stack.append(self.target)
        return self.target

    def __exit__(self, *exc):
        self.builder._stack.pop()


class _Builders(threading.local):
    """The builders IR is emitted into, innermost last: one stack per thread, so that a
    thread compiling a kernel does not capture what another thread computes."""
    def __init__(self):
        self.stack = []


_builders = _Builders()


def current_builder():
    stack = _builders.stack
    return stack[-1] if stack else None


class building:
    """`with building(builder):` makes `builder` the target of emitted IR."""

    def __init__(self, builder):
        self.builder = builder

    def __enter__(self):
        _builders.stack.append(self.builder)
        return self.builder

    def __exit__(self, *exc):
        _builders.stack.pop()


# ----------------------------------------------------------------------------
# What a block defines and what it takes from outside

def defined_in(block):
    """The statements a block defines: its statements at every depth, and the indices
    of its loops."""
    inside = set()
    for stmt in walk(block):
        inside.add(stmt)
        if stmt.op == 'for':
            inside.add(stmt.attrs['index'])
    return inside


def used_from_outside(block, also_inside=()):
    """The values `block` uses but does not define (operands, at any depth, of statements
    defined elsewhere), each once, in order of first use. `also_inside`: more statements
    to count as defined (a loop's own index, for its body)."""
    inside = defined_in(block)
    inside.update(also_inside)
    used = {}
    for stmt in walk(block):
        for arg in stmt.args:
            if arg not in inside:
                used[arg] = None
    return list(used)
