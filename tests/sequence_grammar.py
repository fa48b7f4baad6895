"""Random FEATURE SEQUENCES: sequences of API calls whose derivatives are checked against
central finite differences of the whole sequence, in float64.

Where tests/kernel_grammar.py draws random *kernels*, this module draws random *programs
of API calls* over one small, fixed world (`World`: a few fields and about a dozen
kernels, compiled once per ti.init and shared by every sequence), so that thousands of
sequences cost no compilation. `generate(seed)` is deterministic by seed (a
`random.Random(seed)`); `check(world, seq)` runs a sequence through its derivative
driver and compares.

The world (all float64, every float field with a gradient):
  parameters P  a (4), v (3 2-vectors), M (a 2x2 matrix, 0-D), x0 (4)
  state         b (4), c (4, accumulated into), w (3 2-vectors), s (0-D), xs (3 x 4:
                time slots of a short rollout), loss (0-D); src (4, no gradient, constants)
  kernels       k_ab(scale) b = f(a, v, scale) (atan2(scale, -1): the sign of a zero
                argument matters), k_w  w = M v + g(b), k_c(scale) c += ..., k_max c +=
                max/min (kinks: finite differences check their own stability), k_func
                b += ti.ad.grad / ti.ad.jvp of a ti.func, k_s(r) s = h(r, M), k_sum() ->
                float (a kernel return value), k_nd(t) c += t * a (t: a torch tensor or
                ti.ndarray argument), k_x0 / k_adv(slot, t) / k_xloss(slot) (a rollout),
                k_loss (loss += ...).

Elements of a sequence (op kinds):
  launches of the pool's kernels with constant arguments (0.0 and -0.0 among them);
  kernel return values (`ret`), also passed as the argument of a later kernel;
  Python-scope writes: an element (`a[i] = c`, `v[i] = [c, d]`, `M[None] = ...`), one
  component of a vector / matrix element (`v[i][k] = c`, `M[None][r, k] = c`), `fill`,
  `from_numpy`, `copy_from` (from a constant field: Python writes are constants to the
  tape, see docs/rules.md);
  `ti.ad.clear_all_gradients()` and `loss.grad.fill(0)` in the middle of a sequence;
  `ti.capture`d groups of launches (replayed natively after their first call; scalar
  arguments are the capture's key, so 0.0 and -0.0 keys are drawn), and captured launches
  of a kernel taking a torch tensor that is rewritten in place between calls (contiguous
  float64, a strided view, float32).
Drivers (the derivative of the sequence's scalar loss with respect to P):
  tape_fwd    `ti.ad.Tape` gradient and `ti.ad.FwdMode` tangent (directional derivative
              along a random seed of one parameter field), both against finite
              differences, and against each other (<J v, 1> = <v, J^T 1>);
  manual      launches then `kernel.grad()` of each in reverse order (no tape);
  checkpoint  a rollout through sims.checkpointing.CheckpointedRollout (2-step segments)
              with a taped prefix and `kernel.grad` of the rollout's initial kernel;
  hvp         `ti.ad.hvp` against finite differences of tape gradients, and symmetry
              <H u, z> = <u, H z>;
  hessian     `ti.ad.hessian` of a 4-entry parameter: symmetric, and a column against
              finite differences of tape gradients;
  jacobian    `ti.ad.jacobian` (forward and reverse mode) and `ti.ad.value_and_grad`;
  torch       `engine.torch.function` of the sequence: `backward()` and forward-mode AD
              (`torch.autograd.forward_ad`), dot-product test between them;
  jax         `engine.jax.function`: `jax.grad`.
Every driver also compares the loss value (and the return values) with a plain run of the
same sequence (no tape, no capture), so a replay of stale arguments shows as a value.

Finite differences: central differences of the whole sequence (every field reset to the
sequence's start values, then all ops), along random directions, with two step sizes
(1e-5 and 1e-6 scaled) that must agree with each other and with a one-sided difference (a
kink hit exactly, a tie in max / min, fools central differences of any step), else the
point is skipped as non-smooth (counted). As docs/rules.md says, a Python write on the tape over an element no
launch has touched yet sets an input (`.grad` is the gradient with respect to the value
written): reverse-mode checks perturb such an element at that write; forward mode and
everything else perturb the start values.

KNOWN_OPEN: elements that hit a known open engine bug. While a name is in it, the
generator still draws the element (the random stream is the same) but then leaves it out,
or leaves out the check it breaks, as noted per name. `SEQUENCE_KNOWN_OPEN=a,b` in the
environment replaces the set (`SEQUENCE_KNOWN_OPEN=` empties it: every element on).
"""
import os
import random
from dataclasses import dataclass, field as dc_field

import numpy as np

# Known open engine bugs (see the module docstring). Remove a name once its bug is fixed.
KNOWN_OPEN = set()
# The gates, each for a bug this generator met (all fixed); put one back into KNOWN_OPEN
# if its bug returns:
#   fwd_python_write          FwdMode ignored Python writes (x[i] = c, fill, from_numpy): the
#                             written element kept its tangent. Gate: no Python write inside
#                             FwdMode (also hvp, forward-mode jacobian, torch forward AD).
#   clear_in_tape             ti.ad.clear_all_gradients() / loss.grad.fill(0) inside a Tape
#                             zeroed the gradient. Gate: these ops are dropped inside tapes.
#   return_value_arg          a kernel return value passed to a later kernel on a tape lost its
#                             gradient (now: refused with an AutodiffError, which the
#                             generator checks). Gate: float(value) instead (a constant).
#   component_write_mid_tape  a Python write of one component (v[i][k] = c) on a tape after a
#                             launch used the element raised IndexError. Gate: a whole-element
#                             write instead.
#   capture_torch_storage     ti.capture replayed a tensor argument's old memory after its
#                             storage was replaced (t.set_(...)). Gate: in-place writes only.
#   capture_signed_zero       ti.capture keyed the arguments 0.0 and -0.0 alike. Gate:
#                             captured zero arguments are +0.0.
#   torch_forward_ad_state_war  torch forward-mode AD of a function that updates a field that
#                             is not a port was refused: the tangents came from a second run,
#                             from the state the first left. Gate: no forward AD there.
#   interop_input_overwritten an engine.torch / engine.jax function that overwrote an input
#                             from Python got the gradient of the value written for the tensor
#                             (0 is right). Gate: no Python writes to inputs in interop sequences.
GATES = ('fwd_python_write', 'clear_in_tape', 'return_value_arg', 'component_write_mid_tape',
         'capture_torch_storage', 'capture_signed_zero', 'torch_forward_ad_state_war',
         'interop_input_overwritten')
