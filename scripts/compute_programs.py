"""Compute-bound programs whose source runs unchanged under `import engine as ti` and
`import taichi as ti`: what the engine's generated code costs where launches are few and
arithmetic is much (scripts/bench.py times them under both).

Each builder takes the `ti` module (after ti.init) and its sizes as keywords, fills its
fields from a seeded numpy generator (the same inputs in both engines), and returns a
`Program`: calling it runs one step, `result()` gives the fields that step changes as
numpy arrays.

As a worker (what bench.py runs, once per engine, each in a fresh process):
    python scripts/compute_programs.py NAME --engine taichi --threads 2 [--fast-math default|on|off]
        [--dump result.npz] [--seconds 1.5]
prints one JSON line: seconds of the first step (compile included: no offline cache) and
the median seconds per step after it; --dump writes result() after the first step.
"""
import argparse
import importlib
import json
import os
import statistics
import sys
import time

import numpy as np

TAU = 6.2831853


class Program:
    """One step of a program: `step()` then `ti.sync()`; `result()` reads `fields` back."""

    def __init__(self, ti, step, fields):
        self.ti, self.step, self.fields = ti, step, fields

    def __call__(self):
        self.step()
        self.ti.sync()

    def result(self):
        return {name: field.to_numpy() for name, field in self.fields.items()}


def _f32(array):
    return np.ascontiguousarray(array, dtype=np.float32)


# ---------------------------------------------------------------------------- vortex

VORTEX_CENTERS = [[-0.5, -0.3], [0.4, -0.5], [0.3, 0.45], [-0.45, 0.5]]
VORTEX_STRENGTHS = [1.0, -0.7, 1.3, -0.9]
VORTEX_CORE = 0.04      # squared core radius: the 1/r^2 of a point vortex is smoothed inside it


def vortex(ti, n=200_000, dt=0.01, seed=1):
    """Tracers in the velocity of 4 fixed vortices with smoothed cores (Lamb-Oseen-like);
    one step is Kutta's third-order Runge-Kutta: 3 velocity evaluations of 4 terms, each
    with an exp, a sqrt and a division."""
    pos = ti.Vector.field(2, ti.f32, shape=n)
    centers = ti.Vector.field(2, ti.f32, shape=4)
    strengths = ti.field(ti.f32, shape=4)
    pos.from_numpy(_f32(np.random.default_rng(seed).uniform(-1, 1, (n, 2))))
    centers.from_numpy(_f32(VORTEX_CENTERS))
    strengths.from_numpy(_f32(VORTEX_STRENGTHS))

    @ti.func
    def velocity(p):
        u = ti.Vector([0.0, 0.0])
        for k in range(4):
            d = p - centers[k]
            r = ti.sqrt(d.dot(d) + 1e-6)
            swirl = strengths[k] * (1.0 - ti.exp(-r * r / VORTEX_CORE)) / (TAU * r * r)
            u += swirl * ti.Vector([-d[1], d[0]])
        return u

    @ti.kernel
    def advect(h: ti.f32):
        for i in pos:
            p = pos[i]
            k1 = velocity(p)
            k2 = velocity(p + 0.5 * h * k1)
            k3 = velocity(p + h * (2.0 * k2 - k1))
            pos[i] = p + h / 6.0 * (k1 + 4.0 * k2 + k3)

    return Program(ti, lambda: advect(dt), {'pos': pos})


def vortex_reference(pos, dt=0.01):
    """numpy, float64: one step of `vortex` from positions `pos`."""
    def velocity(p):
        u = np.zeros_like(p)
        for c, s in zip(VORTEX_CENTERS, VORTEX_STRENGTHS):
            d = p - np.asarray(c)
            r2 = (d * d).sum(1) + 1e-6
            swirl = s * (1 - np.exp(-r2 / VORTEX_CORE)) / (TAU * r2)
            u += swirl[:, None] * np.stack([-d[:, 1], d[:, 0]], 1)
        return u
    k1 = velocity(pos)
    k2 = velocity(pos + 0.5 * dt * k1)
    k3 = velocity(pos + dt * (2 * k2 - k1))
    return pos + dt / 6 * (k1 + 4 * k2 + k3)


