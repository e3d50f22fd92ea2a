"""`peagle plan ... --json` without the typer app: the first command a script runs.

Building the typer app (every command's options converted, rich loaded) costs more than
the plan itself. This path reads the same flag table the typer command is built from
(peagle_deploy.spec.flags, via flag_table.json) and calls the same functions
(peagle_deploy.cli.plan_json), so the two cannot drift: tests/cli/test_fast_plan.py
checks byte-identical output over a corpus of command lines.

It takes only a command line it is sure of: `plan`, `--json`, at most one MODEL, and
options of the table spelled plainly (`--flag value`, `--flag=value`, a switch without a
value, each non-repeatable option once, no value that is empty, starts with `-`, or is a
number typer would read differently). Anything else (`--help`, an unknown option, `-k7`,
`--`, ...) returns None and the typer app decides, with its own messages.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peagle_deploy.spec.flag_table import FlagRow
from peagle_deploy.spec.flags import cli_table

FILE = ("--file", "-f")
"""The plan command's own options besides the table's (peagle_deploy.cli.spec_options)."""
JSON = "--json"

_PLAIN = {int: re.compile(r"[0-9]+"), float: re.compile(r"[0-9]+(\.[0-9]+)?")}
"""Numbers as typer converts them (`int(text)`, `float(text)`); signs, spaces,
underscores, exponents, `nan` and `inf` are left to typer."""


@dataclass
class Invocation:
    """A `peagle plan ... --json` command line, parsed."""

    model: str | None = None
    file: Path | None = None
    given: dict[str, Any] = field(default_factory=dict)
    """Each given table option by keyword: its value (converted as typer converts it),
    True (a switch) or a list of texts (repeatable)."""


def _options() -> dict[str, FlagRow | str]:
    """Option name -> its table row, or the name of one of the command's own options."""
    names: dict[str, FlagRow | str] = {name: FILE[0] for name in FILE}
    names[JSON] = JSON
    for row in cli_table()[1]:
        for decl in row.decls:
            names[decl] = row
    return names


def _plain(value: str | None, kind: type) -> bool:
    """A value typer would read exactly as this path does."""
    if value is None or not value or value.startswith("-"):
        return False
    pattern = _PLAIN.get(kind)
    return pattern is None or pattern.fullmatch(value) is not None


def parse(args: list[str]) -> Invocation | None:
    """The invocation, or None when the typer app must decide (see the module doc)."""
    if not args or args[0] != "plan" or JSON not in args:
        return None
    names = _options()
    found = Invocation()
    rest = iter(args[1:])
    for token in rest:
        if not token.startswith("-"):
            if found.model is not None or not token:
                return None  # a second argument, or an empty one: typer's message
            found.model = token
            continue
        name, eq, inline = token.partition("=") if token.startswith("--") else (token, "", "")
        target = names.get(name)
        if target is None:
            return None
        if target == JSON or (isinstance(target, FlagRow) and target.kind == "switch"):
            if eq:
                return None
            if isinstance(target, FlagRow):
                found.given[target.keyword] = True
            continue
        value = inline if eq else next(rest, None)
        if not _take(found, target, value):
            return None
    return found


def _take(found: Invocation, target: FlagRow | str, value: str | None) -> bool:
    """Record one option's value; False when typer must decide."""
    if isinstance(target, str):  # --file
        if found.file is not None or not _plain(value, str):
            return False
        found.file = Path(str(value))
        return True
    if not _plain(value, target.value_type if target.kind == "value" else str):
        return False
    text = str(value)
    if target.kind in ("list", "pairs"):
        found.given.setdefault(target.keyword, []).append(text)
        return True
    if target.keyword in found.given:
        return False  # given twice: typer keeps the last one; let it
    try:
        found.given[target.keyword] = target.value_type(text)
    except ValueError:  # past int()'s 4300-digit limit: typer's one-line refusal
        return False
    return True


def knobs(found: Invocation) -> dict[str, Any]:
    """The `load_spec` overrides, made as the typer command makes them (table order)."""
    out: dict[str, Any] = {}
    for row in cli_table()[1]:
        value = row.from_cli(found.given.get(row.keyword))
        if value is not None:
            out[row.path] = value
    return out


PYDANTIC_PLUGINS_ENV = "PYDANTIC_DISABLE_PLUGINS"
"""pydantic's documented switch (`__all__`: no plugin). With plugins on, the first
validator pydantic builds scans every installed distribution's entry points for the
`pydantic` group: about 25 ms of this path's ~340 ms in the project's venv (193
distributions; benchmarks/cold_start.py). Plugins observe validation (tracing, metrics);
the plan validates only the CLI's own spec, so this path runs without them unless the
user set the variable (theirs wins) and puts the environment back afterwards."""


@contextmanager
def _without_pydantic_plugins() -> Iterator[None]:
    if PYDANTIC_PLUGINS_ENV in os.environ:
        yield
        return
    os.environ[PYDANTIC_PLUGINS_ENV] = "__all__"
    try:
        yield
    finally:
        os.environ.pop(PYDANTIC_PLUGINS_ENV, None)


def run(found: Invocation) -> int:
    """Plan and print the JSON document, as `peagle plan --json` does; 0."""
    with _without_pydantic_plugins():
        return _run(found)


def _run(found: Invocation) -> int:
    from peagle_deploy.cli.json_output import emit_json
    from peagle_deploy.cli.plan_json import (
        load_cli_spec,
        plan_document,
        plan_with_experiment,
        training_document,
    )

    training = training_document(found.file, found.model, knobs(found))
    if training is not None:
        emit_json(training)
        return 0
    spec = load_cli_spec(found.file, found.model, knobs(found))
    emit_json(plan_document(*plan_with_experiment(spec)))
    return 0
