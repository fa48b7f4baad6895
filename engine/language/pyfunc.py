"""`@ti.pyfunc`: a function for both scopes. Kernels inline it as they inline a ti.func;
Python calls the function itself."""
from .frontend import BoundFunc, Func


class PyFunc(Func):
    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __get__(self, obj, owner=None):
        return self if obj is None else _BoundPyFunc(self, obj)


class _BoundPyFunc(BoundFunc):
    """A pyfunc method of an object; kernels inline it with the object as `self`."""

    def __call__(self, *args, **kwargs):
        return self.func.fn(self.obj, *args, **kwargs)


def pyfunc(fn):
    return PyFunc(fn)
