"""What an error message may echo of a user's value: short, and with credentials masked.

Every refusal names the field and what is allowed; the value itself is only context.
A 5 MB endpoint name, a tokenizer.json passed as a spec, or an `hf_...` token that
landed in the wrong field must not come back on the terminal or in CI logs.
"""

from __future__ import annotations

import re
import reprlib

SECRET_VALUE_RE = re.compile(
    r"(hf_[A-Za-z0-9]{30,}"  # Hugging Face access token
    r"|\b(AKIA|ASIA)[0-9A-Z]{16}\b"  # AWS access key id
    r"|\bsk-[A-Za-z0-9_\-]{20,}"  # OpenAI-style API key (Anthropic's sk-ant- too)
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"  # GitHub token
    r"|\bgithub_pat_[A-Za-z0-9_]{22,}"  # GitHub fine-grained token
    r"|\bglpat-[A-Za-z0-9_\-]{20,}"  # GitLab personal access token
    r"|\bxox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack token
    r"|\bAIza[0-9A-Za-z_\-]{35}"  # Google API key
    r"|\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"  # JWT
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----)"
)
"""Values that are credentials whatever key they sit under."""

MASK = "<redacted>"
EXCERPT_CHARS = 80
"""Longest run of a value an error message shows."""
MESSAGE_CHARS = 400
"""Longest error message part (problem, allowed values) shown."""

LONG_RUN_CHARS = 256
"""A run of non-space characters longer than this is a pasted value, not a path or URL."""
_LONG_RUN = re.compile(rf"\S{{{LONG_RUN_CHARS + 1},}}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def mask_secrets(text: str) -> str:
    """`text` with every credential-looking substring replaced by `<redacted>`."""
    return SECRET_VALUE_RE.sub(MASK, text)


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """At most `limit` characters of `text`, masked, saying how much was left out."""
    text = mask_secrets(text)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(text)} characters)"


def safe_message(text: str, limit: int = MESSAGE_CHARS) -> str:
    """A message part fit to print: secrets masked, long pasted runs and the whole cut.

    Control characters (terminal escapes, newlines from a pasted file) are shown escaped
    (`\\t`, `\\x1b`), so the message stays one line and cannot repaint the terminal.
    """
    text = mask_secrets(text)
    text = _LONG_RUN.sub(lambda m: excerpt(m.group(0)), text)
    text = _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)
    if len(text) > limit:
        text = f"{text[: limit - 1]}…"
    return text


MAX_LINES = 40
"""Longest multi-line message (a failure report with log lines) shown."""


def safe_lines(text: str, max_lines: int = MAX_LINES) -> str:
    """`safe_message` for each line of a multi-line report; at most `max_lines` lines."""
    lines = text.split("\n")
    shown = [safe_message(line) for line in lines[:max_lines]]
    if len(lines) > max_lines:
        shown.append(f"... ({len(lines) - max_lines} more lines)")
    return "\n".join(shown)


class _ValueRepr(reprlib.Repr):
    """`repr` that never builds the whole text of a big value and masks strings first."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = 4
        self.maxstring = self.maxother = max(limit - 30, 10)  # room for "… (N characters)"

    def repr_str(self, x: str, level: int) -> str:
        if len(x) <= self.maxstring:
            return repr(mask_secrets(x))
        head = mask_secrets(x[: self.maxstring + 200])[: self.maxstring]
        return f"{head!r}… ({len(x)} characters)"

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() <= 256:
            return repr(x)
        return f"<a number of about {int(x.bit_length() * 0.30103) + 1} digits>"


def value_excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """A short repr of a value for an error message: strings cut, tokens masked, nested
    collections summarised (`[['x', 'x', ...], ...]`), whatever the value's size."""
    text = _ValueRepr(limit).repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
