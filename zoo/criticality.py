"""`python -m zoo.criticality`: see zoo/cli/criticality.py."""

from zoo.cli.criticality import main

if __name__ == "__main__":
    main()
