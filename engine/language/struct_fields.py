"""Fields of structs (`ti.Struct.field`, `S.field` of a `ti.types.struct`): a struct of
arrays, one field per member."""
from ..core import dtypes as T
from ..ir import ops
from . import structs
from ..core.errors import TaichiRuntimeError
from .fields import Field, as_shape, guess_name

# ----------------------------------------------------------------------------
# Fields of structs

class StructField:
    """A field of structs, stored as a struct of arrays: one field per member (`f.a`, a
    StructField again for a struct member), all of one shape. `f[i].a` is `f.a[i]`, in
    kernels and in Python."""

    def __init__(self, struct_type, shape, name, needs_grad=False, needs_dual=False):
        self.struct_type, self.name = struct_type, name
        self.members = {key: _member_field(t, shape, f'{name}.{key}', needs_grad, needs_dual)
                        for key, t in struct_type.members.items()}

    def __getattr__(self, name):
        members = self.__dict__.get('members')
        if members is None or name not in members:
            raise AttributeError(f"struct field {self.__dict__.get('name')} has no member {name!r}"
                                 + (f" (members: {', '.join(members)})" if members else ''))
        return members[name]

    @property
    def grad(self):
        """The members' gradients as a struct field (`s.grad.a` is `s.a.grad`); integer
        members have none and are left out. None if no member has one."""
        return self._companion('grad')

    @property
    def dual(self):
        return self._companion('dual')

    def _companion(self, role):
        views = self.__dict__.setdefault('_companions', {})     # one object per role: kernels see it as one global
        if role not in views:
            members = {key: getattr(m, role) for key, m in self.members.items()}
            members = {key: m for key, m in members.items() if m is not None}
            views[role] = StructField._of_members(self, role, members) if members else None
        return views[role]

    @classmethod
    def _of_members(cls, primal, role, members):
        view = object.__new__(cls)
        view.struct_type = structs.StructType({key: primal.struct_type.members[key] for key in members})
        view.name, view.members = f'{primal.name}.{role}', members
        return view

    @property
    def keys(self):
        return list(self.members)

    def get_member_field(self, key):
        return self.members[key]

    def leaves(self):
        """The fields of scalars, vectors and matrices that hold the members."""
        return [f for m in self.members.values() for f in (m.leaves() if isinstance(m, StructField) else [m])]

    @property
    def placed(self):
        return all(f.placed for f in self.leaves())

    @property
    def shape(self):
        return self.leaves()[0].shape

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f'<{self.name}: field of {self.struct_type!r}, shape {self.shape}>'

    def __str__(self):
        return str(self.to_numpy()) if self.placed and ops.current_builder() is None else repr(self)

    # --- Python-scope access ----------------------------------------------------
    def __getitem__(self, index):
        return _StructElement(self, index)

    def __setitem__(self, index, value):
        value = structs.cast(self.struct_type, value)
        for key, member in self.members.items():
            member[index] = getattr(value, key)

    def to_numpy(self):
        """{member: array} (nested structs give nested dicts), as Taichi gives."""
        return {key: m.to_numpy() for key, m in self.members.items()}

    def from_numpy(self, arrays):
        for key, m in self.members.items():
            m.from_numpy(arrays[key])

    def to_torch(self, device=None):
        """{member: tensor}, as to_numpy."""
        return {key: m.to_torch(device) for key, m in self.members.items()}

    def from_torch(self, tensors):
        for key, m in self.members.items():
            m.from_torch(tensors[key])

    def fill(self, value):
        for m in self.members.values():
            m.fill(value)

    # a struct field placed under a dynamic node is a list of structs (engine/language/sparse.py)
    def parent(self, n=1):
        return self.leaves()[0].parent(n)

    @property
    def snode(self):
        return self.leaves()[0].snode

    def append(self, value):
        return self.leaves()[0].append(value)

    def length(self):
        return self.leaves()[0].length()

    def deactivate(self):
        return self.leaves()[0].deactivate()

    def copy_from(self, other):
        for key, m in self.members.items():
            m.copy_from(other.members[key])


def _member_field(t, shape, name, needs_grad, needs_dual):
    if isinstance(t, structs.StructType):
        return StructField(t, shape, name, needs_grad, needs_dual)
    dtype, element = (t[-1], t[1:-1]) if structs.value_type(t) else (t, ())
    has_grad = T.resolve(dtype).is_float        # integer members have no gradient
    return Field(dtype, element, shape, name, needs_grad and has_grad, needs_dual and has_grad)


class _StructElement(structs.Struct):
    """`f[i]` in Python: the element's members, read when it is taken; assigning a member
    (`f[i].a = 1.0`) writes the field."""

    def __init__(self, field, index):
        members = {key: m[index] for key, m in field.members.items()}
        structs.Struct.__init__(self, members)
        object.__setattr__(self, '_type', field.struct_type)
        object.__setattr__(self, '_home', (field, index))

    def __setattr__(self, name, value):
        structs.Struct.__setattr__(self, name, value)
        field, index = self._home
        field.members[name][index] = getattr(self, name)


def _struct_type_field(struct_type, shape=None, name=None, needs_grad=False, needs_dual=False,
                       offset=None, **_):
    """`S.field(shape=...)` of a StructType."""
    if offset is not None:
        raise TaichiRuntimeError('field offsets are not supported')
    return StructField(struct_type, as_shape(shape) if shape is not None else None,
                       name or guess_name(), needs_grad, needs_dual)


def _struct_field(members, shape=None, name=None, needs_grad=False, needs_dual=False, offset=None, **_):
    """`ti.Struct.field({'a': ti.f32, 'v': ti.math.vec3}, shape=...)`."""
    if offset is not None:
        raise TaichiRuntimeError('field offsets are not supported')
    return StructField(structs.StructType(members), as_shape(shape) if shape is not None else None,
                       name or guess_name(), needs_grad, needs_dual)


structs.StructType.field = _struct_type_field
structs.Struct.field = staticmethod(_struct_field)
