"""Material models of the MLS-MPM robots: ti.funcs that p2g calls per particle.

A material is a factory `material(mu, la)` returning a Material of two ti.funcs of the
deformation gradient F (dim x dim):
- `prepare(F)`: what the stress needs that does not depend on the actuation (det F, a
  polar decomposition), computed before the actuator's branch;
- `stress(F, prepared, act)`: the Kirchhoff stress, with the active stress of an
  actuation `act` (`actuation_stress`, act = 0 for a passive particle) added after the
  elastic part and before the volumetric diagonal.
p2g scales the stress by -dt p_vol 4 inv_dx^2 into the particle's affine momentum.

The order of the operations is part of the result: the gradient kernels add up the
adjoints of F in the reverse order of its uses, so computing the same terms in another
order changes the last bits of the gradients (the regression pins of
tests/sim_losses.json catch it); and where the actuator's branch falls among them
changes the speed of the compiled p2g and its adjoint by a few percent.
"""
from collections import namedtuple

import engine as ti

Material = namedtuple('Material', 'prepare stress')


@ti.func
def actuation_stress(F: ti.template(), act: ti.template()):
    """The active stress F A F^T with A = act e e^T, e the last axis (the one the robots
    actuate: y of the 2D legs, z in 3D as DiffTaichi has it): act times the outer product
    of F's last column with itself."""
    column = ti.Vector([F[r, F.m - 1] for r in ti.static(range(F.n))])
    return act * column.outer_product(column)


def fixed_corotated(mu, la):
    """Fixed-corotated elasticity (the 2D robot): 2 mu (F - R) F^T + la (J - 1) J I, with
    R the rotation of F's polar decomposition and J = det F."""
    @ti.func
    def prepare(F: ti.template()):
        J = F.determinant()
        r, _ = ti.polar_decompose(F)
        return J, r

    @ti.func
    def stress(F: ti.template(), prepared: ti.template(), act: ti.template()):
        J, r = prepared
        cauchy = (2 * mu) * (F - r) @ F.transpose() + actuation_stress(F, act)
        pressure = la * (J - 1) * J
        for d in ti.static(range(F.n)):
            cauchy[d, d] += pressure
        return cauchy

    return Material(prepare, stress)


def neo_hookean(mu, la):
    """Neo-Hookean elasticity (the 3D robot): mu (F F^T - I) + la log(J) I, J = det F."""
    @ti.func
    def prepare(F: ti.template()):
        return F.determinant()

    @ti.func
    def stress(F: ti.template(), J: ti.template(), act: ti.template()):
        cauchy = mu * F @ F.transpose() + actuation_stress(F, act)
        diagonal = la * ti.log(J) - mu
        for d in ti.static(range(F.n)):
            cauchy[d, d] += diagonal
        return cauchy

    return Material(prepare, stress)
