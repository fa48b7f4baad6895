# Taichi's names the engine lacks fail with the engine's words; taichi_logo is there.
import taichi as ti
from taichi.examples.patterns import taichi_logo

ti.init(arch=ti.cpu)
n = 32
logo = ti.field(ti.i32, shape=(n, n))


@ti.kernel
def draw():
    for i, j in logo:
        logo[i, j] = taichi_logo(ti.Vector([i + 0.5, j + 0.5]) / n)


draw()
image = logo.to_numpy()
print('logo', image.sum(), image[6, 16], image[26, 16], image[0, 0], sorted(set(image.ravel().tolist())))


def attempt(what, action):
    try:
        action()
        print(what, 'worked')
    except (AttributeError, ImportError) as exc:
        print(what, type(exc).__name__ + ':', exc)


attempt('ti._lib.utils', lambda: ti._lib.utils)
attempt('ti._lib.core.with_vulkan()', lambda: print('with_vulkan', ti._lib.core.with_vulkan(), ti._lib.core.GGUI_AVAILABLE))
attempt('ti.GUI.set_title', lambda: ti.GUI('t', 16).set_title('x'))
attempt('import taichi.examples.simulation', lambda: __import__('taichi.examples.simulation'))
attempt('import taichi.lang', lambda: __import__('taichi.lang'))
attempt('import taichi._lib.core', lambda: __import__('taichi._lib.core'))
