"""The engine's structure: layers that import downward only, no cycles, short functions.

docs/architecture.md draws the layers. Each package under engine/ is one layer; a module
may import its own layer and the layers below it, never one above, and the module graph
has no cycle. Imports sit at the top of a module: one inside a function would hide an
upward dependency or a cycle. (Optional third-party libraries - imageio, cv2, torch - are the
exception: they are imported where used, so the engine runs without them.)
"""
import ast
import pathlib

import pytest

ENGINE = pathlib.Path(__file__).resolve().parent.parent / 'engine'
LAYERS = ['core', 'ir', 'language', 'autodiff', 'backend', 'runtime', 'api']   # bottom to top
OPTIONAL = {'imageio', 'cv2', 'torch',    # third-party libraries the engine runs without
            'matplotlib'}    # and one slow to import that only GUI.contour uses
MAX_FUNCTION_LINES, MAX_FILE_LINES = 50, 600


def _modules():
    for path in sorted(ENGINE.rglob('*.py')):
        parts = path.relative_to(ENGINE.parent).with_suffix('').parts
        name = '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)
        yield name, path


MODULES = dict(_modules())


def layer_of(name):
    parts = name.split('.')
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else 'api'


def _imported(name, path, node):
    """The engine modules an import statement names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in MODULES]
    package = name if path.name == '__init__.py' else name.rsplit('.', 1)[0]
    if node.level:
        base = package.split('.')[:len(package.split('.')) - node.level + 1]
        module = '.'.join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ''
    found = [f'{module}.{a.name}' for a in node.names if f'{module}.{a.name}' in MODULES]
    if module in MODULES and len(found) < len(node.names):
        found.append(module)
    return found


def _graph():
    edges, inner = {}, []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text())
        edges[name] = {t for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                       for t in _imported(name, path, node) if t != name}
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner += [(name, fn.name, node.lineno) for node in ast.walk(fn)
                          if isinstance(node, (ast.Import, ast.ImportFrom))
                          and not {a.name.split('.')[0] for a in node.names} <= OPTIONAL]
    return edges, inner


EDGES, INNER = _graph()


def test_the_engine_is_split_into_the_layers():
    assert {layer_of(n) for n in MODULES} == set(LAYERS)


def test_no_module_imports_a_higher_layer():
    upward = [f'{a} ({layer_of(a)}) imports {b} ({layer_of(b)})' for a, targets in EDGES.items()
              for b in targets if LAYERS.index(layer_of(b)) > LAYERS.index(layer_of(a))]
    assert not upward, '\n'.join(upward)


def test_no_import_cycle():
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = 'open'
        for nxt in sorted(EDGES[node]):
            if state.get(nxt) == 'open':
                cycles.append(' -> '.join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 'done'
    for name in sorted(EDGES):
        if name not in state:
            visit(name, [name])
    assert not cycles, '\n'.join(cycles)


def test_imports_are_at_the_top_of_modules():
    assert not INNER, '\n'.join(f'{m}.{fn} line {line}' for m, fn, line in INNER)


@pytest.mark.parametrize('root', ['engine', 'sims', 'controllers', 'scripts'])
def test_functions_and_files_are_short(root):
    long = []
    for path in sorted((ENGINE.parent / root).rglob('*.py')):
        text = path.read_text()
        if len(text.splitlines()) > MAX_FILE_LINES:
            long.append(f'{path}: {len(text.splitlines())} lines')
        for fn in ast.walk(ast.parse(text)):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = fn.end_lineno - fn.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long.append(f'{path}:{fn.lineno} {fn.name}: {size} lines')
    assert not long, '\n'.join(long)