if 'SEQUENCE_KNOWN_OPEN' in os.environ:
    KNOWN_OPEN = set(filter(None, os.environ['SEQUENCE_KNOWN_OPEN'].split(',')))


def is_open(name):
    return name in KNOWN_OPEN


N = 4                       # a, b, c, x0: N entries; v, w: 3 2-vectors
NV = 3
SEGMENT = 2                 # checkpointing: xs holds SEGMENT + 1 slots
PARAMS = ('a', 'v', 'M', 'x0')
SCALES = (0.5, -0.7, 1.3, 0.0, -0.0, 0.25)
DRIVERS = [('tape_fwd', 40), ('manual', 9), ('checkpoint', 8), ('hvp', 9), ('hessian', 3),
           ('jacobian', 7), ('torch', 9), ('jax', 4)]


# ---------------------------------------------------------------------------------------
# The world: fields and kernels, built once per ti.init

class World:
    """The fields and the fixed kernel pool; `reset(seq)` loads a sequence's start state."""

    def __init__(self, ti, with_torch=True, with_jax=True):
        self.ti = ti
        f64 = ti.f64

        def fld(name, shape, grad=True):
            return ti.field(f64, shape=shape, needs_grad=grad, name=name)
        a, b, c, x0 = fld('a', N), fld('b', N), fld('c', N), fld('x0', N)
        v = ti.Vector.field(2, f64, shape=NV, needs_grad=True, name='v')
        w = ti.Vector.field(2, f64, shape=NV, needs_grad=True, name='w')
        M = ti.Matrix.field(2, 2, f64, shape=(), needs_grad=True, name='M')
        s, loss = fld('s', ()), fld('loss', ())
        xs = fld('xs', (SEGMENT + 1, N))
        src = fld('src', N, grad=False)
        self.fields = dict(a=a, b=b, c=c, x0=x0, v=v, w=w, M=M, s=s, loss=loss, xs=xs, src=src)
        self.loss = loss

        @ti.func
        def cubic(q):
            return 0.2 * q ** 3 - 0.5 * q ** 2 + q

        @ti.func
        def pair(p, q):
            return ti.sin(p) * q + 0.3 * p * p

        dcubic = ti.ad.grad(cubic)
        jpair = ti.ad.jvp(pair)

        @ti.kernel
        def k_ab(scale: f64):
            for i in b:
                b[i] = ti.sin(a[i]) * (1.0 + 0.3 * v[i % 3][0]) + scale * a[(i + 1) % 4] ** 2 \
                    + 0.1 * ti.atan2(scale, -1.0)

        @ti.kernel
        def k_w():
            for i in w:
                w[i] = M[None] @ v[i] + 0.5 * ti.Vector([b[i], ti.cos(b[i + 1])])

        @ti.kernel
        def k_c(scale: f64):
            for i in c:
                c[i] += ti.tanh(b[i]) * scale + 0.2 * w[i % 3].norm_sqr() + M[None][0, 1] * a[i]

        @ti.kernel
        def k_max():
            for i in c:
                c[i] += 0.5 * ti.max(b[i], 0.2) + 0.3 * ti.min(a[i], v[i % 3][1])

        @ti.kernel
        def k_func():
            for i in b:
                _, t = jpair((a[i], v[i % 3][1]), (1.0, 0.5))
                b[i] += 0.3 * dcubic(a[i]) + 0.2 * t

        @ti.kernel
        def k_s(r: f64):
            s[None] = r * M[None][1, 1] + ti.sin(r) + 0.1 * r * r

        @ti.kernel
        def k_sum() -> f64:
            r = 0.0
            for i in ti.static(range(N)):
                r += b[i] * ti.cos(a[i]) + 0.2 * c[i]
            return r + M[None][1, 0] * w[1][0]

        @ti.kernel
        def k_nd(t: ti.types.ndarray()):
            for i in c:
                c[i] += t[i] * a[i]

        @ti.kernel
        def k_x0():
            for i in x0:
                xs[0, i] = ti.sin(x0[i]) + 0.5 * x0[i]

        @ti.kernel
        def k_adv(slot: ti.i32, t: ti.i32):
            for i in range(N):
                xs[slot + 1, i] = xs[slot, i] + 0.3 * ti.sin(a[i] * xs[slot, i] + 0.2 * t)

        @ti.kernel
        def k_xloss(slot: ti.i32):
            for i in range(N):
                loss[None] += 0.3 * xs[slot, i] ** 2

        @ti.kernel
        def k_loss():
            for i in c:
                loss[None] += 0.5 * c[i] ** 2 + 0.1 * b[i] * a[i]
            for i in w:
                loss[None] += w[i].dot(ti.Vector([0.3, -0.2])) + 0.1 * w[i].norm_sqr()
            loss[None] += 0.3 * s[None] + 0.1 * M[None].determinant()

        self.kernels = dict(k_ab=k_ab, k_w=k_w, k_c=k_c, k_max=k_max, k_func=k_func, k_s=k_s,
                            k_sum=k_sum, k_nd=k_nd, k_x0=k_x0, k_adv=k_adv, k_xloss=k_xloss,
                            k_loss=k_loss)
        self.captures = {}
        self.torch = self.jax = None
        self.tensors = {}
        if with_torch:
            try:
                import torch
                self.torch = torch
                self.tensors = {'f64': torch.zeros(N, dtype=torch.float64),
                                'set_': torch.zeros(N, dtype=torch.float64),
                                'f32': torch.zeros(N, dtype=torch.float32)}
            except ImportError:
                pass
        if with_jax:
            try:
                import jax
                jax.config.update('jax_enable_x64', True)
                self.jax = jax
            except ImportError:
                pass
        self.nd = ti.ndarray(f64, shape=N)     # a ti.ndarray argument of k_nd (a constant)

    # --- state ------------------------------------------------------------------------
    def reset(self, seq, params=None):
        """Every field to the sequence's start values (params: P's values, default seq's)."""
        params = seq.params if params is None else params
        for name, f in self.fields.items():
            value = params[name] if name in params else seq.state[name]
            f.from_numpy(value)
        # a tensor argument's values are set before the sequence: the engine does not see
        # writes into a tensor's memory by PyTorch (as it does not see writes into .data)
        for op in seq.ops:
            if op[0] == 'nd' and op[1] != 'ndarray':
                self._set_tensor(op[1], op[2])

    def _set_tensor(self, variant, values):
        torch = self.torch
        if variant == 'fresh':              # a new tensor object
            self.tensors['fresh'] = torch.tensor(values, dtype=torch.float64)
        elif variant == 'set_':             # the same tensor object, its storage replaced
            self.tensors['set_'].set_(torch.tensor(values, dtype=torch.float64))
        else:                               # the same tensor, written in place
            t = self.tensors[variant]
            with torch.no_grad():
                t.copy_(torch.tensor(values, dtype=t.dtype))

    def param_vector(self):
        return np.concatenate([self.fields[p].to_numpy().reshape(-1) for p in PARAMS])

    def grad_vector(self):
        return np.concatenate([self.fields[p].grad.to_numpy().reshape(-1) for p in PARAMS])

    # --- one op -----------------------------------------------------------------------
    def capture_of(self, names):
        cap = self.captures.get(names)
        if cap is None:
            kernels = [self.kernels[n] for n in names]
            arity = [_ARITY[n] for n in names]

            def launches(*args):
                k = 0
                for kern, n in zip(kernels, arity):
                    kern(*args[k:k + n])
                    k += n
            launches.__name__ = 'cap_' + '_'.join(names)
            cap = self.captures[names] = self.ti.capture(launches)
        return cap

    def nd_capture(self):
        cap = self.captures.get('nd')
        if cap is None:
            k_nd = self.kernels['k_nd']

            def nd_launch(t):
                k_nd(t)
            cap = self.captures['nd'] = self.ti.capture(nd_launch)
        return cap

    def run_op(self, op, regs, plain=False):
        kind = op[0]
        F, K = self.fields, self.kernels
        if kind == 'k':
            _, name, args = op
            K[name](*[self._arg(a, regs) for a in args])
        elif kind == 'ret':
            regs[op[2]] = K[op[1]]()        # on a tape: a marked float (engine/runtime/tape.py)
        elif kind == 'cap':
            _, launches = op
            args = tuple(x for _, la in launches for x in la)
            if plain:
                for name, la in launches:
                    K[name](*la)
            else:
                self.capture_of(tuple(n for n, _ in launches))(*args)
        elif kind == 'nd':
            _, variant, values, captured = op
            if variant == 'ndarray':
                self.nd.from_numpy(np.asarray(values))
                K['k_nd'](self.nd)
                return
            if plain:
                dtype = np.float32 if variant == 'f32' else np.float64
                K['k_nd'](self.torch.tensor(np.asarray(values, dtype=dtype).astype(np.float64)))
                return
            t = self.tensors[variant]     # its values were set by reset()
            if captured:
                self.nd_capture()(t)
            else:
                K['k_nd'](t)
        elif kind == 'w_elem':
            _, name, index, value = op
            F[name][index] = value
        elif kind == 'w_comp':
            _, name, index, comp, value = op
            F[name][index][comp] = value
        elif kind == 'fill':
            F[op[1]].fill(op[2])
        elif kind == 'from_numpy':
            F[op[1]].from_numpy(np.asarray(op[2]))
        elif kind == 'copy_from':
            F[op[1]].copy_from(F[op[2]])
        elif kind == 'clear_all':
            self.ti.ad.clear_all_gradients()
        elif kind == 'loss_grad_fill0':
            self.loss.grad.fill(0)
        else:
            raise ValueError(kind)

    def _arg(self, a, regs):
        if not isinstance(a, tuple):
            return a
        if a[0] == 'r':         # the return value itself: refused on a tape / in forward mode
            return regs[a[1]]
        # float(value): a constant (finite differences use the unperturbed run's value)
        frozen = self.frozen
        return frozen[a[1]] if frozen is not None else float(regs[a[1]])

    frozen = None

    def run_ops(self, ops, plain=False, perturb_at=None):
        """Run ops in the current mode; returns the return values. `perturb_at`: op index ->
        [(field, flat index, delta)] added after that op (finite differences of inputs set
        by a Python write)."""
        regs = {}
        rets = []
        for k, op in enumerate(ops):
            self.run_op(op, regs, plain=plain)
            if op[0] == 'ret':
                rets.append(float(regs[op[2]]))
            if perturb_at and k in perturb_at:
                for name, flat, delta in perturb_at[k]:
                    arr = self.fields[name].data
                    arr[np.unravel_index(flat, arr.shape)] += delta
        return rets


