from sims.cli import main
from sims.smoke import Smoke

main(Smoke)
