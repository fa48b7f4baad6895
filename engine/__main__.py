"""`python -m engine clear-cache|cache-info [DIR]`: manage the compile cache on disk."""
import pathlib
import sys

from . import cache


def main(argv):
    command = argv[0] if argv else None
    directory = pathlib.Path(argv[1] if len(argv) > 1 else cache.default_dir())
    if command == 'clear-cache':
        print(f'removed {cache.clear(directory)} entries from {directory}')
    elif command == 'cache-info':
        entries = list(directory.glob('*' + cache.SUFFIX))
        size = sum(p.stat().st_size for p in entries)
        print(f'{directory}: {len(entries)} entries, {size / 1024:.0f} KiB')
    else:
        print('usage: python -m engine clear-cache|cache-info [DIR]')
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
