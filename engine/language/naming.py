"""The name a field gets when none is given: the variable it is assigned to."""
import ast
import linecache
import re
import sys


def guess_name(depth=2):
    """The variable a field is assigned to at its creation (`x = ti.field(...)`, also
    `x, y = ti.field(...), ti.field(...)` and `p = ti.field(...); q = ti.field(...)`)."""
    frame = sys._getframe(depth)
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    name = _name_at_call(frame, line)
    if name:
        return name
    match = re.match(r'\s*([A-Za-z_][\w.]*)\s*=[^=]', line)
    return match.group(1) if match else f'field@{frame.f_code.co_filename.split("/")[-1]}:{frame.f_lineno}'


def _name_at_call(frame, line):
    """The target of the assignment, on this one line, whose value holds the call the frame
    is making (found by the call's column)."""
    indent = len(line) - len(line.lstrip())
    try:
        module = ast.parse(line.strip())
        _, _, col, _ = list(frame.f_code.co_positions())[frame.f_lasti // 2]
    except (SyntaxError, IndexError, ValueError, AttributeError):
        return None
    if col is None:
        return None
    col -= indent

    def spans(node):
        return node.col_offset <= col < node.end_col_offset

    for statement in module.body:
        if not (isinstance(statement, ast.Assign) and spans(statement.value)):
            continue
        target, value = statement.targets[0], statement.value
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            for name, part in zip(target.elts, value.elts):
                if spans(part):
                    return ast.unparse(name)
            return None
        return ast.unparse(target)
    return None
