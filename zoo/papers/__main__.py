"""`python -m zoo.papers`: see zoo/cli/papers.py."""

from zoo.cli.papers import main

if __name__ == "__main__":
    main()
