"""The IR layer: the printer's text, the verifier, and the simplify passes statement by
statement (golden texts), then properties: simplify never changes a result, on constants
folded in every type and on generated programs (tests/kernel_grammar.py), compared with
the same kernels compiled unsimplified."""
import math
import os
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import engine as ti
from engine.backend import cache
from engine.core import dtypes as T
from engine.autodiff import forward, reverse
from engine.ir import ops, printer, simplify
from engine.ir.nodes import Block, Builder, building, walk
from engine.ir.verify import VerifyError, verify

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def ir(build):
    """The IR that build(builder) emits with ops' operators, as the frontend does."""
    b = Builder()
    with building(b):
        build(b)
    return b.root


def golden(text):
    return textwrap.dedent(text).strip('\n')


def arg(offset, dtype=T.f32):
    return ops.emit('arg', (), dtype, offset=offset)


def loop(b, begin, end, parallel=False):
    """A `for` over [begin, end): returns (its index, the context that fills its body)."""
    body, index = Block(), ops.Value('loop_index', (), T.i32)
    b.emit('for', [ops.as_value(begin, T.i32), ops.as_value(end, T.i32)], body=body, index=index,
           parallel=parallel)
    return index, b.open(body)


def branch(b, cond):
    then, other = Block(), Block()
    b.emit('if', [cond], then=then, **{'else': other})
    return b.open(then), b.open(other)


@pytest.fixture
def interpreted():
    """Kernels keep the IR as built (the interpreter runs it unsimplified)."""
    ti.init(arch=ti.cpu, interpret=True)
    yield
    ti.init(arch=ti.cpu)


# --- the printer -----------------------------------------------------------------------

def _locals_and_branches(b):
    x = arg(0)
    cell = b.emit('alloca', (), T.f32, cls=ops.Value)
    b.emit('local_store', [cell, x * 2.0])
    i, body = loop(b, 0, 3)
    with body:
        then, other = branch(b, i > 0)
        with then:
            b.emit('local_store', [cell, ops.emit('local_load', [cell], T.f32) + x])
    b.emit('return', [ops.emit('local_load', [cell], T.f32)])


def test_the_printer_numbers_statements_in_order_and_indents_blocks():
    assert printer.text(ir(_locals_and_branches)) == golden('''
        %0 = arg() offset=0 : f32
        %1 = alloca() : f32
        %2 = const() value=2.0 : f32
        %3 = mul(%0, %2) : f32
        local_store(%1, %3)
        %4 = const() value=0 : i32
        %5 = const() value=3 : i32
        for(%4, %5) index=%6 parallel=False
          %7 = const() value=0 : i32
          %8 = gt(%6, %7) : i32
          if(%8)
            then:
              %9 = local_load(%1) : f32
              %10 = add(%9, %0) : f32
              local_store(%1, %10)
        %11 = local_load(%1) : f32
        return(%11)''')


def test_the_text_does_not_depend_on_statement_ids():
    first, second = ir(_locals_and_branches), ir(_locals_and_branches)
    assert [s.id for s in walk(first)] != [s.id for s in walk(second)]
    assert printer.text(first) == printer.text(second)
    assert cache.key('k', first, 0) == cache.key('k', second, 0)


def test_the_cache_key_changes_with_the_code_and_refuses_unstable_values():
    def with_constant(value, **attrs):
        return ir(lambda b: b.emit('return', [arg(0) * ops.emit('const', (), T.f32, value=value, **attrs)]))
    keys = {cache.key('k', with_constant(v), 0) for v in (2.0, 3.0, -0.0, 0.0)}
    assert len(keys) == 4 and None not in keys
    assert cache.key('k', with_constant(2.0, note=object()), 0) is None
    with pytest.raises(cache.Uncacheable):
        cache.key_text(with_constant(2.0, note=object()))


def test_print_ir_prints_the_printers_text(capsys):
    ti.init(arch=ti.cpu, print_ir=True)

    @ti.kernel
    def shown(a: ti.f32) -> ti.f32:
        return a * 2.0

    assert shown(1.5) == 3.0
    ti.init(arch=ti.cpu)
    assert capsys.readouterr().out == golden('''
        kernel shown, after build:
          %0 = arg() offset=0 : f32
          %1 = alloca() : f32
          local_store(%1, %0)
          %2 = local_load(%1) : f32
          %3 = const() value=2.0 : f32
          %4 = mul(%2, %3) : f32
          return(%4)
        kernel shown, after simplify:
          %0 = arg() offset=0 : f32
          %1 = const() value=2.0 : f32
          %2 = mul(%0, %1) : f32
          return(%2)''') + '\n'


