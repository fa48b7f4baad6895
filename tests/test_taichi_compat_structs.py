"""The Taichi program tests/taichi_compat/structs.py (struct types, dataclasses,
ti.Struct.field with gradients, a data_oriented class under a tape, kernels returning a
vector and a tuple, a struct-for over an ndarray) runs unchanged through `engine run`."""
from test_taichi_compat import engine_run


def test_a_taichi_program_with_structs_and_data_oriented_classes():
    out, _ = engine_run('structs.py')
    assert out.strip().splitlines() == [
        "particles ['mass', 'pos', 'vel'] [3.0, 0.5, 0.0] [2.0, 4.0, 6.0, 8.0]",
        'element [2.0, 0.5, 0.0] 6.0',
        'sphere 4.1888 True',
        'struct grads [6.0, 12.0, 18.0] [8.0, 8.0, 8.0]',      # d(x^2 |v|^2): 6x, 2 x^2 v
        'chain 14.0 [-2.0, -2.0, -2.0, 6.0]',
        'com [2.0, 0.5, 0.0] (3, 8.0)',
        'ndarray [0.0, 3.0, 6.0]',
    ]
