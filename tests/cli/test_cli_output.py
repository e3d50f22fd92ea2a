"""`output.print_table`: piped or redirected tables keep every character."""

from __future__ import annotations

import pytest
from rich.table import Table

from peagle_deploy.cli import output


def test_piped_table_is_not_cut_to_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    name = "peagle-qwen3-coder-30b-a3b-instruct-staging"
    table = Table(title="peagle endpoints")
    for column in ("name", "status", "stage", "model", "spec hash", "created"):
        table.add_column(column)
    table.add_row(
        name,
        "InService",
        "staging",
        "qwen3-coder-30b-a3b-instruct",
        "3aee5b924974",
        "2026-11-22 01:11:01.993000+00:00",
    )
    output.print_table(table)
    out = capsys.readouterr().out
    assert "…" not in out
    for cell in (name, "InService", "qwen3-coder-30b-a3b-instruct", "01:11:01.993000+00:00"):
        assert cell in out


def test_narrow_table_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    table = Table()
    table.add_column("k")
    table.add_row("v")
    output.print_table(table)
    assert capsys.readouterr().out.splitlines()[1] == "┃ k ┃"


def test_error_and_warning_keep_brackets(capsys: pytest.CaptureFixture[str]) -> None:
    output.error("name: 1-63 of [a-zA-Z0-9-] (stage [dev])")
    output.warn("levels [bold] stay")
    err = capsys.readouterr().err
    assert "error: name: 1-63 of [a-zA-Z0-9-] (stage [dev])" in err
    assert "warning: levels [bold] stay" in err


def test_cli_error_line_shows_the_allowed_characters(capsys: pytest.CaptureFixture[str]) -> None:
    from peagle_deploy.cli.app import main

    assert main(["plan", "gpt-oss-20b", "--endpoint-name", "Bad Name"]) == 2
    err = capsys.readouterr().err
    assert "[a-zA-Z0-9-]" in err and "Traceback" not in err
