"""`peagle doctor --stage NAME`: the pre-flight of `cdk deploy` for a stage of cdk.json."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from doctor_testkit import ACCOUNT, REGION
from peagle_local.emulator import LocalAWS
from peagle_local.emulator.world import stage_world

from peagle_deploy.cli.app import main
from peagle_deploy.cli.cdk_stage import stage_plan

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "acme-stage-models"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalAWS]:
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with LocalAWS(region=REGION) as local:
        for key, value in local.env().items():
            monkeypatch.setenv(key, value)
        yield local


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    try:
        return code, json.loads(out), err
    except ValueError:
        return code, out, err


def _app(tmp: Path, overrides: dict[str, Any]) -> Path:
    """A CDK app directory whose cdk.json has one stage, `edge`."""
    stages = {"edge": {"overrides": {"model": "qwen3-coder-30b-a3b-instruct", **overrides}}}
    (tmp / "cdk.json").write_text(json.dumps({"app": "true", "context": {"peagle:stages": stages}}))
    return tmp


def test_repository_stage_uses_the_plan_cdk_synth_builds(
    aws: LocalAWS, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    _stage, plan = stage_plan("dev", ROOT)
    from infra.stages import stage_configs  # what app.py calls

    context = json.loads((ROOT / "cdk.json").read_text())["context"]["peagle:stages"]
    synth_plan = {s.name: s for s in stage_configs(context, ROOT)}["dev"].plan()
    assert plan.names == synth_plan.names and plan.create_model == synth_plan.create_model
    stage_world(plan, aws.session(), aws.account)
    code, doc, _ = _run(capsys, "doctor", "--stage", "dev", "--json")
    checks = {c["check"]: c for c in doc["checks"]}
    assert code == 0, doc
    assert doc["endpoint_name"] == plan.endpoint_name
    assert "role.trust" not in checks  # the stack creates its role
    for check in ("role.s3-model-data", "role.s3-drafter", "role.ecr"):
        assert checks[check]["status"] == "pass", checks[check]
    assert {c["status"] for c in doc["checks"]} == {"pass"}


def _key(aws: LocalAWS, *principals: str) -> str:
    statements = [
        {"Effect": "Allow", "Principal": {"AWS": p}, "Action": "kms:*", "Resource": "*"}
        for p in principals
    ]
    kms = aws.client("kms")
    policy = {"Version": "2012-10-17", "Statement": statements}
    return str(kms.create_key(Policy=json.dumps(policy))["KeyMetadata"]["Arn"])


def _deployed_stack(aws: LocalAWS, name: str) -> str:
    """A stack named like the stage's, with an ExecutionRoleArn output (what cdk deploy
    leaves behind); returns the role's ARN."""
    template = {
        "Resources": {
            "Role": {
                "Type": "AWS::IAM::Role",
                "Properties": {
                    "AssumeRolePolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Principal": {"Service": "sagemaker.amazonaws.com"},
                                "Action": "sts:AssumeRole",
                            }
                        ],
                    }
                },
            }
        },
        "Outputs": {"ExecutionRoleArn": {"Value": {"Fn::GetAtt": ["Role", "Arn"]}}},
    }
    cfn = aws.client("cloudformation")
    cfn.create_stack(StackName=name, TemplateBody=json.dumps(template))
    outputs = cfn.describe_stacks(StackName=name)["Stacks"][0]["Outputs"]
    return str(outputs[0]["OutputValue"])


def test_key_policy_of_a_stage(
    aws: LocalAWS,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """SSE-KMS weights: the stack's role is granted Decrypt, but the key policy decides.
    A key that delegates to the account passes; one that names only an admin fails;
    one that names the stack's role is decided once the stack exists."""
    admin = f"arn:aws:iam::{ACCOUNT}:user/admin"
    keys = {
        "delegates": _key(aws, f"arn:aws:iam::{ACCOUNT}:root"),
        "admin-only": _key(aws, admin),
    }
    monkeypatch.chdir(tmp_path)
    role = _deployed_stack(aws, "PeagleEndpoint-edge")
    keys["names-stack-role"] = _key(aws, admin, role)
    expected = {"delegates": "pass", "admin-only": "fail", "names-stack-role": "pass"}
    staged = False
    for name, key in keys.items():
        overrides = {
            "custom": {"model_data_uri": f"s3://{BUCKET}/qwen/"},
            "model_data_kms_key_arns": [key],
        }
        _, plan = stage_plan("edge", _app(tmp_path, overrides))
        if not staged:  # model data, image and quota: the same for every key
            stage_world(plan, aws.session(), aws.account)
            staged = True
        code, doc, _ = _run(capsys, "doctor", "--stage", "edge", "--json")
        line = {c["check"]: c for c in doc["checks"]}["role.kms-model-data"]
        assert line["status"] == expected[name], (name, line)
        if name == "admin-only":
            assert code == 1 and line["resource"] == key
            assert "neither names the role nor delegates to the account" in line["detail"]
            assert line["fix"].startswith(f"let the key policy of {key} allow the stack's")
    aws.client("cloudformation").delete_stack(StackName="PeagleEndpoint-edge")
    code, doc, _ = _run(capsys, "doctor", "--stage", "edge", "--json")
    line = {c["check"]: c for c in doc["checks"]}["role.kms-model-data"]
    assert (code, line["status"]) == (0, "warn")  # the role's ARN is not known yet
    assert "the role's ARN" in line["detail"]


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (("--stage", "nope"), "--stage: 'nope' is not a stage of cdk.json"),
        (("--stage", "dev", "--instance-type", "ml.g7e.4xlarge"), "--stage: a CDK stage"),
    ],
)
def test_bad_stage_input_exits_2_before_any_call(
    argv: tuple[str, ...],
    field: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    code, out, err = _run(capsys, "doctor", *argv)
    assert code == 2 and out == "" and err.startswith(f"error: {field}"), err
    assert len(err.strip().splitlines()) == 1


def test_stage_without_cdk_json_exits_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(capsys, "doctor", "--stage", "dev")
    assert code == 2 and "no cdk.json in" in err
