"""`python -m zoo.transfer`: see zoo/cli/transfer.py."""

from zoo.cli.transfer import main

if __name__ == "__main__":
    main()
