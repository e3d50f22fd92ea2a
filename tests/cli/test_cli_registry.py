"""One way to add a command (peagle_deploy.cli.registry): the built-ins and the commands
of other installed packages are found by name, and built only when they run."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from start_up_probe import modules_loaded

from peagle_deploy.cli import registry
from peagle_deploy.cli.app import app, main

COMMAND_MODULES = tuple(
    sorted({source.target.partition(":")[0] for source in registry.BUILT_IN.values()})
)


def _summary(command: Any) -> str:
    """The first paragraph of a command's help on one line: what `peagle --help` shows."""
    return " ".join(inspect.cleandoc(command.help or "").split("\n\n")[0].split())


@pytest.mark.parametrize("name", list(registry.BUILT_IN))
def test_each_summary_is_the_commands_own(name: str) -> None:
    """The registry lists a command without importing it; its line is the command's."""
    root: Any = typer.main.get_command(app)
    assert registry.BUILT_IN[name].summary == _summary(root.commands[name])


def test_the_root_lists_the_built_ins_in_order_then_the_packages(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["--help"]) == 0
    listed = [line.strip("│ ").split()[0] for line in _commands_panel(capsys.readouterr().out)]
    assert listed == registry.names()
    assert listed[: len(registry.BUILT_IN)] == list(registry.BUILT_IN)
    assert {"emulator", "demo"} <= set(listed)  # peagle_local, through its entry points


def _commands_panel(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("╭─ Commands"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("╰"))
    return lines[start + 1 : end]


def test_help_imports_no_built_in_command_module() -> None:
    assert modules_loaded(["--help"], COMMAND_MODULES) == []


def test_a_command_imports_its_own_module_only() -> None:
    assert modules_loaded(["models", "--json"], COMMAND_MODULES) == ["peagle_deploy.cli.plan"]
    loaded = modules_loaded(["image", "base", "--region", "us-east-1"], COMMAND_MODULES)
    assert loaded == ["peagle_deploy.cli.image"]
    assert modules_loaded(["models"], ("peagle_local",), top_level=True) == []


def test_plan_json_loads_neither_rich_nor_an_aws_sdk() -> None:
    heavy = ("rich", "boto3", "botocore", "sagemaker", "yaml", "peagle_local")
    assert modules_loaded(["plan", "gpt-oss-20b", "--json"], heavy, top_level=True) == []


def _package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """An installed package `hello_pkg` with the entry point `hello` (and one that claims
    the built-in name `plan`)."""
    (tmp_path / "hello_pkg.py").write_text(body, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    entries = {
        "hello": registry.Source("hello_pkg:register"),
        "plan": registry.Source("hello_pkg:register"),
    }
    monkeypatch.setattr(registry, "installed", lambda: {**entries})
    monkeypatch.delitem(sys.modules, "hello_pkg", raising=False)


HELLO = '''
import typer

def hello_command(name: str) -> None:
    """Say hello."""
    print(f"hello {name}")

def register(app: typer.Typer) -> None:
    app.command("hello")(hello_command)
    app.command("plan")(hello_command)
'''


def test_a_packages_command_runs_by_its_entry_point_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _package(tmp_path, monkeypatch, HELLO)
    assert main(["hello", "world"]) == 0
    assert capsys.readouterr().out == "hello world\n"
    assert main(["hello", ""]) == 2  # the rules of every command apply to it too
    assert "NAME" in capsys.readouterr().err
    # a built-in name stays the built-in's
    assert registry.source("plan") == registry.BUILT_IN["plan"]


def test_a_package_that_does_not_import_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _package(tmp_path, monkeypatch, "import not_installed_anywhere\n")
    assert main(["hello", "world"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "hello_pkg:register does not import" in err and "not_installed_anywhere" in err
    assert main(["models", "--json"]) == 0  # the other commands are not affected


def test_a_package_whose_function_adds_another_command_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _package(tmp_path, monkeypatch, HELLO.replace('app.command("hello")', 'app.command("hi")'))
    assert main(["hello", "world"]) == 1
    assert "hello_pkg:register adds no command 'hello'" in capsys.readouterr().err


def test_a_mistyped_command_is_one_line_with_the_nearest_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plna"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Did you mean 'plan'?" in err


def test_an_error_is_one_line_in_a_fresh_ascii_process() -> None:
    """A whole process, as a script runs it (stderr not a terminal, ASCII console)."""
    argv = ["plan", "qwen3-coder-30b-\u00e9", "--json"]
    code = f"import sys\nfrom peagle_deploy.cli import app\nsys.exit(app.main({argv!r}))\n"
    env = {"PYTHONIOENCODING": "ascii", "PATH": "/usr/bin:/bin"}
    if "PYTHONPATH" in os.environ:  # a checkout that is not the installed one
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, check=False)
    assert run.returncode == 2 and run.stdout == b""
    assert run.stderr.count(b"\n") == 1 and run.stderr.startswith(b"error: model:")
