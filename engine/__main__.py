"""`python -m engine run [--frames N] [--video PATH] SCRIPT [ARGS]`: run a Taichi program
unchanged (`import taichi` is this engine). `python -m engine clear-cache|cache-info [DIR]`:
the compile cache."""
import argparse
import pathlib
import sys

from .backend import cache
from .gui import video_problem
from .taichi_shim import run_script

RUN_USAGE = 'python -m engine run [--frames N] [--video PATH] SCRIPT [ARGS...]'
USAGE = f'usage: {RUN_USAGE} | clear-cache [DIR] | cache-info [DIR]'
VALUE_FLAGS = ('--frames', '--video')


class _OneLineParser(argparse.ArgumentParser):
    """A bad flag is one line and exit status 2, before the program runs."""

    def error(self, message):
        if message.startswith('unrecognized arguments'):
            message += " (the program's own arguments go after SCRIPT)"
        self.exit(2, f'{self.prog}: {message}\n')


def _positive_count(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f'the number of frames must be a whole number from 1 up, not {text!r}')
    return int(text)


def _writable_video(path):
    problem = video_problem(path)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return path


def _run_parser():
    parser = _OneLineParser(
        prog='python -m engine run', usage=RUN_USAGE,
        description='Run a Taichi program unchanged: `import taichi` imports this engine, and the program '
                    'gets its own arguments. ti.GUI draws off screen (no window, no events); the flags, '
                    'given before SCRIPT, end a `while gui.running:` loop and keep what it showed.',
        epilog='example: python -m engine run --frames 200 --video out.mp4 program.py --its-own-flag')
    parser.add_argument('--frames', type=_positive_count, metavar='N',
                        help='end the program after each ti.GUI has shown N frames (gui.show() calls): '
                             'gui.running turns False, and a program that goes on showing frames ends at its '
                             'next gui.show() (or the one after, if it read gui.running) with exit status 0')
    parser.add_argument('--video', type=_writable_video, metavar='PATH',
                        help='write the frames the first ti.GUI shows to PATH, an .mp4 or .gif (24 frames '
                             'a second), when the N-th is shown or the program ends')
    return parser


def _split_at_script(argv):
    """The engine's flags, then SCRIPT and the program's own arguments (kept exactly)."""
    i = 0
    while i < len(argv) and argv[i].startswith('-'):
        i += 2 if argv[i] in VALUE_FLAGS else 1
    return argv[:i], argv[i:]


def run(argv):
    flags, command = _split_at_script(argv)
    parser = _run_parser()
    options = parser.parse_args(flags)
    if not command:
        parser.error('the SCRIPT to run is missing')
    return run_script(command[0], command[1:], frames=options.frames, video=options.video)


def main(argv):
    command = argv[0] if argv else None
    if command == 'run':
        return run(argv[1:])
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
