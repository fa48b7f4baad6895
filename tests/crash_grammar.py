"""Generated programs for the crash test (tests/test_crash_generated.py,
scripts/fuzz_crash.py): kernels whose indices may be anything. Each index axis is drawn
from loop indices, shifted loop indices, integer field values (0, -1, the extent, 2**31 - 1,
-2**31, 10**8, ...), casts of float values that may be NaN or infinite (sqrt and log of
negatives, 0 / 0, huge products), clamps, modulo, division and shifts by field values
(zero included). The kernels run plainly, under a tape (their adjoints index with the same
values), through `kernel.grad()` after the index data changed, and in forward mode; field
and ndarray targets, 1 to 3 dimensions, 1 or 2 threads, sometimes debug mode or
check_bounds=False with indices that stay in range.

A program prints one line per run: `ok` or the name of the exception it raised. Any Python
exception is allowed to be raised except the ones that say the engine failed (see
`ENGINE_FAILURES`); no program may kill the process.
"""
import random

ENGINE_FAILURES = ('AttributeError', 'KeyError', 'UnboundLocalError', 'AssertionError', 'SystemError',
                   'RecursionError', 'NameError ')
_INT_VALUES = [0, 1, 2, -1, -2, 3, 7, 2 ** 31 - 1, -2 ** 31, 10 ** 8, -10 ** 8, 65535]
_FLOAT_VALUES = ['0.0', '1.0', '-1.0', '2.5', '-3.7', '1e30', '-1e30', 'np.nan', 'np.inf', '-np.inf', '1e-30']


