"""`python -m sims.<name> train|render [options]`, the same for every simulator.

Every key of the simulator's configuration is a flag (`--steps 64`, `--lr 0.5`,
`--toi/--no-toi`, `--controller mlp`); `--quick` starts from the small test
configuration; explicit flags override both.
"""
import argparse
import os

import controllers

from .render import write_video
from .training import train


def _add_config_flags(parser, sim_class):
    values = sim_class.config()
    for key, default in vars(values).items():
        flag = '--' + key.replace('_', '-')
        if isinstance(default, bool):
            parser.add_argument(flag, dest=key, action=argparse.BooleanOptionalAction, default=None)
        elif key == 'controller':
            parser.add_argument(flag, dest=key, choices=controllers.available(), default=None)
        else:
            kind = type(default) if default is not None else float
            parser.add_argument(flag, dest=key, type=kind, default=None, metavar=kind.__name__.upper(),
                                help=f'default {default}')


def parser_for(sim_class):
    parser = argparse.ArgumentParser(prog=f'python -m sims.{sim_class.name}', description=sim_class.__doc__)
    commands = parser.add_subparsers(dest='command', required=True)
    for command, help_text in (('train', 'train by gradient descent'),
                               ('render', 'write a video of a rollout')):
        sub = commands.add_parser(command, help=help_text)
        sub.add_argument('--out', default=os.path.join('out', sim_class.name), help='output folder')
        sub.add_argument('--quick', action='store_true', help='small configuration (for tests)')
        sub.add_argument('--threads', type=int, default=None, help='worker threads (default: all cores)')
        if command == 'render':
            sub.add_argument('--params', default=None,
                             help='parameters to render (default: OUT/params.npz when it exists)')
        _add_config_flags(sub, sim_class)
    return parser


def main(sim_class, argv=None):
    args = parser_for(sim_class).parse_args(argv)
    config_keys = vars(sim_class.config())
    overrides = {k: v for k, v in vars(args).items() if k in config_keys}
    sim = sim_class.create(quick=args.quick, threads=args.threads, **overrides)
    if args.command == 'train':
        train(sim, out=args.out)
        print(f'wrote {args.out}/losses.json, loss_curve.png, params.npz')
        return
    params = args.params or os.path.join(args.out, 'params.npz')
    if os.path.exists(params):
        sim.load_parameters(params)
        print(f'rendering with parameters from {params}')
    os.makedirs(args.out, exist_ok=True)
    written = write_video(sim.render_frames(), os.path.join(args.out, sim_class.name))
    print('wrote ' + ', '.join(written))
