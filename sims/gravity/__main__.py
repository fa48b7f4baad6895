from sims.cli import main
from sims.gravity import Gravity

main(Gravity)
