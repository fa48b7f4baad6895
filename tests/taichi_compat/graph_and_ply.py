# A compute graph that builds a ring of points, replayed with new arrays and scalars, and the
# ring written as a PLY mesh: `python graph_and_ply.py OUTPUT_DIR`.
import os
import sys

import numpy as np
import taichi as ti

ti.init(arch=ti.cpu)
out_dir = sys.argv[1]
n = 6


@ti.kernel
def make_ring(pos: ti.types.ndarray(dtype=ti.math.vec3, ndim=1), radius: ti.f32):
    for i in pos:
        angle = 2 * ti.math.pi * i / n
        pos[i] = ti.Vector([radius * ti.cos(angle), radius * ti.sin(angle), 0.0])


@ti.kernel
def lift(pos: ti.types.ndarray(dtype=ti.math.vec3, ndim=1), height: ti.types.ndarray(dtype=ti.f32, ndim=1),
         steps: ti.i32):
    for i in pos:
        for _ in range(steps):
            pos[i].z += height[i]


sym_pos = ti.graph.Arg(ti.graph.ArgKind.NDARRAY, 'pos', dtype=ti.math.vec3, ndim=1)
sym_height = ti.graph.Arg(ti.graph.ArgKind.NDARRAY, 'height', dtype=ti.f32, ndim=1)
sym_radius = ti.graph.Arg(ti.graph.ArgKind.SCALAR, 'radius', ti.f32)
builder = ti.graph.GraphBuilder()
builder.dispatch(make_ring, sym_pos, sym_radius)
substep = builder.create_sequential()
substep.dispatch(lift, sym_pos, sym_height, 2)
for _ in range(3):
    builder.append(substep)
graph = builder.compile()

pos = ti.Vector.ndarray(3, ti.f32, shape=n)
height = ti.ndarray(ti.f32, shape=n)
height.from_numpy(np.linspace(0.0, 0.5, n, dtype=np.float32))
graph.run({'pos': pos, 'height': height, 'radius': 1.0})
first = pos.to_numpy()

other, direct = ti.Vector.ndarray(3, ti.f32, shape=n), ti.Vector.ndarray(3, ti.f32, shape=n)
graph.run({'pos': other, 'height': height, 'radius': 2.5})
make_ring(direct, 2.5)
for _ in range(3):
    lift(direct, height, 2)
print('graph', [round(float(v), 3) for v in first[1]], 'replayed', np.array_equal(other.to_numpy(), direct.to_numpy()))

try:
    graph.run({'pos': pos, 'radius': 1.0})
except RuntimeError as error:
    print('error:', error)

points = first
writer = ti.tools.PLYWriter(num_vertices=n + 1, num_faces=n, face_type='tri', comment='ring')
xyz = np.vstack([points, [[0.0, 0.0, 0.0]]])
writer.add_vertex_pos(xyz[:, 0], xyz[:, 1], xyz[:, 2])
writer.add_vertex_color(np.ones(n + 1), np.zeros(n + 1), np.zeros(n + 1))
writer.add_faces(np.array([[n, i, (i + 1) % n] for i in range(n)]))
writer.add_face_id()
writer.export_ascii(os.path.join(out_dir, 'ring_ascii.ply'))
for frame in range(2):
    writer.export_frame(frame, os.path.join(out_dir, 'ring.ply'))
print('files', sorted(os.listdir(out_dir)))