_ARITY = dict(k_ab=1, k_w=0, k_c=1, k_max=0, k_func=0, k_s=1, k_sum=0, k_nd=1, k_x0=0,
              k_adv=2, k_xloss=1, k_loss=0)
# fields each kernel reads / writes (every kernel touches whole fields, except xs slots)
_READS = dict(k_ab={'a', 'v'}, k_w={'M', 'v', 'b'}, k_c={'b', 'w', 'M', 'a', 'c'},
              k_max={'b', 'a', 'v', 'c'}, k_func={'a', 'v', 'b'}, k_s={'M'},
              k_sum={'b', 'a', 'c', 'M', 'w'}, k_nd={'a', 'c'}, k_x0={'x0'}, k_adv={'a', 'xs'},
              k_xloss={'xs'}, k_loss={'c', 'b', 'a', 'w', 's', 'M', 'loss'})
_WRITES = dict(k_ab={'b'}, k_w={'w'}, k_c={'c'}, k_max={'c'}, k_func={'b'}, k_s={'s'}, k_sum=set(),
               k_nd={'c'}, k_x0={'xs'}, k_adv={'xs'}, k_xloss={'loss'}, k_loss={'loss'})
SHAPES = dict(a=(N,), b=(N,), c=(N,), x0=(N,), v=(NV, 2), w=(NV, 2), M=(2, 2), s=(), loss=(),
              xs=(SEGMENT + 1, N), src=(N,))
SIZES = {p: int(np.prod(SHAPES[p])) for p in SHAPES}
P_SLICES = {}
_k = 0
for _p in PARAMS:
    P_SLICES[_p] = slice(_k, _k + SIZES[_p])
    _k += SIZES[_p]
P_SIZE = _k


# ---------------------------------------------------------------------------------------
# Sequences

@dataclass
class Sequence:
    seed: int
    driver: str
    ops: list
    params: dict
    state: dict
    fwd_param: str = 'a'
    fwd_seed: np.ndarray = None
    extra: dict = dc_field(default_factory=dict)
    elements: set = dc_field(default_factory=set)     # element names used (coverage)
    gated: set = dc_field(default_factory=set)        # KNOWN_OPEN names that removed something

    def describe(self):
        lines = [f'seed {self.seed}: driver {self.driver}, fwd param {self.fwd_param}, '
                 f'extra {self.extra}']
        lines += [f'  {op!r}' for op in self.ops]
        return '\n'.join(lines)

    def has_python_writes(self):
        return any(op[0] in WRITE_KINDS for op in self.ops)


WRITE_KINDS = ('w_elem', 'w_comp', 'fill', 'from_numpy', 'copy_from')


def _rand_value(rng):
    return round(rng.uniform(-1.2, 1.2), 3)


