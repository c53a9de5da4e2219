"""`python -m ragd.cli`, as the `ragd` command."""

from ragd.cli import main

main()
