"""The engine's modes, in one object.

Which program is current, whether a tape records launches, whether `ti.capture` records
a function, whether forward mode computes tangents: every layer that behaves differently
in a mode reads it here, so no module asks another (higher) one what is going on.
"""


class Context:
    """What is in effect now. Set by the runtime layer (engine/core/program.py, tape.py,
    replay.py, ad.py); read anywhere."""

    def __init__(self):
        self.program = None     # the Program of the last ti.init (engine/core/program.py)
        self.tape = None        # the ti.ad.Tape recording launches (engine/runtime/tape.py)
        self.capture = None     # the Recording of a function ti.capture records (engine/runtime/replay.py)
        self.forward = None     # the ti.ad.FwdMode computing tangents (engine/runtime/ad.py)
        self.no_grad_depth = 0  # > 0 inside a call of a ti.ad.no_grad Python function
        # x.copy_from(y) on a tape or in forward mode: a kernel launch (engine/runtime/copies.py)
        self.launch_copy = None
        # the grad_for function running in forward over reverse (hvp, hessian), whose writes
        # to gradients from Python carry no tangent (engine/language/fields.py refuses them)
        self.custom_backward = None
        # refuses a value a kernel returned on a tape written from Python (engine/runtime/results.py)
        self.check_written_value = None
        # the Watch of wrapped functions' calls recording or awaiting their backward pass
        # (engine/runtime/pending.py): sees every launch and write from Python first
        self.watch = None


ctx = Context()
