"""The program: what `ti.init` creates and `ti.reset` throws away.

Its configuration, the field table (one data address per field) and the runtime
buffer: kernels receive three pointers, the field table, their argument buffer and
the runtime buffer, whose words are laid out below (error reporting, the random-number
launch counter, the print buffer of run-time prints). The current program is
`context.ctx.program`.
"""
import inspect
import math
import numbers
import os
import warnings

import numpy as np

from . import dtypes as T
from . import options, passes
from .context import ctx
from .errors import TaichiInitError

# Slots of the runtime buffer (int64 words).
RT_ERROR_FLAG = 0       # 0: none; otherwise an ERROR_* code
RT_ERROR_LOC = 1        # index into the kernel's table of source lines (codegen.location_table)
RT_ERROR_FIELD = 2      # field id (or -1-arg for ndarrays; an assert's index for ERROR_ASSERT)
RT_RNG_COUNTER = 3      # launches so far, mixed into each launch's random stream
RT_RNG_SEED = 4
RT_SHADOW = 5           # the shadow table of a launch checked for the rules (engine/autodiff/rules.py)
RT_ERROR_INDEX = 8      # up to RT_ERROR_WORDS index values (or other words of the error)
RT_PRINT_BUFFER = 16    # run-time prints (engine/language/printing.py): the buffer's address,
RT_PRINT_CAPACITY = 17  # its size in words,
RT_PRINT_USED = 18      # the words reserved so far (also by records that did not fit),
RT_PRINT_DROPPED = 19   # the prints that did not fit,
RT_PRINT_LAUNCH = 20    # the launch running in a replayed list (engine/runtime/replay.py)
RT_WORDS = 24
RT_ERROR_WORDS = 8

# The random-number streams (splitmix64) of native code and of the interpreter: a launch's
# state is seed * RNG_MIX1 + launch counter * RNG_GOLDEN, mixed with each stream's salt.
RNG_GOLDEN, RNG_MIX1, RNG_MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB

ERROR_INDEX = 1
ERROR_OUT_OF_MEMORY = 2
ERROR_NON_FINITE = 3
ERROR_ZERO_DIVISION = 4
ERROR_RULE1 = 5         # a global data access rule broken inside a launch (RT_ERROR_INDEX:
ERROR_RULE2 = 6         # the line of the earlier read + 1 (or -1), then the element's offset)
ERROR_RACE = 7
ERROR_COMPONENT = 8     # RT_ERROR_INDEX: the component index, then the vector's or matrix's extent
ERROR_NEGATIVE_POWER = 10   # debug mode: an integer raised to a negative integer at run time
ERROR_ASSERT = 9        # RT_ERROR_FIELD: the assert's index in the kernel; RT_ERROR_INDEX: its message's values


class Config:
    def __init__(self, default_fp=T.f32, default_ip=T.i32, debug=False,
                 cpu_max_num_threads=None, random_seed=0, offline_cache=True,
                 offline_cache_file_path=None, native_replay=True, ad_validation=None,
                 interpret=False, check_bounds=None, kernel_profiler=False, check_out_of_bound=None,
                 print_ir=False, log_level=None, print_full_traceback=False, disable_passes=(),
                 tape_memory_limit=None, deterministic=True, fast_math=False):
        # the keywords Taichi's ti.init takes are in engine/core/options.py, which checks them
        self.default_fp = T.resolve(default_fp)
        self.default_ip = T.resolve(default_ip)
        self.debug = bool(debug)
        if check_bounds is None:        # on unless Taichi's check_out_of_bound turns it off
            check_bounds = True if check_out_of_bound is None else check_out_of_bound
        self.check_bounds = bool(check_bounds) or self.debug     # indices out of range raise IndexError
        self.kernel_profiler = bool(kernel_profiler)    # engine/runtime/profiler.py
        self.print_ir = bool(print_ir)
        self.log_level = options.check_log_level(log_level)
        self.print_full_traceback = bool(print_full_traceback)   # engine/core/errors.py: user_frames_only
        self.num_threads = int(cpu_max_num_threads or os.cpu_count() or 1)
        self.random_seed = int(random_seed)
        self.offline_cache = bool(offline_cache)
        self.disable_passes = passes.check(disable_passes)    # engine/core/passes.py
        self.cache_dir = offline_cache_file_path     # None: engine/backend/cache.py's default
        self.interpret = bool(interpret)            # run kernels on the IR interpreter (engine/backend/interpret.py)
        self.native_replay = bool(native_replay) and not self.interpret   # off: adjoints launch from Python
        # the global data access rules (engine/autodiff/rules.py): True, False or 'always' (check
        # inside every launch, not only at steps of a sequence the tapes had not seen); the
        # default comes from $ENGINE_AD_VALIDATION (a test suite sets 'always'), else True
        if ad_validation is None:
            setting = os.environ.get('ENGINE_AD_VALIDATION', '').strip().lower()
            if setting not in _VALIDATION_SETTINGS:
                raise TaichiInitError(f'$ENGINE_AD_VALIDATION={setting!r}: use 1 (check), 0 (do not) or '
                                      f'always (check inside every launch)')
            ad_validation = _VALIDATION_SETTINGS[setting]
        self.ad_validation = validation_setting(ad_validation, 'ti.init(ad_validation=...)', TaichiInitError)
        self.tape_memory_limit = _tape_memory_limit(tape_memory_limit)
        # parallel loops give the same bits on any number of threads (engine/backend/cpu/ordering.py)
        self.deterministic = bool(deterministic)
        # float ops compile with LLVM's fast-math flags but nnan/ninf (backend/cpu/codegen.py)
        self.fast_math = bool(fast_math)


