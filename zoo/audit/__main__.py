"""`python -m zoo.audit`: see zoo/cli/audit.py."""

from zoo.cli.audit import main

if __name__ == "__main__":
    main()
