"""`python -m engine.demo`: the autodiff gravity case study.

Forces are the negative gradient of the potential energy, computed by
`ti.ad.Tape` every step; the total energy is printed as the system evolves.
"""
import engine as ti


def main(steps=300, n=8, dt=1e-5):
    ti.init(default_fp=ti.f64, random_seed=1)
    x = ti.Vector.field(2, ti.f64, shape=n, needs_grad=True)
    v = ti.Vector.field(2, ti.f64, shape=n)
    potential = ti.field(ti.f64, shape=(), needs_grad=True)
    kinetic = ti.field(ti.f64, shape=())

    @ti.kernel
    def init():
        for i in x:
            x[i] = [ti.random(), ti.random()]

    @ti.kernel
    def compute_potential():
        for i, j in ti.ndrange(n, n):
            r = x[i] - x[j]
            potential[None] += -1 / r.norm(1e-3)

    @ti.kernel
    def advance():
        for i in x:
            v[i] += dt * -x.grad[i]
        for i in x:
            x[i] += dt * v[i]

    @ti.kernel
    def measure_kinetic():
        kinetic[None] = 0
        for i in v:
            kinetic[None] += 0.5 * v[i].norm_sqr()

    init()
    for step in range(steps + 1):
        with ti.ad.Tape(loss=potential):
            compute_potential()
        if step % 50 == 0:
            measure_kinetic()
            total = potential[None] + kinetic[None]
            print(f'step {step:4d}  potential {potential[None]:+.6f}  '
                  f'kinetic {kinetic[None]:.6f}  total {total:+.6f}')
        advance()


if __name__ == '__main__':
    main()
