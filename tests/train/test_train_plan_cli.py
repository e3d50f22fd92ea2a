"""`peagle plan --file TRAIN_SPEC`: the training plan, through typer and the fast path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from start_up_probe import modules_loaded

from peagle_deploy.cli import fast_plan
from peagle_deploy.cli.app import main
from peagle_deploy.train.plan import build_training_plan, plan_document
from peagle_deploy.train.spec import load_training_spec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train-qwen3-8b.yaml"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_is_the_plan_document_on_both_paths(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["plan", "--file", str(EXAMPLE), "--json"]
    assert fast_plan.parse(argv) is not None
    fast = _run(capsys, *argv)
    monkeypatch.setattr(fast_plan, "parse", lambda _args: None)
    typer = _run(capsys, *argv)
    assert fast == typer
    code, out, err = fast
    assert code == 0 and err == ""
    expected = plan_document(build_training_plan(load_training_spec(EXAMPLE)))
    assert json.loads(out) == expected
    assert expected["kind"] == "training"


def test_the_table_shows_the_request_and_its_cost(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "plan", "--file", str(EXAMPLE))
    assert code == 0
    assert "CreateTrainingJob" in out and "24 instance-hours" in out
    assert "no sourced price" in out and '"EnableManagedSpotTraining": true' in out


def test_a_training_spec_takes_no_model_or_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for extra in (["gpt-oss-20b"], ["-k", "5"]):
        code, out, err = _run(capsys, "plan", "--file", str(EXAMPLE), *extra, "--json")
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and "is a training spec" in err


def test_a_refusal_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "train.yaml"
    text = EXAMPLE.read_text().replace("ml.g7e.2xlarge", "ml.m5.xlarge")
    bad.write_text(
        text.replace("config_dir: qwen3-8b-target", f"config_dir: {EXAMPLE.parent}/qwen3-8b-target")
    )
    for argv in (["plan", "--file", str(bad), "--json"], ["plan", "--file", str(bad)]):
        code, out, err = _run(capsys, *argv)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and err.startswith("error: train.instance_type:")


def test_a_fresh_process_plans_the_example() -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nfrom peagle_deploy.cli.app import main\n"
            f"sys.exit(main(['plan', '--file', {str(EXAMPLE)!r}, '--json']))",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["create_training_job"]["ResourceConfig"]["InstanceCount"] == 1


def test_plan_model_json_loads_no_training_module() -> None:
    loaded = modules_loaded(
        ["plan", "gpt-oss-20b", "--json"],
        ("peagle_deploy.train", "peagle_deploy.train.spec", "peagle_train.contract"),
    )
    assert loaded == []
