"""`peagle train start | status | logs | stop | resume`: exit codes, one-line errors, --json,
help that teaches; against the emulated account of tests/train/train_run_kit.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from train_run_kit import (  # noqa: F401 (`account_fixture` is the `account` fixture)
    ACCOUNT,
    BUCKET,
    INSTANCE,
    JOB,
    REGION,
    ROLE,
    account_fixture,
    failing,
    plan,
    put_metadata,
)

from peagle_deploy.cli.app import main


@pytest.fixture
def cli(account: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The CLI's sessions are the emulated caller's (with the training-job lifecycle)."""
    from peagle_deploy import aws

    monkeypatch.setattr(
        aws, "make_session", lambda region=None, boto_session=None: boto_session or account.session
    )
    return account


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["train", *argv])
    out, err = capsys.readouterr()
    return code, out, err


ROOT = Path(__file__).resolve().parents[2]
SPEC = {
    "train": {
        "name": "tiny",
        "region": REGION,
        "role_arn": ROLE,
        "image_uri": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/peagle-train@sha256:" + "4f" * 32,
        "target": {
            "model_data_uri": f"s3://{BUCKET}/target/",
            "config_dir": str(ROOT / "examples" / "qwen3-8b-target"),
        },
        "data": {"data_uri": f"s3://{BUCKET}/data/"},
        "num_depths": 4,
        "instance_type": INSTANCE,
        "spot": {"enabled": True, "max_wait_hours": 4},
        "max_runtime_hours": 2,
        "output_uri": f"s3://{BUCKET}/output/",
    }
}


def _spec_file(tmp_path: Path, **changes: Any) -> tuple[Path, str]:
    """A training spec for the kit's account, and the job name its plan gives."""
    from peagle_deploy.train.run import resolve_plan

    spec = tmp_path / "train.yaml"
    spec.write_text(json.dumps({"train": {**SPEC["train"], **changes}}))
    return spec, resolve_plan(spec)[0].job_name


