"""`peagle doctor` asks the policy simulator whether the caller may make the calls of the
coming run (doctor/caller.py, doctor/coming.py): a deploy, a promotion (the source's
reads and the gates' requests, then the target's deploy), an experiment (its start and
its end). A missing grant is one failed line, and the emulator's simulator stand-in
agrees with @cloud-copilot/iam-simulate on every request. Before `cdk deploy` nothing is
asked: CloudFormation makes those calls.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import boto3
import pytest
from doctor_testkit import REGION, ROLE, make_plan

from peagle_deploy.catalog.iam_calls import IamRequest, Where, distinct, iam_requests
from peagle_deploy.doctor.caller import caller_principal, check_caller
from peagle_deploy.doctor.coming import (
    CDK_DEPLOY,
    DEPLOY,
    ComingRun,
    PromotionSource,
    coming_calls,
)
from peagle_deploy.doctor.context import DoctorContext
from peagle_deploy.naming import EXPERIMENT_STAGE_TAG

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
from iam_oracle import ACCOUNT, run

from infra.deploy_policy import Arns, StageResources, deploy_statements

ROLE_NAME = "peagle-ci-staging"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/{ROLE_NAME}"
EXPERIMENT_ROLE = f"arn:aws:iam::{ACCOUNT}:role/peagle-experiment-staging"
SOURCE = PromotionSource(
    stage="dev",
    endpoint_name="peagle-qwen3-coder-30b-a3b-instruct-dev",
    endpoint_config_name="peagle-qwen3-coder-30b-a3b-instruct-dev-c0123abcd",
    region=REGION,
)


def _resources(plan: Any) -> StageResources:
    return StageResources(
        stage=plan.spec.stage,
        region=plan.region,
        endpoint_name=plan.endpoint_name,
        create_model=plan.create_model,
        execution_role_arn=plan.spec.execution_role_arn,
    )


def _policy(plan: Any, *, drop: str | None = None) -> dict[str, Any]:
    """The CI role of `plan`'s stage (promoted from dev), without statement `drop`."""
    source = _resources(make_plan(stage="dev"))
    statements = [
        s
        for s in deploy_statements(Arns("aws", ACCOUNT), _resources(plan), source, ROLE_ARN)
        if s["Sid"] != drop
    ]
    return {"Version": "2012-10-17", "Statement": statements}


def _account(policy: dict[str, Any]) -> Any:
    """The roles a real account holds (the execution role, the stage's experiment role)
    and a session of the CI role with `policy`."""
    iam = boto3.client("iam", region_name=REGION)
    iam.create_role(RoleName=ROLE.rsplit("/", 1)[1], AssumeRolePolicyDocument="{}")
    iam.create_role(
        RoleName=EXPERIMENT_ROLE.rsplit("/", 1)[1],
        AssumeRolePolicyDocument="{}",
        Tags=[{"Key": EXPERIMENT_STAGE_TAG, "Value": "staging"}],
    )
    iam.create_role(RoleName=ROLE_NAME, AssumeRolePolicyDocument="{}")
    iam.put_role_policy(RoleName=ROLE_NAME, PolicyName="ci", PolicyDocument=json.dumps(policy))
    creds = boto3.client("sts", region_name=REGION).assume_role(
        RoleArn=ROLE_ARN, RoleSessionName="gha-run-1"
    )["Credentials"]
    return boto3.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        region_name=REGION,
    )


ROLE_TAGS = {ROLE: {}, EXPERIMENT_ROLE: {EXPERIMENT_STAGE_TAG: "staging"}}
"""What the account's roles are tagged with (the doctor reads it with GetRole)."""


def _oracle_denials(policy: dict[str, Any], requests: list[IamRequest]) -> set[str]:
    """The requests @cloud-copilot/iam-simulate does not allow, as the doctor words them."""

    def context(r: IamRequest) -> dict[str, Any]:
        tags = ROLE_TAGS.get(r.resource, {}) if r.action.startswith("iam:") else {}
        return {
            **{k: list(v) if isinstance(v, tuple) else v for k, v in r.context.items()},
            **{f"aws:ResourceTag/{k}": v for k, v in tags.items()},
        }

    simulations = [
        {
            "request": {
                "principal": ROLE_ARN,
                "action": r.action,
                "resource": {"resource": r.resource, "accountId": ACCOUNT},
                "contextVariables": context(r),
            },
            "identityPolicies": [{"name": "ci", "policy": policy}],
        }
        for r in requests
    ]
    return {
        f"IAM denies {r.action} on {r.resource}"
        for r, d in zip(requests, run(simulations), strict=True)
        if d["decision"] != "Allowed"
    }


