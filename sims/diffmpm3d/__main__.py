from sims.cli import main
from sims.diffmpm3d import DiffMPM3D

main(DiffMPM3D)
