"""`python -m sims`: the simulators, one line each. `python -m sims NAME ...` is
`python -m sims.NAME ...`."""
import sys

from . import load, names
from .cli import main


def listing():
    classes = [load(name) for name in names()]
    width = max(len(c.name) for c in classes)
    lines = ['The simulators (python -m sims.NAME train|render|eval|compare|sweep; --help lists the flags):']
    lines += [f'  {c.name:<{width}}  {c.summary}' for c in classes]
    lines.append('Start with: python -m sims.diffmpm train --iters 10')
    return '\n'.join(lines)


if len(sys.argv) > 1 and sys.argv[1] in names():
    main(load(sys.argv[1]), sys.argv[2:])
elif len(sys.argv) > 1 and sys.argv[1] not in ('-h', '--help'):
    print(f'python -m sims: error: no simulator {sys.argv[1]!r}\n{listing()}', file=sys.stderr)
    sys.exit(2)
else:
    print(listing())