def _rand_array(rng, shape):
    # 6 decimals: ties between entries (kinks of max / min) stay rare
    return np.round(np.array([rng.uniform(-1.2, 1.2) for _ in range(int(np.prod(shape)))]), 6
                    ).reshape(shape)


def _start_state(rng):
    params = {p: _rand_array(rng, SHAPES[p]) for p in PARAMS}
    state = {n: _rand_array(rng, SHAPES[n]) * 0.5 for n in ('b', 'c', 'w', 'xs', 'src')}
    state['s'] = np.array(_rand_value(rng) * 0.5)
    state['loss'] = np.array(0.0)
    return params, state


class _Builder:
    """Draws ops, tracking what the gates and the drivers need to know."""

    def __init__(self, rng, seq, taped, fwd, allow_writes_to_params=True, rollout=True,
                 allow_capture=True, allow_ret=True, allow_clear=True, allow_nd=True,
                 refusals=False):
        self.rng, self.seq = rng, seq
        self.taped, self.fwd = taped, fwd
        self.touched = set()          # fields a launch has read or written
        self.written_by_kernel = set()     # fields whose values depend on launches
        self.regs = 0
        self.allow_writes_to_params = allow_writes_to_params
        self.rollout = rollout
        self.allow_capture, self.allow_ret = allow_capture, allow_ret
        self.allow_clear, self.allow_nd = allow_clear, allow_nd
        self.refusals = refusals
        self.ops = seq.ops

    def gate(self, name):
        """True when element `name` is open (known bug): the caller leaves it out."""
        if is_open(name):
            self.seq.gated.add(name)
            return True
        return False

    def _launch_names(self):
        names = ['k_ab', 'k_w', 'k_c', 'k_max', 'k_func', 'k_s', 'k_loss']
        if self.rollout:
            names += ['k_x0', 'k_adv', 'k_xloss']
        return names

    def _args(self, name, zero_sign=True):
        rng = self.rng
        if name in ('k_ab', 'k_c', 'k_s'):
            scale = rng.choice(SCALES)
            return (scale,)
        if name == 'k_adv':
            slot = rng.randrange(SEGMENT)
            return (slot, rng.randrange(5))
        if name == 'k_xloss':
            return (rng.randrange(SEGMENT + 1),)
        return ()

    def _note_launch(self, name):
        self.touched |= _READS[name] | _WRITES[name]
        self.written_by_kernel |= _WRITES[name]

    def launch(self):
        name = self.rng.choice(self._launch_names())
        self.ops.append(('k', name, self._args(name)))
        self.seq.elements.add('launch')
        self._note_launch(name)

    def ret(self):
        """A return value, maybe passed on to a later kernel."""
        j = self.regs
        self.regs += 1
        self.ops.append(('ret', 'k_sum', j))
        self._note_launch('k_sum')
        self.seq.elements.add('return_value')
        r = self.rng.random()
        if r < 0.7:
            name = self.rng.choice(['k_s', 'k_ab', 'k_c'])
            if r < 0.2 and self.refusals:
                # the value itself: the tape / forward mode must refuse it (its gradient
                # would be lost); the sequence then checks the refusal only
                if self.gate('return_value_arg'):
                    self.ops.append(('k', name, (('rc', j),)))
                else:
                    self.ops.append(('k', name, (('r', j),)))
                    self.seq.extra['refused'] = True
                    self.seq.elements.add('return_value_arg_refused')
            else:               # float(value): a constant to the tape
                self.ops.append(('k', name, (('rc', j),)))
                self.seq.elements.add('return_value_float_arg')
            self._note_launch(name)

    def capture(self):
        rng = self.rng
        names = tuple(rng.choice(['k_ab', 'k_w', 'k_c', 'k_s', 'k_loss', 'k_max'])
                      for _ in range(rng.randint(1, 3)))
        launches = []
        for n in names:
            args = self._args(n)
            if args and args[0] == 0.0 and self.gate('capture_signed_zero'):
                args = (0.0,) + args[1:]
            launches.append((n, args))
        # the same group again, maybe with the other zero: a replay of the first call
        self.ops.append(('cap', tuple(launches)))
        for n in names:
            self._note_launch(n)
        self.seq.elements.add('capture')
        if rng.random() < 0.5:
            flipped = tuple((n, tuple(-x if isinstance(x, float) and x == 0.0 and
                                      not is_open('capture_signed_zero') else x for x in la))
                            for n, la in launches)
            self.ops.append(('cap', flipped))
            if flipped != launches:
                self.seq.elements.add('capture_signed_zero')

    def nd(self):
        """k_nd with a torch tensor (one launch per sequence: its values are set before the
        sequence; captured, it is replayed across the runs of the sequence and of other
        sequences with other values) or a ti.ndarray written from Python."""
        rng = self.rng
        variant = rng.choice(['f64', 'set_', 'f32', 'fresh', 'ndarray'])
        captured = variant != 'ndarray' and rng.random() < 0.7
        if variant != 'ndarray' and any(op[0] == 'nd' and op[1] != 'ndarray' for op in self.ops):
            variant = 'ndarray'
        if variant == 'set_' and captured and self.gate('capture_torch_storage'):
            variant = 'f64'
        values = tuple(round(rng.uniform(-1, 1), 3) for _ in range(N))
        self.ops.append(('nd', variant, values, captured))
        self._note_launch('k_nd')
        self.seq.elements.add('ndarray_arg' if variant == 'ndarray' else
                              'capture_torch_' + variant if captured else 'torch_arg')

    def python_write(self):
        rng = self.rng
        targets = ['b', 'c', 'w', 's'] + (list(PARAMS) if self.allow_writes_to_params else [])
        if self.rollout:
            targets.append('xs')
        name = rng.choice(targets)
        kind = rng.choice(['w_elem', 'w_elem', 'w_comp', 'fill', 'from_numpy', 'copy_from'])
        shape = SHAPES[name]
        if kind == 'copy_from' and name not in ('a', 'b', 'c', 'x0'):
            kind = 'fill'
        if kind == 'w_comp' and name not in ('v', 'w', 'M'):
            kind = 'w_elem'
        if kind == 'w_comp' and self.taped and name in self.touched and self.gate('component_write_mid_tape'):
            kind = 'w_elem'
        if kind == 'w_elem':
            if name in ('v', 'w'):
                op = ('w_elem', name, rng.randrange(NV), [_rand_value(rng), _rand_value(rng)])
            elif name == 'M':
                op = ('w_elem', name, None, [[_rand_value(rng), _rand_value(rng)],
                                             [_rand_value(rng), _rand_value(rng)]])
            elif name == 's':
                op = ('w_elem', name, None, _rand_value(rng))
            elif name == 'xs':
                op = ('w_elem', name, (rng.randrange(SEGMENT + 1), rng.randrange(N)), _rand_value(rng))
            else:
                op = ('w_elem', name, rng.randrange(N), _rand_value(rng))
        elif kind == 'w_comp':
            if name == 'M':
                op = ('w_comp', name, None, (rng.randrange(2), rng.randrange(2)), _rand_value(rng))
            else:
                op = ('w_comp', name, rng.randrange(NV), rng.randrange(2), _rand_value(rng))
        elif kind == 'fill':
            op = ('fill', name, _rand_value(rng))
        elif kind == 'from_numpy':
            op = ('from_numpy', name, _rand_array(rng, shape).tolist())
        else:
            op = ('copy_from', name, 'src')
        self.ops.append(op)
        self.seq.elements.add(kind)
        if self.taped and name in self.touched:
            self.seq.elements.add(kind + '_mid_tape')

    def clear(self):
        kind = self.rng.choice(['clear_all', 'loss_grad_fill0'])
        if self.taped and self.gate('clear_in_tape'):
            return
        self.ops.append((kind,))
        self.seq.elements.add(kind + ('_in_tape' if self.taped else ''))

    def body(self, n):
        rng = self.rng
        for _ in range(n):
            r = rng.random()
            if r < 0.45:
                self.launch()
            elif r < 0.62:
                self.python_write()
            elif r < 0.70 and self.allow_ret:
                self.ret()
            elif r < 0.80 and self.allow_capture:
                self.capture()
            elif r < 0.87 and self.allow_nd:
                self.nd()
            elif r < 0.93 and self.allow_clear:
                self.clear()
            else:
                self.launch()
        # the loss: at least one loss kernel at the end
        if 'xs' in self.touched and self.rollout and rng.random() < 0.6:
            self.ops.append(('k', 'k_xloss', (rng.randrange(SEGMENT + 1),)))
        self.ops.append(('k', 'k_loss', ()))


