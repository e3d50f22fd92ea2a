"""`peagle doctor` asks the policy simulator whether the caller may make the calls of the
coming deploy (doctor/caller.py): a missing grant is one failed line, and the emulator's
simulator stand-in agrees with @cloud-copilot/iam-simulate on every request.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from doctor_testkit import REGION, make_plan

from peagle_deploy.catalog.iam_calls import Where, distinct, iam_requests
from peagle_deploy.doctor.caller import caller_principal, check_caller, deploy_calls
from peagle_deploy.doctor.context import DoctorContext

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
from iam_oracle import ACCOUNT, run

from infra.deploy_policy import Arns, StageResources, deploy_statements

ROLE_NAME = "peagle-ci-dev"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/{ROLE_NAME}"


def _policy(plan: Any, *, drop: str | None = None) -> dict[str, Any]:
    own = StageResources(
        stage=plan.spec.stage,
        region=plan.region,
        endpoint_name=plan.endpoint_name,
        create_model=plan.create_model,
        execution_role_arn=plan.spec.execution_role_arn,
    )
    statements = [
        s for s in deploy_statements(Arns("aws", ACCOUNT), own, None, ROLE_ARN) if s["Sid"] != drop
    ]
    return {"Version": "2012-10-17", "Statement": statements}


def _session_of_role(policy: dict[str, Any]) -> Any:
    iam = boto3.client("iam", region_name=REGION)
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


def test_an_assumed_role_session_is_simulated_as_its_role() -> None:
    session = f"arn:aws:sts::{ACCOUNT}:assumed-role/{ROLE_NAME}/gha-run-1"
    assert caller_principal(session) == ROLE_ARN
    assert caller_principal(f"arn:aws:iam::{ACCOUNT}:root") is None


@pytest.mark.parametrize("drop", [None, "OwnEndpointOnOwnConfigs"])
def test_a_missing_grant_is_one_failed_line_and_the_oracle_agrees(
    inprocess: Any, drop: str | None
) -> None:
    plan = make_plan(stage="dev")
    policy = _policy(plan, drop=drop)
    ctx = DoctorContext(plan, _session_of_role(policy))
    results = check_caller(ctx)
    failed = [r.detail for r in results if r.status == "fail"]
    if drop is None:
        assert [r.status for r in results] == ["pass"], [r.line() for r in results]
    else:
        assert failed == [
            f"IAM denies sagemaker:CreateEndpoint on arn:aws:sagemaker:{REGION}:{ACCOUNT}:"
            f"endpoint-config/{plan.endpoint_config_name}"
        ]
    # the outside evaluator decides the same requests alike
    where = Where(REGION, ACCOUNT)
    requests = distinct(
        [r for s, op, p in deploy_calls(plan, None, ACCOUNT) for r in iam_requests(s, op, p, where)]
    )
    simulations = [
        {
            "request": {
                "principal": ROLE_ARN,
                "action": r.action,
                "resource": {"resource": r.resource, "accountId": ACCOUNT},
                "contextVariables": {
                    k: list(v) if isinstance(v, tuple) else v for k, v in r.context.items()
                },
            },
            "identityPolicies": [{"name": "ci", "policy": policy}],
        }
        for r in requests
    ]
    oracle = {
        f"IAM denies {r.action} on {r.resource}"
        for r, d in zip(requests, run(simulations), strict=True)
        if d["decision"] != "Allowed"
    }
    assert oracle == set(failed)
