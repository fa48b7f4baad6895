"""`python -m sims.<name> train|render|eval|compare|sweep [options]`, the same for every simulator.

Every key of the simulator's configuration is a flag (`--steps 64`, `--lr 0.5`,
`--toi/--no-toi`, `--controller mlp`); `--quick` starts from the small test
configuration; explicit flags override both. Training writes a run folder (sims/runs.py)
that records the whole configuration, so `render`, `eval` and `train --resume` need only
`--out`; a flag that contradicts the run's configuration is an error.

`sweep` trains every combination of lists of values (`--lr 0.1,0.3 --seeds 0:16`), in this
process or on Ray workers (sims/sweep.py).

Input is checked before anything is written: a bad flag, a folder holding another run,
a run that cannot be rebuilt all end in one line on stderr and exit status 2 (argparse's
convention). Ctrl-C stops training after the current iteration, with exit status 130.
"""
import argparse
import fcntl
import inspect
import os
import shlex
import sys
import tempfile
import zipfile

from . import command_of, command_words, runs, sweep
from .base import ParametersMismatch, flag
from .progress import BarProgress, LogProgress, QuietProgress, compile_counts, compile_report, compiling
from .render import FramesError, checked_frames, plot_comparison, write_video
from .training import train

EXIT_USAGE, EXIT_STOPPED = 2, 130
MIN_BAR_COLUMNS = 40        # narrower, a progress bar's line does not fit: per-iteration lines
# Keys that may differ from a run's configuration: they do not change what was trained.
FREE_KEYS = dict(train={'iters'}, render={'frames'}, eval=set())


class UsageError(Exception):
    """A command line that cannot be carried out: reported in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        """One line (argparse prints the whole usage first), exit status 2."""
        self.exit(EXIT_USAGE, f'{self.prog}: error: {message} (see --help)\n')


def _int_at_least(minimum):
    """An argparse type: a whole number of at least `minimum`."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'expected a whole number, got {text!r}') from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f'must be at least {minimum}, got {value}')
        return value
    return parse


_positive_int, _non_negative_int = _int_at_least(1), _int_at_least(0)


def _threads(text):
    """--threads: at least 1, at most this machine's CPUs (more only slow the run down)."""
    value, cpus = _positive_int(text), os.cpu_count() or 1
    if value > cpus:
        raise argparse.ArgumentTypeError(f'{value} threads on {cpus} CPUs would only slow the run down '
                                         f'(at most {cpus})')
    return value


# --- the parser -----------------------------------------------------------------------
def _add_config_flags(parser, sim_class):
    quick = vars(sim_class.config_unchecked(quick=True))
    choices = sim_class.all_choices()
    group = parser.add_argument_group('configuration (default: the run\'s, else the simulator\'s)')
    for key, default in vars(sim_class.config_unchecked()).items():
        shown = f'default {_shown(default)}' + (f', --quick {_shown(quick[key])}' if quick[key] != default else '')
        if isinstance(default, bool):
            group.add_argument(flag(key), dest=key, action=argparse.BooleanOptionalAction, default=None, help=shown)
        elif key in choices:
            kind = type(choices[key][0])
            group.add_argument(flag(key), dest=key, type=kind, choices=choices[key], default=None, help=shown)
        else:
            kind = type(default) if default is not None else float
            group.add_argument(flag(key), dest=key, type=kind, default=None, metavar=kind.__name__.upper(), help=shown)


def _shown(value):
    return 'none' if value is None else value


def _path(text):
    if not text.strip():
        raise argparse.ArgumentTypeError('expected a path, got an empty one')
    return text


