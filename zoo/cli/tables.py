"""Result tables printed whole. rich fits a table to its console's width ($COLUMNS, else the terminal's, else 80 in a
pipe) by shrinking the cells: '2.42…' for 2.4248 at 40 columns, and every cell empty at 10, with exit status 0. What
a command prints is what people paste, so its console is at least as wide as its widest table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def console_for(*tables: Table) -> Console:
    """A console (stdout) at least as wide as the natural width of each of `tables`."""
    console = Console()
    unbounded = console.options.update_width(1 << 16)
    console.width = max([console.width, *(console.measure(t, options=unbounded).maximum for t in tables)])
    return console
