"""Peak memory of one DiffMPM training iteration, with and without checkpointing.

Usage: python scripts/diffmpm_memory.py [--checkpoint 32] [--steps 1024] [--quick]

Builds the simulator and runs one `loss_and_grad()` under tracemalloc (numpy
reports its array allocations to it, so the fields, their gradients and the
checkpoints are all counted) and prints the peak of each configuration. The
test suite measures the same around the build and a forward rollout only
(the fields, gradients and checkpoint buffers are all allocated by then).
"""
import argparse
import gc
import time
import tracemalloc


def peak_memory(checkpoint=0, quick=False, backward=True, **overrides):
    """(peak bytes, seconds) of building DiffMPM and one loss_and_grad() (with
    backward=False: one evaluate(), the forward rollout alone)."""
    from sims.diffmpm import DiffMPM
    gc.collect()
    tracemalloc.start()
    try:
        start = time.perf_counter()
        sim = DiffMPM.create(quick=quick, checkpoint=checkpoint, **overrides)
        sim.loss_and_grad() if backward else sim.evaluate()
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del sim
    gc.collect()
    return peak, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--checkpoint', type=int, default=32)
    parser.add_argument('--steps', type=int, default=None)
    parser.add_argument('--quick', action='store_true')
    args = parser.parse_args()
    overrides = {} if args.steps is None else {'steps': args.steps}
    full, t_full = peak_memory(0, args.quick, **overrides)
    ckpt, t_ckpt = peak_memory(args.checkpoint, args.quick, **overrides)
    print(f'no checkpointing   : peak {full / 2**20:8.1f} MiB  ({t_full:.2f} s)')
    print(f'checkpoint {args.checkpoint:<7d} : peak {ckpt / 2**20:8.1f} MiB  ({t_ckpt:.2f} s)')
    print(f'ratio              : {full / ckpt:.1f}x')


if __name__ == '__main__':
    main()
