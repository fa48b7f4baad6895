"""Regression pins: every simulator's --quick losses over a short run, seed 0, one thread.

The run trains part of the way, then resumes from its checkpoint in a fresh simulator:
the losses must equal, bit for bit, those of the uninterrupted run that
`python scripts/pin_losses.py` pinned in tests/sim_losses.json. A change of physics
shows here; re-pin deliberately with that script. On another CPU or LLVM than the one
that pinned them the compiled code may round differently, so there they are compared to
1e-6 (the file records the host).
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
    if pin['host'] == pin_losses.host():
        assert got == pin['losses'], f'{name}: the losses changed (re-pin with scripts/pin_losses.py if intended)'
    else:
        assert got == pytest.approx(pin['losses'], rel=1e-6), f'{name}: the losses changed'