# ---------------------------------------------------------------------------- fractal

def fractal_angle(step):
    """c's angle at the step-th step: it swings a little about 3.03, where a third of the
    pixels run all iterations; the work per step stays within 2% (a wider swing changed
    it 2x, and the median of a timing with it)."""
    return 3.03 + 0.02 * float(np.sin(0.05 * step))


def fractal(ti, width=640, height=320, iterations=50):
    """A Julia set z -> z^2 + c per pixel, c = 0.7885 e^(i t) moving with each step; a
    pixel stops at |z| > 2 (its value: the share of `iterations` it ran)."""
    pixels = ti.field(ti.f32, shape=(width, height))
    scale = 3.2 / width

    @ti.kernel
    def paint(t: ti.f32):
        for i, j in pixels:
            c = 0.7885 * ti.Vector([ti.cos(t), ti.sin(t)])
            z = ti.Vector([(i - width * 0.5) * scale, (j - height * 0.5) * scale])
            count = 0
            for _ in range(iterations):
                if z.dot(z) > 4.0:
                    break
                z = ti.Vector([z[0] * z[0] - z[1] * z[1], 2.0 * z[0] * z[1]]) + c
                count += 1
            pixels[i, j] = count / iterations

    steps = [0]

    def step():
        steps[0] += 1
        paint(fractal_angle(steps[0]))

    return Program(ti, step, {'pixels': pixels})


def fractal_reference(width, height, iterations, t):
    c = np.complex64(0.7885 * np.exp(1j * np.float32(t)))
    scale = np.float32(3.2 / width)
    i, j = np.meshgrid(np.arange(width, dtype=np.float32), np.arange(height, dtype=np.float32), indexing='ij')
    z = ((i - width * 0.5) * scale + 1j * ((j - height * 0.5) * scale)).astype(np.complex64)
    count = np.zeros(z.shape, np.int32)
    for _ in range(iterations):
        going = z.real * z.real + z.imag * z.imag <= 4
        z = np.where(going, z * z + c, z)
        count += going
    return count / iterations


# ---------------------------------------------------------------------------- rasterizer

def triangle_scene(width, height, triangles, seed=2):
    """Vertices (triangles, 3, 2) in pixels, colours (triangles, 3), depths (triangles,)."""
    rng = np.random.default_rng(seed)
    centre = rng.uniform(0, 1, (triangles, 1, 2)) * [width, height]
    radius = rng.uniform(0.03, 0.2, (triangles, 1, 1)) * min(width, height)
    angle = rng.uniform(0, TAU, (triangles, 1)) + np.array([0, 2.1, 4.2]) + rng.uniform(-0.4, 0.4, (triangles, 3))
    verts = centre + radius * np.stack([np.cos(angle), np.sin(angle)], -1)
    return _f32(verts), _f32(rng.uniform(0, 1, (triangles, 3))), _f32(rng.uniform(0, 1, triangles))


def rasterizer(ti, width=320, height=240, triangles=200):
    """Per pixel, a serial loop over all triangles: three edge functions, a depth test, a
    colour shaded by one barycentric weight (the nearest covering triangle wins)."""
    verts = ti.Vector.field(2, ti.f32, shape=(triangles, 3))
    colors = ti.Vector.field(3, ti.f32, shape=triangles)
    depths = ti.field(ti.f32, shape=triangles)
    image = ti.Vector.field(3, ti.f32, shape=(width, height))
    scene = triangle_scene(width, height, triangles)
    for field, values in zip((verts, colors, depths), scene):
        field.from_numpy(values)

    @ti.func
    def edge(a, b, p):
        return (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])

    @ti.kernel
    def render():
        for x, y in image:
            p = ti.Vector([x + 0.5, y + 0.5])
            nearest = 2.0
            color = ti.Vector([0.1, 0.1, 0.1])
            for t in range(triangles):
                a, b, c = verts[t, 0], verts[t, 1], verts[t, 2]
                w0, w1, w2 = edge(b, c, p), edge(c, a, p), edge(a, b, p)
                inside = (w0 >= 0 and w1 >= 0 and w2 >= 0) or (w0 <= 0 and w1 <= 0 and w2 <= 0)
                if inside and depths[t] < nearest:
                    nearest = depths[t]
                    color = colors[t] * (0.5 + 0.5 * w0 / (w0 + w1 + w2))
            image[x, y] = color

    return Program(ti, render, {'image': image})


