from sims.cli import main
from sims.rigid_body import RigidBody

main(RigidBody)