def generate(seed):
    """The sequence of this seed (deterministic)."""
    rng = random.Random(seed)
    driver = rng.choices([d for d, _ in DRIVERS], weights=[w for _, w in DRIVERS])[0]
    params, state = _start_state(rng)
    seq = Sequence(seed=seed, driver=driver, ops=[], params=params, state=state)
    seq.fwd_param = rng.choice(PARAMS)
    seq.fwd_seed = _rand_array(rng, SHAPES[seq.fwd_param]) + 0.1
    n = rng.randint(1, 8)
    if driver == 'tape_fwd':
        _Builder(rng, seq, taped=True, fwd=False, refusals=True).body(n)
        if seq.has_python_writes() and is_open('fwd_python_write'):
            seq.gated.add('fwd_python_write')
            seq.extra['fwd'] = False
        else:
            seq.extra['fwd'] = True
    elif driver == 'manual':
        _manual(rng, seq, n)
    elif driver == 'checkpoint':
        b = _Builder(rng, seq, taped=True, fwd=False, allow_writes_to_params=False, rollout=False,
                     allow_capture=False)
        b.body(rng.randint(0, 4))
        seq.extra['n_steps'] = rng.randint(1, 7)
    elif driver in ('hvp', 'hessian'):
        writes = not is_open('fwd_python_write')
        b = _Builder(rng, seq, taped=True, fwd=True, allow_writes_to_params=writes,
                     allow_clear=False)
        if not writes:
            seq.gated.add('fwd_python_write')
            b.python_write = b.launch
        b.body(n if driver == 'hvp' else min(n, 4))
        seq.extra['param'] = rng.choice(['a', 'M', 'x0'] + (['v'] if driver == 'hvp' else []))
    elif driver == 'jacobian':
        mode = rng.choice(['forward', 'reverse', 'value_and_grad'])
        fwd = mode == 'forward'
        b = _Builder(rng, seq, taped=not fwd, fwd=fwd, allow_clear=False)
        if fwd and is_open('fwd_python_write'):
            seq.gated.add('fwd_python_write')
            b.python_write = b.launch
        b.body(n)
        seq.extra['mode'] = mode
    elif driver == 'torch':
        b = _Builder(rng, seq, taped=True, fwd=False, allow_clear=False)
        _interop_gate(b)
        b.body(n)
        seq.extra['forward_ad'] = True
        if seq.has_python_writes() and is_open('fwd_python_write'):
            seq.gated.add('fwd_python_write')
            seq.extra['forward_ad'] = False
        seq.extra['fwd_first'] = rng.random() < 0.5
        if seq.extra['forward_ad'] and _state_read_then_written(seq) and \
                is_open('torch_forward_ad_state_war'):
            seq.gated.add('torch_forward_ad_state_war')
            seq.extra['forward_ad'] = False
    elif driver == 'jax':
        b = _Builder(rng, seq, taped=True, fwd=False, allow_clear=False, allow_nd=False)
        _interop_gate(b)
        b.body(min(n, 5))
    seq.elements.add('driver_' + driver)
    return seq


def _interop_gate(builder):
    """interop_input_overwritten: Python writes to P only after a launch used the field."""
    if not is_open('interop_input_overwritten'):
        return
    write = builder.python_write

    def python_write():
        ops = builder.ops
        n = len(ops)
        write()
        op = ops[-1]
        if len(ops) > n and op[1] in PARAMS and op[1] not in builder.touched:
            ops.pop()
            builder.seq.gated.add('interop_input_overwritten')
            builder.launch()
    builder.python_write = python_write


def _state_read_then_written(seq):
    """Whether the sequence writes a state field (not P, not loss) that it read before (or
    reads and writes it in one launch: an accumulation)."""
    read = set()
    for op in seq.ops:
        if op[0] in ('k', 'ret'):
            launches = [op[1]]
        elif op[0] == 'cap':
            launches = [n for n, _ in op[1]]
        elif op[0] == 'nd':
            launches = ['k_nd']
        else:
            if op[0] in WRITE_KINDS and op[1] in read:
                return True
            continue
        for name in launches:
            if _WRITES[name] & (read | _READS[name]) - {'loss'}:
                return True
            read |= _READS[name] - set(PARAMS)
    return False


