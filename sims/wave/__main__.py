from sims.cli import main
from sims.wave import Wave

main(Wave)
