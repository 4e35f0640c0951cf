"""`python -m zoo.export`: see zoo/cli/export.py."""

from zoo.cli.export import main

main()
