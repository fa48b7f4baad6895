from sims.cli import main
from sims.fem import FEM

main(FEM)
