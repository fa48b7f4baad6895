"""`ti.profiler`: per-kernel launch counts and times, with ti.init(kernel_profiler=True).

A profiled program wraps each kernel's native entry point (`CompiledKernel.cfunc`) in a
timer when the kernel is built, so a program without the profiler builds and launches
kernels exactly as before. A launch's time is the wall-clock time of its native call
(packing the arguments in Python is not counted). Adjoint kernels count as 'name.grad',
forward-mode ones as 'name.fwd'. Native replays (a tape's backward pass, ti.capture)
call each kernel in turn from Python while profiling, so each of their launches counts.
"""
import array
import time

from ..core.program import current as current_program
from ..core.errors import missing_attribute

SUFFIXES = {'_grad': '.grad', '_nograd': '.grad', '_fwd': '.fwd'}   # build_native's suffixes
TRACE_LIMIT = 1_000_000         # launches kept for the 'trace' mode (12 bytes each)


class KernelProfilerQueryResult:
    """One kernel's launches: counter, and min, max, avg of their times in milliseconds."""

    def __init__(self, counter=0, min=0.0, max=0.0, avg=0.0):
        self.counter, self.min, self.max, self.avg = counter, min, max, avg

    def __repr__(self):
        return (f'KernelProfilerQueryResult(counter={self.counter}, min={self.min:.6f}, '
                f'max={self.max:.6f}, avg={self.avg:.6f})')


class Records:
    """Per kernel name: [launches, total, min, max] seconds; and the launches in order
    (compactly: the index of the name in `names`, and the seconds)."""

    def __init__(self):
        self.clear()

    def clear(self):
        """Forget every launch (in place: compiled kernels add to this object)."""
        self.stats = {}
        self.names = {}
        self.trace_names, self.trace_seconds = array.array('i'), array.array('d')

    def add(self, name, seconds):
        entry = self.stats.get(name)
        if entry is None:
            self.stats[name] = [1, seconds, seconds, seconds]
        else:
            entry[0] += 1
            entry[1] += seconds
            entry[2] = min(entry[2], seconds)
            entry[3] = max(entry[3], seconds)
        if len(self.trace_seconds) < TRACE_LIMIT:
            self.trace_names.append(self.names.setdefault(name, len(self.names)))
            self.trace_seconds.append(seconds)

    def trace(self):
        """[(name, seconds)] of the launches kept, in order."""
        names = list(self.names)
        return [(names[k], s) for k, s in zip(self.trace_names, self.trace_seconds)]


def records(prog=None):
    """The current program's records (a new ti.init starts empty ones)."""
    prog = prog or current_program()
    found = getattr(prog, 'kernel_profile', None)
    if found is None:
        found = prog.kernel_profile = Records()
    return found


def instrument(compiled, suffix=''):
    """Time the native calls of a kernel just built, if its program profiles."""
    prog = compiled.program
    if not prog.config.kernel_profiler:
        return compiled
    native, add = compiled.cfunc, records(prog).add
    name = compiled.kernel.name + SUFFIXES.get(suffix, '')
    clock = time.perf_counter

    def timed(fields, buffer, runtime_words):
        start = clock()
        native(fields, buffer, runtime_words)
        add(name, clock() - start)
    compiled.cfunc = timed
    return compiled


def enabled(prog=None):
    return (prog or current_program()).config.kernel_profiler


# --- ti.profiler ---------------------------------------------------------------------

def clear_kernel_profiler_info():
    """Forget every launch recorded so far."""
    records().clear()


def get_kernel_profiler_total_time():
    """The time of all recorded launches, in seconds."""
    return sum((entry[1] for entry in records().stats.values()), 0.0)


def query_kernel_profiler_info(name):
    """A KernelProfilerQueryResult for kernel `name` ('name.grad' for its adjoint); zeros
    if it has not been launched."""
    entry = records().stats.get(name)
    if entry is None:
        return KernelProfilerQueryResult()
    count, total, low, high = entry
    return KernelProfilerQueryResult(count, low * 1e3, high * 1e3, total / count * 1e3)


def set_kernel_profiler_toolkit(toolkit_name='default'):
    """Only the 'default' toolkit (timing on the CPU) is there; returns whether it was set."""
    return toolkit_name == 'default'


def print_kernel_profiler_info(mode='count'):
    """Print the recorded launches: 'count' (default) sums them up per kernel, slowest
    first; 'trace' lists them one by one in launch order."""
    if mode not in ('count', 'trace'):
        raise ValueError(f"print_kernel_profiler_info: mode must be 'count' or 'trace', got {mode!r}")
    if not enabled():
        print('The kernel profiler is off: ti.init(kernel_profiler=True) turns it on.')
        return
    print(_count_table() if mode == 'count' else _trace_table())


def _count_table():
    stats = records().stats
    total = sum(e[1] for e in stats.values())
    launches = sum(e[0] for e in stats.values())
    lines = [f'Kernel profiler (count): {len(stats)} kernels, {launches} launches, '
             f'{total * 1e3:.3f} ms in all',
             f'{"time %":>8} {"total ms":>11} {"launches":>9} {"min ms":>10} {"avg ms":>10} '
             f'{"max ms":>10}  kernel']
    for name, (count, seconds, low, high) in sorted(stats.items(), key=lambda kv: -kv[1][1]):
        share = 100.0 * seconds / total if total > 0 else 0.0
        lines.append(f'{share:7.2f}% {seconds * 1e3:11.3f} {count:9d} {low * 1e3:10.4f} '
                     f'{seconds / count * 1e3:10.4f} {high * 1e3:10.4f}  {name}')
    return '\n'.join(lines)


def _trace_table():
    trace = records().trace()
    lines = [f'Kernel profiler (trace): {len(trace)} launches'
             + (f' (the first {TRACE_LIMIT} are kept)' if len(trace) == TRACE_LIMIT else ''),
             f'{"#":>7} {"ms":>10}  kernel']
    lines += [f'{k:7d} {seconds * 1e3:10.4f}  {name}' for k, (name, seconds) in enumerate(trace)]
    return '\n'.join(lines)


def print_scoped_profiler_info():
    """Taichi's scoped profiler times its compiler's phases; the engine has none to report."""
    print('There is no scoped profiler here: ti.profiler.print_kernel_profiler_info() reports '
          'kernel launches (with ti.init(kernel_profiler=True)).')


def print_memory_profiler_info():
    """The memory the current program's fields hold (gradients and duals included)."""
    placed = [f for f in current_program().fields if f.placed]
    nbytes = sum(f._data.nbytes for f in placed)
    print(f'Memory profiler: {len(placed)} fields placed, {nbytes / 2 ** 20:.3f} MiB in all')


def __getattr__(name):
    """A name ti.profiler lacks (one of Taichi's, or a typo): the engine's message, not Python's."""
    raise missing_attribute('ti.profiler', name, globals())

