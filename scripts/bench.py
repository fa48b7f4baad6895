"""Benchmarks: launch overhead (from Python and in native replay), throughput against
numpy, compile time, and for every simulator: compile time cold (empty disk cache) and
warm (kernels from the cache), start-up time, seconds per training iteration (forward +
backward + update) with 1 and with 2 threads, and peak resident memory; and DiffTaichi's
smoke configuration (110^2 grid, 100 steps, 6 Jacobi sweeps, pressure indexed by
`t * 6 + k`) with the rules checked and unchecked.

And compute-bound programs (scripts/compute_programs.py: vortex, fractal, rasterizer,
stencil, mpm88, mpm99, nbody), each in a fresh process, seconds per step under the engine
and, where a Taichi interpreter is found, the same source under Taichi: ours / Taichi's
time, and how far their fields differ after the first step.

Usage: python scripts/bench.py [--json bench.json] [--sims a,b | --sims none] [--quick]
       [--only programs] [--programs a,b] [--threads N] [--taichi-python PATH | --no-taichi]
Prints a table and writes the numbers as JSON. Timings are medians of repeats. Each
simulator runs in fresh processes (cold cache, warm cache at 2 threads, warm at 1 thread,
warm with the global data access rules unchecked: what the rule checker costs; warm without
index checks: what ti.init(check_bounds=False) saves; warm with ti.init(deterministic=False):
what the same answer on any number of threads costs).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

_STARTED = time.perf_counter()
import numpy as np  # noqa: E402

import engine as ti  # noqa: E402
from engine.runtime import pipeline  # noqa: E402
import compute_programs  # noqa: E402  (a sibling: bench.py runs as a script from scripts/)

_ENGINE_IMPORT_S = time.perf_counter() - _STARTED


def best_of(fn, repeats=5, number=1):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times)


def bench_launch():
    x = ti.field(ti.f32, shape=16)

    @ti.kernel
    def tiny(scale: ti.f32):
        for i in x:
            x[i] = i * scale

    tiny(1.0)
    return {'launch_us': best_of(lambda: tiny(1.0), repeats=7, number=20000) * 1e6}


def bench_adjoint_launch():
    x = ti.field(ti.f32, shape=16, needs_grad=True)
    y = ti.field(ti.f32, shape=16, needs_grad=True)

    @ti.kernel
    def tiny(scale: ti.f32):
        for i in x:
            y[i] = x[i] * scale

    tiny(1.0)
    tiny.grad(1.0)
    return {'adjoint_launch_us': best_of(lambda: tiny.grad(1.0), repeats=7, number=20000) * 1e6}


def bench_replay_launch(n=20000):
    """Per launch of a tiny kernel: a tape's backward pass replayed natively, and a
    captured forward pass replayed natively (no Python between the kernels)."""
    x = ti.field(ti.f32, shape=16, needs_grad=True)
    y = ti.field(ti.f32, shape=16, needs_grad=True)

    @ti.kernel
    def tiny(scale: ti.f32):
        for i in range(4):
            y[i] += x[i] * scale

    rollout = ti.capture(lambda: [tiny(1.0) for _ in range(n)] and None)
    rollout()
    tape = ti.ad.Tape(validation=False)
    with tape:
        rollout()
    tape.grad()
    return {'replay_backward_launch_us': best_of(tape.grad, repeats=7) / n * 1e6,
            'replay_forward_launch_us': best_of(rollout, repeats=7) / n * 1e6}


def bench_p2g_adjoint_compile():
    """Compile time of the adjoint of a ~100-line MLS-MPM particle-to-grid kernel."""
    n_particles, n_grid, dx, dt = 256, 32, 1 / 32, 1e-3
    x = ti.Vector.field(2, ti.f32, shape=n_particles, needs_grad=True)
    v = ti.Vector.field(2, ti.f32, shape=n_particles, needs_grad=True)
    C = ti.Matrix.field(2, 2, ti.f32, shape=n_particles, needs_grad=True)
    F = ti.Matrix.field(2, 2, ti.f32, shape=n_particles, needs_grad=True)
    actuation = ti.field(ti.f32, shape=n_particles, needs_grad=True)
    grid_v = ti.Vector.field(2, ti.f32, shape=(n_grid, n_grid), needs_grad=True)
    grid_m = ti.field(ti.f32, shape=(n_grid, n_grid), needs_grad=True)
    F_next = ti.Matrix.field(2, 2, ti.f32, shape=n_particles, needs_grad=True)

    def make():
        @ti.kernel
        def p2g(mu: ti.f32, la: ti.f32, act_strength: ti.f32):
            for p in range(n_particles):
                base = ti.cast(x[p] / dx - 0.5, ti.i32)
                fx = x[p] / dx - ti.cast(base, ti.f32)
                w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
                new_F = (ti.Matrix.identity(ti.f32, 2) + dt * C[p]) @ F[p]
                J = new_F.determinant()
                F_next[p] = new_F
                r, s = ti.polar_decompose(new_F)
                act = actuation[p] * act_strength
                A = ti.Matrix([[0.0, 0.0], [0.0, 1.0]]) * act
                cauchy = 2 * mu * (new_F - r) @ new_F.transpose() + \
                    ti.Matrix.diag(2, la * (J - 1) * J)
                cauchy += new_F @ A @ new_F.transpose()
                stress = -(dt * 4 / dx / dx) * cauchy
                affine = stress + C[p]
                for i in ti.static(range(3)):
                    for j in ti.static(range(3)):
                        offset = ti.Vector([i, j])
                        dpos = (ti.cast(offset, ti.f32) - fx) * dx
                        weight = w[i][0] * w[j][1]
                        grid_v[base + offset] += weight * (v[p] + affine @ dpos)
                        grid_m[base + offset] += weight
        return p2g

    x.from_numpy((np.random.rand(n_particles, 2) * 0.5 + 0.25).astype(np.float32))
    F.from_numpy(np.tile(np.eye(2, dtype=np.float32), (n_particles, 1, 1)))

    def compile_adjoint():
        kernel = make()
        kernel(1.0, 1.0, 1.0)
        start = time.perf_counter()
        kernel.grad(1.0, 1.0, 1.0)
        return time.perf_counter() - start

    return {'p2g_adjoint_compile_s': statistics.median(compile_adjoint() for _ in range(3))}


def bench_elementwise(n=1 << 24):
    a = ti.field(ti.f32, shape=n)
    b = ti.field(ti.f32, shape=n)
    c = ti.field(ti.f32, shape=n)

    @ti.kernel
    def saxpy(alpha: ti.f32):
        for i in a:
            c[i] = alpha * a[i] + b[i]

    a.from_numpy(np.random.rand(n).astype(np.float32))
    b.from_numpy(np.random.rand(n).astype(np.float32))
    saxpy(2.0)
    an, bn, cn = a.data, b.data, np.empty(n, np.float32)

    def numpy_saxpy():
        np.multiply(an, np.float32(2.0), out=cn)
        np.add(cn, bn, out=cn)

    engine_s = best_of(lambda: saxpy(2.0), repeats=9)
    numpy_s = best_of(numpy_saxpy, repeats=9)
    assert np.allclose(c.data, 2 * an + bn)
    return {'elementwise_n': n, 'elementwise_engine_ms': engine_s * 1e3,
            'elementwise_numpy_ms': numpy_s * 1e3, 'elementwise_ratio': engine_s / numpy_s}


def _particle_step(pos: ti.template(), vel: ti.template(), mass: ti.template(), energy: ti.template(),
                   dt: ti.f32, damping: ti.f32):
    n = ti.static(pos.shape[0])
    for i in pos:
        p, v = pos[i], vel[i]
        force = ti.Vector([0.0, -9.8]) * mass[i]
        for k in ti.static(range(2)):        # springs to the two neighbours
            j = (i + 1 + k) % n
            d = pos[j] - p
            length = d.norm(1e-6)
            direction = d / length
            stretch = length - 0.1
            force += 100.0 * stretch * direction
            relative = vel[j] - v
            force += 0.5 * relative.dot(direction) * direction
        if p.x < 0.0:                        # walls
            force.x += -1000.0 * p.x
        elif p.x > 1.0:
            force.x += -1000.0 * (p.x - 1.0)
        if p.y < 0.0:
            force.y += -1000.0 * p.y
            v.x *= 0.9
        speed = v.norm()                     # drag, limited speed
        if speed > 10.0:
            v = v * (10.0 / speed)
        v = v * ti.exp(-dt * damping)
        v += dt * force / mass[i]
        p += dt * v
        angle = ti.atan2(v.y, v.x)
        spin = ti.Matrix([[ti.cos(angle), -ti.sin(angle)], [ti.sin(angle), ti.cos(angle)]])
        local = spin.transpose() @ v
        kinetic = 0.5 * mass[i] * local.norm_sqr()
        potential = mass[i] * 9.8 * p.y
        energy[None] += kinetic + potential
        t = 0.0
        while t < 1.0:
            t += 0.25
            p.y = ti.max(p.y, 0.0)
        pos[i] = p
        vel[i] = v


def bench_compile():
    """A 40-line particle kernel, compiled from scratch (a fresh kernel object each time)."""
    n = 256
    pos, vel = ti.Vector.field(2, ti.f32, shape=n), ti.Vector.field(2, ti.f32, shape=n)
    mass, energy = ti.field(ti.f32, shape=n), ti.field(ti.f32, shape=())
    mass.fill(1.0)

    def compile_once():
        ti.kernel(_particle_step)(pos, vel, mass, energy, 1e-3, 0.1)

    return {'compile_50_line_s': best_of(compile_once, repeats=3)}


def peak_mb():
    """This process's peak resident memory so far: VmHWM (ru_maxrss would include the
    parent's before exec, and the parent holds the 16M-element arrays of bench_elementwise)."""
    try:
        with open('/proc/self/status') as f:
            return next(int(line.split()[1]) for line in f if line.startswith('VmHWM:')) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_simulator(name, threads, quick, cache_dir, iterations=3, rules=True, bounds=True, any_order=False):
    """In this process: start-up, first iteration, compile time, steady iterations
    (`rules=False`: with the global data access rules unchecked, engine/autodiff/rules.py;
    `bounds=False`: without index checks, as ti.init(check_bounds=False))."""
    start = time.perf_counter()
    import sims
    sim_class = sims.load(name)
    imported = time.perf_counter()
    os.environ['ENGINE_CACHE_DIR'] = cache_dir      # read by the ti.init that create() calls
    sim = sim_class.create(quick=quick, threads=threads)
    from engine.core import program
    if not rules:
        program.current().config.ad_validation = False
    if not bounds:                  # before the first iteration compiles the kernels
        program.current().config.check_bounds = False
    if any_order:
        program.current().config.deterministic = False
    created = time.perf_counter()
    optimizer = sim.make_optimizer()

    def iteration():
        sim.loss_and_grad()
        optimizer.step()

    before = time.perf_counter()
    iteration()
    first = time.perf_counter() - before
    # the median of enough iterations to fill about 2 s (at least `iterations`, at most 50):
    # a fast simulator's three iterations vary by 20%
    before = time.perf_counter()
    iteration()
    second = time.perf_counter() - before
    repeats = max(iterations, min(50, int(2.0 / max(second, 1e-6))))
    return dict(import_s=_ENGINE_IMPORT_S + imported - start, create_s=created - imported, first_iter_s=first,
                compile_s=pipeline.compile_seconds, compiled=pipeline.compile_count,
                iter_s=best_of(iteration, repeats=repeats), peak_mb=peak_mb())