class Program:
    def __init__(self, rng):
        self.rng = rng
        self.dims = rng.choice([1, 1, 2, 2, 3])
        self.shape = tuple(rng.randint(1, 5) for _ in range(self.dims))
        self.unchecked = rng.random() < 0.1      # check_bounds=False: indices kept in range
        self.lines = []

    # --- index expressions ------------------------------------------------------------
    def axis_index(self, axis, loop):
        """An i32 expression for `axis`, from the loop's index names `loop`."""
        n = self.shape[axis]
        i = loop[axis % len(loop)]
        if self.unchecked:
            return self.rng.choice([i if len(loop) == self.dims else f'({i} % {n})', f'(ix[{self.at(loop)}] % {n})',
                                    f'ti.max(0, ti.min({self.raw(loop)}, {n - 1}))'])
        choice = self.rng.random()
        if choice < 0.25:
            return i
        if choice < 0.4:
            return f'{i} + {self.rng.choice([-2, -1, 1, 2, n])}'
        if choice < 0.75:
            return self.raw(loop)
        return self.rng.choice([f'ti.max(0, ti.min({self.raw(loop)}, {n - 1}))', f'{self.raw(loop)} % {n}',
                                f'ti.min({self.raw(loop)}, {n - 1})', f'ti.abs({self.raw(loop)})'])

    def raw(self, loop):
        """An unbounded i32 value: field data, casts of odd floats, division, shifts."""
        at = self.at(loop)
        return self.rng.choice([
            f'ix[{at}]',
            f'ti.cast(x[{at}] * 3.0, ti.i32)',
            f'ti.cast(ti.sqrt(x[{at}]) * 2.0, ti.i32)',
            f'ti.cast(ti.log(x[{at}]), ti.i32)',
            f'ti.cast(x[{at}] / (x[{at}] - x[{at}]), ti.i32)',
            f'ti.cast(ti.abs(ti.sin(x[{at}])) * 3.0, ti.i32)',
            f'ix[{at}] // ix[{at}]',
            f'ix[{at}] % (ix[{at}] - ix[{at}])',
            f'ix[{at}] << ix[{at}]',
            f'ix[{at}] * 65536',
            f'ti.cast(ti.floor(x[{at}]), ti.i32) - 1',
        ])

    def at(self, loop):
        """Indices of the loop's own element (in range by construction)."""
        return ', '.join(f'{loop[k % len(loop)]} % {self.shape[k]}' for k in range(self.dims))

    def index(self, loop):
        return ', '.join(self.axis_index(k, loop) for k in range(self.dims))

    # --- the program ---------------------------------------------------------------------
    def source(self):
        rng = self.rng
        threads = rng.choice([1, 2])
        options = [f'cpu_max_num_threads={threads}', f'default_fp=ti.{rng.choice(["f32", "f64"])}',
                   'offline_cache=False']
        if self.unchecked:
            options.append('check_bounds=False')
        elif rng.random() < 0.1:
            options.append('debug=True')
        shape = repr(self.shape)
        ints = [rng.choice(_INT_VALUES) for _ in range(_size(self.shape))]
        floats = [rng.choice(_FLOAT_VALUES) for _ in range(_size(self.shape))]
        out = [
            'import numpy as np',
            'import engine as ti',
            f'ti.init({", ".join(options)})',
            f'x = ti.field(float, shape={shape}, needs_grad=True, needs_dual=True)',
            f'y = ti.field(float, shape={shape}, needs_grad=True, needs_dual=True)',
            f'ix = ti.field(ti.i32, shape={shape})',
            'loss = ti.field(float, shape=(), needs_grad=True, needs_dual=True)',
            f'ix.from_numpy(np.array({ints}, dtype=np.int32).reshape({shape}))',
            f'x.from_numpy(np.array([{", ".join(floats)}]).reshape({shape}).astype(x.to_numpy().dtype))',
        ]
        loops = ', '.join(f'l{k}' for k in range(self.dims))
        header = rng.choice([f'for {loops} in x:', f'for {loops} in ti.ndrange(*{shape}):',
                             'for l0 in range(' + str(self.shape[0]) + '):'])
        loop = [f'l{k}' for k in range(self.dims)] if not header.startswith('for l0 in range') else ['l0']
        body = []
        for _ in range(rng.randint(1, 4)):
            body.append(rng.choice([
                f'y[{self.index(loop)}] += x[{self.index(loop)}] * 2.0',
                f'loss[None] += y[{self.index(loop)}] * x[{self.at(loop)}]',
                f'y[{self.at(loop)}] = ti.sin(x[{self.index(loop)}])',
                f'ti.atomic_max(ix[{self.index(loop)}], 3)',
                f'loss[None] += x[{self.index(loop)}] if ix[{self.at(loop)}] > 0 else 0.0',
            ]))
        serial = ['    ti.loop_config(serialize=True)'] if rng.random() < 0.3 else []
        out += ['', '@ti.kernel', 'def k():'] + serial + ['    ' + header] + ['        ' + b for b in body]
        use_nd = rng.random() < 0.3
        if use_nd:
            out += ['', '@ti.kernel', 'def nd(a: ti.types.ndarray(), b: ti.types.ndarray()):',
                    '    for l0 in range(a.shape[0]):',
                    f'        a[{self.nd_index()}] += b[l0] * 2.0']
        out += ['', 'def attempt(name, run):', '    try:', '        run()', "        print(name, 'ok')",
                '    except Exception as error:', "        print(name, type(error).__name__)", '']
        out.append("attempt('plain', k)")
        out.append('def taped():\n    with ti.ad.Tape(loss):\n        k()')
        out.append("attempt('tape', taped)")
        out.append(f'ix.from_numpy(np.array({[rng.choice(_INT_VALUES) for _ in ints]}, dtype=np.int32).reshape({shape}))')
        out.append('y.grad.fill(1.0)')
        out.append("attempt('grad', k.grad)")
        seed = [1.0] + [0.0] * (_size(self.shape) - 1)
        out.append(f'def forward():\n    with ti.ad.FwdMode(loss=loss, param=x, seed={seed}):\n        k()')
        out.append("attempt('forward', forward)")
        if use_nd:
            length = rng.randint(1, 6)
            out.append(f'attempt("ndarray", lambda: nd(np.zeros({length}), np.ones({length})))')
        out.append("print('alive')")
        return '\n'.join(out) + '\n'

    def nd_index(self):
        if self.unchecked:
            return 'l0'
        return self.rng.choice(['l0', 'l0 + 1', 'l0 - 1', 'ti.cast(b[l0] * 1e10, ti.i32)', 'a.shape[0] - l0 - 1'])


def _size(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def program_source(seed):
    return Program(random.Random(seed)).source()
