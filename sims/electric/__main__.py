from sims.cli import main
from sims.electric import Electric

main(Electric)
