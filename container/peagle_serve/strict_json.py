"""The one way the container parses JSON: bounded, strict, and with one-line errors.

Every JSON document the container reads (SM_VLLM_* values, the drafter's and the
target's config.json, safetensors headers and index files) goes through `loads` or
`load_bytes`, which refuse, with one line naming the document:

- more than `max_bytes` (each caller names its limit, see the *_MAX_BYTES constants);
- nesting deeper than MAX_DEPTH (Python's own parser would raise RecursionError on a
  document nested a few thousand levels deep; that must be a line, not a traceback);
- duplicate object keys (the json module keeps the last one silently);
- NaN, Infinity and -Infinity (not JSON; the json module accepts them);
- bytes that are not UTF-8 (the offset of the first bad byte is named), and a UTF-8
  byte-order mark (transformers and vLLM read these files with json.loads on UTF-8
  text, which rejects a BOM, so accepting it here would only move the failure later).

JsonSyntaxError means "not JSON at all" (callers that accept plain strings, such as the
SM_VLLM_* conversion, fall back to the raw value); JsonLimitError means "JSON, but
refused" (always an error).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Final

MAX_DEPTH: Final = 64
# One SM_VLLM_* value. SageMaker's CreateModel allows 1024 bytes per value; the limit
# is far above that so only a value that is not a configuration at all is refused.
ENV_VALUE_MAX_BYTES: Final = 64 * 1024
# A model's or drafter's config.json (real ones are a few KB).
CONFIG_MAX_BYTES: Final = 4 * 1024 * 1024
# model.safetensors.index.json (about 9 MB for the largest public MoE checkpoints).
INDEX_MAX_BYTES: Final = 64 * 1024 * 1024
# A safetensors header: the format's own limit (safetensors MAX_HEADER_SIZE, 100 MB).
SAFETENSORS_HEADER_MAX_BYTES: Final = 100_000_000

_BOM: Final = b"\xef\xbb\xbf"
# A JSON string (unrolled loop, linear time) or one bracket.
_TOKENS: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
# Characters Python's surrogateescape made of bytes that are not UTF-8 (environment
# variables and command-line arguments are decoded that way).
_ESCAPED_BYTE: Final = re.compile("[\udc80-\udcff]")


class JsonInputError(ValueError):
    """A refused JSON document; str() is one line naming it."""

    def __init__(self, what: str, problem: str) -> None:
        super().__init__(f"{what}: {problem}")
        self.what = what
        self.problem = problem


class JsonSyntaxError(JsonInputError):
    """The text is not JSON."""


class JsonLimitError(JsonInputError):
    """The text is JSON but breaks a limit or a strictness rule."""


def _size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n} bytes"


def _check_depth(text: str, what: str) -> None:
    # Cheap pre-test: a document cannot be deeper than its number of open brackets.
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise JsonLimitError(
                    what,
                    f"nested too deeply (more than {MAX_DEPTH} levels, at character "
                    f"{match.start()})",
                )
        elif token in "]}":
            depth -= 1


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class _DuplicateKeyError(ValueError):
    pass


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(key)
        out[key] = value
    return out


def decoder() -> json.JSONDecoder:
    """A decoder that refuses duplicate keys and NaN/Infinity (for raw_decode loops).

    Run `check_text` on the whole text first: the decoder alone does not bound depth.
    """
    return json.JSONDecoder(object_pairs_hook=_unique_object, parse_constant=_refuse_constant)


def check_text(text: str, *, what: str, max_bytes: int) -> None:
    """The limits that apply before parsing: size, bytes that were not UTF-8, depth."""
    if len(text) > max_bytes:
        raise JsonLimitError(
            what, f"is {_size(len(text))} of text; the limit is {_size(max_bytes)}"
        )
    bad = _ESCAPED_BYTE.search(text)
    if bad is not None:
        byte = ord(bad.group()) - 0xDC00
        raise JsonLimitError(
            what, f"is not valid UTF-8 (byte 0x{byte:02x} at character {bad.start()})"
        )
    _check_depth(text, what)


def parse_error(what: str, error: ValueError) -> JsonInputError:
    """The JsonInputError for a ValueError raised by the strict decoder."""
    if isinstance(error, _DuplicateKeyError):
        return JsonLimitError(what, f"duplicate key {str(error)!r} (each key may appear once)")
    message = str(error)
    if "is not a JSON number" in message:
        return JsonLimitError(what, f"{message} (NaN and Infinity are not allowed)")
    if isinstance(error, json.JSONDecodeError):
        return JsonSyntaxError(what, f"not valid JSON ({error.msg} at character {error.pos})")
    return JsonSyntaxError(what, f"not valid JSON ({message})")


def loads(text: str, *, what: str, max_bytes: int) -> Any:
    """Parse one JSON document from text under every limit of this module."""
    check_text(text, what=what, max_bytes=max_bytes)
    try:
        return decoder().decode(text)
    except RecursionError:  # defensive: _check_depth should have caught it
        raise JsonLimitError(what, f"nested too deeply (more than {MAX_DEPTH} levels)") from None
    except ValueError as e:
        raise parse_error(what, e) from None


def load_bytes(data: bytes, *, what: str, max_bytes: int) -> Any:
    """Parse one JSON document from bytes that must be UTF-8 without a BOM."""
    if len(data) > max_bytes:
        raise JsonLimitError(what, f"is {_size(len(data))}; the limit is {_size(max_bytes)}")
    if data.startswith(_BOM):
        raise JsonLimitError(
            what,
            "starts with a UTF-8 byte-order mark, which vLLM's loaders reject; save it "
            "as UTF-8 without a BOM",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise JsonLimitError(
            what, f"is not valid UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start})"
        ) from None
    return loads(text, what=what, max_bytes=max_bytes)


def load_file(path: str, *, max_bytes: int, what: str | None = None) -> Any:
    """Parse a JSON file, reading at most max_bytes + 1 bytes of it.

    OSError is left to the caller (which knows which variable the file belongs to).
    """
    name = what or path
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise JsonLimitError(name, f"is {_size(size)}; the limit is {_size(max_bytes)}")
        data = f.read(max_bytes + 1)
    return load_bytes(data, what=name, max_bytes=max_bytes)