def test_autodiff_stacks_are_numbered_by_identity(interpreted):
    x = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def k(n: ti.i32):
        v = x[None]
        ti.loop_config(serialize=True)
        for _ in range(n):
            v = v * v
        x[None] = v

    adjoint = printer.text(reverse.adjoint(k.compiled((3,)).body))
    assert 'stack_push(%' in adjoint and 'stack=stack#0' in adjoint and 'stack#1' not in adjoint


# --- the verifier ------------------------------------------------------------------------

def _reordered(b):
    x = arg(0)
    y = x + 1.0
    b.block.stmts[:] = [y] + [s for s in b.block.stmts if s is not y]      # used before x is defined


def _escaping(b):
    i, body = loop(b, 0, 2)
    with body:
        inner = ops.cast(i, T.f32)
    b.emit('return', [inner])           # defined in the loop, used after it


def _twice(b):
    x = arg(0)
    b.block.stmts.append(x)


def _stray_break(b):
    then, _ = branch(b, arg(0, T.i32))
    with then:
        b.emit('break')


def _shared_index(b):
    i, body = loop(b, 0, 2)
    b.emit('for', [ops.const(0, T.i32), ops.const(1, T.i32)], body=Block(), index=i, parallel=False)


@pytest.mark.parametrize('build, problem, at', [
    (_reordered, 'operand %1 (arg) is defined nowhere before this use', '%0 = add(%1, %2) : f32'),
    (_escaping, 'operand %3 (cast) is defined in a block that does not enclose this use', 'return(%3)'),
    (_twice, 'arg statement %0 appears twice', '%0 = arg() offset=0 : f32'),
    (_stray_break, 'break outside a loop', 'break()'),
    (_shared_index, 'loop_index statement %2 appears twice', 'for(%3, %4) index=%2'),
    (lambda b: b.block.stmts.append(ops.Value('add', [arg(0)], T.f32)), 'add takes 2 operand(s), has 1', '%1 = add(%0) : f32'),
    (lambda b: ops.emit('add', [arg(0), arg(8, T.f64)], T.f32), 'add mixes operand types f32, f64', None),
    (lambda b: ops.emit('lt', [arg(0), arg(8)], T.f32), 'lt of f32 operands must give i32', None),
    (lambda b: ops.emit('sqrt', [arg(0)], T.f64), 'sqrt of f32 operands must give f32', None),
    (lambda b: ops.emit('bit_and', [arg(0), arg(8)], T.f32), 'bit_and needs integer operands', None),
    (lambda b: ops.emit('select', [arg(0, T.i32), arg(8), arg(16, T.f64)], T.f32), 'select of f32 and f64 arms', None),
    (lambda b: b.emit('local_store', [b.emit('alloca', (), T.f32), arg(0, T.f64)]), 'f64 value stored into f32', None),
    (lambda b: b.emit('local_load', [arg(0)], T.f32), 'local_load of %0, a arg: not a local', None),
    (lambda b: branch(b, arg(0)), 'the condition must be an integer, is f32', None),
    (lambda b: b.emit('return', [b.emit('print', [], format='')]), '(print) has no value', 'return(%?'),
    (lambda b: ops.emit('frobnicate', [arg(0)], T.f32), "unknown op 'frobnicate'", None),
    (lambda b: ops.emit('const', (), T.i32, value=0.5), 'a i32 constant holds 0.5', None),
])
def test_the_verifier_names_the_stage_the_statement_and_the_problem(build, problem, at):
    with pytest.raises(VerifyError) as error:
        verify(ir(build), stage='after a broken pass')
    message = str(error.value)
    assert message.startswith('IR after a broken pass: ') and problem in message
    assert at is None or f'at: {at}' in message


