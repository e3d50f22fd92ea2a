"""After `make demo`, the last lines say how to run `peagle` from the user's shell, with
the path of the running installation (issue 23, item 2)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from peagle_deploy.cli import how_to_run
from peagle_deploy.cli.how_to_run import run_hint, scripts_dir


def _installation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scripts directory with `peagle` and `activate`, as a venv has, under the cwd."""
    scripts = tmp_path / ".venv" / "bin"
    scripts.mkdir(parents=True)
    for name in ("peagle", "activate"):
        (scripts / name).write_text("#!/bin/sh\n")
        (scripts / name).chmod(0o755)
    monkeypatch.setattr(how_to_run, "scripts_dir", lambda: scripts)
    monkeypatch.setattr(sys, "base_prefix", "/not-this-venv")  # inside a venv
    monkeypatch.chdir(tmp_path)
    return scripts


def test_scripts_dir_is_the_running_interpreters() -> None:
    assert (scripts_dir() / "python").exists() or (scripts_dir() / "python3").exists()
    assert scripts_dir().resolve() == Path(sys.executable).parent.resolve()


def test_not_on_path_says_where_peagle_is_and_how_to_activate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _installation(tmp_path, monkeypatch)
    lines = run_hint(path_env="/usr/bin:/bin")
    text = "\n".join(lines)
    assert "not on your PATH" in text
    assert ".venv/bin/peagle plan gpt-oss-20b" in text  # relative to where the user is
    assert "source .venv/bin/activate" in text


def test_elsewhere_the_path_is_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scripts = _installation(tmp_path, monkeypatch)
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)
    text = "\n".join(run_hint(path_env=""))
    assert f"{scripts.resolve() / 'peagle'} plan gpt-oss-20b" in text


def test_on_path_says_just_peagle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scripts = _installation(tmp_path, monkeypatch)
    lines = run_hint(path_env=os.pathsep.join([str(scripts), "/usr/bin"]))
    assert lines == ["next: peagle plan gpt-oss-20b   (peagle --help lists every command)"]


def test_another_peagle_on_path_is_not_this_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _installation(tmp_path, monkeypatch)
    other = tmp_path / "other-bin"
    other.mkdir()
    (other / "peagle").write_text("#!/bin/sh\n")
    (other / "peagle").chmod(0o755)
    assert "another installation" in "\n".join(run_hint(path_env=str(other)))
