"""Taichi's Python-scope API as Taichi 1.7 documents it: layouts, field and vector
elements, swizzles, struct gradients, names and submodules, field helpers, the GUI's
drawing calls and the VideoManager's frames. Features the engine lacks fail saying so."""
import pytest

import engine as ti

pytestmark = pytest.mark.usefixtures('ti_init')


# --- sparse SNodes: refused, never allocated densely -------------------------------------

@pytest.mark.parametrize('build', [lambda: ti.root.pointer(ti.i, 4),
                                   lambda: ti.root.dense(ti.i, 2).bitmasked(ti.j, 8),
                                   lambda: ti.root.dense(ti.i, 2).dynamic(ti.j, 16, chunk_size=4)])
def test_sparse_snodes_are_refused_naming_the_line(build):
    with pytest.raises(ti.TaichiNotImplementedError, match=r'test_taichi_compat_python_scope.py:\d+: sparse'):
        build()
    assert issubclass(ti.TaichiNotImplementedError, (ti.TaichiRuntimeError, NotImplementedError))
