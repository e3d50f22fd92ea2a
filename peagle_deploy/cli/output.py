"""Shared terminal output: rich consoles for humans, plain JSON for machines."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console, RenderableType
from rich.markup import escape

console = Console()
err_console = Console(stderr=True)


def error(message: str) -> None:
    """One error, on stderr, no traceback.

    The message is plain text: brackets in it (`[a-zA-Z0-9-]`, `[dev]`) are printed,
    not read as rich markup and dropped.
    """
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def warn(message: str) -> None:
    """One warning, on stderr; plain text like `error`."""
    err_console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


def emit_json(data: Any) -> None:
    """Machine output: exactly one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def print_table(table: RenderableType) -> None:
    """A table on stdout that never loses characters when piped or redirected.

    Rich sizes output for an 80-column terminal when stdout is not one, and cuts cells
    that do not fit to `…`: endpoint names in `peagle list | grep`, figures in
    `peagle bench ... > run.txt`. Off a terminal the table gets the width it needs; on a
    terminal it fits the window as usual.
    """
    if console.is_terminal:
        console.print(table)
        return
    needed = console.measure(table, options=console.options.update_width(4096)).maximum
    Console(width=max(console.width, needed)).print(table)
