"""Shared terminal output: rich consoles for humans, plain JSON for machines.

rich is imported when a console is first used (`output.console`, `output.err_console`,
made by peagle_deploy.cli.consoles): `peagle plan --json` prints no rich output and
never loads it.
"""

from __future__ import annotations

import codecs
import sys
import unicodedata
from typing import TYPE_CHECKING, Any

from peagle_deploy.cli.json_output import emit_json  # noqa: F401  (output.emit_json)
from peagle_deploy.redaction import safe_lines, safe_message
from peagle_deploy.terminal import size_hint

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

PIPE_WIDTH = 120
"""Width of a table off a terminal when COLUMNS does not say (a CI log, a file)."""

console: Console
"""stdout's console (built on first use)."""
err_console: Console
"""stderr's console (built on first use)."""


def pipe_width() -> int:
    """COLUMNS when it is a number of cells, else PIPE_WIDTH."""
    return size_hint("COLUMNS") or PIPE_WIDTH


_CONSOLES = {"console": False, "err_console": True}
"""The module's consoles by name: whether each writes to stderr."""
_made: dict[str, Console] = {}


def _console(name: str) -> Console:
    if name not in _made:
        from peagle_deploy.cli.consoles import plain_width_console

        _made[name] = plain_width_console(stderr=_CONSOLES[name], pipe_width=pipe_width)
    return _made[name]


def __getattr__(name: str) -> Any:
    """`console` and `err_console`, each built once, on first use."""
    if name not in _CONSOLES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _console(name)


_ASCII_FALLBACK = {
    "\u2192": "->",
    "\u2190": "<-",
    "\u2026": "...",
    "\u2014": "--",
    "\u2013": "-",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u00d7": "x",
    "\u2265": ">=",
    "\u2264": "<=",
    "\u2713": "ok",
    "\u2717": "x",
    "\u2022": "*",
}
_ERRORS = "peagle-ascii"


def _to_ascii(exc: UnicodeError) -> tuple[str, int]:
    """Codec error handler: a close ASCII spelling of what the console cannot encode."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = []
    for char in exc.object[exc.start : exc.end]:
        if char in _ASCII_FALLBACK:
            out.append(_ASCII_FALLBACK[char])
            continue
        plain = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode()
        out.append(plain or "?")
    return "".join(out), exc.end


codecs.register_error(_ERRORS, _to_ascii)


def degrade_to_ascii() -> None:
    """Let stdout/stderr write what their encoding cannot hold as ASCII, not fail.

    On a console whose encoding is not Unicode (`PYTHONIOENCODING=ascii`, `LANG=C` on an
    old system) a model's answer with an emoji or a `->` arrow would otherwise end the
    command with UnicodeEncodeError; rich already draws its boxes in ASCII there.
    """
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "utf-8"
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None or codecs.lookup(encoding).name.startswith("utf"):
            continue
        reconfigure(errors=_ERRORS)


WARNING_CHARS = 1000
"""Longest warning shown (an interruption's resume advice is a few sentences)."""


def error(message: str) -> None:
    """One error, on stderr, no traceback.

    The message is plain text: brackets in it (`[a-zA-Z0-9-]`, `[dev]`) are printed,
    not read as rich markup and dropped. Credentials are masked and pasted values cut
    (`redaction.safe_lines`); a multi-line failure report (log lines) keeps its lines.
    """
    from rich.markup import escape

    text = escape(safe_lines(message))
    _console("err_console").print(f"[bold red]error:[/] {text}", highlight=False, soft_wrap=True)


def warn(message: str) -> None:
    """One warning, on stderr, one line; plain and safe like `error`."""
    from rich.markup import escape

    text = escape(safe_message(message, WARNING_CHARS))
    _console("err_console").print(f"[yellow]warning:[/] {text}", highlight=False, soft_wrap=True)


def literal(value: object) -> Any:
    """A table cell that shows `value` exactly (no markup, no emoji)."""
    from peagle_deploy.terminal import literal as as_text

    return as_text(value)


def print_table(table: RenderableType) -> None:
    """A table on stdout that never loses characters when piped or redirected."""
    _console("console").print(table)