def test_start_prints_the_drafter_as_json(
    cli: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec, job = _spec_file(tmp_path)
    put_metadata(job)
    code, out, err = _run(capsys, "start", "--file", str(spec), "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert (shown["job_name"], shown["status"]) == (job, "Completed")
    assert shown["drafter_uri"] == f"s3://{BUCKET}/output/{job}/output/model/drafter/"
    assert shown["num_speculative_tokens"] == 4
    assert shown["deploy_with"]["custom"]["drafter_kind"] == "p-eagle"
    sent = next(body for op, body in cli.jobs.calls if op == "CreateTrainingJob")
    assert sent["TrainingJobName"] == job
    assert sent["HyperParameters"]["num_depths"] == "4"


def test_start_of_a_failing_job_is_one_line_and_exit_1(
    cli: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec, job = _spec_file(tmp_path)
    cli.jobs.scripts[job] = failing("AlgorithmError: CUDA out of memory")
    code, out, err = _run(capsys, "start", "--file", str(spec))
    assert code == 1
    assert out == ""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert f"training job {job} failed: AlgorithmError: CUDA out of memory" in lines[0]


def test_start_no_wait_returns_the_running_job(
    cli: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec, job = _spec_file(tmp_path)
    code, out, err = _run(capsys, "start", "--file", str(spec), "--no-wait", "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "InProgress"
    code, out, _ = _run(capsys, "start", "--file", str(spec), "--no-wait")
    assert code == 0
    assert f"watch it: peagle train status {job}" in out
    assert [op for op, _ in cli.jobs.calls].count("CreateTrainingJob") == 2  # then adopted
    assert len(cli.jobs.jobs) == 1


def test_a_bad_spec_is_one_line_exit_2_before_any_call(
    cli: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec = tmp_path / "train.yaml"
    spec.write_text(json.dumps({"train": {**SPEC["train"], "num_depths": 0}}))
    code, out, err = _run(capsys, "start", "--file", str(spec))
    assert code == 2, err
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "train.num_depths" in err
    assert cli.jobs.calls == []


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["start"], "--file"),
        (["start", "--file", "/no/such/train.yaml"], "--file"),
        (["status", "not a job!"], "JOB"),
        (["stop", "bad-"], "JOB"),
        (["resume", "x" * 64], "JOB"),
        (["logs", JOB, "--lines", "0"], "--lines"),
        (["status", JOB, "--region", "not a region"], "--region"),
    ],
)
def test_bad_input_is_one_line_exit_2_before_any_call(
    cli: Any, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    code, out, err = _run(capsys, *argv)
    assert code == 2, err
    assert out == ""
    assert len([line for line in err.splitlines() if line.strip()]) == 1, err
    assert named in err
    assert cli.jobs.calls == []


def test_status_stop_resume(cli: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from peagle_deploy.train.run import train_drafter

    cli.jobs.scripts[JOB] = [("InProgress", "Training", "Training image download completed.")]
    train_drafter(plan(), session=cli.session, wait=False)

    code, out, err = _run(capsys, "status", JOB, "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "InProgress"

    code, out, err = _run(capsys, "stop", JOB, "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "Stopped"

    code, out, err = _run(capsys, "status", JOB)
    assert code == 0, err
    assert out.splitlines()[0] == f"{JOB}: Stopped / Stopped"
    assert f"checkpoints: s3://{BUCKET}/checkpoints/{JOB}/" in out

    put_metadata(f"{JOB}-r1")
    code, out, err = _run(capsys, "resume", JOB, "--json")
    assert code == 0, err
    resumed = json.loads(out)
    assert (resumed["job_name"], resumed["status"]) == (f"{JOB}-r1", "Completed")

    code, out, err = _run(capsys, "resume", f"{JOB}-r1")
    assert code == 1
    assert "completed: its drafter is at its output" in err


def test_status_of_an_unknown_job_exits_1(cli: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "status", "no-such-job")
    assert code == 1
    assert "training job no-such-job does not exist" in err


def test_help_teaches(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--help")
    assert code == 0
    for command in ("plan", "start", "status", "logs", "stop", "resume"):
        assert command in out
    assert "custom.drafter_uri" in out
    code, out, _ = _run(capsys, "start", "--help")
    assert code == 0
    assert "peagle train start --file examples/train-qwen3-8b.yaml" in out
    assert "chat template" in out


def test_logs_prints_the_last_lines(cli: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import time

    import boto3

    from peagle_deploy.train.run import train_drafter

    logs = boto3.client("logs", region_name=REGION)
    logs.create_log_group(logGroupName="/aws/sagemaker/TrainingJobs")
    stream = f"{JOB}/algo-1-1700000000"
    logs.create_log_stream(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream)
    now_ms = int(time.time() * 1000)
    logs.put_log_events(
        logGroupName="/aws/sagemaker/TrainingJobs",
        logStreamName=stream,
        logEvents=[{"timestamp": now_ms + i, "message": f"epoch {i}"} for i in range(3)],
    )
    cli.jobs.scripts[JOB] = [("InProgress", "Training", "Training")]
    train_drafter(plan(), session=cli.session, wait=False)
    code, out, err = _run(capsys, "logs", JOB, "--lines", "2")
    assert code == 0, err
    assert out.splitlines() == ["epoch 1", "epoch 2"]


def test_plan_shows_the_request_without_any_call(
    cli: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from peagle_deploy.train.plan import plan_document
    from peagle_deploy.train.run import resolve_plan

    spec, job = _spec_file(tmp_path)
    code, out, err = _run(capsys, "plan", "--file", str(spec), "--json")
    assert code == 0, err
    assert json.loads(out) == json.loads(json.dumps(plan_document(resolve_plan(spec)[0])))
    code, out, err = _run(capsys, "plan", "--file", str(spec))
    assert code == 0, err
    assert job in out
    assert cli.jobs.calls == []
