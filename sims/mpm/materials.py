"""Material models of the MLS-MPM robots: ti.funcs that p2g calls per particle.

A material is a factory `material(mu, la)` returning a ti.func `stress(F, act)`: the
Kirchhoff stress of the deformation gradient F (dim x dim) plus the active stress of
an actuation `act` (`actuation_stress`, 0 for a passive particle). p2g scales it by
-dt p_vol 4 inv_dx^2 into the particle's affine momentum.

The order of the operations is part of the result: the gradient kernels add up the
adjoints of F in the reverse order of its uses, so computing the same terms in another
order changes the last bits of the gradients (the regression pins of
tests/sim_losses.json catch it). Each material adds the active stress after its
elastic part and before its volumetric diagonal.
"""
import engine as ti


@ti.func
def actuation_stress(F, act):
    """The active stress F A F^T with A = act e e^T, e the last axis (the one the robots
    actuate: y of the 2D legs, z in 3D as DiffTaichi has it): act times the outer product
    of F's last column with itself."""
    column = ti.Vector([F[r, F.m - 1] for r in ti.static(range(F.n))])
    return act * column.outer_product(column)


def fixed_corotated(mu, la):
    """Fixed-corotated elasticity (the 2D robot): 2 mu (F - R) F^T + la (J - 1) J I, with
    R the rotation of F's polar decomposition and J = det F."""
    @ti.func
    def stress(F, act):
        J = F.determinant()
        r, _ = ti.polar_decompose(F)
        cauchy = (2 * mu) * (F - r) @ F.transpose() + actuation_stress(F, act)
        pressure = la * (J - 1) * J
        for d in ti.static(range(F.n)):
            cauchy[d, d] += pressure
        return cauchy

    return stress


def neo_hookean(mu, la):
    """Neo-Hookean elasticity (the 3D robot): mu (F F^T - I) + la log(J) I, J = det F."""
    @ti.func
    def stress(F, act):
        J = F.determinant()
        cauchy = mu * F @ F.transpose() + actuation_stress(F, act)
        diagonal = la * ti.log(J) - mu
        for d in ti.static(range(F.n)):
            cauchy[d, d] += diagonal
        return cauchy

    return stress
