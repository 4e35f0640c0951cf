"""`python -m zoo.fit`: see zoo/cli/fit.py."""

from zoo.cli.fit import main

if __name__ == "__main__":
    main()
