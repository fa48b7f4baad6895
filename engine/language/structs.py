"""Compound types: structs, and the scalar slots of compound values.

A struct value (`Struct`) is an ordered set of named members, each a scalar (a Python
number or an IR value), a Matrix or another struct. Like matrices, structs never reach
the IR: the frontend keeps them as Python objects holding IR values. A `StructType`
(`ti.types.struct(...)`, `@ti.dataclass`) names member types and builds values with
their members cast to those types.

Kernel arguments and return values of vector, matrix, struct and tuple types occupy one
scalar slot per entry: `slot_types` lists the slots of a type, `split` a value into
them, and `join` rebuilds the value from them.
"""
import inspect
import typing

import numpy as np

from ..core import dtypes as T
from ..ir import ops
from .matrix import Matrix


class Struct:
    """A struct value: `ti.Struct(a=1.0, v=ti.Vector([0, 0]))` or `ti.Struct({'a': 1.0})`, or
    one built by a StructType. Members are attributes; a @ti.dataclass's methods bind to it."""

    def __init__(self, *entries, **members):
        values = {}
        for entry in entries:
            values.update(entry)
        values.update(members)
        object.__setattr__(self, '_members', values)
        object.__setattr__(self, '_type', None)

    @classmethod
    def _typed(cls, struct_type, members):
        value = object.__new__(cls)
        object.__setattr__(value, '_members', members)
        object.__setattr__(value, '_type', struct_type)
        return value

    def __getattr__(self, name):
        members = self.__dict__.get('_members')
        if members is None:             # not initialised (copy, pickle)
            raise AttributeError(name)
        if name in members:
            return members[name]
        struct_type = self.__dict__['_type']
        if struct_type is not None and name in struct_type.methods:
            return struct_type.methods[name].__get__(self, type(self))
        raise AttributeError(f"the struct has no member {name!r} (members: {', '.join(members)})")

    def __setattr__(self, name, value):
        if name not in self._members:
            raise AttributeError(f"the struct has no member {name!r} (members: {', '.join(self._members)})")
        struct_type = self._type
        self._members[name] = value if struct_type is None else cast(struct_type.members[name], value)

    @property
    def keys(self):
        return list(self._members)

    @property
    def items(self):
        return self._members.items()

    def to_dict(self):
        """Members as a dict (nested structs as dicts, matrices as lists)."""
        return {k: v.to_dict() if isinstance(v, Struct) else v.to_list() if isinstance(v, Matrix) else v
                for k, v in self._members.items()}

    def __repr__(self):
        return repr(self.to_dict()) if not any(map(ops.is_value, leaves(self))) else \
            f'Struct({", ".join(self._members)})'


class StructType:
    """`ti.types.struct(a=ti.f32, v=ti.math.vec3)`: member types, a constructor of values
    (`S(a=1.0, v=...)`, positional in member order, or from a dict; members not given are
    zero) and `S.field(shape=...)` (engine/language/fields.py)."""

    def __init__(self, members, methods=None, name='Struct'):
        for key, member in members.items():
            if kind_of(member) not in ('scalar', 'matrix', 'struct'):
                raise TypeError(f'struct member {key!r}: {member!r} is not a scalar, vector, matrix '
                                f'or struct type')
        self.members = dict(members)
        self.methods = dict(methods or {})
        self.name = name

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], (dict, Struct)):
            given = dict(_members_of(args[0]))
        else:
            if len(args) > len(self.members):
                raise TypeError(f'{self.name} has {len(self.members)} members, got {len(args)} values')
            given = dict(zip(self.members, args))
            given.update(kwargs)
        unknown = [k for k in given if k not in self.members]
        if unknown:
            raise TypeError(f'{self.name} has no member {unknown[0]!r} (members: {", ".join(self.members)})')
        return Struct._typed(self, {k: cast(t, given[k]) if k in given else zero(t)
                                    for k, t in self.members.items()})

    def __repr__(self):
        return f'{self.name}({", ".join(f"{k}: {type_name(t)}" for k, t in self.members.items())})'


def dataclass(cls):
    """`@ti.dataclass`: a StructType of the class's annotated members; its other functions
    become methods of the values (ti.funcs are called in kernels, plain ones in Python)."""
    members = inspect.get_annotations(cls, eval_str=True)
    methods = {name: attr for name, attr in vars(cls).items()
               if not name.startswith('__') and name not in members and callable(attr)}
    return StructType(members, methods, cls.__name__)


# ----------------------------------------------------------------------------
# Types: scalar (ti.f32, float, ...), matrix (('vector', n, dtype) / ('matrix', n, m,
# dtype), as ti.math.vec3 is), struct (StructType), tuple ((ti.i32, ti.f32), tuple[...])

def kind_of(t):
    """'scalar', 'matrix', 'struct' or 'tuple' (None: not a type)."""
    if isinstance(t, StructType):
        return 'struct'
    if isinstance(t, tuple) and len(t) >= 3 and t[0] in ('vector', 'matrix'):
        return 'matrix'
    if _tuple_members(t) is not None:
        return 'tuple'
    return 'scalar' if T.resolve(t) is not None else None


def _tuple_members(t):
    if isinstance(t, tuple) and not (t and isinstance(t[0], str)):
        return t
    return typing.get_args(t) if typing.get_origin(t) is tuple else None


def _shape(t):
    return (t[1],) if t[0] == 'vector' else (t[1], t[2])


def matrix_shape(t):
    """The shape of a vector or matrix type."""
    return _shape(t)


def type_name(t):
    kind = kind_of(t)
    if kind == 'matrix':
        return f'{t[0]}{"x".join(map(str, _shape(t)))}({T.resolve(t[-1])})'
    if kind == 'struct':
        return t.name
    if kind == 'tuple':
        return '(' + ', '.join(map(type_name, _tuple_members(t))) + ')'
    return str(T.resolve(t))


