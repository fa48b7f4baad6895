"""The compile cache on disk: hits across programs and processes, invalidation, bad entries."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import engine as ti
from engine.backend import cache
from engine.runtime import pipeline

SOURCE = '''
import engine as ti
SCALE = {scale}
x = ti.field(float, shape=8)

@ti.kernel
def fill(offset: ti.f32):
    for i in range(8):
        x[i] = SCALE * i + offset
'''


def _new_process(cache_dir):
    """What a fresh Python process sees: no kernel loaded yet, the cache on disk."""
    pipeline._loaded.clear()
    ti.init(offline_cache_file_path=str(cache_dir))


def _run_module(path, cache_dir):
    """Import a kernel module from `path` (fresh), run it; returns (values, LLVM compiles)."""
    _new_process(cache_dir)
    namespace = {}
    code = compile(path.read_text(), str(path), 'exec')
    exec(code, namespace)
    before = pipeline.compile_count
    namespace['fill'](0.5)
    return namespace['x'].to_numpy(), pipeline.compile_count - before


@pytest.fixture
def module_file(tmp_path):
    path = tmp_path / 'kernels_under_test.py'
    path.write_text(SOURCE.format(scale=2.0))
    return path


def test_second_program_loads_instead_of_compiling(tmp_path, module_file):
    first, compiled = _run_module(module_file, tmp_path / 'c')
    assert compiled == 1 and len(list((tmp_path / 'c').glob('*' + cache.SUFFIX))) == 1
    hits = cache.hits
    again, compiled = _run_module(module_file, tmp_path / 'c')
    assert compiled == 0 and cache.hits == hits + 1
    np.testing.assert_array_equal(again, first)
    np.testing.assert_allclose(first, 2.0 * np.arange(8) + 0.5)


def test_changed_source_or_captured_constant_recompiles(tmp_path, module_file):
    _run_module(module_file, tmp_path / 'c')
    module_file.write_text(SOURCE.format(scale=3.0))              # a captured constant
    values, compiled = _run_module(module_file, tmp_path / 'c')
    assert compiled == 1
    np.testing.assert_allclose(values, 3.0 * np.arange(8) + 0.5)
    module_file.write_text(SOURCE.format(scale=3.0).replace('+ offset', '- offset'))   # the source
    values, compiled = _run_module(module_file, tmp_path / 'c')
    assert compiled == 1
    np.testing.assert_allclose(values, 3.0 * np.arange(8) - 0.5)
    assert len(list((tmp_path / 'c').glob('*' + cache.SUFFIX))) == 3


def test_template_arguments_and_field_shapes_are_part_of_the_key(tmp_path):
    _new_process(tmp_path)
    a, b = ti.field(float, shape=4), ti.field(float, shape=6)

    @ti.kernel
    def ones(f: ti.template()):
        for i in f:
            f[i] = 1.0

    ones(a)
    ones(b)
    assert a.to_numpy().sum() == 4 and b.to_numpy().sum() == 6
    assert len(list(tmp_path.glob('*' + cache.SUFFIX))) == 2


@pytest.mark.parametrize('damage', ['flip a byte', 'truncate', 'foreign host', 'garbage'])
def test_corrupted_or_foreign_entry_is_recompiled_not_loaded(tmp_path, module_file, damage):
    _run_module(module_file, tmp_path / 'c')
    [entry] = (tmp_path / 'c').glob('*' + cache.SUFFIX)
    raw = entry.read_bytes()
    head, _, payload = raw.partition(b'\n')
    if damage == 'flip a byte':
        raw = head + b'\n' + payload[:100] + bytes([payload[100] ^ 0xFF]) + payload[101:]
    elif damage == 'truncate':
        raw = raw[:len(raw) // 2]
    elif damage == 'foreign host':
        raw = head.replace(b'x86_64', b'aarch64').replace(b'"host": "', b'"host": "other-cpu|') + b'\n' + payload
    else:
        raw = b'\x00\x01garbage'
    entry.write_bytes(raw)
    hits = cache.hits
    values, compiled = _run_module(module_file, tmp_path / 'c')
    assert compiled == 1 and cache.hits == hits
    np.testing.assert_allclose(values, 2.0 * np.arange(8) + 0.5)
    assert cache.load(tmp_path / 'c', entry.name[:-len(cache.SUFFIX)]) is not None   # rewritten


def test_off_switch_and_debug_mode_bypass_the_cache(tmp_path, module_file):
    pipeline._loaded.clear()
    for options in (dict(offline_cache=False), dict(debug=True)):
        ti.init(offline_cache_file_path=str(tmp_path / 'c'), **options)
        namespace = {}
        exec(compile(module_file.read_text(), str(module_file), 'exec'), namespace)
        namespace['fill'](0.5)
    assert not list((tmp_path / 'c').glob('*' + cache.SUFFIX))


def test_clear_cache_and_the_command_line(tmp_path, module_file):
    _run_module(module_file, tmp_path / 'c')
    assert ti.clear_cache(tmp_path / 'c') == 1
    _run_module(module_file, tmp_path / 'c')
    info = subprocess.run([sys.executable, '-m', 'engine', 'cache-info', str(tmp_path / 'c')],
                          capture_output=True, text=True, check=True).stdout
    assert '1 entries' in info
    cleared = subprocess.run([sys.executable, '-m', 'engine', 'clear-cache', str(tmp_path / 'c')],
                             capture_output=True, text=True, check=True).stdout
    assert 'removed 1 entries' in cleared
    assert not list((tmp_path / 'c').glob('*' + cache.SUFFIX))


def test_a_new_process_starts_without_compiling(tmp_path, module_file):
    script = textwrap.dedent(f'''
        import runpy, sys
        import engine as ti
        from engine.runtime import pipeline
        ti.init(offline_cache_file_path={str(tmp_path / "c")!r})
        ns = runpy.run_path({str(module_file)!r})
        ns['fill'](0.5)
        print(pipeline.compile_count, ns['x'].to_numpy().sum())
    ''')
    outputs = [subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                              check=True).stdout.split() for _ in range(2)]
    assert outputs[0][0] == '1' and outputs[1][0] == '0'
    assert outputs[0][1] == outputs[1][1]
