"""What autodiff refuses to differentiate, one rule each, apart from the transforms.

A construct whose derivative the engine cannot compute correctly is refused with an
AutodiffError rather than differentiated wrongly. `refuse(rule, stmt, ...)` makes it:
the rule's text (formatted with the details: the kind of atomic, the field), the
user's line (the statement's location) and the rule's name at the end, so a refusal can
be looked up here. engine/autodiff/reverse.py and engine/autodiff/forward.py raise them where they meet
the construct; the text says what to do instead.
"""
from ..core.errors import AutodiffError, TaichiRuntimeError

RULES = {
    # reverse mode
    'random numbers': 'ti.random() in a differentiated kernel: the adjoint would draw different numbers; '
                      'draw them into a field in a separate kernel',
    'local read after a parallel accumulation':
        'this kernel reads a kernel-scope variable after a parallel loop accumulated into it; its gradient '
        'would need the loop replayed. Accumulate into a 0-D field instead, or split the kernel',
    'old value of an atomic': 'the old value returned by an atomic operation cannot be used in a kernel '
                              'that is differentiated (replaying the atomic would change the field)',
    'float atomic min/max': 'atomic_{kind} on the float field {field} is not differentiable',
    'shared float atomic min/max': 'atomic_{kind} on a float variable that the threads of a parallel '
                                   'loop share is not differentiable',
    'gradient array': 'Cannot automatically differentiate through a grad tensor: this kernel accesses '
                      '{name}, the gradient of an ndarray argument, which the backward pass itself '
                      'accumulates into (Taichi refuses it too); access it in a kernel that is not '
                      'differentiated (an optimizer step), or copy it into another ndarray first',
    # forward mode
    'forward: local atomic min/max': 'forward mode through a local atomic_{kind} on a float is not supported',
    'forward: parallel old value of an atomic':
        'forward mode through the old value returned by an atomic operation inside a parallel loop: the '
        'value depends on the order of the threads, and its tangent cannot be paired with it',
    'forward: float atomic min/max': 'forward mode through atomic_{kind} on a float field is not supported',
    'forward: tangent without a dual': 'forward mode would drop the tangent written here: {what} (ti.ad.FwdMode '
                                       'allocates duals for the fields placed when it starts)',
}


class GradientArrayError(AutodiffError, TaichiRuntimeError):
    """The refusal of 'gradient array': an AutodiffError, and a RuntimeError as in Taichi."""


_CLASSES = {'gradient array': GradientArrayError}


def refuse(rule, stmt, **details):
    """The AutodiffError of `rule` at the user's line of `stmt`."""
    return _CLASSES.get(rule, AutodiffError)(f'{RULES[rule].format(**details)} [refused: {rule}]', stmt.loc)