def value_type(annotation):
    """A kernel's argument or return annotation as a compound type, or None for a scalar
    (or no type at all)."""
    kind = kind_of(annotation)
    if kind == 'tuple' and not all(kind_of(t) for t in _tuple_members(annotation)):
        raise TypeError(f'{annotation!r} is not a tuple of types')
    return annotation if kind in ('matrix', 'struct', 'tuple') else None


def element_dtype(t):
    """The scalar type of a scalar, vector or matrix type (None for others or None)."""
    kind = kind_of(t) if t is not None else None
    return T.resolve(t[-1] if kind == 'matrix' else t) if kind in ('scalar', 'matrix') else None


def slot_types(t):
    """The scalar type of each slot of a value of type t, in order."""
    kind = kind_of(t)
    if kind == 'scalar':
        return [T.resolve(t)]
    if kind == 'matrix':
        return [T.resolve(t[-1])] * int(np.prod(_shape(t)))
    members = t.members.values() if kind == 'struct' else _tuple_members(t)
    return [s for member in members for s in slot_types(member)]


def split(t, value):
    """The scalars of `value` (Python or kernel values) in the slots of type t; a TypeError
    says what does not fit."""
    kind = kind_of(t)
    if kind == 'scalar':
        if not (ops.is_value(value) or ops.is_number(value)):
            raise TypeError(f'expected a scalar, got {describe(value)}')
        return [value]
    if kind == 'matrix':
        if not isinstance(value, (Matrix, list, tuple, np.ndarray)):
            raise TypeError(f'expected a {type_name(t)}, got {describe(value)}')
        matrix = value if isinstance(value, Matrix) else Matrix(value)
        if matrix.shape != _shape(t):
            raise TypeError(f'expected a {type_name(t)}, got shape {matrix.shape}')
        return list(matrix.entries)
    if kind == 'struct':
        members = _members_of(value)
        if set(members) != set(t.members):
            raise TypeError(f'expected a {t.name} with members {", ".join(t.members)}, got '
                            f'{describe(value)}')
        return [x for k, member in t.members.items() for x in split(member, members[k])]
    types = _tuple_members(t)
    if not isinstance(value, (tuple, list)) or len(value) != len(types):
        raise TypeError(f'expected a tuple of {len(types)} values, got {describe(value)}')
    return [x for member, v in zip(types, value) for x in split(member, v)]


def join(t, scalars):
    """The value of type t whose slots hold `scalars` (an iterator, consumed)."""
    kind = kind_of(t)
    if kind == 'scalar':
        return next(scalars)
    if kind == 'matrix':
        shape = _shape(t)
        return Matrix._make(shape, [next(scalars) for _ in range(int(np.prod(shape)))])
    if kind == 'struct':
        return Struct._typed(t, {k: join(member, scalars) for k, member in t.members.items()})
    return tuple(join(member, scalars) for member in _tuple_members(t))


def cast(t, value):
    """`value` as a member of type t: scalars cast, matrices checked and cast entry by entry,
    structs (or dicts) built by their type."""
    kind = kind_of(t)
    if kind == 'struct':
        return value if isinstance(value, Struct) and value._type is t else t(value)
    if kind == 'matrix':
        dtype = T.resolve(t[-1])
        return Matrix._make(_shape(t), [ops.cast(x, dtype) for x in split(t, value)])
    if isinstance(value, (Matrix, Struct)):
        raise TypeError(f'expected a scalar, got {describe(value)}')
    return ops.cast(value, T.resolve(t))


def zero(t):
    return join(t, iter([ops.cast(0, dtype) for dtype in slot_types(t)]))


def _members_of(value):
    if isinstance(value, Struct):
        return value._members
    if isinstance(value, dict):
        return value
    raise TypeError(f'expected a struct or a dict, got {describe(value)}')


def describe(value):
    if isinstance(value, Matrix):
        return f'a matrix of shape {value.shape}'
    if isinstance(value, Struct):
        return f'a struct with members {", ".join(value._members)}'
    if isinstance(value, dict):
        return f'a dict with keys {", ".join(map(str, value))}'
    if ops.is_value(value):
        return f'a {value.dtype} value'
    return f'{type(value).__name__} {value!r}' if ops.is_number(value) else type(value).__name__


# ----------------------------------------------------------------------------
# Values as trees of scalars (a ti.func's result kept in locals)

def leaves(value):
    """The scalars of a scalar, matrix, struct or tuple value, in order."""
    if isinstance(value, Matrix):
        return list(value.entries)
    if isinstance(value, Struct):
        return [x for v in value._members.values() for x in leaves(v)]
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in leaves(v)]
    return [value]


def tree(value):
    """What `rebuild` needs besides the leaves: comparable between values of one shape."""
    if isinstance(value, Matrix):
        return ('matrix', value.shape)
    if isinstance(value, Struct):
        return ('struct', value._type, tuple((k, tree(v)) for k, v in value._members.items()))
    if isinstance(value, (tuple, list)):
        return ('tuple', tuple(tree(v) for v in value))
    return 'scalar'


def rebuild(shape, scalars):
    """The value of tree `shape` whose leaves are `scalars` (an iterator, consumed)."""
    if shape == 'scalar':
        return next(scalars)
    kind, *rest = shape
    if kind == 'matrix':
        return Matrix._make(rest[0], [next(scalars) for _ in range(int(np.prod(rest[0])))])
    if kind == 'struct':
        struct_type, members = rest
        built = {k: rebuild(s, scalars) for k, s in members}
        return Struct._typed(struct_type, built) if struct_type is not None else Struct(built)
    return tuple(rebuild(s, scalars) for s in rest[0])
