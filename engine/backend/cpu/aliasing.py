"""Scoped no-alias metadata on field accesses.

Every field owns its memory (language/fields.py allocates each one, its .grad and its
.dual separately, and nothing replaces it), so an access to one field never touches
another's. LLVM cannot know that: the base pointers come from the field table. Without
it, a store to `v[t + 1, p]` might change `grid[i, j]`, so a loop that reads the grid
at computed indices and writes particles cannot be vectorized and reloads values it has
read. Each field gets a scope; its accesses are in it and alias no other field's scope.
Ndarrays get none: one ndarray may be passed as two arguments.
"""
from llvmlite import ir as llir

# which operand of a memory instruction is its address
POINTER_OPERAND = {'load': 0, 'store': 1, 'atomicrmw': 0, 'cmpxchg': 0}


def tag_field_accesses(module, bases):
    """`bases`: {id(a field's base pointer in some function of `module`): the field}."""
    accesses = []
    for fn in module.functions:
        for block in fn.blocks:
            for instr in block.instructions:
                k = POINTER_OPERAND.get(getattr(instr, 'opname', None))
                field = None if k is None else _field_of(instr.operands[k], bases)
                if field is not None:
                    accesses.append((instr, field.id))
    ids = sorted({fid for _, fid in accesses})
    if len(ids) < 2:
        return
    domain = module.add_metadata([llir.MetaDataString(module, 'engine.fields')])
    scopes = {fid: module.add_metadata([llir.MetaDataString(module, f'engine.field{fid}'), domain])
              for fid in ids}
    own = {fid: module.add_metadata([scopes[fid]]) for fid in ids}
    others = {fid: module.add_metadata([scopes[g] for g in ids if g != fid]) for fid in ids}
    for instr, fid in accesses:
        instr.set_metadata('alias.scope', own[fid])
        instr.set_metadata('noalias', others[fid])


def _field_of(pointer, bases):
    """The field whose base pointer `pointer` is derived from by GEPs and casts, or None."""
    while id(pointer) not in bases:
        if not isinstance(pointer, (llir.GEPInstr, llir.CastInstr)):
            return None
        pointer = pointer.operands[0]
    return bases[id(pointer)]
