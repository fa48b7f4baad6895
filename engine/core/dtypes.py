"""Scalar data types and Taichi's promotion rules."""
import numpy as np


class DataType:
    """A scalar type: its name, numpy dtype and kind."""

    def __init__(self, name, np_dtype, is_float, bits, signed=True):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_float = is_float
        self.bits = bits
        self.signed = signed

    @property
    def is_int(self):
        return not self.is_float

    def __repr__(self):
        return self.name


f32 = DataType('f32', np.float32, True, 32)
f64 = DataType('f64', np.float64, True, 64)
i8 = DataType('i8', np.int8, False, 8)
i16 = DataType('i16', np.int16, False, 16)
i32 = DataType('i32', np.int32, False, 32)
i64 = DataType('i64', np.int64, False, 64)
u8 = DataType('u8', np.uint8, False, 8, signed=False)
u16 = DataType('u16', np.uint16, False, 16, signed=False)
u32 = DataType('u32', np.uint32, False, 32, signed=False)
u64 = DataType('u64', np.uint64, False, 64, signed=False)
float32, float64 = f32, f64
int8, int16, int32, int64 = i8, i16, i32, i64
uint8, uint16, uint32, uint64 = u8, u16, u32, u64

ALL = (f32, f64, i8, i16, i32, i64, u8, u16, u32, u64)
_BY_NUMPY = {t.np: t for t in ALL}


def from_numpy(np_dtype):
    return _BY_NUMPY[np.dtype(np_dtype)]


def has_numpy(np_dtype):
    return np.dtype(np_dtype) in _BY_NUMPY


class _Defaults:
    fp = f32
    ip = i32


defaults = _Defaults()


def resolve(annotation):
    """Map a user annotation (ti.f32, float, int, np.float64) to a DataType."""
    if isinstance(annotation, DataType):
        return annotation
    annotation = getattr(annotation, 'python_type', annotation)   # `float` seen from a kernel
    if annotation is float:
        return defaults.fp
    if annotation is int:
        return defaults.ip
    if annotation is bool:
        return i32
    try:
        return from_numpy(annotation)
    except (TypeError, KeyError, ValueError):       # not a type numpy knows
        return None


def promote(a: DataType, b: DataType) -> DataType:
    """Binary-op result type: floats win over ints, wider wins, signed wins a tie."""
    if a is b:
        return a
    if a.is_float != b.is_float:
        return a if a.is_float else b
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if a.signed else b


def python_scalar_type(value) -> DataType:
    """The type a Python literal takes when it meets no typed operand."""
    if isinstance(value, (bool, np.bool_)):
        return i32
    if isinstance(value, (int, np.integer)):
        return from_numpy(value.dtype) if isinstance(value, np.integer) else defaults.ip
    if isinstance(value, np.floating):
        return from_numpy(value.dtype)
    return defaults.fp
