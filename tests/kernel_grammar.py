"""Random kernels for property-based autodiff tests, drawn with hypothesis.

A generated program reads a = x[i], b = x[(i + 1) % n] and computes y[c, i]
through locals that are mutated, branches, serial inner loops carrying locals,
bounded `while` loops, `break` and `continue` on data-dependent conditions, 2-vectors and smooth math functions (domains kept safe: log and sqrt of
E*E + 1, exp of tanh). A generated kernel holds PROGRAMS_PER_KERNEL programs,
one parallel loop each, so that one compilation checks many programs.
"""
from hypothesis import strategies as st

CONSTANTS = ['0.5', '-1.25', '2.0', '0.3', '-0.7', '1.5']
UNARY = ['ti.sin({})', 'ti.cos({})', 'ti.tanh({})', 'ti.sqrt({0} * {0} + 1.0)', 'ti.log({0} * {0} + 1.0)',
         'ti.exp(ti.tanh({}))', 'ti.atan2({}, 2.0)', '(-{})']
BINARY = ['({0} + {1})', '({0} - {1})', '({0} * {1})', '({0} / ({1} * {1} + 1.0))',
          'ti.Vector([{0}, {1}]).dot(ti.Vector([{1}, 0.5]))', 'ti.Vector([{0}, {1}]).norm_sqr()']
PROGRAMS_PER_KERNEL = 10


@st.composite
def expression(draw, names, depth=2):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(names + CONSTANTS[:2]))
    if draw(st.booleans()):
        return draw(st.sampled_from(UNARY)).format(draw(expression(names, depth - 1)))
    template = draw(st.sampled_from(BINARY))
    return template.format(draw(expression(names, depth - 1)), draw(expression(names, depth - 1)))


@st.composite
def statements(draw, names, indent, depth=2, in_loop=False):
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        kinds = ['assign', 'add', 'scale'] + (['if', 'loop', 'while'] if depth else []) + \
            (['break', 'continue'] if in_loop else [])
        kind = draw(st.sampled_from(kinds))
        pad = ' ' * indent
        if kind == 'assign':
            lines.append(f'{pad}v = {draw(expression(names))}')
        elif kind == 'add':
            lines.append(f'{pad}v += {draw(expression(names))}')
        elif kind == 'scale':
            lines.append(f'{pad}v *= 0.5 + 0.25 * ti.tanh({draw(expression(names))})')
        elif kind == 'if':
            lines.append(f'{pad}if {draw(expression(names, 1))} > {draw(st.sampled_from(CONSTANTS))}:')
            lines += draw(statements(names, indent + 4, depth - 1, in_loop))
            lines.append(f'{pad}else:')
            lines += draw(statements(names, indent + 4, depth - 1, in_loop))
        elif kind in ('break', 'continue'):
            lines.append(f'{pad}if {draw(expression(names, 1))} > {draw(st.sampled_from(CONSTANTS))}:')
            lines.append(f'{pad}    {kind}')
        elif kind == 'loop':
            lines.append(f'{pad}for j in range({draw(st.integers(1, 3))}):')
            lines.append(f'{pad}    u = ti.cast(j, ti.f64) * 0.3')
            lines += draw(statements(names + ['u'], indent + 4, depth - 1, True))
        else:       # at most 3 trips, fewer if the condition on the data fails first
            w = f'w{indent}'
            lines.append(f'{pad}{w} = 0')
            lines.append(f'{pad}while {w} < {draw(st.integers(1, 3))} and '
                         f'{draw(expression(names, 1))} > {draw(st.sampled_from(CONSTANTS))}:')
            lines.append(f'{pad}    {w} += 1')
            lines += draw(statements(names, indent + 4, depth - 1, True))
    return lines


@st.composite
def program(draw, c):
    names = ['a', 'b', 'v']
    body = [f'    for i in range(n):',
            f'        a = x[i]',
            f'        b = x[(i + 1) % n]',
            f'        v = {draw(expression(["a", "b"]))}']
    body += draw(statements(names, 8))
    body.append(f'        y[{c}, i] = v + {draw(expression(names, 1))}')
    return body


@st.composite
def kernel_source(draw):
    lines = ['import engine as ti', '', '', 'def build(x, y, n):', '    @ti.kernel', '    def generated():']
    for c in range(PROGRAMS_PER_KERNEL):
        lines += ['    ' + line for line in draw(program(c))]
    lines += ['    return generated', '']
    return '\n'.join(lines)