def bench_simulator(name, quick):
    """Cold (empty cache, 2 threads), warm (2 threads), warm with 1 thread and warm with
    the rules unchecked (2 threads), each in a fresh process."""
    with tempfile.TemporaryDirectory() as cache_dir:
        runs = {}
        flags = {'norules': ['--no-rules'], 'nobounds': ['--no-bounds'], 'anyorder': ['--any-order']}
        for label, threads in (('cold', 2), ('warm', 2), ('warm1', 1), ('norules', 2), ('nobounds', 2),
                               ('anyorder', 2)):
            command = [sys.executable, __file__, '--worker', name, '--threads', str(threads),
                       '--cache', cache_dir] + (['--quick'] if quick else []) + flags.get(label, [])
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            runs[label] = json.loads(out.strip().splitlines()[-1])
    cold, warm, single, unchecked = runs['cold'], runs['warm'], runs['warm1'], runs['norules']
    unbounded = runs['nobounds']
    return {f'{name}_compile_cold_s': cold['compile_s'], f'{name}_compile_warm_s': warm['compile_s'],
            f'{name}_kernels_compiled_warm': warm['compiled'],
            f'{name}_warm_ready_s': warm['import_s'] + warm['create_s'] + warm['compile_s'],
            f'{name}_first_iter_cold_s': cold['first_iter_s'],
            f'{name}_iter_s_1thread': single['iter_s'], f'{name}_iter_s_2threads': warm['iter_s'],
            f'{name}_speedup_2threads': single['iter_s'] / warm['iter_s'],
            f'{name}_iter_s_rules_unchecked': unchecked['iter_s'],
            f'{name}_iter_s_bounds_unchecked': unbounded['iter_s'],
            f'{name}_bounds_check_cost': warm['iter_s'] / unbounded['iter_s'] - 1,
            f'{name}_first_iter_s_rules_unchecked': unchecked['first_iter_s'],
            f'{name}_first_iter_warm_s': warm['first_iter_s'],
            f'{name}_iter_s_any_order': runs['anyorder']['iter_s'],
            f'{name}_determinism_cost': warm['iter_s'] / runs['anyorder']['iter_s'] - 1,
            f'{name}_peak_mb': warm['peak_mb'], f'{name}_peak_mb_rules_unchecked': unchecked['peak_mb']}


