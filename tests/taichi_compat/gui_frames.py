# ti.GUI off screen: shapes and text, written as PNG frames; a video from the frames.
import os
import sys

import numpy as np
import taichi as ti

ti.init(arch=ti.cpu)
out = sys.argv[1]
gui = ti.GUI('frames', (64, 48), background_color=0x112233)
for frame in range(3):
    gui.circle((0.5, 0.5), color=0xFF0000, radius=6 + frame)
    gui.circles(np.array([[0.1, 0.1], [0.9, 0.9]]), color=0x00FF00, radius=3)
    gui.line((0.0, 0.0), (1.0, 1.0), radius=1, color=0xFFFFFF)
    gui.triangle((0.1, 0.9), (0.3, 0.9), (0.2, 0.7), color=0x0000FF)
    gui.rect((0.6, 0.4), (0.9, 0.1), radius=1, color=0xFFFF00)
    gui.text(f'frame {frame}', (0.05, 0.95), font_size=10, color=0xFFFFFF)
    gui.show(os.path.join(out, f'{frame:04d}.png'))
image = np.zeros((64, 48, 3), dtype=np.float32)
image[:32, :, 0] = 1.0                        # the left half red: x is the first axis
gui.set_image(image)
gui.show(os.path.join(out, 'image.png'))
video = ti.tools.VideoManager(output_dir=out, framerate=10, automatic_build=False)
for frame in range(3):
    video.write_frame(image * (frame + 1) / 3)
video.make_video(gif=True, mp4=False)
print('running', gui.running, 'color', hex(ti.rgb_to_hex((1.0, 0.5, 0.0))))
