"""Rich consoles that print values as given.

rich reads `:name:` as an emoji code by default, so `--tag aws:x=1` came back as
`tags.aws❌`; every console the project makes has emoji codes off. Markup stays on for
the project's own styling (`[bold]...[/]`): a value from a user, a file or AWS is
escaped (`literal`) before it goes into a marked-up line or a table cell.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# C0 and C1 controls and DEL (escape sequences, newlines, carriage returns), and the
# Unicode direction overrides/isolates that reorder what a line appears to say.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")

CONSOLE_OPTIONS: dict[str, Any] = {"emoji": False}
"""What every peagle-deploy console is built with."""


def plain_console(*, stderr: bool = False) -> Console:
    """A rich console for progress lines (SDK, promotion, rehearsal)."""
    from rich.console import Console

    return Console(stderr=stderr, **CONSOLE_OPTIONS)


def literal(value: object) -> Text:
    """`value` as a rich Text: printed character for character, never read as markup."""
    from rich.text import Text

    return Text(str(value))


def escaped(value: object) -> str:
    """`value` for an f-string that also holds markup: its brackets are printed."""
    from rich.markup import escape

    return escape(str(value))


def printable(value: object) -> str:
    """`value` as one line that cannot drive the terminal: control characters and
    direction overrides are shown escaped (`\\x1b`, `\\u202e`). For strings that come
    from an account (S3 keys, AWS error messages, policy text)."""
    return _UNPRINTABLE.sub(
        lambda m: m.group(0).encode("unicode_escape").decode("ascii"), str(value)
    )
