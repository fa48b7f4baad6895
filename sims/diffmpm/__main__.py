from sims.cli import main
from sims.diffmpm import DiffMPM

main(DiffMPM)