def _add_run_flags(sub, sim_class, command):
    sub.add_argument('--out', type=_path, default=os.path.join('out', sim_class.name),
                     help='the run folder (default: %(default)s)')
    sub.add_argument('--quick', action='store_true', default=None, help='the small configuration (for tests)')
    sub.add_argument('--threads', type=_threads, default=None, help='worker threads (default: all cores)')
    sub.add_argument('--quiet', action='store_true', help='print nothing but errors')
    if command == 'train':
        sub.add_argument('--resume', action='store_true',
                         help='continue the run in --out from its last checkpoint (--iters: the new total)')
        sub.add_argument('--force', action='store_true', help='replace a run that --out holds already')
    if command == 'render':
        sub.add_argument('--params', default=None,
                         help="'best' (OUT/params.npz, the default), 'last' (OUT/checkpoint.npz) or an .npz file")
        sub.add_argument('--video', choices=('mp4', 'gif'), default='mp4',
                         help='mp4 (H.264; a GIF when it cannot be written) or gif (default: %(default)s)')
        sub.add_argument('--initial', action='store_true',
                         help='render the initial, untrained parameters (--out need hold no run)')
    _add_config_flags(sub, sim_class)


def parser_for(sim_class):
    parser = _Parser(prog=f'{command_of(sim_class)}', description=inspect.cleandoc(sim_class.__doc__ or ''),
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     epilog=f'{command_of(sim_class)} COMMAND --help lists the flags of a command')
    commands = parser.add_subparsers(dest='command', required=True, metavar='{train,render,eval,compare,sweep}')
    for command, help_text in (('train', 'train by gradient descent into a run folder'),
                               ('render', 'write a video of a rollout with the trained parameters'),
                               ('eval', 'print the loss of the trained parameters')):
        _add_run_flags(commands.add_parser(command, help=help_text, description=help_text), sim_class, command)
    compare = commands.add_parser('compare', help="plot several runs' loss curves in one PNG",
                                  description="plot several runs' loss curves in one PNG")
    compare.add_argument('runs', nargs='+', metavar='RUN', help='run folders')
    compare.add_argument('--output', type=_path, default='loss_comparison.png', help='the PNG (default: %(default)s)')
    text = 'train every combination of the values given (comma-separated lists), in parallel on Ray workers'
    _add_sweep_flags(commands.add_parser('sweep', help=text, description=text, allow_abbrev=False), sim_class)
    return parser


def _add_sweep_flags(sub, sim_class):
    sub.add_argument('--out', type=_path, default=os.path.join('out', f'{sim_class.name}-sweep'),
                     help='the sweep folder (default: %(default)s)')
    sub.add_argument('--seeds', type=sweep.seed_list, default=None,
                     help="A:B (A, A+1, ..., B-1) or a list 0,3,5 (default: the configuration's seed)")
    sub.add_argument('--iters', type=_positive_int, default=None, help='iterations per trial')
    sub.add_argument('--quick', action='store_true', default=None, help='the small configuration (for tests)')
    sub.add_argument('--workers', type=_positive_int, default=None,
                     help='trials at once (default: 1 without Ray; with Ray, the CPUs / --threads-per-trial)')
    sub.add_argument('--threads-per-trial', type=_positive_int, default=None,
                     help='engine threads of each trial (default: the CPUs / --workers)')
    sub.add_argument('--address', default=None, help="a Ray cluster's address ('auto': the one started with ray start)")
    sub.add_argument('--scheduler', choices=('fifo', 'asha'), default=None,
                     help='fifo runs every trial to the end; asha stops bad ones early (default: fifo)')
    sub.add_argument('--grace-period', type=_positive_int, default=None,
                     help="asha: the updates a trial makes before it can be stopped (default: 1)")
    sub.add_argument('--retries', type=_non_negative_int, default=1,
                     help='attempts more for a trial that fails or whose worker dies (default: %(default)s)')
    sub.add_argument('--resume', action='store_true', help='run the trials of the sweep in --out that are not done')
    sub.add_argument('--force', action='store_true', help='replace a sweep that --out holds already')
    sub.add_argument('--quiet', action='store_true', help='print nothing but errors')
    choices = sim_class.all_choices()
    group = sub.add_argument_group('values to sweep (comma-separated lists; every combination is a trial)')
    for key, default in vars(sim_class.config_unchecked()).items():
        if key not in sweep.grid_keys(sim_class):
            continue
        kind = bool if isinstance(default, bool) else type(choices[key][0]) if key in choices else (
            type(default) if default is not None else float)
        values = 'true,false' if kind is bool else ','.join(map(str, choices[key])) if key in choices else None
        group.add_argument(flag(key), dest=key, type=sweep.value_list(kind, choices.get(key)), default=None,
                           metavar=f'{kind.__name__.upper()}[,...]',
                           help=f'default {_shown(default)}' + (f'; of {values}' if values else ''))


