# Keyboard and mouse input as Taichi's GUI documentation uses it; off screen there is none.
import taichi as ti

ti.init(arch=ti.cpu)
gui = ti.GUI('input', res=(64, 48))
keys = [ti.GUI.ESCAPE, ti.GUI.SPACE, ti.GUI.RETURN, ti.GUI.BACKSPACE, ti.GUI.UP, ti.GUI.DOWN, ti.GUI.LEFT,
        ti.GUI.RIGHT, ti.GUI.SHIFT, ti.GUI.CTRL, ti.GUI.ALT, ti.GUI.LMB, ti.GUI.RMB, ti.GUI.WHEEL, ti.GUI.EXIT]
print('keys', keys)
print('types', ti.GUI.PRESS, ti.GUI.RELEASE, ti.GUI.MOTION)
center = [0.5, 0.5]
while gui.running:
    while gui.get_event(ti.GUI.PRESS, ti.GUI.MOTION):
        if gui.event.key == ti.GUI.EXIT:
            gui.running = False
        elif gui.event.type == ti.GUI.PRESS and gui.event.key == 'r':
            center = [0.5, 0.5]
    if gui.is_pressed('a', ti.GUI.LEFT):
        center[0] -= 0.01
    if gui.is_pressed('d', ti.GUI.RIGHT):
        center[0] += 0.01
    cursor = gui.get_cursor_pos()
    gui.circle(center, color=0xFF0000, radius=5)
    gui.circle(cursor, color=0x00FF00, radius=2)
    gui.show()
print('event', gui.event.type, gui.event.key, gui.event.modifier, tuple(gui.event.pos))
print('pressed', gui.is_pressed('a'), 'cursor', tuple(cursor), 'center', center, 'frames', gui.frame)
