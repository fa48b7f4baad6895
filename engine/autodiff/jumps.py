"""`break` and `continue` as guard flags: the IR the reverse-mode pass starts from.

The adjoint replays one loop iteration and then walks it backwards, so an
iteration must be a tree of `if`s: a jump would leave the replay, or the
reversed loop, early. `without_jumps` rewrites each loop body that jumps: a
fresh i32 local (`flag`, 0 when the iteration starts) records the jump,
`continue` stores CONTINUE and `break` stores BREAK, and the statements after a
branch that may have jumped run under `if flag == 0`. A loop that can break
ends its body with its only jump, `if flag == BREAK: break`, kept in the loop's
`exit` attr so that the reverse pass can leave it out of the replayed
iterations (their number is counted in the forward sweep instead).

The result is the same program; leaf statements are shared with the input,
which is left untouched (it is also the forward kernel's IR).
"""
from ..core import dtypes as T
from ..ir import ops
from ..ir.nodes import Block, Builder, building, walk

CONTINUE, BREAK = 1, 2


def without_jumps(block):
    if not any(s.op in ('break', 'continue') for s in walk(block)):
        return block
    b = Builder()
    with building(b):
        _copy(b, block.stmts, None)
    return b.root


def jumps(block, kinds=('break', 'continue')):
    """Whether `block` may jump out of its loop (jumps in nested loops are theirs)."""
    return any(s.op in kinds or (s.op == 'if' and any(jumps(x, kinds) for x in s.blocks()))
               for s in block.stmts)


def _copy(b, stmts, flag):
    for k, s in enumerate(stmts):
        b.loc = s.loc
        if s.op in ('break', 'continue'):
            b.emit('local_store', [flag, ops.const(BREAK if s.op == 'break' else CONTINUE, T.i32)])
            return                                  # the rest of the block is dead code
        if s.op == 'if':
            blocks = {name: Block() for name in ('then', 'else')}
            b.emit('if', s.args, **blocks)
            for name, target in blocks.items():
                with b.open(target):
                    _copy(b, s.attrs[name].stmts, flag)
            if flag is not None and any(jumps(x) for x in s.blocks()):
                rest = Block()
                b.emit('if', [ops.emit('local_load', [flag], T.i32) == 0], then=rest, **{'else': Block()})
                with b.open(rest):
                    _copy(b, stmts[k + 1:], flag)
                return
        elif s.op in ('for', 'while'):
            _loop(b, s)
        else:
            b.block.stmts.append(s)


def _loop(b, s):
    body = b.emit(s.op, s.args, **{**s.attrs, 'body': Block()}).attrs['body']
    loop = b.block.stmts[-1]
    with b.open(body):
        if not jumps(s.attrs['body']):
            return _copy(b, s.attrs['body'].stmts, None)
        flag = b.emit('alloca', (), T.i32, cls=ops.Value)
        b.emit('local_store', [flag, ops.const(0, T.i32)])
        _copy(b, s.attrs['body'].stmts, flag)
        if jumps(s.attrs['body'], ('break',)):
            b.loc = s.loc
            stop = Block()
            loop.attrs['exit'] = b.emit('if', [ops.emit('local_load', [flag], T.i32) == BREAK],
                                        then=stop, **{'else': Block()})
            with b.open(stop):
                b.emit('break')

