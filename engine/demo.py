"""`python -m engine.demo`: a small gravity simulation, printed as energy per step."""
import engine as ti


def main(steps=200, n=16):
    ti.init(default_fp=ti.f64, random_seed=1)
    x = ti.Vector.field(2, ti.f64, shape=n)
    v = ti.Vector.field(2, ti.f64, shape=n)
    energy = ti.field(ti.f64, shape=())

    @ti.kernel
    def init():
        for i in x:
            x[i] = [ti.random(), ti.random()]
            v[i] = [0.0, 0.0]

    @ti.kernel
    def step(dt: ti.f64):
        for i in x:
            force = ti.Vector([0.0, 0.0])
            for j in range(n):
                r = x[j] - x[i]
                force += r / (r.norm_sqr() + 1e-2) ** 1.5
            v[i] += dt * force
        for i in x:
            x[i] += dt * v[i]

    @ti.kernel
    def measure():
        energy[None] = 0.0
        for i in x:
            energy[None] += 0.5 * v[i].norm_sqr()
            for j in range(n):
                if i < j:
                    energy[None] += -1.0 / ti.sqrt((x[i] - x[j]).norm_sqr() + 1e-2)

    init()
    for s in range(steps + 1):
        if s % 50 == 0:
            measure()
            print(f'step {s:4d}  energy {energy[None]:+.6f}')
        step(1e-4)


if __name__ == '__main__':
    main()
