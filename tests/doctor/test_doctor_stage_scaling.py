"""`peagle doctor --stage`'s `stage.scaling`: a stage's deploy that would change the
instance type of an autoscaled variant fails before CloudFormation is asked (SageMaker
refuses the update and the stack cannot deregister the target first: docs/cdk.md, "An
autoscaled stage"); every other deploy passes. Against the emulator, which refuses such
an update as SageMaker does (tests/emulator/test_emulator_lifecycle.py).
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
from peagle_deploy.doctor.stage_scaling import check_stage_scaling

SCALING = {"min_instances": 1, "max_instances": 8, "target_invocations_per_instance": 20}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalAWS]:
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with LocalAWS(region=REGION) as local:
        for key, value in local.env().items():
            monkeypatch.setenv(key, value)
        yield local


def _stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, instance_type: str) -> Any:
    overrides = {
        "model": "qwen3-coder-30b-a3b-instruct",
        "instance_type": instance_type,
        "scaling": SCALING,
    }
    stages = {"edge": {"overrides": overrides}}
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"peagle:stages": stages}}))
    monkeypatch.chdir(tmp_path)
    return stage_plan("edge", tmp_path)[1]


def _serving(aws: LocalAWS, plan: Any, instance_type: str, *, scaled: bool) -> None:
    """The stage's endpoint on `instance_type`, scaled to 6 by its target when `scaled`."""
    sm = aws.client("sagemaker")
    sm.create_model(
        ModelName="m-old", ExecutionRoleArn=plan.execution_role_arn, PrimaryContainer={"Image": "x"}
    )
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": "m-old",
        "InstanceType": instance_type,
        "InitialInstanceCount": 1,
    }
    sm.create_endpoint_config(EndpointConfigName="c-old", ProductionVariants=[variant])
    sm.create_endpoint(EndpointName=plan.endpoint_name, EndpointConfigName="c-old")
    if scaled:
        aws.client("application-autoscaling").register_scalable_target(
            ServiceNamespace="sagemaker",
            ResourceId=f"endpoint/{plan.endpoint_name}/variant/AllTraffic",
            ScalableDimension="sagemaker:variant:DesiredInstanceCount",
            MinCapacity=1,
            MaxCapacity=8,
        )
        assert aws.autoscale(plan.endpoint_name, 6) == 6


def test_an_instance_type_change_of_an_autoscaled_stage_fails_with_the_two_deploys(
    aws: LocalAWS,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    plan = _stage(tmp_path, monkeypatch, "ml.g7e.4xlarge")
    stage_world(plan, aws.session(), aws.account)
    _serving(aws, plan, "ml.g7e.2xlarge", scaled=True)
    code = main(["doctor", "--stage", "edge", "--json"])
    line = {c["check"]: c for c in json.loads(capsys.readouterr().out)["checks"]}["stage.scaling"]
    assert code == 1 and line["status"] == "fail"
    assert line["detail"].startswith(
        "instance_type: the endpoint runs ml.g7e.2xlarge on a variant that is an autoscaling "
        "target; SageMaker refuses its update to ml.g7e.4xlarge"
    )
    assert line["fix"].startswith(
        "deploy the stage without scaling: and with initial_instance_count: 6 (what it runs), "
        "then with instance_type: ml.g7e.4xlarge and scaling: again"
    )


@pytest.mark.parametrize(
    "case",
    [
        (None, False, "keeps the instance type"),
        ("ml.g7e.4xlarge", True, "keeps the instance type"),
        ("ml.g7e.2xlarge", False, "the variant is no autoscaling target"),
    ],
    ids=["no-endpoint-yet", "same-type", "not-a-target"],
)
def test_every_other_deploy_passes(
    aws: LocalAWS,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    case: tuple[str | None, bool, str],
) -> None:
    serving, scaled, says = case
    plan = _stage(tmp_path, monkeypatch, "ml.g7e.4xlarge")
    if serving is not None:
        _serving(aws, plan, serving, scaled=scaled)
    verdict = check_stage_scaling(aws.session(), plan)
    assert verdict.status == "pass" and says in verdict.detail


def test_a_read_that_is_denied_is_a_warning(
    aws: LocalAWS, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from botocore.exceptions import ClientError

    plan = _stage(tmp_path, monkeypatch, "ml.g7e.4xlarge")
    _serving(aws, plan, "ml.g7e.2xlarge", scaled=True)
    session = aws.session()

    def refuse(**_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "AccessDenied", "Message": "no"}}, "DescribeScalableTargets"
        )

    session.events.register("before-call.application-autoscaling.DescribeScalableTargets", refuse)
    verdict = check_stage_scaling(session, plan)
    assert verdict.status == "warn" and verdict.detail.startswith("could not check")
    assert "application-autoscaling:DescribeScalableTargets" in (verdict.fix or "")