def test_every_stage_of_a_kernel_verifies(interpreted):
    x = ti.field(ti.f32, shape=4, needs_grad=True)
    y = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def k(n: ti.i32):
        for i in x:
            v = x[i]
            j = 0
            while j < n:
                if v > 2.0:
                    break
                v = v * 1.5 + ti.sin(v)
                j += 1
            y[None] += v

    body = k.compiled((3,)).body
    verify(body, 'as built')
    with ti.ad.FwdMode(loss=y, param=x, seed=[1.0, 0.0, 0.0, 0.0]):      # every field gets a .dual
        stages = {'adjoint': reverse.adjoint(body), 'no_grad adjoint': reverse.adjoint(body, constant=True),
                  'tangent': forward.tangent_kernel(body),
                  'forward over reverse': forward.tangent_kernel(reverse.adjoint(body))}
        body = simplify.simplify(body)
        stages.update({'simplified': body, 'adjoint, simplified': reverse.adjoint(body),
                       'tangent, simplified': forward.tangent_kernel(body)})
    for stage, derived in stages.items():
        verify(derived, stage)


def test_engine_verify_ir_checks_the_ir_after_each_pass(monkeypatch):
    ti.init(arch=ti.cpu)
    monkeypatch.setenv('ENGINE_VERIFY_IR', '1')
    monkeypatch.setattr(simplify, 'simplify', lambda body: Block(body.stmts[1:]))      # drops a definition

    @ti.kernel
    def k(a: ti.f32) -> ti.f32:
        return a * 2.0

    with pytest.raises(VerifyError, match=r'IR of k after simplify: operand %\?\d+ \(arg\) is defined nowhere before this use'):
        k(1.0)


# --- simplify, pass by pass --------------------------------------------------------------

def _forwarding(b):
    x = arg(0)
    cell = b.emit('alloca', (), T.f32, cls=ops.Value)
    b.emit('local_store', [cell, x * 2.0])
    loaded = ops.emit('local_load', [cell], T.f32)      # the value just stored
    again = x * 2.0                                      # computed twice
    b.emit('return', [loaded + again])


def test_merge_common_forwards_stores_and_merges_repeated_values():
    body = simplify.merge_common(ir(_forwarding))
    assert printer.text(body) == golden('''
        %0 = arg() offset=0 : f32
        %1 = alloca() : f32
        %2 = const() value=2.0 : f32
        %3 = mul(%0, %2) : f32
        local_store(%1, %3)
        %4 = add(%3, %3) : f32
        return(%4)''')
    assert printer.text(simplify.eliminate_dead_code(body)) == golden('''
        %0 = arg() offset=0 : f32
        %1 = const() value=2.0 : f32
        %2 = mul(%0, %1) : f32
        %3 = add(%2, %2) : f32
        return(%3)''')


def _constants(b):
    f32, f64 = (ops.const(0.1, t) + ops.const(0.2, t) for t in (T.f32, T.f64))
    wraps = ops.const(2 ** 31 - 1, T.i32) + 1
    small = ops.const(200, T.u8) + ops.const(100, T.u8)
    floor = ops.const(7, T.i32) // ops.const(-2, T.i32)
    by_zero = ops.const(7, T.i32) // ops.const(0, T.i32)
    inf = ops.const(1.0, T.f32) / ops.const(0.0, T.f32)
    narrowed = ops.cast(ops.const(1e40, T.f64), T.f32)
    compared = ops.const(0.1, T.f32) < ops.const(0.1, T.f64)
    b.emit('return', [f32, f64, wraps, small, floor, by_zero, inf, narrowed, compared])     # compared: 0


def test_constants_fold_in_the_precision_of_their_statement():
    body = simplify.merge_common(ir(_constants))
    assert printer.text(simplify.eliminate_dead_code(body)) == golden('''
        %0 = const() value=0.30000001192092896 : f32
        %1 = const() value=0.30000000000000004 : f64
        %2 = const() value=-2147483648 : i32
        %3 = const() value=44 : u8
        %4 = const() value=7 : i32
        %5 = const() value=-4 : i32
        %6 = const() value=0 : i32
        %7 = floordiv(%4, %6) : i32
        %8 = const() value=1.0 : f32
        %9 = const() value=0.0 : f32
        %10 = truediv(%8, %9) : f32
        %11 = const() value=1e+40 : f64
        %12 = cast(%11) : f32
        return(%0, %1, %2, %3, %5, %7, %10, %12, %6)''')


def _identities(b):
    x, c = arg(0), arg(8, T.i32)
    exact = [x * 1.0, 1.0 * x, x / 1.0, x - 0.0, x + -0.0, -0.0 + x, ops.select(c, x, x),
             ops.select(ops.const(1, T.i32), x, x * 3.0), c + 0, c * 1]
    inexact = [x + 0.0, x * 0.0, x - -0.0, 0.0 - x, 1.0 / x]
    b.emit('return', exact + inexact)


