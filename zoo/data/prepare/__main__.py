"""`python -m zoo.data.prepare`: see zoo/cli/prepare.py."""

from zoo.cli.prepare import main

if __name__ == "__main__":
    main()
