"""A compiled kernel and its launch: pack the arguments, call native code, report errors.

A launch packs scalar arguments into a preallocated buffer and calls the native code
through ctypes (which releases the GIL), so the Python work per launch is a handful of
attribute reads and one `struct.pack_into`. The kernels derived from it (adjoint,
tangents, checked build) are built by engine/runtime/pipeline.py.
"""
import ctypes
import operator
import struct

import numpy as np

from . import bounds
from .cpu import codegen, jit
from ..language import printing, structs
from ..autodiff import rules
from ..core import dtypes as T
from ..language.abi import ExternalArray, as_array, call_error, companion, memory_key, scalar_format
from ..language.fields import Field
from ..ir.nodes import walk
from .native_errors import raise_recorded_error
from ..core.program import RT_SHADOW


class CompiledKernel:
    def __init__(self, kernel, address, layout, prog, body, label=None):
        self.label = label or kernel.name     # how errors name it ("f (its adjoint)")
        self.kernel, self.layout, self.program, self.body = kernel, layout, prog, body
        self.address = address
        self.cfunc = jit.cfunc(address, None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        self.buffer = ctypes.create_string_buffer(layout.size)
        self.buffer_address = ctypes.addressof(self.buffer)
        self.pack = struct.Struct(layout.scalar_format).pack_into
        n_scalars = len(layout.scalar_positions)
        all_scalars = n_scalars == len(layout.specs)
        positions = layout.scalar_positions
        self.pick = (layout.pack_values if layout.compound else
                     None if all_scalars else
                     (lambda args: ()) if n_scalars == 0 else
                     (lambda args, g=operator.itemgetter(*positions): (g(args),)) if n_scalars == 1 else
                     operator.itemgetter(*positions))
        self.nargs = len(layout.specs)
        rt, slots = layout.return_type, layout.return_slots
        self.unpack_return = struct.Struct('=' + ''.join(map(scalar_format, slots))).unpack_from if slots else None
        # a vector, matrix, struct or tuple is rebuilt from its slots; a scalar is the first
        self.build_return = None if isinstance(rt, T.DataType) else lambda values: structs.join(rt, iter(values))
        # run-time prints and asserts: their Formats, by the index native code records
        self.print_formats, self.assert_formats = ([s.attrs['format'] for s in printing.table(body, op)]
                                                   for op in ('print', 'assert_fail'))
        if self.print_formats:
            printing.buffer_of(prog)
        # Native code reports errors (indices out of range, debug mode's checks, autodiff
        # stacks out of memory) and prints; a launch looks for them only where the code can
        # record one, so a kernel without them pays nothing.
        # the ndarray arguments it writes, (position, path: () or a .grad/.dual companion's): a
        # read-only array among them is refused before the launch (a memmap opened with
        # mode='r' is mapped read-only, and a write to it would kill the process)
        self.written_arrays = frozenset((s.attrs['target'].index, s.attrs['target'].path) for s in walk(body)
                                        if s.op in ('global_store', 'atomic')
                                        and not isinstance(s.attrs['target'], Field))
        self.check_errors = (prog.config.debug or any(s.op == 'stack_push' for s in walk(body))
                             or (prog.config.check_bounds and bounds.checks_indices(body))
                             or bool(self.print_formats))
        # the kernels derived from this one (engine/runtime/pipeline.py): (epoch or key, kernel)
        self.adjoint = None
        self.tangents = None
        self.summary = None
        self._locations = None
        self.checked = None             # the build that checks the rules (engine/autodiff/rules.py)
        self.constant_adjoint = None

    @property
    def locations(self):
        """The kernel's table of source lines, by which its native code reports errors."""
        if self._locations is None:
            self._locations = codegen.location_table(self.body)
        return self._locations

    def report_errors(self, ndarrays=None):
        """After a launch: what it printed, then the error it recorded, if any."""
        if self.print_formats:
            printing.drain(self.program, lambda launch: self)
        raise_recorded_error(self.program, self.label, ndarrays, self.locations, self.assert_formats)

    def access_summary(self):
        """Its field accesses, for the global data access rules (computed once)."""
        if self.summary is None:
            self.summary = rules.KernelSummary(self.body, self.layout)
        return self.summary

    def shadowed(self, args):
        """What a checked launch with these arguments keeps shadow words for: the fields and
        ndarrays not proven safe, and every ndarray argument that is passed twice (two
        parameters naming one array are one array to the rules)."""
        targets = list(self.access_summary().unproven)
        seen = {}
        for k, param in self.layout.ndarray_params.items():
            array = as_array(args[k])
            for other_k, other in seen.items():
                if other is array or memory_key(other) == memory_key(array):
                    targets += [p for p in (self.layout.ndarray_params[other_k], param) if p not in targets]
                elif np.shares_memory(other, array):
                    raise rules.AutodiffRuleError(
                        f'kernel {self.kernel.name}: ndarray arguments {self.layout.specs[other_k].name} and '
                        f'{self.layout.specs[k].name} overlap in memory without being the same array; '
                        f'the rules cannot be checked for them (pass separate arrays or the same one)')
            seen[k] = array
        return targets

    def launch_with_shadows(self, checked, args, targets):
        """Launch `checked`, this kernel's checked build, with shadow words for `targets`
        (arguments naming one array share its words)."""
        windows, keys = {}, []
        for target in targets:
            array = target._data if isinstance(target, Field) else as_array(args[target.index])
            key = memory_key(array)
            lo, hi = self._shadow_window(target, array, args)
            seen = windows.get(key, (lo, hi))
            windows[key] = (min(lo, seen[0]), max(hi, seen[1]))
            keys.append(key)
        shadows = {key: (lo, np.zeros(hi - lo, dtype=np.int32), np.zeros(hi - lo, dtype=np.int64))
                   for key, (lo, hi) in windows.items()}
        # each table entry is where element 0's words would be: the launch indexes them by
        # the element's offset in the whole array, and touches only offsets in the window
        table = np.array([int(words.ctypes.data) - lo * words.itemsize
                          for lo, *both in map(shadows.get, keys) for words in both], dtype=np.uint64)
        words = self.program.runtime_buffer
        words[RT_SHADOW] = table.ctypes.data
        try:
            return checked.launch(args)
        finally:
            words[RT_SHADOW] = 0

    def _shadow_window(self, target, array, args):
        """[lo, hi): the offsets in `array` (components included) that this launch's accesses
        to `target` can touch, from their boxes (rules.Box): the shadow words of one time
        step of a state indexed by time, not of all steps. The whole array without index
        checks (an index out of range could then land outside the window) or when a box's
        point is out of range (the launch will stop there)."""
        shape = target.shape if isinstance(target, Field) else array.shape[:target.ndim]
        elements = int(np.prod(shape, dtype=np.int64))
        components = array.size // elements if elements else 1
        if not self.program.config.check_bounds or not elements:
            return 0, array.size
        lo, hi = array.size, 0
        for obj, _, box, _ in self.access_summary().accesses:
            if obj is not target:
                continue
            first = last = 0
            for at, n in zip(box.index(args, shape), shape):
                if isinstance(at, slice) and at.stop == 0:
                    return 0, array.size
                a, b = (0, n - 1) if isinstance(at, slice) else (at, at)
                first, last = first * n + a, last * n + b
            lo, hi = min(lo, first * components), max(hi, (last + 1) * components)
        return (lo, hi) if lo < hi else (0, array.size)

    def launch(self, args):
        if len(args) != self.nargs:
            raise call_error(self.kernel, f'kernel {self.kernel.name}() takes {self.nargs} '
                                           f'argument(s), {len(args)} given')
        try:
            self.pack(self.buffer, 0, *(args if self.pick is None else self.pick(args)))
        except (struct.error, TypeError, OverflowError) as exc:
            self.kernel._check_args(args)
            raise call_error(self.kernel, f'kernel {self.kernel.name}(): {exc}') from None
        if self.layout.ndarrays:
            self._pack_ndarrays(args)
        prog = self.program
        self.cfunc(prog.field_table_address, self.buffer_address, prog.runtime_address)
        if self.check_errors:
            self.report_errors({k: (self.layout.specs[k].name, as_array(args[k]).shape[:ndim])
                                for k, _, ndim, _ in self.layout.ndarrays})
        if self.unpack_return is not None:
            values = self.unpack_return(self.buffer, self.layout.ret_offset)
            return values[0] if self.build_return is None else self.build_return(values)

    def _pack_ndarrays(self, args):
        for k, offset, ndim, companions in self.layout.ndarrays:
            array = as_array(args[k])
            if not array.flags.c_contiguous:
                raise call_error(self.kernel, f'ndarray argument {self.layout.specs[k].name!r} must be '
                                               f'C-contiguous (use {_contiguous_hint(args[k])})')
            if self.written_arrays and (k, ()) in self.written_arrays and not array.flags.writeable:
                raise self._read_only(k, '')
            struct.pack_into('=Q' + 'q' * ndim, self.buffer, offset, array.ctypes.data, *array.shape[:ndim])
            for pointer_offset, path in companions:      # its .grad, .dual, .grad.dual
                other = companion(args[k], path).data
                if (k, path) in self.written_arrays and not (other.flags.writeable and other.flags.c_contiguous):
                    raise self._read_only(k, '.' + '.'.join(path), other.flags.writeable)
                struct.pack_into('=Q', self.buffer, pointer_offset, other.ctypes.data)

    def _read_only(self, k, path, writeable=False):
        name = f'{self.layout.specs[k].name}{path}'
        if writeable:
            return call_error(self.kernel, f'ndarray argument {name!r} of {self.label} must be C-contiguous')
        return call_error(self.kernel, f'ndarray argument {name!r} of {self.label} is read-only (flags.writeable '
                                       f'is False, e.g. np.memmap(mode=\'r\') or a broadcast view) and the kernel '
                                       f'writes it; pass a writable array (np.array(...) copies one, a memmap '
                                       f"opened with mode='r+' or 'c' is writable)")


def _contiguous_hint(value):
    return '.contiguous()' if isinstance(value, ExternalArray) else 'np.ascontiguousarray'
