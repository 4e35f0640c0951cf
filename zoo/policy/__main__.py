"""`python -m zoo.policy list | run NAME [--quick] [--out DIR] | render NAME`: the scaling policies' pages
(zoo.policy.pages), run and rendered as `python -m zoo.papers` runs the papers'."""

from zoo.cli.papers import main
from zoo.policy.pages import SHELF

if __name__ == "__main__":
    main(shelf=SHELF)
