"""Memory of a training iteration of a simulator wrapped as a PyTorch operation
(engine.torch) against the same iteration on the engine's own tape.

    python scripts/interop_memory.py [--sim diffmpm] [--quick] [--iters 2]

Each way runs in a fresh process: build the simulator, one iteration to compile, then
`--iters` iterations under tracemalloc (numpy's allocations and Python's); it prints
the memory of the fields plus the peak traced during the iterations, for each way, and
their ratio. The wrapped function's inputs are the simulator's parameters, its output the loss.
"""
import argparse
import json
import subprocess
import sys
import tracemalloc


def measure(name, wrapped, quick, iters):
    import sims
    sim = sims.load(name).create(quick=quick)
    step = _wrapped_iteration(sim) if wrapped else sim.loss_and_grad
    step()                                  # compiles the kernels
    tracemalloc.start()
    for _ in range(iters):
        step()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak + _field_bytes()


def _field_bytes():
    """The memory of every field (values, gradients, tangents): allocated before tracing."""
    from engine.core.program import current
    return sum(f._data.nbytes for f in current().fields if f.placed)


def _wrapped_iteration(sim):
    import torch
    import engine.torch as ti_torch
    params = sim.parameters()
    layer = ti_torch.function(sim.rollout_forward, params, [sim.loss])
    tensors = [torch.from_numpy(p.to_numpy()).requires_grad_() for p in params]

    def iteration():
        loss = layer(*tensors)
        loss.backward()
        return loss.item()
    return iteration


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--sim', default='diffmpm')
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--iters', type=int, default=2)
    parser.add_argument('--child', choices=['plain', 'wrapped'], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.sim, args.child == 'wrapped', args.quick, args.iters)))
        return
    peaks = {}
    for way in ('plain', 'wrapped'):
        command = [sys.executable, __file__, '--sim', args.sim, '--iters', str(args.iters), '--child', way]
        output = subprocess.run(command + (['--quick'] if args.quick else []), check=True,
                                capture_output=True, text=True).stdout
        peaks[way] = json.loads(output.strip().splitlines()[-1])
    ratio = peaks['wrapped'] / peaks['plain']
    print(f"{args.sim}{' (quick)' if args.quick else ''}: peak traced memory per iteration, fields included: "
          f"engine tape {peaks['plain'] / 2**20:.1f} MiB, engine.torch {peaks['wrapped'] / 2**20:.1f} MiB, "
          f"ratio {ratio:.3f}")
    return ratio


if __name__ == '__main__':
    main()
