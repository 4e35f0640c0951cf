"""`python -m zoo.policy`: see zoo/cli/policy.py."""

from zoo.cli.policy import main

if __name__ == "__main__":
    main()
