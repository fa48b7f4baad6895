from sims.cli import main
from sims.mass_spring import MassSpring

main(MassSpring)