def test_only_exact_identities_fold():
    body = simplify.simplify(ir(_identities))
    assert printer.text(body) == golden('''
        %0 = arg() offset=0 : f32
        %1 = arg() offset=8 : i32
        %2 = const() value=1.0 : f32
        %3 = const() value=0.0 : f32
        %4 = const() value=-0.0 : f32
        %5 = add(%0, %3) : f32
        %6 = mul(%0, %3) : f32
        %7 = sub(%0, %4) : f32
        %8 = sub(%3, %0) : f32
        %9 = truediv(%2, %0) : f32
        return(%0, %0, %0, %0, %0, %0, %0, %0, %1, %1, %5, %6, %7, %8, %9)''')


def test_a_nan_guards_product_stays_a_product():
    def guarded(b):
        g = arg(0)
        product = g * 1.0
        b.emit('return', [ops.emit('select', [g == 0.0, ops.const(0.0, T.f32), product], T.f32, nan_guard=True)])
    text = printer.text(simplify.simplify(ir(guarded)))
    assert 'mul(%0, ' in text and 'nan_guard=True' in text


def _dead_and_alive(b):
    x, n = arg(0), arg(8, T.i32)
    field = ti.field(ti.f32, shape=4)
    unused = x * 3.0                                               # noqa: F841 - dead
    cell = b.emit('alloca', (), T.f32, cls=ops.Value)              # stored, never read: dead
    b.emit('local_store', [cell, x])
    ops.emit('random', (), T.f32)                                  # unused, but it advances the generator
    then, other = branch(b, n > 0)
    with then:
        ops.emit('global_load', [n], T.f32, target=field, component=0)     # unused, but its index is checked
    i, body = loop(b, 0, n)
    with body:
        ops.emit('sin', [x], T.f32)                                # dead
        b.emit('global_store', [i, x], target=field, component=0)
    with b.open(b.emit('while', (), body=Block()).attrs['body']):
        b.emit('break')                                            # a while is kept


def test_dead_code_goes_and_effects_stay(ti_init):
    assert printer.text(simplify.eliminate_dead_code(ir(_dead_and_alive))) == golden('''
        %0 = arg() offset=0 : f32
        %1 = arg() offset=8 : i32
        %2 = random() : f32
        %3 = const() value=0 : i32
        %4 = gt(%1, %3) : i32
        if(%4)
          then:
            %5 = global_load(%1) component=0 target=field(field#0, (4,), (), f32) : f32
        %6 = const() value=0 : i32
        for(%6, %1) index=%7 parallel=False
          global_store(%7, %0) component=0 target=field(field#0, (4,), (), f32)
        while()
          break()''')


def test_the_norm_of_a_local_vector_leaves_no_dead_loads_for_the_adjoint(interpreted):
    v = ti.Vector.field(2, ti.f32, shape=4, needs_grad=True)
    out = ti.field(ti.f32, shape=4, needs_grad=True)

    @ti.kernel
    def k():
        for i in range(4):
            a = v[i]
            n = a.norm()
            out[i] = n

    body = k.compiled(()).body
    loads = [s for s in walk(body) if s.op == 'local_load']
    assert len(loads) == 5          # as built: a's components read twice (once dead), n once
    merged = simplify.merge_common(body)
    before = [s.op for s in walk(reverse.adjoint(merged))]
    assert printer.text(simplify.eliminate_dead_code(merged)) == golden('''
        %0 = const() value=0 : i32
        %1 = const() value=4 : i32
        for(%0, %1) index=%2 parallel=True
          %3 = global_load(%2) component=0 target=field(v#0, (4,), (2,), f32) : f32
          %4 = global_load(%2) component=1 target=field(v#0, (4,), (2,), f32) : f32
          %5 = mul(%3, %3) : f32
          %6 = mul(%4, %4) : f32
          %7 = add(%5, %6) : f32
          %8 = const() value=0.0 : f32
          %9 = gt(%7, %8) : i32
          %10 = sqrt(%7) : f32
          %11 = select(%9, %10, %8) : f32
          global_store(%2, %11) component=0 target=field(out#4, (4,), (), f32)''')
    after = [s.op for s in walk(reverse.adjoint(merged))]
    # the adjoint no longer recomputes a and n into locals and carries no adjoint cells for them
    assert (len(before), before.count('alloca')) == (134, 13)
    assert (len(after), after.count('alloca')) == (101, 7)