def _manual(rng, seq, n):
    """Launches with no write after read across them (kernel.grad recomputes from the
    fields as they are), Python writes only before the first launch."""
    if rng.random() < 0.4:
        b = _Builder(rng, seq, taped=True, fwd=False, rollout=False)
        for _ in range(rng.randint(1, 2)):
            b.python_write()
    read = set()
    names = ['k_ab', 'k_w', 'k_c', 'k_max', 'k_func', 'k_s', 'k_x0', 'k_adv', 'k_xloss', 'k_loss']
    for _ in range(n):
        name = rng.choice(names)
        if _WRITES[name] & read and name != 'k_loss' and name != 'k_xloss':
            continue
        if name in ('k_loss', 'k_xloss') and 'loss' in read - {'loss'}:
            continue
        args = _Builder(rng, seq, True, False)._args(name)
        if name == 'k_adv':
            args = (0, args[1])
        if name == 'k_xloss':
            args = (rng.choice([0, 1]),)
        seq.ops.append(('k', name, args))
        read |= _READS[name] - {'loss'}
    if 'c' not in read or True:
        seq.ops.append(('k', 'k_loss', ()))
    seq.elements.add('kernel_grad')


# ---------------------------------------------------------------------------------------
# Checking

class Mismatch(AssertionError):
    pass


@dataclass
class Stats:
    sequences: int = 0
    checks: int = 0
    unstable: int = 0
    by_driver: dict = dc_field(default_factory=dict)
    elements: dict = dc_field(default_factory=dict)
    gated: dict = dc_field(default_factory=dict)

    def add(self, seq):
        self.sequences += 1
        self.by_driver[seq.driver] = self.by_driver.get(seq.driver, 0) + 1
        for e in seq.elements:
            self.elements[e] = self.elements.get(e, 0) + 1
        for g in seq.gated:
            self.gated[g] = self.gated.get(g, 0) + 1

    def summary(self):
        return (f'{self.sequences} sequences, {self.checks} derivative checks, {self.unstable} '
                f'skipped as non-smooth; drivers {dict(sorted(self.by_driver.items()))}; '
                f'gated (KNOWN_OPEN) {dict(sorted(self.gated.items()))}')


RTOL_FD, ATOL_FD = 2e-6, 1e-7
RTOL_EXACT = 1e-9
STEPS = (1e-5, 1e-6)


def _close(x, y, rtol, atol, scale=0.0):
    return abs(x - y) <= atol + rtol * max(abs(x), abs(y), scale)


