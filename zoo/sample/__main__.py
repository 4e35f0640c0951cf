"""`python -m zoo.sample`: see zoo/cli/sample.py."""

from zoo.cli.sample import main

if __name__ == "__main__":
    main()
