"""Every command's --help reads cleanly at 100 columns (issue 23, item 7): no `<bool>` after
a flag, no line past the width, and each command's summary on one line of its group's
list."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
import typer

from peagle_deploy.cli.app import app, main

WIDTH = 100
SUMMARY_CHARS = 82
"""Longest one-line summary: what fits beside the longest command name at WIDTH."""


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(typer.main.get_command(app)))


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main([*argv, "--help"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("path", "command"), COMMANDS, ids=[" ".join(p) or "peagle" for p, _ in COMMANDS]
)
def test_help_has_no_bool_metavar_and_fits_the_width(
    path: tuple[str, ...],
    command: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    text = _help(list(path), capsys)
    assert "<bool>" not in text
    too_wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert too_wide == []
    flags = [p for p in command.params if getattr(p, "is_flag", False)]
    for flag in flags:  # each flag is listed, followed by its help, not by a type
        assert any(line.lstrip("│ ").startswith(flag.opts[0]) for line in text.splitlines())
    subcommands = getattr(command, "commands", {})
    if subcommands:  # one row per subcommand: no summary wraps onto a second line
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("╭─ Commands"))
        end = next(i for i in range(start, len(lines)) if lines[i].startswith("╰"))
        rows = [line.strip("│ ").split()[0] for line in lines[start + 1 : end]]
        assert rows == list(subcommands)


@pytest.mark.parametrize(
    ("path", "command"), COMMANDS[1:], ids=[" ".join(p) for p, _ in COMMANDS[1:]]
)
def test_every_summary_is_one_short_line(path: tuple[str, ...], command: Any) -> None:
    summary = inspect.cleandoc(command.help or "").split("\n\n")[0]
    assert "\n" not in summary and 0 < len(summary) <= SUMMARY_CHARS, summary