# --- commands -------------------------------------------------------------------------
def main(sim_class, argv=None):
    parser = parser_for(sim_class)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    args.typed = runs.command_line([*command_words(sim_class), *argv])   # for config.json
    try:
        status = COMMANDS[args.command](sim_class, args)
    except BrokenPipeError:            # `eval | head -1`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())     # no second error at exit
        sys.exit(0)
    except runs.DamagedFile as e:      # a file of the run (exit status 1, as for other damaged files)
        parser.exit(1, f'{parser.prog} {args.command}: error: {e}\n')
    except (UsageError, runs.RunError) as e:
        parser.exit(EXIT_USAGE, f'{parser.prog} {args.command}: error: {e}\n')
    except FramesError as e:           # the simulator's own render_frames()
        parser.exit(1, f'{parser.prog} {args.command}: error: {e}\n')
    except (OSError, EOFError, zipfile.BadZipFile, MemoryError, OverflowError) as e:
        # a folder that cannot be written, a damaged .npz, a size or seed beyond the machine
        parser.exit(1, f'{parser.prog} {args.command}: error: {type(e).__name__}: {e}\n')
    except KeyboardInterrupt:          # a second Ctrl-C: the checkpoint of the last iteration stays
        hint = _resume_hint(sim_class, args) if args.command == 'train' else '\n'
        parser.exit(EXIT_STOPPED, '\nstopped at once' + hint)
    if status:
        sys.exit(status)


def _train(sim_class, args):
    run = runs.RunFolder(args.out)
    if args.resume and args.force:
        raise UsageError('--resume continues the run in --out and --force replaces it: give one of them')
    if args.resume:
        sim, saved = _from_run(sim_class, args, run, required=True)
        checkpoint = run.load_checkpoint()[0]
        if checkpoint is None and run.metrics():
            raise UsageError(f'{args.out} has trained iterations but no checkpoint.npz to resume from '
                             f'(train with --force to start over)')
        done = (checkpoint or {}).get('iteration', 0)
        if sim.cfg.iters < done:
            raise UsageError(f'{args.out} has {done} iterations already; --iters must be at least that')
        if saved.get('engine_build') != runs.engine_version()['engine_build'] and not args.quiet:
            sys.stderr.write('note: the engine (or the CPU) differs from the one that started this run: '
                             'the losses may differ from an uninterrupted run in the last bits\n')
    else:
        _check_config(sim_class, args.quick, _given(sim_class, args))     # the flags first
        _check_free(sim_class, args, run)
        sim = _create(sim_class, args.quick, args.threads, _given(sim_class, args))
    say = _printer(args)
    lock = _lock(args.out)      # noqa: F841 - held until the process ends
    records = train(sim, out=args.out, resume=args.resume, progress=_progress(args), command=args.typed)
    best = run.load_checkpoint()[0] or {}
    if best.get('best_iteration') == best.get('iteration'):
        say(f'best loss {best["best_loss"]:+.6e} with the last parameters, after {best["iteration"]} '
            f'iterations (params.npz and checkpoint.npz)')
    elif best.get('best_iteration') is not None:
        say(f'best loss {best["best_loss"]:+.6e} at iteration {best["best_iteration"]} (params.npz); '
            f'the last parameters are in checkpoint.npz')
    say(f'wrote {args.out}: ' + ', '.join(n for n in runs.RUN_FILES if run.has(n)))
    if len(records) < sim.cfg.iters:
        sys.stderr.write(f'stopped after {len(records)} of {sim.cfg.iters} iterations' + _resume_hint(sim_class, args))
        return EXIT_STOPPED
    say(f'next: {command_of(sim_class)} render --out {shlex.quote(args.out)}')
    return 0


