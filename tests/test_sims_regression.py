"""Regression pins: every simulator's --quick losses over a short run, seed 0.

The run trains part of the way on 2 threads, then resumes from its checkpoint on 1 thread
in a fresh simulator: the losses must equal, bit for bit, those of the uninterrupted
1-thread run that `python scripts/pin_losses.py` pinned in tests/sim_losses.json. A change
of physics shows here, and so would a result that depends on the number of threads;
re-pin deliberately with that script. On another CPU or LLVM than the ones that pinned
them the compiled code may round differently, so there they are compared to 1e-6 (the
file records the hosts).
"""
import pytest

import sims
from scripts import pin_losses

PINS = pin_losses.load_pins()


def test_every_simulator_is_pinned():
    assert sorted(PINS['losses']) == sims.names() and PINS['iters'] == pin_losses.ITERS


@pytest.mark.parametrize('name', sims.names())
def test_quick_losses_after_a_resume_equal_the_pinned_run(name, tmp_path, monkeypatch):
    monkeypatch.delenv('ENGINE_AD_VALIDATION', raising=False)    # as users run: the sim tests check the rules
    pin = PINS['losses'][name]
    got = pin_losses.losses(name, str(tmp_path / name), stop_at=pin_losses.ITERS - 1)
    here = pin_losses.host()
    exact = pin['losses'] if pin['host'] == here else PINS.get('other_hosts', {}).get(here, {}).get(name)
    if exact is not None:
        assert got == exact, f'{name}: the losses changed (re-pin with scripts/pin_losses.py if intended)'
    else:
        assert got == pytest.approx(pin['losses'], rel=1e-6), f'{name}: the losses changed'
