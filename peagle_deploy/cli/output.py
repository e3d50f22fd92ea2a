"""Shared terminal output: rich consoles for humans, plain JSON for machines."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

console = Console()
err_console = Console(stderr=True)


def error(message: str) -> None:
    """One error, on stderr, no traceback."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)


def warn(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {message}", highlight=False, soft_wrap=True)


def emit_json(data: Any) -> None:
    """Machine output: exactly one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