def run_difftaichi_smoke(cache_dir, rules=True, iterations=5):
    """DiffTaichi's smoke example (scripts/difftaichi_smoke.py), in this process: seconds per
    iteration (the first, which checks every launch; the mean of all; the median of the
    rest) and peak memory."""
    os.environ['ENGINE_CACHE_DIR'] = cache_dir
    ti.init(ad_validation=rules)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import difftaichi_smoke
    iteration, loss = difftaichi_smoke.build()
    times, losses = [], []
    for _ in range(iterations):
        start = time.perf_counter()
        iteration()
        times.append(time.perf_counter() - start)
        losses.append(loss[None])
    return dict(first_iter_s=times[0], mean_iter_s=statistics.mean(times), steady_iter_s=statistics.median(times[1:]),
                peak_mb=peak_mb(), losses=losses)


def bench_difftaichi_smoke():
    """DiffTaichi's smoke configuration, checked and unchecked, each in a fresh process
    (after a run that fills the compile cache)."""
    with tempfile.TemporaryDirectory() as cache_dir:
        runs = {}
        for label in ('cold', 'checked', 'unchecked'):
            command = [sys.executable, __file__, '--worker', 'difftaichi_smoke', '--cache', cache_dir] + \
                (['--no-rules'] if label == 'unchecked' else [])
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            runs[label] = json.loads(out.strip().splitlines()[-1])
    checked, unchecked = runs['checked'], runs['unchecked']
    return {'difftaichi_smoke_iter_s': checked['mean_iter_s'],
            'difftaichi_smoke_iter_s_rules_unchecked': unchecked['mean_iter_s'],
            'difftaichi_smoke_first_iter_s': checked['first_iter_s'],
            'difftaichi_smoke_first_iter_s_rules_unchecked': unchecked['first_iter_s'],
            'difftaichi_smoke_rules_time_ratio': checked['mean_iter_s'] / unchecked['mean_iter_s'],
            'difftaichi_smoke_peak_mb': checked['peak_mb'],
            'difftaichi_smoke_peak_mb_rules_unchecked': unchecked['peak_mb'],
            'difftaichi_smoke_rules_memory_ratio': checked['peak_mb'] / unchecked['peak_mb'],
            'difftaichi_smoke_same_losses': checked['losses'] == unchecked['losses']}


