"""`peagle doctor --stage`'s `stage.experiment`: a deploy that would remove or replace a
live InferenceExperiment fails before CloudFormation is asked anything.

The verdicts are a pure function (`judge`), tested on every case here; the reads and the
CLI wiring run against the emulator with an experiment live on the stage's endpoint.
tests/infra/test_infra_experiment_lifecycle.py plays the deploys these verdicts guard.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from doctor_testkit import REGION
from peagle_local.emulator import LocalAWS
from peagle_local.emulator.world import stage_world

from peagle_deploy.cli.app import main
from peagle_deploy.cli.cdk_stage import stage_plan
from peagle_deploy.doctor.stage_experiment import Declared, Experiment, judge

WHERE = "peagle:stages.dev"


@pytest.mark.parametrize(
    ("declared", "live", "own", "status", "says"),
    [
        (Declared(None, "running", WHERE), None, None, "pass", "no experiment runs"),
        (Declared("x1", "running", WHERE), None, None, "pass", "no experiment runs"),
        (
            Declared("x1", "running", WHERE),
            Experiment("x1", "Running"),
            Experiment("x1", "Running"),
            "pass",
            "the deploy keeps it",
        ),
        (
            Declared("x1", "completed", WHERE),
            Experiment("x1", "Running"),
            Experiment("x1", "Running"),
            "pass",
            "the deploy stops it (completed)",
        ),
        (
            Declared(None, "running", WHERE),
            Experiment("x1", "Running"),
            None,
            "fail",
            "the candidate's fleet would stay on the endpoint",
        ),
        (
            Declared("x2", "running", WHERE),
            Experiment("x1", "Starting"),
            None,
            "fail",
            "the stage declares x2 instead",
        ),
        (
            Declared("x1", "cancelled", WHERE),
            None,
            None,
            "fail",
            "CloudFormation's create starts it",
        ),
        (
            Declared("x1", "completed", WHERE),
            None,
            Experiment("x1", "Completed"),
            "pass",
            "no experiment runs",
        ),
        (
            Declared("x1", "running", WHERE),
            None,
            Experiment("x1", "Completed"),
            "warn",
            "x1 has ended (Completed)",
        ),
    ],
    ids=[
        "none",
        "first-start",
        "unchanged",
        "stop-in-place",
        "removed-while-live",
        "replaced-while-live",
        "stop-of-nothing",
        "removal-after-stop",
        "ended-by-sagemaker",
    ],
)
def test_the_verdicts(
    declared: Declared, live: Experiment | None, own: Experiment | None, status: str, says: str
) -> None:
    verdict = judge("ep", declared, live, own)
    assert (verdict.status, verdict.check) == (status, "stage.experiment")
    assert says in verdict.detail
    if status == "fail" and live is not None:
        assert f"{WHERE}.experiment_state: completed" in verdict.fix
    assert "\n" not in verdict.line()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalAWS]:
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with LocalAWS(region=REGION) as local:
        for key, value in local.env().items():
            monkeypatch.setenv(key, value)
        yield local


def _live_experiment(aws: LocalAWS, plan: Any) -> str:
    """The stage's endpoint serving its model, with a shadow experiment running on it
    (as `peagle experiment start` or a stack would leave it)."""
    sm, iam = aws.client("sagemaker"), aws.client("iam")
    role = iam.create_role(RoleName="shadow", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    variants = []
    for name, model in (("AllTraffic", "m-inc"), ("Candidate", "m-cand")):
        sm.create_model(ModelName=model, ExecutionRoleArn=role, PrimaryContainer={"Image": "x"})
        variants.append(
            {
                "ModelName": model,
                "VariantName": name,
                "InfrastructureConfig": {
                    "InfrastructureType": "RealTimeInference",
                    "RealTimeInferenceConfig": {
                        "InstanceType": "ml.g7e.2xlarge",
                        "InstanceCount": 1,
                    },
                },
            }
        )
    production = {
        "VariantName": "AllTraffic",
        "ModelName": "m-inc",
        "InstanceType": "ml.g7e.2xlarge",
        "InitialInstanceCount": 1,
    }
    sm.create_endpoint_config(EndpointConfigName="c-inc", ProductionVariants=[production])
    sm.create_endpoint(EndpointName=plan.endpoint_name, EndpointConfigName="c-inc")
    sm.create_inference_experiment(
        Name="elsewhere-x1",
        Type="ShadowMode",
        RoleArn=role,
        EndpointName=plan.endpoint_name,
        ModelVariants=variants,
        ShadowModeConfig={
            "SourceModelVariantName": "AllTraffic",
            "ShadowModelVariants": [
                {"ShadowModelVariantName": "Candidate", "SamplingPercentage": 100}
            ],
        },
    )
    return "elsewhere-x1"


def test_doctor_stage_fails_a_deploy_that_would_remove_a_live_experiment(
    aws: LocalAWS,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    stages = {"edge": {"overrides": {"model": "qwen3-coder-30b-a3b-instruct"}}}
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"peagle:stages": stages}}))
    monkeypatch.chdir(tmp_path)
    _, plan = stage_plan("edge", tmp_path)
    stage_world(plan, aws.session(), aws.account)
    name = _live_experiment(aws, plan)
    code = main(["doctor", "--stage", "edge", "--json"])
    doc = json.loads(capsys.readouterr().out)
    line = {c["check"]: c for c in doc["checks"]}["stage.experiment"]
    assert code == 1
    assert line["status"] == "fail" and line["resource"] == plan.endpoint_name
    assert line["detail"].startswith(f"runs {name} (Running); the stage no longer declares it")
    assert "peagle:stages.edge.experiment_state: completed" in line["fix"]
    aws.client("sagemaker").stop_inference_experiment(
        Name=name, ModelVariantActions={"AllTraffic": "Retain", "Candidate": "Remove"}
    )
    code = main(["doctor", "--stage", "edge", "--json"])
    doc = json.loads(capsys.readouterr().out)
    line = {c["check"]: c for c in doc["checks"]}["stage.experiment"]
    assert (code, line["status"]) == (0, "pass")
