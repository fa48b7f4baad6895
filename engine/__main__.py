"""`python -m engine run SCRIPT [ARGS]`: run a Taichi program unchanged (`import taichi`
is this engine). `python -m engine clear-cache|cache-info [DIR]`: the compile cache."""
import pathlib
import sys

from .backend import cache
from .taichi_shim import run_script

USAGE = 'usage: python -m engine run SCRIPT [ARGS...] | clear-cache [DIR] | cache-info [DIR]'


def main(argv):
    command = argv[0] if argv else None
    if command == 'run':
        if len(argv) < 2:
            print('usage: python -m engine run SCRIPT [ARGS...]', file=sys.stderr)
            return 2
        return run_script(argv[1], argv[2:])
    directory = pathlib.Path(argv[1] if len(argv) > 1 else cache.default_dir())
    if command == 'clear-cache':
        print(f'removed {cache.clear(directory)} entries from {directory}')
    elif command == 'cache-info':
        entries = list(directory.glob('*' + cache.SUFFIX))
        size = sum(p.stat().st_size for p in entries)
        print(f'{directory}: {len(entries)} entries, {size / 1024:.0f} KiB')
    else:
        print(USAGE, file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
