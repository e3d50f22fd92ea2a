"""What an error message may echo of a user's value: short, and with credentials masked.

Every refusal names the field and what is allowed; the value itself is only context.
A 5 MB endpoint name, a tokenizer.json passed as a spec, or an `hf_...` token that
landed in the wrong field must not come back on the terminal or in CI logs.

`SecretValues` (and `masked`, `environment_values` under it) is the one masking of the
values read from Secrets Manager, for every path that holds them: the SDK's deploy, an
experiment's candidate, a promotion (through the SDK) and the CDK model provider's
handler. Standard library only: infra/provider_bundle.py copies this file (and the
package's `__init__.py`) into the handler's Lambda asset.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any

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
    # a URL's user:password (RFC 3986 userinfo: no '/', '?', '#' or '@' in it), as in
    # postgres://user:pw@host/db or redis://:pw@host; a user name alone is no credential
    r"|\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#@:]*:[^\s/?#@]+@"
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


# --- Values read from Secrets Manager, masked wherever a message could quote them ---

# Where botocore's ParamValidationError (botocore/validate.py, _format_error) and AWS's
# validation messages ("1 validation error detected: Value '...' at '...' failed to
# satisfy constraint: ...") quote a value.
_QUOTED_VALUES = (
    re.compile(r"(, value: ).*?(, (?:type: |valid min value: |valid min length: ))", re.S),
    re.compile(r"(Value ').*?(' at ')", re.S),
)
MIN_MASKED_CHARS = 6
"""Values shorter than this are left in messages when they are not quoted as above
("1", "true" would otherwise blank out unrelated words); no credential is that short."""
_MAX_TREE_DEPTH = 8


def value_forms(values: Iterable[str]) -> list[str]:
    """Each value as a message could show it: as is, and escaped as in a repr or in
    JSON; longest first (a value that contains another is masked whole)."""
    forms: set[str] = set()
    for value in values:
        forms.update({value, repr(value)[1:-1], json.dumps(value)[1:-1]})
    return sorted((f for f in forms if len(f) >= MIN_MASKED_CHARS), key=len, reverse=True)


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    elif value is not None:
        yield str(value)


def environment_values(requests: Iterable[Mapping[str, Any]]) -> list[str]:
    """The values of every container Environment of CreateModel `requests`, in the forms
    `value_forms` gives."""
    values: list[str] = []
    for request in requests:
        containers = [request.get("PrimaryContainer"), *(request.get("Containers") or [])]
        for container in containers:
            env = container.get("Environment") if isinstance(container, Mapping) else None
            values.extend(_leaves(env))
    return value_forms(values)


def masked(text: str, forms: Iterable[str]) -> str:
    """`text` with every value botocore or AWS quotes, and each of `forms` (see
    `value_forms`), replaced by MASK."""
    for pattern in _QUOTED_VALUES:
        text = pattern.sub(rf"\g<1>{MASK}\g<2>", text)
    for form in forms:
        text = text.replace(form, MASK)
    return text


def _masked_tree(value: Any, forms: list[str], depth: int = 0) -> Any:
    """`value` with `masked` applied to every string in it (dicts, lists, tuples)."""
    if isinstance(value, str):
        return masked(value, forms)
    if depth >= _MAX_TREE_DEPTH:
        return value
    if isinstance(value, dict):
        return {k: _masked_tree(v, forms, depth + 1) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_masked_tree(v, forms, depth + 1) for v in value)
    return value


def mask_exception(exc: BaseException, forms: list[str]) -> None:
    """Mask `exc` in place, and every exception chained to it: the message (`args`) and
    the text it carries in attributes (botocore's `response` Error.Message and `kwargs`,
    a failure's log lines), so whoever prints or inspects it sees no value."""
    seen: set[int] = set()
    chain: list[BaseException | None] = [exc]
    while chain:
        current = chain.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        current.args = _masked_tree(current.args, forms)
        for name, value in list(vars(current).items()):
            try:
                setattr(current, name, _masked_tree(value, forms))
            except (AttributeError, TypeError):
                continue  # a read-only attribute
        chain += [current.__cause__, current.__context__]


class SecretValues:
    """The secret values one path has read; it masks them in what leaves the path.

    `with values:` masks, in place, any exception that leaves the block (see
    `mask_exception`); `text()` masks a message or a log line. Before anything is
    added, nothing is changed.
    """

    def __init__(self) -> None:
        self._values: list[str] = []
        self._forms: list[str] = []

    def add(self, values: Iterable[str]) -> None:
        self._values.extend(values)
        self._forms = value_forms(self._values)

    def __bool__(self) -> bool:
        return bool(self._values)

    def text(self, text: str) -> str:
        return masked(text, self._forms) if self._values else text

    def __enter__(self) -> SecretValues:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None and self._values:
            mask_exception(exc, self._forms)
