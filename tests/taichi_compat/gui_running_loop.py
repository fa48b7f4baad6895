# A `while gui.running:` loop as Taichi's GUI documentation writes one: Escape ends it,
# and each frame shows a field a kernel fills. Off screen only --frames ends it.
import taichi as ti

ti.init(arch=ti.cpu)
n = 64
brightness = ti.field(ti.f32, shape=(n, n))


@ti.kernel
def fill(level: ti.f32):
    for i, j in brightness:
        brightness[i, j] = level


gui = ti.GUI('running loop', res=(n, n))
step = 0
while gui.running:
    for e in gui.get_events(ti.GUI.PRESS):
        if e.key == ti.GUI.ESCAPE:
            gui.running = False
    fill(step / 10)                        # frame k is k/10 grey: the video keeps the order
    gui.set_image(brightness)
    gui.show()
    step += 1
print('left the loop after', gui.frame, 'frames')
