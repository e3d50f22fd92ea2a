"""Every document peagle-deploy reads from a user goes through here, with limits.

Specs, stage files, gates files, bench datasets and results, and the stage maps of
`cdk.json` are parsed by `load_document` / `parse_document` (whole files) or
`iter_json_lines` (JSONL). Whatever a file holds, the outcome is the parsed value or
one `DocumentError` naming the field the document came from; never a traceback, a hang
or a multi-megabyte echo:

- size: a cap per kind of document, checked before anything is parsed;
- encoding: UTF-8, with or without a byte-order mark; UTF-16/32 and invalid bytes are
  refused with the line where decoding failed;
- nesting: a depth cap, checked on the YAML event stream before any tree is built, and
  on JSON with the parser's own recursion guard;
- YAML aliases: allowed (anchors are handy in gates files), but the values they expand
  to are counted on the event stream and capped, so a "billion laughs" document is
  refused after reading a few hundred events, not after expanding them;
- duplicate keys are refused (JSON and YAML would silently keep the last one);
- NaN and Infinity are refused (JSON `NaN`, `1e999`, YAML `.nan`, `.inf`);
- pipes (`--file <(...)`, `/dev/stdin`) are read, but one that gives nothing to read
  within `PIPE_WAIT_S` (a named pipe no program writes to) is refused instead of
  waiting for ever.
"""

from __future__ import annotations

import codecs
import functools
import json
import math
import os
import select
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

from peagle_deploy.errors import InputError

Format = Literal["json", "yaml"]

_MIB = 1 << 20
PIPE_WAIT_S = 30.0
"""How long a pipe or device may keep a reader waiting for its first byte."""


@dataclass(frozen=True)
class Limits:
    """How big a document of one kind may be."""

    max_bytes: int
    """Size of the file (or of one JSONL line) before decoding."""
    max_depth: int = 32
    """Nesting of mappings and sequences; real documents here are under 8 deep."""
    max_values: int = 100_000
    """Scalars and collections after YAML aliases are expanded (and in JSON)."""

    def describe(self) -> str:
        return f"<= {_size(self.max_bytes)}, nesting <= {self.max_depth}"


SPEC = Limits(max_bytes=_MIB)
"""Deployment specs, stage files, gates files and cdk.json stage maps."""
RESULTS = Limits(max_bytes=64 * _MIB, max_values=5_000_000)
"""Benchmark result files (`peagle bench --json` output), which carry per-request samples."""
JSONL_LINE = Limits(max_bytes=4 * _MIB)
"""One line of a JSONL dataset (a prompt and its metadata)."""


class DocumentError(InputError):
    """A document that cannot be read; `field` names where it came from (`--file`, ...)."""


def _size(n: int) -> str:
    return f"{n / _MIB:.0f} MiB" if n >= _MIB else f"{n} bytes"


# --- bytes -> text -----------------------------------------------------------------------