def rasterizer_reference(width, height, triangles):
    verts, colors, depths = (a.astype(np.float64) for a in triangle_scene(width, height, triangles))
    x, y = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5, indexing='ij')
    image = np.full((width, height, 3), 0.1)
    nearest = np.full((width, height), 2.0)

    def edge(a, b):
        return (b[0] - a[0]) * (y - a[1]) - (b[1] - a[1]) * (x - a[0])
    for (a, b, c), color, depth in zip(verts, colors, depths):
        w0, w1, w2 = edge(b, c), edge(c, a), edge(a, b)
        inside = ((w0 >= 0) & (w1 >= 0) & (w2 >= 0)) | ((w0 <= 0) & (w1 <= 0) & (w2 <= 0))
        hit = inside & (depth < nearest)
        with np.errstate(divide='ignore', invalid='ignore'):
            shade = 0.5 + 0.5 * w0 / (w0 + w1 + w2)
        image[hit] = color * shade[hit][:, None]
        nearest[hit] = depth
    return image


# ---------------------------------------------------------------------------- stencil

def wave_start(n):
    """A Gaussian bump off centre on the grid's lowest mode, zero on the border. The mode
    keeps values away from denormals (a bump alone has a tail of them, and a wave front
    of them as it spreads): Taichi flushes them to zero, the engine computes them as IEEE
    says, slowly; a stencil benchmark should not measure that."""
    x = np.linspace(0, 1, n)
    bump = np.exp(-((x[:, None] - 0.4) ** 2 + (x[None, :] - 0.55) ** 2) / 0.005)
    start = bump + 0.01 * np.sin(np.pi * x[:, None]) * np.sin(np.pi * x[None, :])
    start[[0, -1], :] = start[:, [0, -1]] = 0
    return _f32(start)


