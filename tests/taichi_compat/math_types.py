# ti.math: GLSL-style helpers and the small vector types, as Taichi's documentation uses them.
import taichi as ti

ti.init(arch=ti.cpu, default_fp=ti.f64)
vec3 = ti.math.vec3
p = ti.field(vec3, shape=4)
out = ti.field(float, shape=8)


@ti.kernel
def shade():
    for i in p:
        p[i] = vec3(i, 1.0, 0.5 * i)
    for _ in range(1):
        a, b = vec3(1, 0, 0), vec3(0, 1, 0)
        out[0] = ti.math.clamp(3.5, 0.0, 1.0)
        out[1] = ti.math.mix(2.0, 4.0, 0.25)
        out[2] = ti.math.smoothstep(0.0, 1.0, 0.5)
        out[3] = ti.math.length(vec3(3.0, 4.0, 0.0))
        out[4] = ti.math.dot(a, b) + ti.math.cross(a, b)[2]
        out[5] = ti.math.reflect(vec3(1.0, -1.0, 0.0), b)[1]
        out[6] = ti.math.normalize(vec3(0.0, 2.0, 0.0))[1] + ti.math.fract(2.75)
        out[7] = ti.math.pi + ti.math.step(0.5, 0.25)


shade()
print(p.shape, p[3].to_list())
print([round(v, 4) for v in out.to_numpy().tolist()])
