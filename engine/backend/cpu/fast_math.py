"""ti.init(fast_math=True): LLVM's fast-math flags on a kernel's float instructions.

Every float instruction and math intrinsic may then be reassociated, contracted into
FMAs, divided by reciprocals and approximated, and the sign of zero may be ignored. NaN
and Inf keep their meaning (no `nnan`/`ninf`): NaN guards, `ti.math.isnan` and debug
mode's checks must still see them. Off by default (docs/performance.md says what it
changes). The flags are added to the module's text, where every float op is one line.
"""
import re

FAST_MATH = 'reassoc nsz arcp contract afn'
_FLOAT_OP = re.compile(r'= (fadd|fsub|fmul|fdiv|frem|fneg) ')
_FLOAT_CALL = re.compile(r'= call (float|double|<\d+ x (?:float|double)>) @"?llvm\.')


def with_fast_math(text):
    """`text`, an LLVM module, with FAST_MATH on its float instructions and intrinsic calls."""
    text = _FLOAT_OP.sub(lambda m: f'= {m.group(1)} {FAST_MATH} ', text)
    return _FLOAT_CALL.sub(lambda m: f'= call {FAST_MATH} {m.group(1)} @"llvm.' if '"' in m.group(0)
                           else f'= call {FAST_MATH} {m.group(1)} @llvm.', text)