def _lock(out):
    """An exclusive lock on the run folder while this process trains into it: a second
    training into the same folder (even with --resume or --force) is refused."""
    os.makedirs(out, exist_ok=True)
    handle = open(os.path.join(out, '.lock'), 'w')
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise UsageError(f'another process is training into {out}') from None
    return handle


def _resume_hint(sim_class, args):
    info = runs.RunFolder(args.out).load_checkpoint()[0]
    if info is None:
        return '\n'
    return (f'; the checkpoint after {info["iteration"]} iterations is in {args.out}; to continue: '
            f'{command_of(sim_class)} train --resume --out {shlex.quote(args.out)}\n')


def _render(sim_class, args):
    run = runs.RunFolder(args.out)
    if args.initial and args.params is not None:
        raise UsageError('--initial renders the untrained parameters and --params trained ones: give one of them')
    params = None if args.initial else _parameters_file(run, args.params, _read_run(sim_class, run, False))
    if params is None and not args.initial:
        raise UsageError(f'{args.out} holds no run to render (train into it first, or render the '
                         f'untrained parameters with --initial)')
    sim, _ = _from_run(sim_class, args, run, required=False)
    say = _printer(args)
    if params:
        _load(sim, params, own=args.params in (None, 'best', 'last'))
        say(f'rendering with {_describe(args.params)} parameters from {params}')
    else:
        say('rendering the initial parameters')
    os.makedirs(args.out, exist_ok=True)
    _check_writable(args.out)
    before = compile_counts()
    say(compiling('the rollout'))
    frames = checked_frames(_frames(sim, args), sim_class.__name__)
    stem = sim_class.name + ('_initial' if args.initial else '')      # never over the trained video
    path, count, why = write_video(frames, os.path.join(args.out, stem), kind=args.video)
    say(compile_report(before))
    if why:
        say(f'no MP4 ({why}): wrote a GIF instead')
    say(f'wrote {path} ({count} frames)')
    return 0