# --- properties: simplify never changes a result -------------------------------------------

_BINARY = ['add', 'sub', 'mul', 'truediv', 'floordiv', 'mod', 'min', 'max', 'lt', 'le', 'gt', 'ge', 'eq',
           'ne', 'bit_and', 'bit_or', 'bit_xor']
_UNARY = ['neg', 'abs', 'bit_not', 'cast']
_INTEGER_ONLY = {'bit_and', 'bit_or', 'bit_xor', 'bit_not'}


def make_folding_kernel():
    @ti.kernel
    def fold(op: ti.template(), a: ti.template(), b: ti.template(), t: ti.template(), to: ti.template(),
             out: ti.template(), flag: ti.template(), src: ti.template()):
        x, y = ti.cast(a, t), ti.cast(b, t)
        if ti.static(src is not None):      # x known at run time only: identities fold
            x = src[None]
        if ti.static(op in ('lt', 'le', 'gt', 'ge', 'eq', 'ne')):
            flag[None] = ops.binary(op, x, y)
        else:
            r = ti.cast(x, to) if ti.static(op == 'cast') else ops.unary(op, x) if ti.static(op in _UNARY) \
                else ops.binary(op, x, y)
            out[None] = r
            flag[None] = (r < ti.cast(x, r.dtype)) * 2 + (r == ti.cast(y, r.dtype))     # folded in turn
    return fold


def _number(dtype):
    if dtype.is_float:
        special = st.sampled_from([0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 1e-45, 3.4e38, 1e308])
        return st.one_of(special, st.floats(width=dtype.bits, allow_nan=True), st.floats(-4, 4))
    low, high = (-2 ** (dtype.bits - 1), 2 ** (dtype.bits - 1) - 1) if dtype.signed else (0, 2 ** dtype.bits - 1)
    return st.one_of(st.sampled_from([0, 1, -1, low, high]), st.integers(low, high), st.integers(-9, 9))


@st.composite
def folding_cases(draw):
    t = draw(st.sampled_from(T.ALL))
    op = draw(st.sampled_from([o for o in _BINARY + _UNARY if t.is_int or o not in _INTEGER_ONLY]))
    b = draw(st.one_of(st.sampled_from([0, 1] + ([-0.0] if t.is_float else [])), _number(t)))
    return op, draw(_number(t)), b, t, draw(st.sampled_from(T.ALL)), draw(st.booleans())


def _bits(value, dtype):
    return np.array(value, dtype=dtype.np).tobytes()


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=folding_cases())
def test_folded_constants_give_the_bits_of_the_unfolded_kernel(case, monkeypatch):
    op, a, b, t, to, at_run_time = case
    ti.init(arch=ti.cpu)
    out_type = to if op == 'cast' else t
    results = []
    for simplified in (True, False):
        with monkeypatch.context() as patch:
            if not simplified:
                patch.setattr(simplify, 'simplify', lambda body: body)
            out, flag, src = ti.field(out_type, shape=()), ti.field(ti.i32, shape=()), None
            if at_run_time:
                src = ti.field(t, shape=())
                src.from_numpy(np.array(ops.convert_number(a, t), dtype=t.np))
            make_folding_kernel()(op, a, b, t, to, out, flag, src)
            results.append((_bits(out[None], out_type), flag[None]))
    assert results[0] == results[1], f'{op}({a!r}, {b!r}) in {t} (cast to {to}; x at run time: {at_run_time})'


_IDENTITY_CASES = [(op, c, left) for op in ('add', 'sub', 'mul', 'truediv') for c in (0.0, -0.0, 1.0, -1.0, 2.0)
                   for left in (False, True)]


def make_identity_kernel():
    @ti.kernel
    def identities(x: ti.template(), out: ti.template()):
        for i in x:
            for j in ti.static(range(len(_IDENTITY_CASES))):
                op, c, left = ti.static(_IDENTITY_CASES[j])
                k = ti.cast(c, x.dtype)
                out[i, j] = ops.binary(op, k, x[i]) if ti.static(left) else ops.binary(op, x[i], k)
    return identities


