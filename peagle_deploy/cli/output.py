"""Shared terminal output: rich consoles for humans, plain JSON for machines."""

from __future__ import annotations

import codecs
import sys
import unicodedata
from typing import Any

from rich.console import Console, RenderableType
from rich.markup import escape

# Machine output lives apart so the fast path of `peagle plan --json` needs no rich.
from peagle_deploy.cli.json_output import emit_json  # noqa: F401  (output.emit_json)
from peagle_deploy.redaction import safe_lines, safe_message
from peagle_deploy.terminal import CONSOLE_OPTIONS, size_hint

PIPE_WIDTH = 120
"""Width of a table off a terminal when COLUMNS does not say (a CI log, a file)."""


def pipe_width() -> int:
    """COLUMNS when it is a number of cells, else PIPE_WIDTH."""
    return size_hint("COLUMNS") or PIPE_WIDTH


class _Console(Console):
    """Off a terminal (a pipe, a CI log, a file) rich lays output out for 80 columns:
    lines would break mid-sentence and table cells would be wrapped or cut to `…`, so
    greps over `peagle list`, CI logs and `peagle demo > log` would miss names. There,
    plain-text lines are not wrapped; a table gets COLUMNS (else PIPE_WIDTH) columns, its
    long text folded, unless that would cut a cell to `…`: then the width it needs.
    Panels and rules keep 80 columns. On a terminal everything fits the window as usual."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if self.is_terminal:
            super().print(*objects, **kwargs)
            return
        if "soft_wrap" not in kwargs and all(isinstance(o, str) for o in objects):
            kwargs["soft_wrap"] = True
        # No table exists unless rich.table was imported: start-up does not import it.
        table_module = sys.modules.get("rich.table")
        tables = [o for o in objects if table_module and isinstance(o, table_module.Table)]
        width = max((self._table_width(t) for t in tables), default=self.width)
        if width == self.width:
            super().print(*objects, **kwargs)
            return
        saved = self.width
        self.width = width
        try:
            super().print(*objects, **kwargs)
        finally:
            self.width = saved

    def _table_width(self, table: RenderableType) -> int:
        """COLUMNS (else PIPE_WIDTH), or the table's full width if that would cut a cell."""
        width = pipe_width()
        full = self.measure(table, options=self.options.update_width(4096)).maximum
        if full <= width or not self._cuts(table, width):
            return width
        return full

    def _cuts(self, table: RenderableType, width: int) -> bool:
        """Whether laying `table` out in `width` columns ends a cell in `…`."""
        lines = self.render_lines(table, self.options.update_width(width), pad=False)
        return any("…" in segment.text for line in lines for segment in line)


# Emoji codes off (`aws:x:` stays as typed); see peagle_deploy.terminal.
console: Console = _Console(**CONSOLE_OPTIONS)
err_console: Console = _Console(stderr=True, **CONSOLE_OPTIONS)

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
    text = escape(safe_lines(message))
    err_console.print(f"[bold red]error:[/] {text}", highlight=False, soft_wrap=True)


def warn(message: str) -> None:
    """One warning, on stderr, one line; plain and safe like `error`."""
    text = escape(safe_message(message, WARNING_CHARS))
    err_console.print(f"[yellow]warning:[/] {text}", highlight=False, soft_wrap=True)


def literal(value: object) -> Any:
    """A table cell that shows `value` exactly (no markup, no emoji)."""
    from peagle_deploy.terminal import literal as as_text

    return as_text(value)


def print_table(table: RenderableType) -> None:
    """A table on stdout that never loses characters when piped or redirected."""
    console.print(table)
