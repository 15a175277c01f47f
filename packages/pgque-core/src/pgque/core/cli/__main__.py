"""Allow ``python -m pgque.core.cli``."""

from pgque.core.cli import main

main()