class Checker:
    """Runs one sequence through its driver and compares (raises Mismatch)."""

    def __init__(self, world, stats=None):
        self.world = world
        self.ti = world.ti
        self.stats = stats or Stats()

    # --- plain evaluation -------------------------------------------------------------
    def load(self, seq, delta=None, at_writes=True):
        """Reset the world to the sequence's start, P moved by delta (a P-vector; an entry
        set as an input by a Python write is moved at that write: see input_points).
        Returns run_ops' perturb_at; registers passed as float(value) keep the values of
        the unperturbed run."""
        W = self.world
        if delta is None:
            W.frozen = None
            W.reset(seq)
            return None
        params = {p: seq.params[p] + delta[P_SLICES[p]].reshape(SHAPES[p]) for p in PARAMS}
        perturb_at = {}
        for (p, k), i in input_points(seq).items():
            if i >= 0 and at_writes:
                params[p].reshape(-1)[k] = seq.params[p].reshape(-1)[k]
                perturb_at.setdefault(i, []).append((p, k, delta[P_SLICES[p]][k]))
        if any(a[0] == 'rc' for op in seq.ops if op[0] == 'k' for a in op[2] if isinstance(a, tuple)):
            W.frozen = None
            W.reset(seq)
            W.frozen = dict(enumerate(W.run_ops(seq.ops, plain=True)))
        W.reset(seq, params)
        return perturb_at

    def plain(self, seq, delta=None, at_writes=True):
        """The loss of the sequence run plain (no tape, no capture), P moved by delta."""
        W = self.world
        perturb_at = self.load(seq, delta, at_writes)
        try:
            rets = W.run_ops(seq.ops, plain=True, perturb_at=perturb_at)
        finally:
            W.frozen = None
        return float(W.loss[None]), rets

    def fd(self, seq, direction, fn=None, at_writes=True):
        """Central differences along direction, two steps; None when they disagree.
        at_writes=False: the inputs are the start values only (interop: tensor inputs)."""
        fn = fn or (lambda d: self.plain(seq, d, at_writes)[0])
        scale = 1.0 / max(np.abs(direction).max(), 1e-12)
        ests = []
        for h in STEPS:
            h = h * scale
            ests.append((np.asarray(fn(h * direction)) - np.asarray(fn(-h * direction))) / (2 * h))
        a, b = ests
        # a one-sided difference too: a central difference straddling a kink exactly (a tie
        # in max/min) is stable across step sizes but gives the mean of the two slopes
        h = STEPS[1] * scale
        one_sided = (np.asarray(fn(h * direction)) - np.asarray(fn(0 * direction))) / h
        if not np.allclose(a, b, rtol=1e-4, atol=1e-6) or \
                not np.allclose(one_sided, b, rtol=1e-3, atol=1e-4):
            self.stats.unstable += 1
            return None
        return b

    def compare_fd(self, what, seq, got, expected, scale=0.0):
        self.stats.checks += 1
        got, expected = np.atleast_1d(got), np.atleast_1d(expected)
        scale = max(scale, float(np.abs(expected).max(initial=0)))
        for g, e in zip(got.ravel(), expected.ravel()):
            if not _close(g, e, RTOL_FD, ATOL_FD, scale * 1e-2):
                raise Mismatch(f'{what}: got {got}, finite differences {expected}\n{seq.describe()}')

    def compare_exact(self, what, seq, got, expected):
        self.stats.checks += 1
        got, expected = np.atleast_1d(got), np.atleast_1d(expected)
        scale = float(np.abs(expected).max(initial=0))
        for g, e in zip(got.ravel(), expected.ravel()):
            if not _close(g, e, RTOL_EXACT, 1e-11, scale):
                raise Mismatch(f'{what}: got {got}, expected {expected}\n{seq.describe()}')

    def compare_value(self, seq, value, rets, reference):
        self.compare_exact('loss value', seq, value, reference[0])
        if rets is not None and reference[1]:
            self.compare_exact('return values', seq, rets, reference[1])

    def directions(self, seq, rng):
        dense = np.array([rng.gauss(0, 1) for _ in range(P_SIZE)])
        one = np.zeros(P_SIZE)
        one[rng.randrange(P_SIZE)] = 1.0
        return [dense, one]

    def fwd_direction(self, seq):
        d = np.zeros(P_SIZE)
        d[P_SLICES[seq.fwd_param]] = seq.fwd_seed.reshape(-1)
        return d

    # --- drivers ----------------------------------------------------------------------
    def check(self, seq):
        self.stats.add(seq)
        getattr(self, 'drive_' + seq.driver)(seq)

    def tape_gradient(self, seq):
        ti, W = self.ti, self.world
        W.reset(seq)
        with ti.ad.Tape(W.loss):
            rets = W.run_ops(seq.ops)
        return float(W.loss[None]), rets, W.grad_vector()

    def expect_refusal(self, seq, what, run):
        self.stats.checks += 1
        try:
            run()
        except self.ti.ad.AutodiffError as exc:
            if 'returned inside' not in str(exc):
                raise
            return
        raise Mismatch(f'{what}: a kernel return value passed to a later kernel was not '
                       f'refused\n{seq.describe()}')

    def drive_tape_fwd(self, seq):
        ti, W = self.ti, self.world
        rng = random.Random(seq.seed + 1)
        reference = self.plain(seq)
        if seq.extra.get('refused'):
            self.expect_refusal(seq, 'Tape', lambda: self.tape_gradient(seq))
            if seq.extra.get('fwd'):
                def fwd():
                    W.reset(seq)
                    with ti.ad.FwdMode(loss=W.loss, param=W.fields[seq.fwd_param],
                                       seed=seq.fwd_seed.reshape(-1)):
                        W.run_ops(seq.ops)
                self.expect_refusal(seq, 'FwdMode', fwd)
            return
        value, rets, g = self.tape_gradient(seq)
        self.compare_value(seq, value, rets, reference)
        dirs = self.directions(seq, rng) + [self.fwd_direction(seq)]
        for d in dirs:
            est = self.fd(seq, d)
            if est is not None:
                self.compare_fd('Tape gradient . d', seq, g @ d, est, np.abs(g).sum() * np.abs(d).max())
        if not seq.extra.get('fwd'):
            return
        W.reset(seq)
        with ti.ad.FwdMode(loss=W.loss, param=W.fields[seq.fwd_param], seed=seq.fwd_seed.reshape(-1)):
            rets = W.run_ops(seq.ops)
        self.compare_value(seq, float(W.loss[None]), rets, reference)
        tangent = float(W.loss.dual[None])
        d = self.fwd_direction(seq)
        est = self.fd(seq, d)
        if est is not None:
            self.compare_fd('FwdMode tangent', seq, tangent, est)
        # both define an entry written from Python before any launch used it as an input
        self.compare_exact('dot test: FwdMode tangent vs Tape gradient . seed', seq, tangent, g @ d)

    def drive_manual(self, seq):
        ti, W = self.ti, self.world
        reference = self.plain(seq)
        W.reset(seq)
        W.run_ops(seq.ops)
        self.compare_value(seq, float(W.loss[None]), None, reference)
        ti.ad.clear_all_gradients()
        W.loss.grad[None] = 1.0
        for op in reversed(seq.ops):
            if op[0] == 'k':
                W.kernels[op[1]].grad(*op[2])
        g = W.grad_vector()
        rng = random.Random(seq.seed + 1)
        for d in self.directions(seq, rng):
            est = self.fd(seq, d)
            if est is not None:
                self.compare_fd('kernel.grad gradient . d', seq, g @ d, est, np.abs(g).sum() * np.abs(d).max())

    def drive_checkpoint(self, seq):
        from sims.checkpointing import CheckpointedRollout
        ti, W = self.ti, self.world
        n_steps = seq.extra['n_steps']
        K = W.kernels
        rollout = CheckpointedRollout([W.fields['xs']], K['k_adv'], n_steps, SEGMENT)

        def final_slot():
            return (n_steps - 1) % SEGMENT + 1

        frozen = {}

        def plain(delta=None):
            params = seq.params if delta is None else \
                {p: seq.params[p] + delta[P_SLICES[p]].reshape(SHAPES[p]) for p in PARAMS}
            W.reset(seq, params)
            K['k_x0']()
            rollout.forward()
            W.frozen = frozen if delta is not None else None
            try:
                rets = W.run_ops(seq.ops, plain=True)
                if delta is None:
                    frozen.update(enumerate(rets))
            finally:
                W.frozen = None
            K['k_xloss'](final_slot())
            return float(W.loss[None])
        reference = plain()
        W.reset(seq)
        ti.ad.clear_all_gradients()
        K['k_x0']()
        final = rollout.forward()
        assert final == final_slot()
        with ti.ad.Tape(W.loss, clear_gradients=False):
            W.run_ops(seq.ops)
            K['k_xloss'](final)
        self.compare_exact('checkpointed loss value', seq, float(W.loss[None]), reference)
        rollout.backward()
        K['k_x0'].grad()
        g = W.grad_vector()
        rng = random.Random(seq.seed + 1)
        for d in self.directions(seq, rng):
            est = self.fd(seq, d, fn=plain)
            if est is not None:
                self.compare_fd('checkpointed gradient . d', seq, g @ d, est, np.abs(g).sum() * np.abs(d).max())

    def _grad_fn(self, seq):
        """P-vector -> tape gradient (for finite differences of gradients)."""
        def grad_at(delta):
            ti, W = self.ti, self.world
            perturb_at = self.load(seq, delta)
            try:
                with ti.ad.Tape(W.loss):
                    W.run_ops(seq.ops, perturb_at=perturb_at)
            finally:
                W.frozen = None
            return W.grad_vector()
        return grad_at

    def drive_hvp(self, seq):
        ti, W = self.ti, self.world
        p = seq.extra['param']
        field = W.fields[p]
        rng = random.Random(seq.seed + 1)
        u = np.array([rng.gauss(0, 1) for _ in range(SIZES[p])])
        z = np.array([rng.gauss(0, 1) for _ in range(SIZES[p])])
        reference = self.plain(seq)

        def hvp(vec):
            W.reset(seq)
            out = ti.ad.hvp(lambda: W.run_ops(seq.ops), W.loss, field, vec.reshape(field.data.shape))
            self.compare_value(seq, float(W.loss[None]), None, reference)
            return out.reshape(-1)
        Hu, Hz = hvp(u), hvp(z)
        self.compare_exact('hvp symmetry <Hu, z> vs <u, Hz>', seq, Hu @ z, u @ Hz)
        d = np.zeros(P_SIZE)
        d[P_SLICES[p]] = u
        est = self.fd(seq, d, fn=self._grad_fn(seq))
        if est is not None:
            self.compare_fd('hvp vs finite differences of the gradient', seq, Hu, est[P_SLICES[p]])

    def drive_hessian(self, seq):
        ti, W = self.ti, self.world
        p = seq.extra['param']
        W.reset(seq)
        H = ti.ad.hessian(lambda: W.run_ops(seq.ops), W.loss, W.fields[p])
        self.compare_exact('Hessian symmetry', seq, H, H.T)
        j = random.Random(seq.seed + 1).randrange(SIZES[p])
        d = np.zeros(P_SIZE)
        d[P_SLICES[p].start + j] = 1.0
        est = self.fd(seq, d, fn=self._grad_fn(seq))
        if est is not None:
            self.compare_fd(f'Hessian column {j} vs finite differences of the gradient', seq,
                            H[:, j], est[P_SLICES[p]])

    def drive_jacobian(self, seq):
        ti, W = self.ti, self.world
        mode = seq.extra['mode']
        inputs = [W.fields[p] for p in PARAMS]
        rng = random.Random(seq.seed + 1)
        if mode == 'value_and_grad':
            W.reset(seq)
            fn = ti.ad.value_and_grad(lambda: W.run_ops(seq.ops), inputs=inputs, output=W.loss)
            value, grads = fn()
            self.compare_value(seq, value, None, self.plain(seq))
            g = np.concatenate([np.asarray(x).reshape(-1) for x in grads])
        else:
            W.reset(seq)
            J = ti.ad.jacobian(lambda: W.run_ops(seq.ops), inputs, [W.loss], mode=mode)
            g = J[0]
        for d in self.directions(seq, rng):
            est = self.fd(seq, d)
            if est is not None:
                self.compare_fd(f'jacobian ({mode}) . d', seq, g @ d, est, np.abs(g).sum() * np.abs(d).max())

    def drive_torch(self, seq):
        W = self.world
        torch = W.torch
        if torch is None:
            return
        import engine.torch as ti_torch
        import torch.autograd.forward_ad as fwad
        reference = self.plain(seq)
        inputs = [W.fields[p] for p in PARAMS]
        fn = ti_torch.function(lambda: W.run_ops(seq.ops), inputs=inputs, outputs=[W.loss],
                               name=f'sequence {seq.seed}')
        rng = random.Random(seq.seed + 1)
        dirs = self.directions(seq, rng)
        d_fwd = np.array([rng.gauss(0, 1) for _ in range(P_SIZE)])

        def reverse():
            tensors = [torch.tensor(seq.params[p], dtype=torch.float64, requires_grad=True)
                       for p in PARAMS]
            W.reset(seq)
            value = fn(*tensors)
            self.compare_value(seq, value.item(), None, reference)
            value.backward()
            return np.concatenate([t.grad.numpy().reshape(-1) for t in tensors])

        def forward():
            W.reset(seq)
            with fwad.dual_level():
                duals = [fwad.make_dual(torch.tensor(seq.params[p], dtype=torch.float64),
                                        torch.tensor(d_fwd[P_SLICES[p]].reshape(SHAPES[p])))
                         for p in PARAMS]
                primal, tangent = fwad.unpack_dual(fn(*duals))
            self.compare_value(seq, primal.item(), None, reference)
            return tangent.item()
        forward_ad = seq.extra.get('forward_ad')
        tangent = None
        if forward_ad and seq.extra.get('fwd_first'):
            tangent = forward()
        g = reverse()
        if forward_ad and tangent is None:
            tangent = forward()
        for d in dirs:
            est = self.fd(seq, d, at_writes=False)
            if est is not None:
                self.compare_fd('torch gradient . d', seq, g @ d, est, np.abs(g).sum() * np.abs(d).max())
        if not forward_ad:
            return
        est = self.fd(seq, d_fwd, at_writes=False)
        if est is not None:
            self.compare_fd('torch forward AD tangent', seq, tangent, est)
        self.compare_exact('dot test: torch forward AD vs backward', seq, tangent, g @ d_fwd)

    def drive_jax(self, seq):
        W = self.world
        jax = W.jax
        if jax is None:
            return
        import jax.numpy as jnp
        import engine.jax as ti_jax
        reference = self.plain(seq)
        inputs = [W.fields[p] for p in PARAMS]
        fn = ti_jax.function(lambda: W.run_ops(seq.ops), inputs=inputs, outputs=[W.loss],
                             name=f'sequence {seq.seed}')
        args = [jnp.asarray(seq.params[p]) for p in PARAMS]
        W.reset(seq)
        value, grads = jax.value_and_grad(fn, argnums=tuple(range(len(PARAMS))))(*args)
        self.compare_value(seq, float(value), None, reference)
        g = np.concatenate([np.asarray(x).reshape(-1) for x in grads])
        rng = random.Random(seq.seed + 1)
        for d in self.directions(seq, rng):
            est = self.fd(seq, d, at_writes=False)
            if est is not None:
                self.compare_fd('jax gradient . d', seq, g @ d, est, np.abs(g).sum() * np.abs(d).max())