def _check_writable(folder):
    """Before the rollout: a folder the video cannot go into is one line, not ffmpeg's."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise OSError(e.errno, f'{folder} cannot be written ({e.strerror})') from None


def _eval(sim_class, args):
    run = runs.RunFolder(args.out)
    sim, saved = _from_run(sim_class, args, run, required=True)
    try:
        info = run.load_checkpoint()[0]
    except runs.DamagedFile as damaged:            # the best parameters may still be whole
        if not run.has(runs.BEST):
            raise
        _load(sim, run.file(runs.BEST), own=True)
        print(f'best parameters (params.npz): loss {sim.evaluate():+.6e}')
        raise damaged
    if info is None:
        raise UsageError(f'{args.out} has no trained parameters yet')
    last = f'after {info["iteration"]} iterations'
    best = f'the last ones, {last}' if info['best_iteration'] == info['iteration'] else \
        f'those of iteration {info["best_iteration"]}'
    damaged = []
    for which, detail in (('best', best), ('last', last)):
        try:
            _load(sim, run.parameters_file(which), own=True)
        except runs.DamagedFile as e:        # the other one may still be whole
            damaged.append(e)
            continue
        print(f'{which} parameters ({detail}): loss {sim.evaluate():+.6e}')
    if damaged:
        raise damaged[0]
    return 0


def _compare(sim_class, args):
    curves, rows = {}, []
    folders = [runs.RunFolder(path) for path in args.runs]
    configs = [_read_run(sim_class, run, required=True)['config'] for run in folders]
    differing = sorted(k for k in configs[0] if len({repr(c.get(k)) for c in configs}) > 1)
    for run, cfg in zip(folders, configs):
        records = run.metrics()
        if not records:
            raise UsageError(f'{run.path} has no iterations yet')
        label = run.path + ''.join(f' {flag(k)} {cfg[k]}' for k in differing)
        curves[label] = [(r['iteration'], r['loss']) for r in records]
        best = min(records, key=lambda r: r['loss'])
        rows.append(f'{label}: {len(records)} iterations, first {records[0]["loss"]:+.6e}, '
                    f'best {best["loss"]:+.6e} (iteration {best["iteration"]}), last {records[-1]["loss"]:+.6e}')
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    plot_comparison(curves, args.output, f'{sim_class.name}: training loss')
    print('\n'.join(rows + [f'wrote {args.output}']))
    return 0


def _sweep(sim_class, args):
    grid = {k: getattr(args, k) for k in sweep.grid_keys(sim_class) if getattr(args, k, None) is not None}
    rows = sweep.sweep(sim_class, args.out, grid=grid, seeds=args.seeds, iters=args.iters, quick=args.quick,
                       workers=args.workers, threads_per_trial=args.threads_per_trial, address=args.address,
                       scheduler=args.scheduler, grace_period=args.grace_period, retries=args.retries,
                       resume=args.resume, force=args.force, log=_printer(args), command=args.typed)
    unfinished = [r for r in rows if r['status'] not in (*sweep.FINAL, sweep.FAILED)]
    failed = [r for r in rows if r['status'] == sweep.FAILED]
    if unfinished:
        sys.stderr.write(f'{len(unfinished)} of {len(rows)} trials are not finished; to continue: '
                         f'{command_of(sim_class)} sweep --resume --out {shlex.quote(args.out)}\n')
        return EXIT_STOPPED
    if failed:
        sys.stderr.write(f'{len(failed)} of {len(rows)} trials failed ({failed[0]["trial"]}: {failed[0]["error"]}); '
                         f'see {os.path.join(args.out, sweep.SWEEP)}; --resume tries them again\n')
        return 1
    return 0


COMMANDS = dict(train=_train, render=_render, eval=_eval, compare=_compare, sweep=_sweep)


# --- run folders and configurations -----------------------------------------------------
def _given(sim_class, args):
    """The configuration flags given on the command line."""
    return {k: getattr(args, k) for k in vars(sim_class.config_unchecked()) if getattr(args, k, None) is not None}


def _read_run(sim_class, run, required):
    if os.path.exists(run.path) and not os.path.isdir(run.path):
        raise UsageError(f'{run.path} is a file, not a run folder')
    saved = run.read_config()
    if saved is None and (run.has(runs.CHECKPOINT) or run.has(runs.METRICS)):
        raise runs.DamagedFile(run.file(runs.CONFIG), FileNotFoundError('it is missing'),
                               'the run\'s other files cannot be read without it: train --force starts it over')
    if saved is None and required:
        raise UsageError(f'{run.path} holds no run (train one first: {command_of(sim_class)} train '
                         f'--out {shlex.quote(run.path)})')
    if saved is not None and saved['simulator'] != sim_class.name:
        raise UsageError(f'{run.path} holds a {saved["simulator"]} run, not {sim_class.name}: '
                         f'use python -m sims.{saved["simulator"]}')
    return saved


def _from_run(sim_class, args, run, required):
    """The simulator of the run in `run` (the flags given must agree with it), or, where
    there is none and none is required, of the flags."""
    saved = _read_run(sim_class, run, required)
    given = _given(sim_class, args)
    if saved is None:
        return _create(sim_class, args.quick, args.threads, given), None
    if args.quick and not saved.get('quick'):
        raise UsageError(f'--quick differs from the run in {run.path}, which has the full configuration; '
                         f'leave it out')
    for key, value in given.items():
        if key not in FREE_KEYS[args.command] and value != saved['config'].get(key):
            raise UsageError(f'{flag(key)} {value} differs from the run in {run.path} '
                             f'({flag(key)} {saved["config"].get(key)}); leave it out to use the run\'s')
    threads = args.threads if args.threads is not None else saved.get('threads')
    return _create(sim_class, saved.get('quick'), threads, {**saved['config'], **given}), saved


def _check_free(sim_class, args, run):
    """A fresh run may go into a folder without a run, or replace one with --force."""
    if os.path.exists(run.path) and not os.path.isdir(run.path):
        raise UsageError(f'{run.path} is a file, not a run folder')
    if args.force:
        return
    other = run.simulator()
    if other is None:
        return
    if other != sim_class.name:
        raise UsageError(f'{run.path} holds a {other} run; --force replaces it, --out DIR trains elsewhere')
    done = len(run.metrics())
    raise UsageError(f'{run.path} holds a {other} run ({done} iterations); --resume continues it, '
                     f'--force replaces it, --out DIR trains elsewhere')


def _check_config(sim_class, quick, config):
    try:
        sim_class.config(bool(quick), **config)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _create(sim_class, quick, threads, config):
    """The simulator, after its configuration is checked (a bad value: UsageError)."""
    _check_config(sim_class, quick, config)
    try:
        return sim_class.create(quick=bool(quick), threads=threads, **config)
    except ValueError as e:              # a combination of values the simulator cannot build
        raise UsageError(f'{sim_class.name} cannot be built with this configuration: {e}') from None


def _parameters_file(run, which, saved):
    """The .npz to render: the run's best (default) or last parameters, or a file; None in
    a folder without a run."""
    if which not in (None, 'best', 'last'):
        if not os.path.isfile(which):
            raise UsageError(f"--params {which}: neither 'best', 'last' nor an .npz file that exists")
        return which
    if saved is None:                    # params.npz alone: a folder of the earlier command line
        if run.has(runs.BEST) and which != 'last':
            return run.file(runs.BEST)
        if which is None:
            return None
        raise UsageError(f'{run.path} holds no run: --params {which} has nothing to render')
    path = run.parameters_file(which or 'best')
    if not os.path.lexists(path):
        raise UsageError(f'{run.path} has no trained parameters yet ({os.path.basename(path)})')
    return path


def _describe(which):
    return {None: 'the best', 'best': 'the best', 'last': 'the last'}.get(which, 'the')


def _load(sim, path, own):
    """The parameters of `path`: the run's own file (`own`: arrays that do not fit the run's
    configuration mean damage) or a file given with --params (a configuration mismatch)."""
    try:
        sim.load_parameters(path)
    except ParametersMismatch as e:
        if not own:
            raise UsageError(str(e)) from None
        raise runs.DamagedFile(path, e, _OTHER_PARAMETERS.get(os.path.basename(path), 'train again')) from None
    except runs.DAMAGE as e:
        raise runs.DamagedFile(path, e, _OTHER_PARAMETERS.get(os.path.basename(path), 'train again')) from None


# where a damaged parameters file has a stand-in
_OTHER_PARAMETERS = {runs.BEST: 'the last parameters, in checkpoint.npz, may be whole (render --params last)',
                     runs.CHECKPOINT: 'the best parameters, in params.npz, may be whole (render --params best)'}


def _frames(sim, args):
    frames = sim.render_frames()
    if args.quiet or not _on_terminal():
        return frames
    from tqdm import tqdm
    return tqdm(frames, desc='render', unit='frame', leave=False)


# --- output -----------------------------------------------------------------------------
def _on_terminal():
    """A terminal that can show a bar: one that reports no width or no rows (`script`, some
    CI logs) gets lines, as a pipe does."""
    if not (sys.stdout.isatty() and sys.stderr.isatty()):
        return False
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except (OSError, ValueError):
        return False
    return size.columns >= MIN_BAR_COLUMNS and size.lines > 0


def _progress(args):
    if args.quiet:
        return QuietProgress()
    return BarProgress() if _on_terminal() else LogProgress()


def _printer(args):
    return (lambda text: None) if args.quiet else print