def _check(plan: Any, coming: ComingRun, drop: str | None) -> tuple[list[Any], set[str]]:
    """The doctor's lines for `coming` under the CI policy without `drop`, and what
    iam-simulate denies of the same requests."""
    policy = _policy(plan, drop=drop)
    results = check_caller(DoctorContext(plan, _account(policy), coming=coming))
    where = Where(REGION, ACCOUNT)
    requests = distinct(
        [
            r
            for s, op, p in coming_calls(coming, plan, None, ACCOUNT)
            for r in iam_requests(s, op, p, where)
        ]
    )
    return results, _oracle_denials(policy, requests)


def _staging() -> Any:
    return make_plan(stage="staging")


def _experiment(mode: str) -> ComingRun:
    from peagle_deploy.experiment.plan import experiment_plan
    from peagle_deploy.spec import spec_with
    from peagle_deploy.spec.models import ExperimentSpec

    settings: dict[str, Any] = {"mode": mode, "candidate": {"num_speculative_tokens": 5}}
    if mode == "split":
        settings["weight_percent"] = 50
    spec = spec_with(_staging().spec, experiment=ExperimentSpec.model_validate(settings))
    xp = experiment_plan(spec, experiment_role_arn=EXPERIMENT_ROLE)
    return ComingRun("experiment", experiment=xp.requests, candidate=xp.candidate)


def test_an_assumed_role_session_is_simulated_as_its_role() -> None:
    session = f"arn:aws:sts::{ACCOUNT}:assumed-role/{ROLE_NAME}/gha-run-1"
    assert caller_principal(session) == ROLE_ARN
    assert caller_principal(f"arn:aws:iam::{ACCOUNT}:root") is None


CASES: Mapping[str, tuple[Any, str, str]] = {
    # run: (the coming run, a statement it needs, a request that statement alone grants)
    "deploy": (
        lambda: DEPLOY,
        "OwnEndpointOnOwnConfigs",
        "sagemaker:CreateEndpoint on arn:aws:sagemaker:{region}:{account}:endpoint-config/",
    ),
    "promotion": (
        lambda: ComingRun("promotion", source=SOURCE),
        "SourceEndpoint",
        "sagemaker:InvokeEndpointWithResponseStream on arn:aws:sagemaker:{region}:{account}:"
        f"endpoint/{SOURCE.endpoint_name}",
    ),
    "shadow experiment": (
        lambda: _experiment("shadow"),
        "PassOwnExperimentRoleToSageMaker",
        f"iam:PassRole on {EXPERIMENT_ROLE}",
    ),
    "split experiment": (
        lambda: _experiment("split"),
        "ReadMetrics",
        "cloudwatch:GetMetricData on *",
    ),
}


@pytest.mark.parametrize("drop", [None, "needed"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_missing_grant_is_one_failed_line_and_the_oracle_agrees(
    inprocess: Any, case: str, drop: str | None
) -> None:
    coming, needed, denied = CASES[case]
    plan = _staging()
    results, oracle = _check(plan, coming(), needed if drop else None)
    failed = {r.detail for r in results if r.status == "fail"}
    if drop is None:
        assert [r.status for r in results] == ["pass"], [r.line() for r in results]
        assert "of the" in results[0].detail
    else:
        # the one line named, and the other requests only that statement granted
        (statement,) = [s for s in _policy(plan)["Statement"] if s["Sid"] == needed]
        actions = set(statement["Action"])
        assert any(
            line.startswith("IAM denies " + denied.format(region=REGION, account=ACCOUNT))
            for line in failed
        ), failed
        assert {line.split()[2] for line in failed} <= actions, failed
    assert oracle == failed


def test_an_experiment_asks_for_its_start_its_status_and_its_end(inprocess: Any) -> None:
    """What an experiment the caller could start but not end would leave: the candidate's
    fleet. The doctor asks for the stop (shadow) or the restore (split) too."""
    for mode, end in (("shadow", "StopInferenceExperiment"), ("split", "DeleteEndpointConfig")):
        calls = coming_calls(_experiment(mode), _staging(), None, ACCOUNT)
        operations = {op for _, op, _ in calls}
        assert {"CreateModel", "DeleteModel", end, "GetMetricData", "QueryMetrics"} <= operations


def test_before_cdk_deploy_nothing_is_asked(inprocess: Any) -> None:
    plan = _staging()
    assert check_caller(DoctorContext(plan, _account(_policy(plan)), coming=CDK_DEPLOY)) == []
