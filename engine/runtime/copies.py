"""`x.copy_from(y)` on a tape or in forward mode: a kernel launch, as in Taichi, so that
gradients and tangents flow through the copy (a plain write from Python would be a
constant to both). Installed as ctx.launch_copy, which engine/language/fields.py calls."""
from ..core.context import ctx
from ..language.abi import NdarrayType
from ..language.frontend import Template, grouped
from .kernels import kernel


@kernel
def _copy_field(dst: Template(), src: Template()):
    for I in grouped(dst):
        dst[I] = src[I]


@kernel
def _copy_ndarray(dst: NdarrayType(), src: NdarrayType()):
    for I in grouped(dst):
        dst[I] = src[I]


def launch_copy(dst, src, fields):
    (_copy_field if fields else _copy_ndarray)(dst, src)


ctx.launch_copy = launch_copy
