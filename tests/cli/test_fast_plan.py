"""The fast path of `peagle plan ... --json` (peagle_deploy.cli.fast_plan) and the typer
command print the same bytes, exit alike, and know the same options; what the fast path
is not sure of goes to typer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from start_up_probe import modules_loaded

from peagle_deploy.cli import app as entry
from peagle_deploy.cli import fast_plan
from peagle_deploy.spec.flag_table import FlagRow
from peagle_deploy.spec.flags import cli_table

MODEL = "gpt-oss-20b"
ROWS = cli_table()[1]
STAGES = Path(__file__).resolve().parents[2] / "stages"


def _outcome(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = entry.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _both(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    """(fast path, typer app) outcomes of one command line."""
    assert fast_plan.parse(argv) is not None, argv
    fast = _outcome(capsys, argv)
    with monkeypatch.context() as m:
        m.setattr(fast_plan, "parse", lambda _args: None)
        typer = _outcome(capsys, argv)
    return fast, typer


def _values(row: FlagRow) -> list[list[str]]:
    """Command-line spellings of `row` worth comparing: valid, refused, each form."""
    flag, last = row.flag, row.decls[-1]
    if row.kind == "switch":
        return [[flag]]
    if row.kind == "list":
        return [[flag, "a"], [flag, "a", last, "b"], [f"{flag}=c"]]
    if row.kind == "pairs":
        return [[flag, "A=1"], [flag, "A=1", last, "B=x=y"], [flag, "nokey"], [f"{flag}==v"]]
    if row.choices:
        return [[flag, c] for c in row.choices] + [[last, "other"], [f"{flag}={row.choices[0]}"]]
    if row.value_type is int:
        return [[flag, "3"], [last, "0"], [flag, "99999"], [f"{flag}=007"]]
    if row.value_type is float:
        return [[flag, "0.5"], [last, "7"], [f"{flag}=1.25"]]
    return [[flag, "x"], [last, "ml.g7e.4xlarge"], [f"{flag}=arn:aws:iam::123456789012:role/r"]]


def _flag_lines() -> list[list[str]]:
    return [["plan", MODEL, "--json", *v] for row in ROWS for v in _values(row)]


def _file_lines(tmp: Path) -> list[list[str]]:
    spec = tmp / "spec.yaml"
    spec.write_text("model: gpt-oss-20b\nstage: staging\nspeculative: {mode: eagle3}\n")
    no_model = tmp / "nomodel.yaml"
    no_model.write_text("stage: prod\n")
    broken = tmp / "broken.yaml"
    broken.write_text("model: [unclosed\n")
    return [
        ["plan", "--file", str(spec), "--json"],
        ["plan", "--json", "-f", str(spec), "-k", "7", "--env", "A=1"],
        ["plan", f"--file={spec}", "--json", "qwen3-coder-30b-a3b-instruct"],
        ["plan", "-f", str(no_model), "--json"],
        ["plan", "-f", str(no_model), "--json", MODEL],
        ["plan", "-f", str(broken), "--json"],
        ["plan", "-f", str(tmp / "missing.yaml"), "--json"],
        ["plan", "-f", str(tmp), "--json"],
        ["plan", "-f", str(STAGES / "dev-experiment.yaml"), "--json"],  # with an experiment
        ["plan", "-f", str(STAGES / "prod.yaml"), "--json"],
    ]


SIMPLE = [
    ["plan", MODEL, "--json"],
    ["plan", "--json", MODEL],
    ["plan", "qwen3-coder-30b-a3b-instruct", "--json", "--json"],
    ["plan", "--json"],  # no model
    ["plan", "qwen3-coder-30b", "--json"],  # a near miss of a catalog key
    ["plan", "custom", "--json"],
    ["plan", MODEL, "--json", "-k", "99", "--tp", "3", "--mode", "eagle3"],
    ["plan", MODEL, "--json", "--accept-eula", "--no-network-isolation", "--stage", "prod"],
]


@pytest.mark.parametrize("argv", SIMPLE + _flag_lines(), ids=" ".join)
def test_fast_path_prints_what_typer_prints(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, typer = _both(capsys, monkeypatch, argv)
    assert fast == typer


def test_spec_files_print_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for argv in _file_lines(tmp_path):
        fast, typer = _both(capsys, monkeypatch, argv)
        assert fast == typer, argv


def test_the_corpus_reaches_success_and_refusal() -> None:
    """The comparisons above are worth something only if both outcomes occur."""
    codes = set()
    for argv in SIMPLE:
        found = fast_plan.parse(argv)
        assert found is not None
        try:
            codes.add(fast_plan.run(found))
        except Exception as exc:
            codes.add(getattr(exc, "exit_code", 1))
    assert {0, 2} <= codes


FALLBACK = [
    ["plan", MODEL],  # the human tables need rich
    ["plan", MODEL, "--json", "--help"],
    ["plan", "--help", "--json"],
    ["plan", MODEL, "--json", "-h"],
    ["plan", MODEL, "--json", "--bogus"],
    ["plan", MODEL, "--json", "--num-speculative"],  # an abbreviation
    ["plan", MODEL, "--json", "-k7"],
    ["plan", MODEL, "--json", "-k", "abc"],
    ["plan", MODEL, "--json", "-k", "+5"],
    ["plan", MODEL, "--json", "-k", " 5"],
    ["plan", MODEL, "--json", "-k", "5_0"],
    ["plan", MODEL, "--json", "-k", "-1"],
    ["plan", MODEL, "--json", "-k", ""],
    ["plan", MODEL, "--json", "-k", "3", "-k", "4"],
    ["plan", MODEL, "--json", "--region"],  # no value
    ["plan", MODEL, "--json", "--region="],
    ["plan", MODEL, "--json", "--region", "--json"],
    ["plan", MODEL, "--json", "--env", ""],
    ["plan", MODEL, "--json", "--accept-eula=true"],
    ["plan", MODEL, "--json=1"],
    ["plan", MODEL, "--json", "--"],
    ["plan", MODEL, "--json", "-"],
    ["plan", MODEL, "other", "--json"],
    ["plan", "", "--json"],
    ["plan", "-f", "", "--json"],
    ["plan", "-f", "a.yaml", "-f", "b.yaml", "--json"],
    ["plan", "-f=a.yaml", "--json"],
    ["--version", "plan", MODEL, "--json"],
    ["deploy", MODEL, "--json"],
    [],
]


@pytest.mark.parametrize("argv", FALLBACK, ids=lambda a: " ".join(a) or "(none)")
def test_what_the_fast_path_is_not_sure_of_goes_to_typer(argv: list[str]) -> None:
    assert fast_plan.parse(argv) is None


@pytest.mark.parametrize("argv", FALLBACK[1:8], ids=" ".join)
def test_fallbacks_answer_as_typer(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry point hands them over unchanged: typer's own help and messages."""
    code, out, err = _outcome(capsys, argv)
    with monkeypatch.context() as m:
        m.setattr(fast_plan, "parse", lambda _args: None)
        assert (code, out, err) == _outcome(capsys, argv)
    assert code in (0, 2) and (out or err)


