"""Terminal output: piped tables and lines keep every character; non-UTF-8 consoles get ASCII."""

from __future__ import annotations

import sys

import pytest
from rich.table import Table

from peagle_deploy.cli import output
from peagle_deploy.terminal import drop_unreadable_size_hints

PEAGLE = [sys.executable, "-m", "peagle_deploy.cli.app"]


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


def _run_piped(code: str, **env: str) -> str:
    """Run `code` in a fresh interpreter whose stdout is a pipe (not a terminal)."""
    import os
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        check=True,
        env={**os.environ, "COLUMNS": "", **env},
    )
    # On an ASCII console every byte must be ASCII (strict decoding fails otherwise).
    return result.stdout.decode("ascii" if env else "utf-8")


def test_piped_lines_are_not_wrapped_at_80_columns() -> None:
    line = "P-EAGLE " + "speculative-decoding " * 8 + "end"
    out = _run_piped(
        "from peagle_deploy.cli import output\n"
        f"output.console.print({line!r})\n"
        "from rich.panel import Panel\n"
        f"output.console.print(Panel({line!r}))\n"
    )
    lines = out.splitlines()
    assert lines[0] == line  # one line, as written
    assert all(len(row) <= 80 for row in lines[1:])  # a panel still fits 80 columns
    assert "end" in out


def test_a_non_unicode_console_gets_ascii_instead_of_a_traceback() -> None:
    out = _run_piped(
        "from peagle_deploy.cli import output\n"
        "output.degrade_to_ascii()\n"
        "print('K=3 \\u2192 5 \\u2713 caf\\u00e9 \\U0001f680 \\u2026')\n"
        "output.console.print('t\\u00eate-\\u00e0-t\\u00eate')\n",
        PYTHONIOENCODING="ascii",
    )
    assert out.splitlines() == ["K=3 -> 5 ok cafe ? ...", "tete-a-tete"]


def test_peagle_runs_on_an_ascii_console() -> None:
    out = _run_piped(
        "import sys\n"
        "from peagle_deploy.cli.app import main\n"
        "sys.exit(main(['plan', 'gpt-oss-20b', '--tag', 'owner=J\\u00fcrgen']))\n",
        PYTHONIOENCODING="ascii",
    )
    assert '"Value": "Jurgen"' in out and "+----" in out  # rich's ASCII boxes


@pytest.mark.parametrize(("columns", "width"), [("", output.PIPE_WIDTH), ("90", 90)])
def test_piped_doctor_table_fits_columns_else_a_sane_width(columns: str, width: int) -> None:
    """`peagle doctor > log`: the table is COLUMNS (else 120) wide, its long findings
    folded, not one line per finding of several hundred characters (issue 23, item 7)."""
    import os
    import subprocess

    from peagle_local.emulator import LocalAWS

    with LocalAWS() as aws:  # a bare account: every check fails with a long finding
        done = subprocess.run(
            [*PEAGLE, "doctor", "gpt-oss-20b", "--role-arn", "arn:aws:iam::123456789012:role/x"],
            capture_output=True,
            text=True,
            check=False,
            env={
                **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
                **aws.env(),
                "COLUMNS": columns,
            },
        )
    assert done.returncode == 1, done.stderr
    table = [line for line in done.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert len(table) > 10
    assert max(len(line) for line in table) == width
    assert "…" not in done.stdout  # folded, never cut


def test_a_table_that_would_cut_a_name_gets_the_width_it_needs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    table = Table()
    table.add_column("name", no_wrap=True)
    table.add_column("note", overflow="fold")
    name = "peagle-qwen3-coder-30b-a3b-instruct-staging"
    table.add_row(name, "x " * 40)
    output.print_table(table)
    out = capsys.readouterr().out
    assert name in out and "…" not in out


@pytest.mark.parametrize(
    ("value", "width"),
    [
        ("90", 90),
        ("", output.PIPE_WIDTH),
        ("\u00b2", output.PIPE_WIDTH),
        ("0", output.PIPE_WIDTH),
        ("9" * 5000, output.PIPE_WIDTH),
        (" 90", output.PIPE_WIDTH),
        ("-5", output.PIPE_WIDTH),
    ],
)
def test_pipe_width_takes_only_a_plain_number_of_columns(
    value: str, width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", value)
    assert output.pipe_width() == width


def test_unreadable_size_hints_are_dropped_and_readable_ones_kept() -> None:
    environ = {"COLUMNS": "\u00b2", "LINES": "40", "TERM": "xterm"}
    drop_unreadable_size_hints(environ)
    assert environ == {"LINES": "40", "TERM": "xterm"}
    environ = {"COLUMNS": "9" * 6, "LINES": "\u0663"}
    drop_unreadable_size_hints(environ)
    assert environ == {}
