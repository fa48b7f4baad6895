# ndarray arguments whose last axis is a vector: ti.types.ndarray(element_dim=1) and
# ti.types.ndarray(dtype=ti.types.vector(3, ti.f32)).
import numpy as np
import taichi as ti

ti.init(arch=ti.cpu)
x = ti.Vector.field(3, ti.f32, shape=4)


@ti.kernel
def load(a: ti.types.ndarray(element_dim=1), b: ti.types.ndarray(dtype=ti.types.vector(3, ti.f32))):
    for i in range(a.shape[0]):
        x[i] = a[i] + b[i] * 2.0


load(np.ones((4, 3), dtype=np.float32), np.arange(12, dtype=np.float32).reshape(4, 3))
print(x.to_numpy()[3].tolist())