@pytest.mark.parametrize("flag", [["-k"], ["--max-model-len="]], ids=["-k", "--max-model-len="])
def test_a_number_past_ints_digit_limit_goes_to_typer(
    flag: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """int() refuses more than 4300 digits: the fast path was a traceback (issue 31)."""
    digits = "9" * 5000
    argv = (
        ["plan", MODEL, "--json", *flag, digits]
        if flag == ["-k"]
        else ["plan", MODEL, "--json", flag[0] + digits]
    )
    assert fast_plan.parse(argv) is None
    code, out, err = _outcome(capsys, argv)
    assert code == 2 and out == "" and err.count("\n") == 1


def test_fast_path_knows_exactly_the_typer_commands_options() -> None:
    """Every option of the typer `plan` command is one the fast path reads, and no
    other (`--help` is typer's: the fast path leaves it to typer)."""
    from typer.main import get_command

    root: Any = get_command(entry.app)
    params = root.commands["plan"].params
    typer_options = {o for p in params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}
    assert typer_options - {"--help"} == set(fast_plan._options())
    assert [p.name for p in params if p.param_type_name == "argument"] == ["model"]


def test_fast_path_loads_neither_typer_nor_rich_nor_an_aws_sdk() -> None:
    heavy = ("typer", "rich", "click", "boto3", "botocore", "sagemaker", "yaml")
    assert modules_loaded(["plan", MODEL, "--json"], heavy, top_level=True) == []


def test_an_error_on_the_fast_path_is_one_line_in_a_fresh_process() -> None:
    """Whole processes, as a script runs them (stderr not a terminal, ASCII console)."""
    argv = ["plan", "qwen3-coder-30b-\u00e9", "--json"]
    runs = []
    for fast in (True, False):
        code = "import sys\nfrom peagle_deploy.cli import app, fast_plan\n"
        if not fast:
            code += "fast_plan.parse = lambda _args: None\n"
        code += f"sys.exit(app.main({argv!r}))\n"
        env = {"PYTHONIOENCODING": "ascii", "PATH": "/usr/bin:/bin"}
        command = [sys.executable, "-c", code]
        runs.append(subprocess.run(command, capture_output=True, env=env, check=False))
    assert runs[0].returncode == runs[1].returncode == 2
    assert runs[0].stdout == runs[1].stdout == b""
    assert runs[0].stderr == runs[1].stderr
    assert runs[0].stderr.count(b"\n") == 1 and runs[0].stderr.startswith(b"error: model:")


_PLUGIN_PROBE = """
import contextlib, importlib.metadata, io, json, os, sys
scanned = []
real = importlib.metadata.entry_points
def entry_points(**kw):
    scanned.append(kw.get("group"))
    return real(**kw)
importlib.metadata.entry_points = entry_points
from peagle_deploy.cli.app import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["plan", "gpt-oss-20b", "--json"])
print(json.dumps({"code": code, "scanned": scanned,
                  "env": os.environ.get("PYDANTIC_DISABLE_PLUGINS")}))
"""


@pytest.mark.parametrize("given", [None, "logfire"])
def test_the_fast_path_skips_pydantic_plugins_unless_the_user_chose(given: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if given is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = given
    out = subprocess.run(
        [sys.executable, "-c", _PLUGIN_PROBE], env=env, capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout)
    assert result["code"] == 0
    # the user's setting is theirs (pydantic then scans and skips the named plugin);
    # unset, no distribution is scanned and the environment is left as it was
    assert result["env"] == given
    assert ("pydantic" in result["scanned"]) == (given is not None)
