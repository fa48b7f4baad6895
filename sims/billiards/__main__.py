from sims.cli import main
from sims.billiards import Billiards

main(Billiards)
