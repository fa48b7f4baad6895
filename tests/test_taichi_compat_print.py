"""A Taichi program with run-time print and assert (tests/taichi_compat/print_assert.py),
run unchanged through `python -m engine run`: what it prints, in order."""
from test_taichi_compat import engine_run


def test_taichi_print_and_assert_program():
    out, err = engine_run('print_assert.py')
    assert out.splitlines() == [
        'hello 256',
        'hello 712',
        'hello256',
        'hello256world256',
        'm = [[2, 3, 4], [5, 6, 7]]',
        'v = [3, 4]',
        'ray.dir = [0.0, 0.0, 1.0] , ray.len = 1.0',
        'x[0] = 0.00',
        'x[1] = 0.50',
        'x[2] = 1.00',
        'x[3] = 1.50',
        'sqrt [0.0, 0.707, 1.0, 1.225]',
        'AssertionError: in kernel do_sqrt_all: x[2] is negative',
    ]
    assert 'Traceback' not in err