def find_taichi(path=None):
    """(interpreter, reason): the Python to run Taichi with (--taichi-python, else
    $BENCH_TAICHI_PYTHON, else this one if it imports taichi), or None and why not. Taichi
    runs in its own processes: its LLVM and llvmlite's are not loaded into one."""
    path = path or os.environ.get('BENCH_TAICHI_PYTHON') or sys.executable
    try:
        found = subprocess.run([path, '-c', 'import taichi'], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f'{path}: {exc}'
    return (path, None) if found else (None, f'{path} cannot import taichi')


def run_program(python, name, engine, dump, threads, rounds=1, fast_math='default'):
    """The fastest of `rounds` runs of a worker of scripts/compute_programs.py, each in a
    fresh process (other work on a shared machine only ever slows a run down): (its JSON,
    None), or (None, the error's last line). fast_math: 'default' (the engine's own: off
    here, on in Taichi), 'on' or 'off'."""
    command = [python, compute_programs.__file__, name, '--engine', engine, '--threads', str(threads),
               '--dump', dump, '--fast-math', fast_math]
    runs = []
    for _ in range(max(1, rounds)):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            lines = (done.stderr or done.stdout).strip().splitlines() or [f'exit status {done.returncode}']
            return None, lines[-1]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {**min(runs, key=lambda run: run['step_s']), 'first_s': min(run['first_s'] for run in runs)}, None


# the rows of a program: (suffix of its figures, the engine's fast_math, Taichi's fast_math).
# '' compares the two defaults (off here, on in Taichi); the others one setting on both sides
PROGRAM_ROWS = (('', 'default', 'default'), ('_fastmath', 'on', 'default'), ('_nofastmath', 'default', 'off'))


def _program_row(results, name, suffix, engine_fm, taichi_fm, taichi_python, folder, **options):
    """One row of a program: the engine's time (and Taichi's, the ratio, the difference)."""
    key = f'program_{name}{suffix}_'
    mine = os.path.join(folder, f'{name}{"_fastmath" if engine_fm == "on" else ""}_engine.npz')
    if engine_fm == 'default' and suffix:       # the engine's default is off: the first row's run
        ours = {'step_s': results[f'program_{name}_s']} if f'program_{name}_s' in results else None
    else:
        ours, error = run_program(sys.executable, name, 'engine', mine, fast_math=engine_fm, **options)
        if error:
            results[key + 'error'] = error
        else:
            results[key + 's'], results[key + 'first_s'] = ours['step_s'], ours['first_s']
    if not taichi_python:
        return
    dump = os.path.join(folder, f'{name}{suffix}_taichi.npz')
    theirs, error = run_program(taichi_python, name, 'taichi', dump, fast_math=taichi_fm, **options)
    if error:
        results[key + 'taichi_error'] = error
        return
    results['program_taichi_version'] = theirs['version']
    results[key + 'taichi_s'] = theirs['step_s']
    if ours:
        results[key + 'ratio'] = ours['step_s'] / theirs['step_s']
        with np.load(mine) as a, np.load(dump) as b:
            results[key + 'max_rel_diff'], results[key + 'differing_share'] = compute_programs.compare(dict(a), dict(b))


def bench_programs(names, taichi_python, exact=('vortex',), threads=2, rounds=1):
    """Seconds per step of each program under the engine and Taichi, each with its default
    fast_math; for the programs in `exact` also both with fast_math=True and both with
    fast_math=False. The fastest of `rounds` fresh processes each, on `threads` threads."""
    results = {'program_threads': threads}
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            for suffix, engine_fm, taichi_fm in PROGRAM_ROWS if name in exact else PROGRAM_ROWS[:1]:
                _program_row(results, name, suffix, engine_fm, taichi_fm, taichi_python, folder,
                             threads=threads, rounds=rounds)
    return results


def print_programs(results, names, taichi_reason):
    """A row per program and setting: both engines' seconds per step, the ratio, the largest difference."""
    print(f'compute-bound programs, {results["program_threads"]} threads (both engines), seconds per step '
          f'(median; with --rounds, the fastest median); ratio: engine / Taichi; max rel diff: of the fields '
          f'after the first step')
    if taichi_reason:
        print(f'Taichi not available ({taichi_reason}): its columns are empty')
    else:
        print(f'Taichi {results.get("program_taichi_version", "?")}; fast_math: each engine\'s default (off here, '
              f'on in Taichi), then (fm on) both on, (fm off) both off')
    print(f'{"program":<20} {"engine":>10} {"taichi":>10} {"ratio":>7} {"max rel diff":>12}  note')

    def cell(key, spec):
        value = results.get(key)
        return format(value, spec) if isinstance(value, float) else ''
    labels = {'': '', '_fastmath': ' (fm on)', '_nofastmath': ' (fm off)'}
    for name in names:
        for suffix, label in labels.items():
            key = f'program_{name}{suffix}_'
            if not any(k.startswith(key) for k in results):
                continue
            mine = key + 's' if suffix != '_nofastmath' else f'program_{name}_s'
            note = results.get(key + 'error') or results.get(key + 'taichi_error', '')
            print(f'{name + label:<20} {cell(mine, ".4g"):>10} {cell(key + "taichi_s", ".4g"):>10} '
                  f'{cell(key + "ratio", ".2f"):>7} {cell(key + "max_rel_diff", ".1e"):>12}  {note}')


def _parser():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--json', default='bench.json')
    parser.add_argument('--sims', default='all', help='comma-separated simulator names, all, or none')
    parser.add_argument('--quick', action='store_true', help='simulators in their --quick configuration')
    parser.add_argument('--only', choices=['programs'], help='run only this section')
    parser.add_argument('--programs', default='all', help='comma-separated compute programs, all, or none')
    parser.add_argument('--threads', type=int, default=None, help='threads of the compute programs, the same '
                        'in both engines (cpu_max_num_threads; default: all cores); a simulator worker\'s threads')
    parser.add_argument('--taichi-python', help='a Python that imports taichi (default: $BENCH_TAICHI_PYTHON, '
                        'else this one if it can)')
    parser.add_argument('--no-taichi', action='store_true', help='do not time the programs under Taichi')
    parser.add_argument('--rounds', type=int, default=1, help='runs of each compute program per engine, '
                        'the fastest kept (a shared machine\'s other work only slows runs down)')
    parser.add_argument('--taichi-exact', default='vortex,nbody', help='programs also timed with fast_math on '
                        'in both engines and off in both (comma-separated, all, or none)')
    parser.add_argument('--worker', help=argparse.SUPPRESS)
    parser.add_argument('--cache', help=argparse.SUPPRESS)
    parser.add_argument('--no-rules', action='store_true', help=argparse.SUPPRESS)
    parser.add_argument('--no-bounds', action='store_true', help=argparse.SUPPRESS)
    parser.add_argument('--any-order', action='store_true', help=argparse.SUPPRESS)
    parser.add_argument('--difftaichi-smoke', action='store_true', help='only the DiffTaichi smoke row')
    return parser


def programs_section(args):
    """The compute programs' rows (printed) and figures."""
    names = list(compute_programs.PROGRAMS) if args.programs == 'all' else \
        [] if args.programs == 'none' else args.programs.split(',')
    if not names:
        return {}
    taichi_python, reason = (None, '--no-taichi') if args.no_taichi else find_taichi(args.taichi_python)
    exact = names if args.taichi_exact == 'all' else args.taichi_exact.split(',')
    results = bench_programs(names, taichi_python, exact, args.threads, args.rounds)
    print_programs(results, names, reason)
    return results


def main():
    args = _parser().parse_args()
    if args.worker == 'difftaichi_smoke':
        print(json.dumps(run_difftaichi_smoke(args.cache, rules=not args.no_rules)))
        return
    if args.worker:
        print(json.dumps(run_simulator(args.worker, args.threads, args.quick, args.cache, rules=not args.no_rules,
                                       bounds=not args.no_bounds, any_order=args.any_order)))
        return
    if args.difftaichi_smoke:
        print(json.dumps(bench_difftaichi_smoke(), indent=1))
        return
    args.threads = args.threads or os.cpu_count()
    results = {}
    if args.only != 'programs':
        ti.init(offline_cache=False)      # the compile benchmarks compile; simulators use the cache
        for bench in (bench_launch, bench_adjoint_launch, bench_replay_launch, bench_elementwise,
                      bench_compile, bench_p2g_adjoint_compile):
            results.update(bench())
        import sims
        chosen = sims.names() if args.sims == 'all' else [] if args.sims == 'none' else args.sims.split(',')
        for name in chosen:
            results.update(bench_simulator(name, args.quick))
        if args.sims == 'all':
            results.update(bench_difftaichi_smoke())
    results.update(programs_section(args))
    width = max(map(len, results), default=9)
    print(f'{"benchmark":<{width}}  value')
    for name, value in results.items():
        print(f'{name:<{width}}  {value:.4g}' if isinstance(value, float) else f'{name:<{width}}  {value}')
    with open(args.json, 'w') as f:
        json.dump(results, f, indent=2)


if __name__ == '__main__':
    main()
