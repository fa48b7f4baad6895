# A program that never looks at gui.running: only a closed window (here --frames) ends it.
import taichi as ti

ti.init(arch=ti.cpu)
gui = ti.GUI('ignores running', 64, background_color=0x000000)
radius = 2
while True:
    gui.circle((0.5, 0.5), color=0xFFFFFF, radius=radius)   # grows each frame: no two alike
    gui.show()
    radius += 3
    print('shown', gui.frame)