@pytest.mark.parametrize('dtype', T.ALL, ids=str)
def test_identities_with_run_time_values_keep_every_bit(dtype, monkeypatch):
    ti.init(arch=ti.cpu)
    if dtype.is_float:
        values = [-0.0, 0.0, math.nan, math.inf, -math.inf, 1.5, -2.5, 1e-45, 3e38]
    else:
        values = [0, 1, 2, 7, ops.convert_number(-1, dtype), ops.convert_number(2 ** (dtype.bits - 1), dtype)]
    results = []
    for simplified in (True, False):
        with monkeypatch.context() as patch:
            if not simplified:
                patch.setattr(simplify, 'simplify', lambda body: body)
            x, out = ti.field(dtype, shape=len(values)), ti.field(dtype, shape=(len(values), len(_IDENTITY_CASES)))
            x.from_numpy(np.array(values, dtype=dtype.np))
            make_identity_kernel()(x, out)
            results.append(out.to_numpy())
    bad = np.argwhere(results[0].view(np.uint8).reshape(*results[0].shape, -1) !=
                      results[1].view(np.uint8).reshape(*results[1].shape, -1))
    assert not len(bad), [(values[i], _IDENTITY_CASES[j]) for i, j, _ in bad[:5]]


def test_generated_programs_compute_the_same_values_and_derivatives_simplified(monkeypatch):
    """Folding and dead code change no bit of values, gradients or tangents (against merging
    alone); against the IR as built, values are the same bits and derivatives agree to
    rounding: a merged read gets one adjoint add of the sum of its uses' adjoints, where
    each read had its own add (that reassociates a sum)."""
    import test_autodiff_properties as tp
    from kernel_grammar import case_source
    merge_only = simplify.merge_common

    @settings(max_examples=2, deadline=None, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(case_source())
    def check(source):
        results = {}
        for name, passes in (('simplified', None), ('merged', merge_only), ('as built', lambda body: body)):
            with monkeypatch.context() as patch:
                if passes is not None:
                    patch.setattr(simplify, 'simplify', passes)
                # one thread: float atomics from two threads add in an order that varies
                results[name] = tp.derivatives(source, {'cpu_max_num_threads': 1}, hessian=False)
        for key in ('values', 'reverse', 'forward'):
            simplified, merged, built = (results[name][key] for name in ('simplified', 'merged', 'as built'))
            assert simplified.tobytes() == merged.tobytes(), f'{key}: folding or dead code changed a bit\n{source}'
            if key == 'values':
                assert simplified.tobytes() == built.tobytes(), f'values differ from the IR as built\n{source}'
            np.testing.assert_allclose(simplified, built, rtol=1e-12, atol=1e-14, err_msg=f'{key}\n{source}')
    check()


# --- found by the adversarial review ------------------------------------------------------

def test_an_unused_read_out_of_range_still_raises(ti_init):
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def k(i: ti.i32):
        a = x[i]        # noqa: F841 - never used: dead code, but its index is checked
        x[0] = 1.0

    with pytest.raises(ti.TaichiIndexError, match=r'index \(10,\) is out of range for field x'):
        k(10)


def test_folding_an_overflowing_f32_constant_warns_nothing(ti_init):
    import warnings
    o = ti.field(ti.f32, shape=1)

    @ti.kernel
    def k():
        z = 0.0
        o[0] = 1e39 + z

    with warnings.catch_warnings():
        warnings.simplefilter('error')
        k()
    assert o[0] == float('inf')


def test_another_thread_may_read_fields_while_a_kernel_compiles(ti_init):
    import threading
    x = ti.field(ti.f32, shape=2)
    read = []

    def helper():       # runs while k compiles: another thread's Python reads are its own
        thread = threading.Thread(target=lambda: read.append(x[1]))
        thread.start()
        thread.join()
        return 2.0

    @ti.kernel
    def k():
        x[0] = helper()

    x[1] = 3.0
    k()
    assert read == [3.0] and x[0] == 2.0


def test_a_plain_python_helper_may_not_read_fields_in_a_kernel(ti_init):
    x = ti.field(ti.i32, shape=2)
    out = ti.field(ti.i32, shape=())

    def helper():
        return x[0]     # would be read once, at compile time

    @ti.kernel
    def k():
        out[None] = helper()

    with pytest.raises(ti.TaichiSyntaxError, match='a plain Python function called in a kernel'):
        k()
