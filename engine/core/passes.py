"""The optional passes: rewrites that only make kernels faster, never change what they
compute (values bit for bit; gradients up to the order in which float terms are added:
merged reads add one adjoint where there were several). `ti.init(disable_passes=[...])` turns them off by name, so that each can be shown
harmless on values *and gradients* (tests/test_autodiff_properties.py runs the generated
programs with each one off and all on), and so that a user who suspects one can check.
"""
from .context import ctx
from .errors import TaichiInitError

OPTIONAL = {
    'simplify': 'store forwarding, common values, constant folding and dead code before '
                'differentiation (engine/ir/simplify.py)',
    'merge_reads': "simplify's merging of repeated reads of one field element",
    'nan_guards': 'leaving out the NaN guard of a chain-rule product whose partial is proven '
                  'finite (engine/autodiff/finite.py)',
    'owned_adjoints': 'adds into gradients without atomics where each iteration of a parallel '
                      'loop owns its elements (engine/autodiff/reverse.py: _owned_fields)',
    'bounds_elision': 'leaving out the index checks that the loop ranges prove unnecessary '
                      '(engine/backend/bounds.py)',
    'wide_indices': "computing a parallel loop's field indices in 64 bits, where LLVM sees "
                    'consecutive elements (engine/backend/cpu/codegen.py: FunctionEmitter.widen)',
    'field_noalias': "telling LLVM that one field's accesses never touch another field "
                     '(engine/backend/cpu/aliasing.py)',
    'scalar_gathers': 'keeping parallel loops whose loads are mostly gathers out of LLVM\'s loop '
                      'vectorizer (engine/backend/cpu/gathers.py)',
}


def check(names):
    """ti.init's disable_passes: a frozenset of known pass names."""
    names = frozenset([names] if isinstance(names, str) else names or ())
    unknown = sorted(names - OPTIONAL.keys())
    if unknown:
        raise TaichiInitError(f'ti.init: disable_passes names no such pass: {", ".join(unknown)} '
                              f'(the optional passes: {", ".join(OPTIONAL)})')
    return names


def enabled(name):
    """Whether the current program runs the optional pass `name` (kernels compile for
    the program of the last ti.init)."""
    return ctx.program is None or name not in ctx.program.config.disable_passes
