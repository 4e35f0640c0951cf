"""`python -m zoo.coord_check`: see zoo/cli/coord_check.py."""

from zoo.cli.coord_check import main

if __name__ == "__main__":
    main()
