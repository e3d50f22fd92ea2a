"""Rich consoles that print values as given, and never let a value drive the terminal.

rich reads `:name:` as an emoji code by default, so `--tag aws:x=1` came back as
`tags.aws❌`; every console the project makes has emoji codes off. Markup stays on for
the project's own styling (`[bold]...[/]`): a value from a user, a file or AWS is
escaped (`literal`, `escaped`) before it goes into a marked-up line or a table cell.

rich strips only BEL, backspace, vertical tab, form feed and carriage return from a
Text (rich 14 `rich/control.py`, `STRIP_CONTROL_CODES`): ESC passes, so an endpoint's
answer or an account's error could set the window title (OSC), write a hyperlink, move
the cursor or clear the screen (CSI). `literal` and `escaped` show every control
character but newline and tab escaped (`harmless`); `printable` keeps a value on one line.
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# C0 and C1 controls and DEL (escape sequences, newlines, carriage returns), and the
# Unicode direction overrides/isolates that reorder what a line appears to say.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# The same but newline and tab, which only lay text out (a model's answer has lines).
_DRIVES_THE_TERMINAL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def _shown_escaped(found: re.Match[str]) -> str:
    return found.group(0).encode("unicode_escape").decode("ascii")


CONSOLE_OPTIONS: dict[str, Any] = {"emoji": False}
"""What every peagle-deploy console is built with."""

SIZE_HINTS = ("COLUMNS", "LINES")
"""The environment's terminal size hints, which rich, typer and the tables read."""
_SIZE_HINT = re.compile(r"[1-9][0-9]{0,4}")


def size_hint(name: str, environ: MutableMapping[str, str] | None = None) -> int | None:
    """COLUMNS or LINES as a number of cells (1-99999), None when unset or anything else."""
    raw = (os.environ if environ is None else environ).get(name, "")
    return int(raw) if _SIZE_HINT.fullmatch(raw) else None


def drop_unreadable_size_hints(environ: MutableMapping[str, str] | None = None) -> None:
    """Remove a COLUMNS or LINES that is set but no plain number of cells.

    rich converts them with `int()` after `str.isdigit()`, which a Unicode digit (`²`)
    passes, so such a value is a traceback in every console (typer's help included); a
    5000-digit one asks for a table that wide. No terminal sets either: unset is what
    such a value means.
    """
    environ = os.environ if environ is None else environ
    for name in SIZE_HINTS:
        if name in environ and size_hint(name, environ) is None:
            del environ[name]


def plain_console(*, stderr: bool = False) -> Console:
    """A rich console for progress lines (SDK, promotion, rehearsal)."""
    from rich.console import Console

    return Console(stderr=stderr, **CONSOLE_OPTIONS)


def harmless(value: object) -> str:
    """`value` with its lines and tabs, and every other control character and direction
    override shown escaped (`\\x1b`, `\\x9b`, `\\r`, `\\u202e`): text from an endpoint or
    an account (a model's answer, an error) that cannot drive the terminal. Character by
    character, so a sequence split across two stream chunks is neutralised too."""
    return _DRIVES_THE_TERMINAL.sub(_shown_escaped, str(value))


def literal(value: object) -> Text:
    """`value` as a rich Text: printed character for character (`harmless`), never read
    as markup."""
    from rich.text import Text

    return Text(harmless(value))


def escaped(value: object) -> str:
    """`value` for an f-string that also holds markup: its brackets are printed, its
    control characters shown escaped (`harmless`)."""
    from rich.markup import escape

    return escape(harmless(value))


def printable(value: object) -> str:
    """`value` as one line that cannot drive the terminal: control characters and
    direction overrides are shown escaped (`\\x1b`, `\\u202e`). For strings that come
    from an account (S3 keys, AWS error messages, policy text)."""
    return _UNPRINTABLE.sub(_shown_escaped, str(value))