def input_points(seq):
    """For each P entry (field, flat index): the index of the op that sets it as an input on
    a tape (a Python write before any launch touched the field), or -1 (the start)."""
    points = {(p, k): -1 for p in PARAMS for k in range(SIZES[p])}
    touched = set()
    for i, op in enumerate(seq.ops):
        kind = op[0]
        if kind == 'k' or kind == 'ret':
            touched |= _READS[op[1]] | _WRITES[op[1]]
        elif kind == 'cap':
            for n, _ in op[1]:
                touched |= _READS[n] | _WRITES[n]
        elif kind == 'nd':
            touched |= _READS['k_nd'] | _WRITES['k_nd']
        elif kind in WRITE_KINDS and op[1] in PARAMS and op[1] not in touched:
            for k in written_entries(op):
                points[(op[1], k)] = i
    return points


def written_entries(op):
    kind, name = op[0], op[1]
    size = SIZES[name]
    if kind in ('fill', 'from_numpy', 'copy_from'):
        return range(size)
    if kind == 'w_elem':
        if name in ('v', 'w'):
            return [2 * op[2], 2 * op[2] + 1]
        if name == 'M':
            return range(4)
        return [op[2]]
    if kind == 'w_comp':
        if name == 'M':
            r, k = op[3]
            return [2 * r + k]
        return [2 * op[2] + op[3]]
    return []


def run_seeds(world, seeds, stats=None, on_failure=None):
    """Check the sequences of `seeds`; returns (stats, failures [(seed, message)])."""
    checker = Checker(world, stats)
    failures = []
    for seed in seeds:
        seq = generate(seed)
        try:
            checker.check(seq)
        except Exception as exc:        # noqa: BLE001 - every failure is reported with its seed
            msg = f'{type(exc).__name__}: {exc}'
            if not isinstance(exc, Mismatch):
                msg += '\n' + seq.describe()
            failures.append((seed, msg))
            if on_failure:
                on_failure(seed, msg)
    return checker.stats, failures


def make_world(threads=None, **init):
    import engine as ti
    opts = dict(default_fp=ti.f64, ad_validation=True)
    if threads:
        opts['cpu_max_num_threads'] = threads
    opts.update(init)
    ti.init(**opts)
    return World(ti)