_VALIDATION_SETTINGS = {'': True, '1': True, 'on': True, 'true': True, 'yes': True,
                        '0': False, 'off': False, 'false': False, 'no': False, 'always': 'always'}


def validation_setting(value, where, error=ValueError):
    """True, False or 'always', from what a user passed to `where`; anything else refused
    (a string such as 'off' must not turn the checks on by being truthy)."""
    if value is None or isinstance(value, bool) or value == 'always' or (type(value) is int and value in (0, 1)):
        return 'always' if value == 'always' else bool(value)
    raise error(f'{where}: True (check the rules), False (do not) or \'always\' (check inside '
                     f'every launch), got {value!r}')


def _tape_memory_limit(limit):
    """Bytes a tape may keep (saved values, launch records) before it raises MemoryError:
    `limit` in bytes, 0 for no limit, None for half of the physical memory."""
    if limit is None:
        try:
            return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // 2
        except (ValueError, OSError, AttributeError):
            return 0
    if isinstance(limit, bool) or not isinstance(limit, numbers.Real) or not math.isfinite(limit) \
            or limit < 0 or limit != int(limit):
        raise TaichiInitError(f'ti.init: tape_memory_limit is a whole number of bytes (0: no limit), got {limit!r}')
    return int(limit)


_KEYWORDS = tuple(inspect.signature(Config).parameters)


class Program:
    """Everything `ti.init` creates and `ti.reset` throws away."""
    generation = 0

    def __init__(self, config: Config):
        Program.generation += 1
        self.generation = Program.generation
        self.config = config
        self.fields = []
        self.snodes = []                  # the layout tree's nodes below ti.root (engine/language/snodes.py)
        self.field_table = np.zeros(64, dtype=np.uint64)
        self.runtime_buffer = np.zeros(RT_WORDS, dtype=np.int64)
        self.runtime_buffer[RT_RNG_SEED] = config.random_seed
        # Raw addresses handed to every launch (numpy's .ctypes.data builds objects per call).
        self.field_table_address = self.field_table.ctypes.data
        self.runtime_address = self.runtime_buffer.ctypes.data
        self.dual_epoch = 0           # bumped whenever a .dual is allocated
        self.grad_epoch = 0           # bumped whenever a .grad is allocated
        self.rule_memo = (None, None)     # (grad_epoch, tape_rules.PlanNode): tape_rules.memo_of
        self.prints = None                # the PrintBuffer, made when a kernel that prints is built
        self.threads_installed = False    # threadpool.install_for: the pool runs num_threads

    def register_field(self, field):
        """Give a field the next slot of the field table."""
        field.id = len(self.fields)
        self.fields.append(field)
        if field.id >= len(self.field_table):
            grown = np.zeros(2 * len(self.field_table), dtype=np.uint64)
            grown[:len(self.field_table)] = self.field_table
            self.field_table = grown
            self.field_table_address = grown.ctypes.data
        return field.id

    def set_field_address(self, field, array):
        self.field_table[field.id] = array.ctypes.data

    def clear_gradients(self):
        """Zero every allocated .grad field (and the .grad's dual, for forward-over-reverse)."""
        for field in self.fields:
            if field.role == 'grad' and field.placed:
                field.data.fill(0)
                if field.dual is not None and field.dual.placed:
                    field.dual.data.fill(0)

    def clear_duals(self):
        for field in self.fields:
            if field.role == 'dual' and field.placed:
                field.data.fill(0)

    def allocate_duals(self, roles=('primal', 'grad')):
        """Give every placed float field of these roles a .dual (forward mode needs them all:
        a tangent written to a field without one would be lost)."""
        for field in list(self.fields):
            if field.role in roles and field.placed and field.dual is not None and not field.dual.placed:
                field.dual._allocate(field.shape)


def current() -> Program:
    """The program of the last ti.init (one with the defaults if there was none)."""
    if ctx.program is None:
        init()
    return ctx.program


def init(arch=None, **kwargs):
    """`ti.init`: start a fresh program (all fields and compiled kernels are dropped)."""
    arch, kwargs = options.resolve(arch, kwargs, _KEYWORDS)
    config = Config(**kwargs)
    if arch not in (None, 'cpu') and (config.log_level or _logging_level) not in ('error', 'critical'):
        _warn_once('arch', f'ti.init(arch={arch}): there is no GPU backend yet; kernels run on the CPU')
    T.defaults.fp, T.defaults.ip = config.default_fp, config.default_ip
    ctx.program = Program(config)
    ctx.watch = None        # calls of the old program are dead: nothing of theirs to keep
    return ctx.program


_logging_level = None       # ti.set_logging_level's; ti.init's log_level goes first


def set_logging_level(level):
    """`ti.set_logging_level(ti.ERROR)`: 'error' or 'critical' silence the engine's warnings
    of ti.init for the programs started after it, as ti.init(log_level=...) does for one."""
    global _logging_level
    _logging_level = options.check_log_level(level, 'ti.set_logging_level: the level')


_warned = set()


def _warn_once(key, message):
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=4)     # the user's ti.init line


def reset():
    ctx.program = ctx.watch = None
