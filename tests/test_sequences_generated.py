"""Generated FEATURE SEQUENCES (tests/sequence_grammar.py): random sequences of API calls
(launches, kernel return values, Python-scope writes, clear_all_gradients, ti.capture
replays, tensor arguments) under a derivative driver (Tape + FwdMode, kernel.grad,
checkpointing, hvp, hessian, jacobian / value_and_grad, engine.torch, engine.jax), each
checked against float64 central finite differences of the whole sequence and, where both
modes exist, forward against reverse mode.

One ti.init for the module: every sequence shares the same dozen compiled kernels, so the
run costs little more than the launches. Elements that hit a known open bug are left out
while their name is in sequence_grammar.KNOWN_OPEN. More sequences:
`python scripts/fuzz_sequences.py --count 5000`; one seed alone:
`python scripts/fuzz_sequences.py --seed S --count 1 --verbose`.

SEQUENCE_COUNT=K (default 400) and SEQUENCE_SEED=S (first seed, default 0) change the run.
"""
import os
import sys
import time
import warnings

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import sequence_grammar as sg      # noqa: E402

COUNT = int(os.environ.get('SEQUENCE_COUNT', 400))
FIRST = int(os.environ.get('SEQUENCE_SEED', 0))


@pytest.fixture(scope='module')
def world():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        yield sg.make_world()


def test_generator_is_deterministic():
    for seed in (0, 1, 17, 123456):
        a, b = sg.generate(seed), sg.generate(seed)
        assert a.describe() == b.describe() and a.gated == b.gated


def test_generator_covers_every_element():
    seen = set()
    for seed in range(FIRST, FIRST + COUNT):
        seen |= sg.generate(seed).elements
    wanted = {'launch', 'return_value', 'return_value_float_arg', 'return_value_arg_refused',
              'w_elem', 'w_elem_mid_tape', 'w_comp', 'w_comp_mid_tape', 'fill', 'fill_mid_tape',
              'from_numpy', 'from_numpy_mid_tape', 'copy_from', 'clear_all_in_tape',
              'loss_grad_fill0_in_tape', 'capture', 'capture_signed_zero', 'capture_torch_f64',
              'capture_torch_set_', 'capture_torch_fresh', 'capture_torch_f32', 'torch_arg',
              'ndarray_arg', 'kernel_grad'} | {'driver_' + d for d, _ in sg.DRIVERS}
    for name in sg.KNOWN_OPEN:      # elements a known open bug leaves out
        wanted -= {'return_value_arg_refused'} if name == 'return_value_arg' else set()
        wanted -= {'clear_all_in_tape', 'loss_grad_fill0_in_tape'} if name == 'clear_in_tape' else set()
        wanted -= {'w_comp_mid_tape'} if name == 'component_write_mid_tape' else set()
        wanted -= {'capture_torch_set_'} if name == 'capture_torch_storage' else set()
        wanted -= {'capture_signed_zero'} if name == 'capture_signed_zero' else set()
    assert not wanted - seen, f'never generated: {sorted(wanted - seen)}'


def test_generated_sequences(world):
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        stats, failures = sg.run_seeds(world, range(FIRST, FIRST + COUNT))
    print(f'\n{stats.summary()} in {time.perf_counter() - started:.1f} s')
    assert stats.sequences == COUNT
    assert stats.unstable <= stats.checks // 20, 'finite differences too often unstable'
    if failures:
        report = '\n\n'.join(f'seed {seed}: {message}' for seed, message in failures[:5])
        pytest.fail(f'{len(failures)} of {COUNT} sequences failed (rerun one with '
                    f'scripts/fuzz_sequences.py --seed S --count 1 --verbose):\n{report}')