_UTF16_32_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def decode(data: bytes, field: str, where: str, *, one_line: bool = False) -> str:
    """UTF-8 text of `data` (a UTF-8 byte-order mark is dropped); DocumentError otherwise.
    `one_line`: `where` already names the line (a JSONL line)."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    else:
        for bom, name in _UTF16_32_BOMS:
            if data.startswith(bom):
                raise DocumentError(
                    field, f"{where} is {name} text (byte-order mark)", "UTF-8; save it as UTF-8"
                )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        at = where if one_line else f"{where} line {line}"
        raise DocumentError(
            field, f"{at}: not UTF-8 (byte 0x{data[exc.start]:02x})", "UTF-8 text"
        ) from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        at = where if one_line else f"{where} line {line}"
        raise DocumentError(field, f"{at}: NUL byte (binary file?)", "UTF-8 text")
    return text


def open_for_reading(path: Path, field: str, what: str = "a file") -> BinaryIO:
    """`path` opened for reading, or one DocumentError; never blocks on an idle pipe.

    A FIFO opened the usual way blocks in open() until some program opens it for
    writing, which may be never. Opening without blocking and then waiting, bounded, for
    the first byte keeps `--file <(cmd)` working and turns a forgotten pipe into an error.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise DocumentError(field, f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise DocumentError(field, f"{path} is a directory", what)
        if not stat.S_ISREG(mode):
            poller = select.poll()
            poller.register(fd, select.POLLIN | select.POLLPRI)
            if not poller.poll(int(PIPE_WAIT_S * 1000)):
                raise DocumentError(
                    field,
                    f"nothing to read from {path} within {PIPE_WAIT_S:g} s "
                    "(a named pipe that no program writes to?)",
                    what,
                )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: Path, field: str, limits: Limits) -> bytes:
    """The file's bytes, refusing it before reading when it is larger than allowed."""
    with open_for_reading(path, field) as f:
        try:
            data = f.read(limits.max_bytes + 1)
        except OSError as exc:
            raise DocumentError(field, f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > limits.max_bytes:
        raise DocumentError(
            field, f"{path} is larger than {_size(limits.max_bytes)}", limits.describe()
        )
    return data


# --- the parsed tree -------------------------------------------------------------------


def _check_tree(value: Any, field: str, where: str, limits: Limits, *, finite: bool = True) -> None:
    """Depth, value count and non-finite floats of a parsed tree, without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    count = 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > limits.max_values:
            raise DocumentError(
                field, f"{where} holds more than {limits.max_values} values", limits.describe()
            )
        if finite and isinstance(node, float) and not math.isfinite(node):
            raise DocumentError(field, f"{where}: {node} is not a number", "finite numbers")
        if isinstance(node, Mapping | list):
            if depth > limits.max_depth:
                raise _too_deep(field, where, limits)
            children = node.values() if isinstance(node, Mapping) else node
            stack.extend((child, depth + 1) for child in children)


def check_tree(
    value: Any, field: str, where: str, limits: Limits = SPEC, *, finite: bool = True
) -> None:
    """The limits of an already-parsed document (e.g. cdk.json context, parsed by the CDK
    CLI): nesting depth, value count and (unless `finite=False`, for values a model
    checks field by field) NaN and Infinity; DocumentError naming `field`."""
    _check_tree(value, field, where, limits, finite=finite)


def _too_deep(field: str, where: str, limits: Limits) -> DocumentError:
    return DocumentError(
        field, f"{where} is nested deeper than {limits.max_depth} levels", limits.describe()
    )


# --- JSON ------------------------------------------------------------------------------


def _no_duplicates(field: str, where: str) -> Any:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise DocumentError(
                    field, f"{where}: key {_short(key)} appears twice", "each key once"
                )
            out[key] = value
        return out

    return hook


def _refuse_constant(field: str, where: str) -> Any:
    def hook(name: str) -> Any:
        raise DocumentError(field, f"{where}: {name} is not a number", "finite numbers")

    return hook


def _finite_float(field: str, where: str) -> Any:
    def hook(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise DocumentError(
                field, f"{where}: {_short(text)} does not fit a float", "finite numbers"
            )
        return value

    return hook


def parse_json(
    text: str, field: str, where: str, limits: Limits = SPEC, *, one_line: bool = False
) -> Any:
    """Parse JSON text strictly (see the module docstring). `one_line`: `where` already
    names the line (a JSONL line), so a syntax error does not add the parser's line 1."""
    try:
        value = json.loads(
            text,
            object_pairs_hook=_no_duplicates(field, where),
            parse_constant=_refuse_constant(field, where),
            parse_float=_finite_float(field, where),
        )
    except RecursionError:
        raise _too_deep(field, where, limits) from None
    except json.JSONDecodeError as exc:
        at = where if one_line else f"{where} line {exc.lineno}"
        raise DocumentError(field, f"{at}: not valid JSON: {exc.msg}", "JSON") from None
    except ValueError as exc:  # int() of a number with thousands of digits
        raise DocumentError(field, f"{where}: {_short(str(exc))}", "JSON") from None
    _check_tree(value, field, where, limits)
    return value


# --- YAML ------------------------------------------------------------------------------


def _yaml_budget(text: str, field: str, where: str, limits: Limits) -> None:
    """Walk the event stream: nesting depth and the size aliases expand to.

    The parser is an explicit state machine (no recursion), so this is safe on any
    input; the composer and constructor that run afterwards recurse once per level and
    share aliased nodes, which is why depth and expansion are settled here first.
    """
    import yaml

    depth = 0
    # one running count per open collection; anchors remember the size of what they name
    counts: list[int] = [0]
    anchor_sizes: dict[str, int] = {}
    open_anchors: list[str | None] = []
    total = 0
    aliases = False
    for event in yaml.parse(text, Loader=_safe_loader()):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limits.max_depth:
                raise _too_deep(field, where, limits)
            counts.append(1)
            open_anchors.append(event.anchor)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            size = counts.pop()
            anchor = open_anchors.pop()
            if anchor is not None:
                anchor_sizes[anchor] = size
            counts[-1] += size
        elif isinstance(event, yaml.ScalarEvent):
            counts[-1] += 1
            if event.anchor is not None:
                anchor_sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            aliases = True
            counts[-1] += anchor_sizes.get(event.anchor or "", 1)
        else:
            continue
        total = sum(counts)
        if total > limits.max_values:
            if not aliases:
                raise DocumentError(
                    field, f"{where} holds more than {limits.max_values} values", limits.describe()
                )
            raise DocumentError(
                field,
                f"{where}: YAML aliases expand to more than {limits.max_values} values",
                "fewer aliases, or none",
            )


@functools.cache
def _safe_loader() -> type:
    """libyaml's SafeLoader when PyYAML has it, else the pure-Python one: the same safe
    tags and results, but parsing a 1 MiB file takes a fraction of a second instead of
    seconds (a flat list of 90,000 items took 4.7 s in pure Python)."""
    import yaml

    return yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader


@functools.cache
def _strict_loader() -> type:
    import yaml

    class StrictLoader(_safe_loader()):  # type: ignore[misc]
        """SafeLoader that refuses a key given twice in one mapping (merge keys aside)."""

    def construct_mapping(loader: Any, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = loader.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key is a collection", key_node.start_mark
                ) from None
            if duplicate:
                raise _DuplicateKeyError(key, key_node.start_mark.line + 1)
        return yaml.constructor.SafeConstructor.construct_mapping(loader, node, deep=deep)

    StrictLoader.add_constructor(
        "tag:yaml.org,2002:map",
        lambda loader, node: _construct_map(loader, node, construct_mapping),
    )
    return StrictLoader


def _construct_map(loader: Any, node: Any, construct_mapping: Any) -> Any:
    # SafeConstructor.construct_yaml_map is a generator (two-step construction for
    # recursive structures); build the dict the same way with the duplicate check first.
    data: dict[Any, Any] = {}
    yield data
    data.update(construct_mapping(loader, node))


class _DuplicateKeyError(Exception):
    def __init__(self, key: Any, line: int):
        self.key = key
        self.line = line


# libyaml's own cap (PyYAML 6.0.4's wheels, CSafeLoader: a flow of 1000 levels, while the
# pure-Python parser has none). Its scanner reads ahead, so it can fire before the event
# walk reaches `max_depth`; any document it refuses is deeper than ours allows.
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"


def parse_yaml(text: str, field: str, where: str, limits: Limits = SPEC) -> Any:
    """Parse YAML text strictly (see the module docstring); plain-safe tags only."""
    import yaml

    try:
        _yaml_budget(text, field, where, limits)
        value = yaml.load(text, Loader=_strict_loader())  # a (C)SafeLoader subclass
    except _DuplicateKeyError as dup:
        raise DocumentError(
            field,
            f"{where} line {dup.line}: key {_short(str(dup.key))} appears twice",
            "each key once",
        ) from None
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if problem == _LIBYAML_TOO_DEEP:
            raise _too_deep(field, where, limits) from None
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise DocumentError(
            field, f"{where}{line}: not valid YAML: {_short(problem)}", "YAML"
        ) from None
    except RecursionError:
        raise _too_deep(field, where, limits) from None
    _check_tree(value, field, where, limits)
    return value


# --- whole documents -------------------------------------------------------------------


def format_of(path: Path) -> Format:
    """JSON for `.json` files, YAML otherwise (YAML also reads plain JSON)."""
    return "json" if path.suffix.lower() == ".json" else "yaml"


def parse_document(text: str, field: str, where: str, fmt: Format, limits: Limits = SPEC) -> Any:
    """Parse already-decoded text as `fmt`."""
    if len(text.encode("utf-8", "surrogatepass")) > limits.max_bytes:
        raise DocumentError(
            field, f"{where} is larger than {_size(limits.max_bytes)}", limits.describe()
        )
    if fmt == "json":
        return parse_json(text, field, where, limits)
    return parse_yaml(text, field, where, limits)


def load_document(
    path: str | Path, field: str, limits: Limits = SPEC, fmt: Format | None = None
) -> Any:
    """Read, decode and parse one file; `field` names it in errors (`--file`, `gates` ...)."""
    p = Path(path)
    text = decode(read_bytes(p, field, limits), field, str(p))
    return parse_document(text, field, str(p), fmt or format_of(p), limits)


def load_mapping(
    path: str | Path, field: str, limits: Limits = SPEC, fmt: Format | None = None
) -> dict[str, Any]:
    """`load_document` for documents whose top level is a mapping (empty file: `{}`)."""
    value = load_document(path, field, limits, fmt)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DocumentError(field, f"{path}: top level is {_kind(value)}", "a mapping")
    return value


def iter_json_lines(
    path: str | Path, field: str, limits: Limits = JSONL_LINE, *, max_lines: int = 1_000_000
) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each non-blank line of a JSONL file, each line strict."""
    p = Path(path)
    with open_for_reading(p, field, "a JSONL file") as f:
        for number, raw in enumerate(iter(lambda: f.readline(limits.max_bytes + 1), b""), 1):
            if number > max_lines:
                raise DocumentError(field, f"{p} has more than {max_lines} lines", "a smaller file")
            where = f"{p} line {number}"
            if len(raw) > limits.max_bytes and not raw.endswith(b"\n"):
                raise DocumentError(
                    field, f"{where} is longer than {_size(limits.max_bytes)}", limits.describe()
                )
            text = decode(raw, field, where, one_line=True)
            if not text.strip():
                continue
            yield number, parse_json(text, field, where, limits, one_line=True)


def _kind(value: Any) -> str:
    return {
        list: "a list",
        str: "a string",
        int: "a number",
        float: "a number",
        bool: "a boolean",
    }.get(type(value), type(value).__name__)


def _short(text: str, limit: int = 60) -> str:
    """A value quoted for an error message, cut to `limit` characters."""
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return repr(text)
