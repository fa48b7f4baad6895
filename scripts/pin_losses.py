"""Re-pin the regression losses of tests/test_sim_regression.py, deliberately, when the
physics (or the engine's arithmetic) changes:

    python scripts/pin_losses.py                  # every simulator
    python scripts/pin_losses.py --sims smoke,fem # some

Each simulator trains its --quick configuration for ITERS iterations from seed 0 on one
thread (bit-reproducible) and the losses go to tests/sim_losses.json with the host they
were computed on (on another host than the first one's: under other_hosts, so that the
test compares bits there too). Review the printed changes before committing the file.
"""
import argparse
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import sims  # noqa: E402
from sims import cli, runs  # noqa: E402

PINS = os.path.join(ROOT, 'tests', 'sim_losses.json')
ITERS = 3
FLAGS = ['--quick', '--seed', '0', '--threads', '1', '--quiet']


def host():
    """What decides the last bits of the losses besides the source: the CPU and LLVM."""
    from engine.backend.cpu import jit
    return jit.host_description()


def losses(name, out, stop_at=None):
    """The --quick losses of ITERS iterations; with stop_at, trained that far first on two
    threads, then resumed from the checkpoint in a fresh simulator (what the test does: the
    pins hold on any number of threads, engine/backend/cpu/ordering.py)."""
    sim_class = sims.load(name)
    if stop_at is None:
        cli.main(sim_class, ['train', *FLAGS, '--iters', str(ITERS), '--out', out])
    else:
        two_threads = [flag if flag != '1' or FLAGS[k - 1] != '--threads' else '2' for k, flag in enumerate(FLAGS)]
        cli.main(sim_class, ['train', *two_threads, '--iters', str(stop_at), '--out', out])
        cli.main(sim_class, ['train', '--resume', '--quiet', '--iters', str(ITERS), '--out', out])
    return [r['loss'] for r in runs.RunFolder(out).metrics()]


def load_pins():
    with open(PINS) as f:
        return json.load(f)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--sims', default='all', help='comma-separated names (default: all)')
    args = parser.parse_args(argv)
    os.environ.pop('ENGINE_AD_VALIDATION', None)     # as users run, and as the test does
    names = sims.names() if args.sims == 'all' else args.sims.split(',')
    pins = load_pins() if os.path.exists(PINS) else dict(losses={})
    old, here = pins['losses'], host()
    others = pins.setdefault('other_hosts', {})
    with tempfile.TemporaryDirectory() as tmp:
        new = {name: losses(name, os.path.join(tmp, name)) for name in names}
    for name, got in new.items():
        # the reference host's pins, or (pinned elsewhere first) this host's own bits
        if name not in old or old[name]['host'] == here:
            was, old[name] = old.get(name, {}).get('losses'), dict(losses=got, host=here)
        else:
            was = others.get(here, {}).get(name)
            others.setdefault(here, {})[name] = got
        print(f'{name}: unchanged' if was == got else f'{name}: {was} -> {got}')
    pins.update(iters=ITERS, flags=FLAGS)
    with open(PINS, 'w') as f:
        json.dump(pins, f, indent=1)
        f.write('\n')
    print(f'wrote {PINS}')


if __name__ == '__main__':
    main()
