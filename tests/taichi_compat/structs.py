# Struct types, dataclasses, data-oriented classes and compound return values, written as
# Taichi's documentation writes them.
import numpy as np
import taichi as ti

ti.init(arch=ti.cpu, default_fp=ti.f64)
vec3 = ti.math.vec3

# ti.types.struct as a field dtype, struct of arrays
Particle = ti.types.struct(pos=vec3, vel=vec3, mass=float)
particles = Particle.field(shape=4)


@ti.kernel
def init_particles():
    for i in particles:
        particles[i] = Particle(pos=vec3(i, 0, 0), vel=vec3(0, 1, 0), mass=1.0 + i)


@ti.kernel
def advance(dt: float):
    for i in particles:
        particles[i].pos += particles[i].vel * dt
        particles.mass[i] *= 2


init_particles()
advance(0.5)
arrays = particles.to_numpy()
print('particles', sorted(arrays), arrays['pos'][3].tolist(), arrays['mass'].tolist())
print('element', particles[2].pos.to_list(), particles.mass[2])


# ti.dataclass with a Taichi-scope and a Python-scope method
@ti.dataclass
class Sphere:
    center: vec3
    radius: float

    @ti.func
    def volume(self):
        return 4.0 / 3.0 * ti.math.pi * self.radius ** 3

    def is_zero_sized(self):
        return self.radius == 0.0


@ti.kernel
def sphere_volume(s: Sphere) -> float:
    return s.volume()


print('sphere', round(sphere_volume(Sphere(center=vec3(0.0), radius=1.0)), 4),
      Sphere(radius=0.0).is_zero_sized())

# ti.Struct.field with gradients
state = ti.Struct.field({'x': ti.f64, 'v': vec3}, shape=3, needs_grad=True)
loss = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.kernel
def energy():
    for i in state:
        loss[None] += state[i].x ** 2 * state[i].v.norm_sqr()


state.x.from_numpy(np.array([1.0, 2.0, 3.0]))
state.v.fill(1.0)
with ti.ad.Tape(loss=loss):
    energy()
print('struct grads', state.x.grad.to_numpy().tolist(), state.v.grad.to_numpy()[1].tolist())


# a data-oriented class whose methods are kernels, differentiated with a tape
@ti.data_oriented
class Chain:
    def __init__(self, n):
        self.x = ti.field(float, shape=n, needs_grad=True)
        self.loss = ti.field(float, shape=(), needs_grad=True)

    @ti.func
    def link(self, i):
        return (self.x[i + 1] - self.x[i]) ** 2

    @ti.kernel
    def compute_loss(self):
        for i in range(self.x.shape[0] - 1):
            self.loss[None] += self.link(i)


chain = Chain(4)
chain.x.from_numpy(np.array([0.0, 1.0, 3.0, 6.0]))
with ti.ad.Tape(loss=chain.loss):
    chain.compute_loss()
print('chain', chain.loss[None], chain.x.grad.to_numpy().tolist())


# kernels returning a vector and a tuple
@ti.kernel
def center_of_mass() -> vec3:
    total, weight = vec3(0.0), 0.0
    for i in particles:
        total += particles[i].pos * particles[i].mass
        weight += particles[i].mass
    return total / weight


@ti.kernel
def extremes() -> (ti.i32, float):
    heaviest, mass = 0, 0.0
    ti.loop_config(serialize=True)
    for i in range(4):
        if particles[i].mass > mass:
            heaviest, mass = i, particles[i].mass
    return heaviest, mass


print('com', [round(c, 4) for c in center_of_mass()], extremes())


# a struct-for over an ndarray argument
@ti.kernel
def add_index(a: ti.types.ndarray(dtype=vec3, ndim=1)):
    for i in a:
        a[i] += vec3(i)


grid = ti.ndarray(vec3, shape=3)                 # f64 elements, as the annotation asks
add_index(grid)
print('ndarray', grid.to_numpy().sum(axis=1).tolist())
