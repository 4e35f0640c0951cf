"""`python -m zoo.sweep`: see zoo/cli/sweep.py."""

from zoo.cli.sweep import main

if __name__ == "__main__":
    main()