def stencil(ti, n=512, sweeps=4, courant=0.2, damping=0.999):
    """The damped wave equation on an n x n grid with a fixed zero border: each sweep a
    5-point Laplacian, `sweeps` sweeps per launch (two fields take turns as now and before;
    each cell overwrites its own `before`)."""
    now, before = ti.field(ti.f32, shape=(n, n)), ti.field(ti.f32, shape=(n, n))
    now.from_numpy(wave_start(n))
    before.from_numpy(wave_start(n))

    @ti.kernel
    def advance():
        for _ in ti.static(range(sweeps // 2)):
            for i, j in ti.ndrange((1, n - 1), (1, n - 1)):
                lap = now[i + 1, j] + now[i - 1, j] + now[i, j + 1] + now[i, j - 1] - 4.0 * now[i, j]
                before[i, j] = now[i, j] + damping * (now[i, j] - before[i, j]) + courant * lap
            for i, j in ti.ndrange((1, n - 1), (1, n - 1)):
                lap = before[i + 1, j] + before[i - 1, j] + before[i, j + 1] + before[i, j - 1] - 4.0 * before[i, j]
                now[i, j] = before[i, j] + damping * (before[i, j] - now[i, j]) + courant * lap

    return Program(ti, advance, {'now': now, 'before': before})


def stencil_reference(n, sweeps=4, courant=0.2, damping=0.999):
    a, b = wave_start(n).astype(np.float64), wave_start(n).astype(np.float64)
    for _ in range(sweeps):
        lap = a[2:, 1:-1] + a[:-2, 1:-1] + a[1:-1, 2:] + a[1:-1, :-2] - 4 * a[1:-1, 1:-1]
        b[1:-1, 1:-1] = a[1:-1, 1:-1] + damping * (a[1:-1, 1:-1] - b[1:-1, 1:-1]) + courant * lap
        a, b = b, a
    return {'now': a, 'before': b} if sweeps % 2 == 0 else {'now': b, 'before': a}


# ---------------------------------------------------------------------------- nbody

def nbody_start(n, seed=3):
    """Positions in a unit ball, a slow rotation about z, masses summing to 1."""
    rng = np.random.default_rng(seed)
    pos = rng.normal(0, 0.4, (n, 3))
    vel = 0.3 * np.stack([-pos[:, 1], pos[:, 0], np.zeros(n)], 1)
    return _f32(pos), _f32(vel), _f32(rng.uniform(0.5, 1.5, n) / n * 1.0)


def nbody(ti, n=4096, dt=1e-3, softening=1e-2):
    """All-pairs gravity: a parallel loop over bodies, each summing a serial loop over all
    bodies (softened 1/r^2), then symplectic Euler."""
    pos, vel = ti.Vector.field(3, ti.f32, shape=n), ti.Vector.field(3, ti.f32, shape=n)
    acc, mass = ti.Vector.field(3, ti.f32, shape=n), ti.field(ti.f32, shape=n)
    for field, values in zip((pos, vel, mass), nbody_start(n)):
        field.from_numpy(values)

    @ti.kernel
    def forces():
        for i in range(n):
            p = pos[i]
            a = ti.Vector([0.0, 0.0, 0.0])
            for j in range(n):
                d = pos[j] - p
                r2 = d.dot(d) + softening
                a += mass[j] / (r2 * ti.sqrt(r2)) * d
            acc[i] = a

    @ti.kernel
    def integrate(h: ti.f32):
        for i in range(n):
            vel[i] += h * acc[i]
            pos[i] += h * vel[i]

    def step():
        forces()
        integrate(dt)

    return Program(ti, step, {'pos': pos, 'vel': vel})


def nbody_reference(n, dt=1e-3, softening=1e-2):
    pos, vel, mass = (a.astype(np.float64) for a in nbody_start(n))
    d = pos[None, :, :] - pos[:, None, :]
    r2 = (d * d).sum(-1) + softening
    vel = vel + dt * (mass[None, :, None] / (r2 * np.sqrt(r2))[:, :, None] * d).sum(1)
    return {'pos': pos + dt * vel, 'vel': vel}


# ---------------------------------------------------------------------------- MPM

def _mpm_fields(ti, n_particles, n_grid):
    return dict(x=ti.Vector.field(2, ti.f32, shape=n_particles), v=ti.Vector.field(2, ti.f32, shape=n_particles),
                C=ti.Matrix.field(2, 2, ti.f32, shape=n_particles),
                grid_v=ti.Vector.field(2, ti.f32, shape=(n_grid, n_grid)),
                grid_m=ti.field(ti.f32, shape=(n_grid, n_grid)))


def _mpm_substep(ti, f, n_grid, dt, p_mass, affine_of, gravity=9.8, wall=3):
    """An MLS-MPM substep in one kernel: clear the grid, particles to grid (quadratic B-splines,
    atomic adds), grid velocities (gravity, sticky walls), grid to particles. `affine_of(p)`, a
    ti.func, updates particle p's state and returns its stress term plus its mass times C[p]."""
    x, v, C, grid_v, grid_m = f['x'], f['v'], f['C'], f['grid_v'], f['grid_m']
    dx = 1.0 / n_grid

    @ti.kernel
    def substep():
        for i, j in grid_m:
            grid_v[i, j] = ti.Vector([0.0, 0.0])
            grid_m[i, j] = 0.0
        for p in x:
            cell = x[p] / dx
            base = ti.cast(cell - 0.5, ti.i32)
            fx = cell - ti.cast(base, ti.f32)
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
            affine = affine_of(p)
            for i, j in ti.static(ti.ndrange(3, 3)):
                offset = ti.Vector([i, j])
                dpos = (ti.cast(offset, ti.f32) - fx) * dx
                weight = w[i][0] * w[j][1]
                grid_v[base + offset] += weight * (p_mass * v[p] + affine @ dpos)
                grid_m[base + offset] += weight * p_mass
        for i, j in grid_m:
            if grid_m[i, j] > 0:
                gv = grid_v[i, j] / grid_m[i, j]
                gv[1] -= dt * gravity
                if (i < wall and gv[0] < 0) or (i >= n_grid - wall and gv[0] > 0):
                    gv[0] = 0.0
                if (j < wall and gv[1] < 0) or (j >= n_grid - wall and gv[1] > 0):
                    gv[1] = 0.0
                grid_v[i, j] = gv
        for p in x:
            cell = x[p] / dx
            base = ti.cast(cell - 0.5, ti.i32)
            fx = cell - ti.cast(base, ti.f32)
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
            new_v = ti.Vector([0.0, 0.0])
            new_C = ti.Matrix([[0.0, 0.0], [0.0, 0.0]])
            for i, j in ti.static(ti.ndrange(3, 3)):
                offset = ti.Vector([i, j])
                g = grid_v[base + offset]
                weight = w[i][0] * w[j][1]
                new_v += weight * g
                new_C += (4.0 / dx) * weight * g.outer_product(ti.cast(offset, ti.f32) - fx)
            v[p], C[p] = new_v, new_C
            x[p] += dt * new_v

    return substep


def _repeat(function, times):
    def repeated():
        for _ in range(times):
            function()
    return repeated


def mpm_start(n_particles, blocks, seed=4):
    """Particles spread evenly over `blocks` squares ((corner x, corner y, side) each)."""
    rng = np.random.default_rng(seed)
    which = np.arange(n_particles) % len(blocks)
    corner, side = np.asarray(blocks)[which, :2], np.asarray(blocks)[which, 2:]
    return _f32(corner + rng.uniform(0, 1, (n_particles, 2)) * side), which.astype(np.int32)


def mpm88(ti, n_particles=8192, n_grid=128, substeps=8, dt=2e-4, stiffness=400.0):
    """A weakly compressible fluid (pressure from the volume ratio J) falling in a box; one
    step is `substeps` launches of the substep kernel."""
    f = _mpm_fields(ti, n_particles, n_grid)
    J = ti.field(ti.f32, shape=n_particles)
    dx = 1.0 / n_grid
    p_vol = (0.5 * dx) ** 2
    f['x'].from_numpy(mpm_start(n_particles, [(0.15, 0.2, 0.45)])[0])
    J.fill(1.0)
    C = f['C']

    @ti.func
    def affine_of(p):
        J[p] *= 1.0 + dt * C[p].trace()
        pressure = -dt * 4.0 * stiffness * p_vol * (J[p] - 1.0) / (dx * dx)
        return ti.Matrix([[pressure, 0.0], [0.0, pressure]]) + p_vol * C[p]

    step = _repeat(_mpm_substep(ti, f, n_grid, dt, p_vol, affine_of), substeps)
    return Program(ti, step, {'x': f['x'], 'v': f['v'], 'J': J, 'grid_m': f['grid_m']})


def mpm99(ti, n_particles=8192, n_grid=128, substeps=8, dt=1e-4, young=3e3, poisson=0.2):
    """Three materials, one block each, with a deformation gradient F: a liquid (F reset
    to sqrt(J) I), an elastic jelly, and snow whose singular values (ti.svd) are clamped,
    the clamped part kept in Jp, which hardens it."""
    f = _mpm_fields(ti, n_particles, n_grid)
    F = ti.Matrix.field(2, 2, ti.f32, shape=n_particles)
    Jp = ti.field(ti.f32, shape=n_particles)
    material = ti.field(ti.i32, shape=n_particles)
    dx = 1.0 / n_grid
    p_vol = (0.5 * dx) ** 2
    mu0, la0 = young / (2 * (1 + poisson)), young * poisson / ((1 + poisson) * (1 - 2 * poisson))
    x0, which = mpm_start(n_particles, [(0.1, 0.15, 0.25), (0.4, 0.45, 0.2), (0.65, 0.1, 0.25)])
    f['x'].from_numpy(x0)
    material.from_numpy(which)
    F.from_numpy(np.tile(np.eye(2, dtype=np.float32), (n_particles, 1, 1)))
    Jp.fill(1.0)
    C = f['C']

    @ti.func
    def affine_of(p):
        eye = ti.Matrix([[1.0, 0.0], [0.0, 1.0]])
        Fp = (eye + dt * C[p]) @ F[p]
        soft = ti.exp(8.0 * (1.0 - Jp[p]))
        if material[p] == 1:
            soft = 0.4
        mu, la = mu0 * soft, la0 * soft
        if material[p] == 0:
            mu = 0.0
        U, sig, V = ti.svd(Fp)
        J = 1.0
        for d in ti.static(range(2)):
            s = sig[d, d]
            if material[p] == 2:
                s = ti.min(ti.max(s, 1.0 - 2e-2), 1.0 + 5e-3)
            Jp[p] *= sig[d, d] / s
            sig[d, d] = s
            J *= s
        if material[p] == 0:
            Fp = eye * ti.sqrt(J)
        elif material[p] == 2:
            Fp = U @ sig @ V.transpose()
        F[p] = Fp
        stress = 2.0 * mu * (Fp - U @ V.transpose()) @ Fp.transpose() + eye * (la * J * (J - 1.0))
        return (-dt * p_vol * 4.0 / (dx * dx)) * stress + p_vol * C[p]

    step = _repeat(_mpm_substep(ti, f, n_grid, dt, p_vol, affine_of), substeps)
    return Program(ti, step, {'x': f['x'], 'v': f['v'], 'F': F, 'Jp': Jp, 'grid_m': f['grid_m']})


PROGRAMS = {'vortex': vortex, 'fractal': fractal, 'rasterizer': rasterizer, 'stencil': stencil,
            'mpm88': mpm88, 'mpm99': mpm99, 'nbody': nbody}


# ---------------------------------------------------------------------------- comparing, timing

def compare(ours, theirs):
    """The largest difference of an array relative to that array's largest magnitude
    (over all arrays), and the share of elements that differ by more than 1e-4 of it."""
    worst, differing, total = 0.0, 0, 0
    for name, reference in theirs.items():
        a, b = np.asarray(ours[name], np.float64), np.asarray(reference, np.float64)
        scale = max(float(np.abs(b).max(initial=0.0)), 1e-30)
        error = np.abs(a - b) / scale
        worst = max(worst, float(np.nan_to_num(error, nan=np.inf).max(initial=0.0)))
        differing += int(np.count_nonzero(~(error <= 1e-4)))
        total += error.size
    return worst, differing / max(total, 1)


def measure(program, seconds):
    """Median seconds per step over samples that fill about `seconds`; a sample is as
    many steps as take about 50 ms (one step's launch overhead is then averaged out)."""
    start = time.perf_counter()
    program()
    one = time.perf_counter() - start
    number = max(1, int(0.05 / max(one, 1e-7)))
    samples = max(5, min(50, int(seconds / (number * max(one, 1e-7)))))
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        for _ in range(number):
            program()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times), samples * number


def run_worker(args):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the engine of this tree
    ti = importlib.import_module(args.engine)
    settings = dict(arch=ti.cpu, cpu_max_num_threads=args.threads, offline_cache=False)
    if args.fast_math != 'default':       # Taichi's default is on, the engine's off
        settings['fast_math'] = args.fast_math == 'on'
    ti.init(**settings)
    program = PROGRAMS[args.name](ti)
    start = time.perf_counter()
    program()
    first = time.perf_counter() - start
    if args.dump:
        np.savez(args.dump, **program.result())
    step_s, steps = measure(program, args.seconds)
    version = getattr(ti, '__version__', None)
    return dict(name=args.name, engine=args.engine, threads=args.threads, fast_math=args.fast_math,
                first_s=first, step_s=step_s, steps=steps,
                version='.'.join(map(str, version)) if isinstance(version, tuple) else version)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('name', choices=sorted(PROGRAMS))
    parser.add_argument('--engine', default='engine', choices=['engine', 'taichi'])
    parser.add_argument('--threads', type=int, default=os.cpu_count())
    parser.add_argument('--fast-math', choices=['default', 'on', 'off'], default='default',
                        help="ti.init(fast_math=...): the engine's own default (off here, on in Taichi)")
    parser.add_argument('--dump', help='write the fields after the first step to this .npz')
    parser.add_argument('--seconds', type=float, default=1.5, help='about how long to time steps')
    print(json.dumps(run_worker(parser.parse_args())))


if __name__ == '__main__':
    main()
