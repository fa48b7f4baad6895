"""Every code block of docs/**/*.md runs, and prints what the guide says it prints.

A document's ```python blocks run in order as one script (kernels need a source
file, so the script is written to a temporary file); a block followed by an
```output block must print exactly that text. A document that uses optional extras
says so in a comment, `<!-- needs: torch, jax -->`: it is skipped without them (unless
ENGINE_REQUIRE_INTEROP is set, as CI sets it).
"""
import importlib
import os
import pathlib
import re
import runpy

import pytest

DOCS_DIR = pathlib.Path(__file__).parent.parent / 'docs'
DOCS = sorted(DOCS_DIR.rglob('*.md'))
BLOCK = re.compile(r'```(python|output)\n(.*?)```', re.S)
MARK = '@@block-{}@@'
NEEDS = re.compile(r'<!-- needs: ([\w, ]+) -->')


def _require(path):
    """Skip a document whose optional extras are missing (fail, when CI requires them)."""
    found = NEEDS.search(path.read_text())
    for name in (found.group(1).replace(' ', '').split(',') if found else ()):
        if os.environ.get('ENGINE_REQUIRE_INTEROP'):
            importlib.import_module(name)
        else:
            pytest.importorskip(name)


def _blocks(path):
    """[(code, expected output or None)] in document order."""
    out = []
    for kind, text in BLOCK.findall(path.read_text()):
        if kind == 'python':
            out.append([text, None])
        elif out and out[-1][1] is None:
            out[-1][1] = text
        else:
            raise AssertionError(f'{path.name}: an output block must follow a python block')
    return out


@pytest.mark.parametrize('path', DOCS, ids=[p.relative_to(DOCS_DIR).as_posix() for p in DOCS])
def test_doc_code_blocks_run_and_print_what_they_say(path, tmp_path, capsys, monkeypatch):
    _require(path)
    blocks = _blocks(path)
    assert blocks, f'{path.name} has no python blocks'
    script = ''.join(f'print({MARK.format(i)!r})\n{code}' for i, (code, _) in enumerate(blocks))
    file = tmp_path / (path.stem + '_doc.py')
    file.write_text(script)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv('ENGINE_AD_VALIDATION', raising=False)   # the docs show the defaults
    runpy.run_path(str(file), run_name='__main__')
    printed = capsys.readouterr().out
    pieces = re.split(r'@@block-(\d+)@@\n', printed)[1:]
    outputs = dict(zip(map(int, pieces[0::2]), pieces[1::2]))
    for i, (code, expected) in enumerate(blocks):
        if expected is not None:
            assert outputs.get(i, '').strip() == expected.strip(), f'{path.name}, block {i + 1}:\n{code}'
