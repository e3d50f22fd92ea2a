"""Secrets by reference, end to end on both paths (issue 19).

A stage whose spec gives `HF_TOKEN` by reference (`secrets: {HF_TOKEN: <ARN>}`) is
synthesized, its model created by the stack's own handler (from the Lambda asset, behind
the real Provider framework's logging) and by `deploy_peagle()`, all against moto's
Secrets Manager and SageMaker. Both send the same CreateModel with the value; nothing the
project writes holds it: not cdk.out, not the template's properties (which the framework
logs), not the handler's log, not the plan, not the SSM manifest. Each role may read
exactly that secret.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from cdk_helpers import ROLE_PLACEHOLDER, synthesize
from iam_oracle import ACCOUNT, Ask, TemplateRoles
from model_provider_kit import (
    FakeContext,
    event,
    framework_asset,
    model_properties,
    recording_handler,
    run_framework,
)
from moto import mock_aws
from peagle_local.emulator import MotoExtensions

from infra.deploy_policy import Arns, StageResources, deploy_statements
from infra.stages import StageConfig
from peagle_deploy.plan import SPEC_HASH_TAG
from peagle_deploy.sdk import deploy_peagle

pytestmark = pytest.mark.xdist_group(name="cdk")

REGION = "us-east-1"
TOKEN = "hf_" + "R" * 34
STACK = "PeagleEndpoint-secret"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Any:
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws(), MotoExtensions():
        yield boto3.Session(region_name=REGION)


def _grep(directory: Path, needle: str) -> list[str]:
    return [
        str(p.relative_to(directory))
        for p in directory.rglob("*")
        if p.is_file() and needle.encode() in p.read_bytes()
    ]


def test_both_paths_send_the_value_and_nothing_written_holds_it(
    aws: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    arn = aws.client("secretsmanager").create_secret(Name="team/hf-token", SecretString=TOKEN)[
        "ARN"
    ]
    overrides = {"model": "gpt-oss-20b", "region": REGION, "secrets": {"HF_TOKEN": arn}}
    stage = StageConfig(name="secret", spec_file=None, overrides=overrides)
    synth = synthesize([stage], tmp_path / "cdk.out", context={})
    assert synth.violations == [], synth.violations
    plan = synth.stacks[STACK].plan
    assert plan.secret_refs == {"HF_TOKEN": arn}
    assert "HF_TOKEN" not in plan.create_model["PrimaryContainer"]["Environment"]
    assert TOKEN not in json.dumps(plan.to_json(redact_secrets=False))

    # The custom resource carries the ARN; the provider may read exactly that secret.
    template = synth.templates[STACK]
    (resource,) = [r for r in template["Resources"].values() if r["Type"] == "Custom::PeagleModel"]
    assert json.loads(resource["Properties"]["Secrets"]) == {"HF_TOKEN": arn}
    roles = TemplateRoles(template, REGION)
    provider = roles.role_id("ModelProviderRole")
    other = arn.replace("team/hf-token", "team/other")
    decisions = roles.decide(
        provider,
        [Ask("secretsmanager:GetSecretValue", arn), Ask("secretsmanager:GetSecretValue", other)],
    )
    assert decisions == ["Allowed", "ImplicitlyDenied"]

    # The stack's handler (its Lambda asset), behind the real framework.js.
    sent: dict[str, list[dict[str, Any]]] = {"cdk": [], "sdk": []}
    module = recording_handler(synth, STACK, monkeypatch, sent["cdk"])
    properties = model_properties(synth, STACK, ROLE_PLACEHOLDER)
    properties["Secrets"] = resource["Properties"]["Secrets"]
    create = event("Create", properties)
    framework_log = run_framework(
        framework_asset(synth, STACK), create, {"PhysicalResourceId": "x"}, tmp_path
    )
    assert arn in framework_log  # the framework logs the properties whole: the reference
    module.on_event(create, FakeContext())

    # deploy_peagle() with the same spec.
    aws.events.register(
        "provide-client-params.sagemaker.CreateModel",
        lambda params, **_: sent["sdk"].append(copy.deepcopy(params)),
    )
    deploy_peagle(
        "gpt-oss-20b",
        secrets={"HF_TOKEN": arn},
        stage="secret",
        region=REGION,
        role_arn=ROLE_PLACEHOLDER,
        boto_session=aws,
        wait=False,
        progress=False,
    )
    ((cdk_request,), (sdk_request,)) = sent["cdk"], sent["sdk"]
    for request in (cdk_request, sdk_request):
        assert request["PrimaryContainer"]["Environment"]["HF_TOKEN"] == TOKEN
    assert _without_identity(cdk_request) == _without_identity(sdk_request)

    # Nothing written holds the value.
    out, err = capfd.readouterr()
    assert TOKEN not in framework_log + out + err
    assert _grep(tmp_path / "cdk.out", TOKEN) == []
    # the manifest deploy_peagle() records once the endpoint is InService
    from peagle_deploy.sdk import DeploymentManifest

    manifest = DeploymentManifest.from_plan(plan, deployed_by="test").model_dump_json()
    assert arn in manifest and TOKEN not in manifest


def _without_identity(request: dict[str, Any]) -> dict[str, Any]:
    """A CreateModel request without its content-derived name and spec-hash tag."""
    rest = {k: v for k, v in request.items() if k != "ModelName"}
    rest["Tags"] = [t for t in request["Tags"] if t["Key"] != SPEC_HASH_TAG]
    return rest


def test_a_reference_to_a_missing_secret_fails_naming_the_variable(aws: Any) -> None:
    from peagle_deploy.errors import DeployError

    arn = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:nothing-here-AbCdEf"
    with pytest.raises(DeployError, match=r"secrets\.HF_TOKEN: could not read") as err:
        deploy_peagle(
            "gpt-oss-20b",
            secrets={"HF_TOKEN": arn},
            region=REGION,
            role_arn=ROLE_PLACEHOLDER,
            boto_session=aws,
            wait=False,
            progress=False,
        )
    assert arn in str(err.value)


def test_ci_roles_read_only_the_secrets_of_their_own_stage(tmp_path: Path) -> None:
    """Secrets are stage-owned (a promotion binds the target's own), so a stage's CI role
    reads its own stage's secrets and no other, not its promotion source's either:
    decided by the outside evaluator on the synthesized PeagleCiRoles template."""
    import aws_cdk as cdk
    from cdk_helpers import cdk_context

    from infra.ci_stack import CI_STACK_ID, CiRolesStack
    from infra.github_oidc import GitHubRepo

    def arn(name: str) -> str:
        return f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{name}-AbCdEf"

    stages = [
        StageConfig(
            name=name,
            spec_file=None,
            overrides={
                "model": "qwen3-coder-30b-a3b-instruct",
                "region": REGION,
                "execution_role_arn": f"arn:aws:iam::{ACCOUNT}:role/peagle-{name}",
                "secrets": {"HF_TOKEN": arn(f"{name}-hf") + ":token"},
            },
            promote_from=source,
        )
        for name, source in (("dev", None), ("staging", "dev"), ("prod", "staging"))
    ]
    app = cdk.App(outdir=str(tmp_path), context=cdk_context())
    CiRolesStack(
        app,
        CI_STACK_ID,
        repo=GitHubRepo.parse("acme/llm-serving", "test"),
        stages=stages,
        plans=[s.plan() for s in stages],
        account=ACCOUNT,
    )
    app.synth()
    roles = TemplateRoles(
        json.loads((tmp_path / f"{CI_STACK_ID}.template.json").read_text()), REGION
    )
    asks = [
        Ask("secretsmanager:GetSecretValue", arn(f"{s}-hf")) for s in ("dev", "staging", "prod")
    ]
    for stage in ("dev", "staging", "prod"):
        decisions = roles.decide(roles.role_id(f"Deploy{stage}Role"), asks)
        expected = [
            "Allowed" if ask.resource == arn(f"{stage}-hf") else "ImplicitlyDenied" for ask in asks
        ]
        assert decisions == expected, stage


def test_stages_without_secrets_grant_none() -> None:
    arns = Arns("aws", ACCOUNT)
    plain = StageResources(stage="dev", region=REGION, endpoint_name="peagle-x-dev")
    assert not [
        s for s in deploy_statements(arns, plain, None) if "secretsmanager" in json.dumps(s)
    ]
