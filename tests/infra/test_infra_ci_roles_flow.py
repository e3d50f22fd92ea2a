"""The CI roles allow what the pipeline really does, and only in its own stage.

The pipeline's own steps run against the local AWS (`LocalAWS`: moto plus the endpoint
emulator) with the real SDK, doctor gate included: deploy dev, update dev (blue/green,
old model and config removed), promote dev -> staging and staging -> prod through their
gates. Every AWS call is recorded with the stage whose job makes it, turned into the IAM
request AWS authorizes (action, resource ARN, context keys), and decided by
@cloud-copilot/iam-simulate against the synthesized PeagleCiRoles policies:

- each call must be allowed for the role of the stage that made it (no false denial:
  a role that breaks the deployment is not least privilege, it is broken);
- each call that changes something must be denied to the roles of the other stages.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from cdk_helpers import synthesize_once
from iam_oracle import ACCOUNT, Ask, TemplateRoles

from infra.ci_stack import CI_STACK_ID, CiRolesStack
from infra.github_oidc import GitHubRepo
from infra.stages import StageConfig
from peagle_deploy.catalog.iam_calls import Where, iam_requests
from peagle_deploy.promote.gates import parse_gates

pytestmark = [pytest.mark.xdist_group(name="cdk"), pytest.mark.slow, pytest.mark.doctor_gate]

MODEL = "qwen3-coder-30b-a3b-instruct"
INSTANCE = "ml.g7e.2xlarge"
REGION = "us-east-1"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/peagle-ci-flow"
STAGES = ("dev", "staging", "prod")
GATES = {
    "version": 1,
    "stages": {
        stage: {
            "smoke": {"max_tokens": 8},
            "bench": {"concurrency": [1], "num_prompts": 2, "max_tokens": 8, "warmup": 0},
            "thresholds": {"max_error_rate": 0.0},
        }
        for stage in ("staging", "prod")
    },
}


@dataclass(frozen=True)
class Call:
    stage: str
    service: str
    operation: str
    params: Mapping[str, Any]
    region: str


class Recorder:
    """Every botocore API call made while `stage` is set (all threads)."""

    def __init__(self) -> None:
        self.stage: str | None = None
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    @staticmethod
    def _patched(recorder: Recorder) -> Any:
        from botocore.client import BaseClient

        original = BaseClient._make_api_call

        def record(client: Any, operation: str, params: Mapping[str, Any]) -> Any:
            if recorder.stage is not None:
                with recorder._lock:
                    recorder.calls.append(
                        Call(
                            recorder.stage,
                            client.meta.service_model.service_name,
                            operation,
                            dict(params),
                            client.meta.region_name,
                        )
                    )
            return original(client, operation, params)

        return original, record


def _flow(recorder: Recorder) -> None:
    from botocore.client import BaseClient
    from peagle_local.emulator import LocalAWS

    from peagle_deploy.plan import build_plan
    from peagle_deploy.promote.runner import PromoteOptions, promote
    from peagle_deploy.sdk import deploy_peagle
    from peagle_deploy.spec import load_spec

    gates = parse_gates(GATES)
    original, record = Recorder._patched(recorder)
    aws = LocalAWS(region=REGION)
    with aws, aws.patched_environ():
        for stage in STAGES:
            plan = build_plan(
                load_spec(
                    None,
                    model=MODEL,
                    instance_type=INSTANCE,
                    stage=stage,
                    region=REGION,
                    execution_role_arn=ROLE,
                )
            )
            if stage == "dev":
                aws.stage_world(plan)
            aws.script_endpoint(plan.endpoint_name, creating_s=0.05)
            aws.set_acceptance_metrics(
                plan.endpoint_name, acceptance_rate=0.6, num_speculative_tokens=3
            )
        BaseClient._make_api_call = record  # type: ignore[method-assign]
        try:
            recorder.stage = "dev"
            common = {
                "instance_type": INSTANCE,
                "role_arn": ROLE,
                "region": REGION,
                "stage": "dev",
                "poll_interval_s": 0.05,
                "progress": False,
                # autoscaling too: Application Auto Scaling and its alarms
                "scaling": {
                    "min_instances": 1,
                    "max_instances": 2,
                    "target_invocations_per_instance": 5,
                },
            }
            deploy_peagle(MODEL, num_speculative_tokens=3, **common)
            deploy_peagle(MODEL, num_speculative_tokens=4, **common)  # blue/green update
            for source, target in (("dev", "staging"), ("staging", "prod")):
                recorder.stage = target
                result = promote(
                    PromoteOptions(
                        source_stage=source,
                        target_stage=target,
                        region=REGION,
                        role_arn=ROLE,
                        bench_logs_delay_s=0.0,
                        bench_progress=False,
                        poll_interval_s=0.05,
                    ),
                    gates.for_stage(target),
                )
                assert result.status == "promoted", result.message
        finally:
            recorder.stage = None
            BaseClient._make_api_call = original  # type: ignore[method-assign]


# --- the IAM request behind each call -----------------------------------------------------


def asks_for(call: Call, targets: Mapping[str, Mapping[str, str]] | None = None) -> list[Ask]:
    """What IAM authorizes for one call: the product's map from the Service Authorization
    Reference (`peagle_deploy.catalog.iam_calls`; an unknown operation raises there).

    `targets`: the tags of the scalable targets registered so far (by resource id), which
    Application Auto Scaling authorizes as `aws:ResourceTag` (a resource's own tags are
    no parameter of the call: the ledger knows them from the calls before)."""
    requests = iam_requests(call.service, call.operation, call.params, Where(call.region, ACCOUNT))
    existing = (targets or {}).get(str(call.params.get("ResourceId")), {})
    out = []
    for r in requests:
        context: dict[str, str | list[str]] = {
            k: list(v) if isinstance(v, tuple) else v for k, v in r.context.items()
        }
        if r.action.startswith("application-autoscaling:"):
            context |= {f"aws:ResourceTag/{k}": v for k, v in existing.items()}
        # The identity side: another account's resource (AWS's image repository) also
        # needs its own policy's grant, which is the owner's and no role's.
        out.append(Ask(r.action, r.resource, context))
    return out


# --- fixtures ------------------------------------------------------------------------------


class Flow:
    def __init__(self, calls: list[Call], template: dict[str, Any]) -> None:
        self.calls = calls
        self.roles = TemplateRoles(template, REGION)

    def role(self, stage: str) -> str:
        return self.roles.role_id(f"Deploy{stage}Role")


def _stage(name: str, source: str | None) -> StageConfig:
    return StageConfig(
        name=name,
        spec_file=None,
        overrides={
            "model": MODEL,
            "instance_type": INSTANCE,
            "region": REGION,
            "execution_role_arn": ROLE,
        },
        promote_from=source,
    )


def _build(outdir: Path) -> Flow:
    recorder = Recorder()
    _flow(recorder)
    stages = [_stage("dev", None), _stage("staging", "dev"), _stage("prod", "staging")]
    app = cdk.App(outdir=str(outdir))
    CiRolesStack(
        app,
        CI_STACK_ID,
        repo=GitHubRepo.parse("acme/llm-serving", "test"),
        stages=stages,
        plans=[s.plan() for s in stages],
        account=ACCOUNT,
    )
    app.synth()
    template = json.loads((outdir / f"{CI_STACK_ID}.template.json").read_text())
    return Flow(recorder.calls, template)


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory) -> Flow:
    return synthesize_once("ci-flow", tmp_path_factory, _build)  # type: ignore[arg-type]


def _unique(flow: Flow, stage: str) -> Iterator[Ask]:
    seen: set[tuple[str, str, str]] = set()
    targets: dict[str, Mapping[str, str]] = {}  # tags of the scalable targets so far
    for call in flow.calls:
        asks = asks_for(call, targets)
        if call.operation == "RegisterScalableTarget":  # tags only a new target
            targets.setdefault(call.params["ResourceId"], dict(call.params.get("Tags") or {}))
        elif call.operation == "DeregisterScalableTarget":
            targets.pop(call.params["ResourceId"], None)
        if call.stage != stage:
            continue
        for ask in asks:
            key = (ask.action, ask.resource, json.dumps(dict(ask.context), sort_keys=True))
            if key not in seen:
                seen.add(key)
                yield ask


def test_the_flow_ran_every_kind_of_call(flow: Flow) -> None:
    ops = {(c.stage, c.operation) for c in flow.calls}
    for needed in [
        ("dev", "CreateEndpoint"),
        ("dev", "UpdateEndpoint"),
        ("dev", "DeleteModel"),
        ("dev", "PutParameter"),
        ("dev", "SimulatePrincipalPolicy"),
        ("dev", "RegisterScalableTarget"),
        ("dev", "PutScalingPolicy"),
        ("staging", "InvokeEndpointWithResponseStream"),
        ("staging", "GetParameter"),
        ("staging", "CreateEndpoint"),
        ("prod", "CreateEndpoint"),
    ]:
        assert needed in ops, needed


EXPECTED_DENIALS = {
    ("ssm:GetParametersByPath", f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/peagle-deploy"),
}
"""Calls the SDK makes and a stage's role must be denied: the look for a record of the
endpoint under another stage's path (every stage's records, which no stage may read).
Denied, the SDK relies on the endpoint's peagle:stage tag (tests/sdk/test_sdk_adopt.py)."""


@pytest.mark.parametrize("stage", STAGES)
def test_every_call_of_a_stage_is_allowed_for_its_role(flow: Flow, stage: str) -> None:
    asks = list(_unique(flow, stage))
    assert asks
    decisions = flow.roles.decide(flow.role(stage), asks)
    denied = {
        (a.action, a.resource) for a, d in zip(asks, decisions, strict=True) if d != "Allowed"
    }
    assert denied == EXPECTED_DENIALS, f"the {stage} role would break its own job: {denied}"


_CHANGES = ("Create", "Update", "Delete", "Put", "AddTags", "PassRole", "Register", "Deregister")


@pytest.mark.parametrize("stage", STAGES)
def test_changes_of_a_stage_are_denied_to_the_other_roles(flow: Flow, stage: str) -> None:
    changes = [a for a in _unique(flow, stage) if a.action.split(":")[1].startswith(_CHANGES)]
    # The shared execution role is not stage-scoped. Application Auto Scaling's targets
    # (generated ids) are, by their stage tag (issue 29).
    changes = [a for a in changes if a.resource != "*" and a.action != "iam:PassRole"]
    assert any(a.action.startswith("application-autoscaling:") for a in changes)
    assert changes
    for other in STAGES:
        if other == stage:
            continue
        decisions = flow.roles.decide(flow.role(other), changes)
        allowed = [
            (a.action, a.resource)
            for a, d in zip(changes, decisions, strict=True)
            if d == "Allowed"
        ]
        assert allowed == [], f"the {other} role may change {stage}"


def _model_arn(stage: str) -> str:
    from peagle_deploy.access import endpoint_grants

    pattern = endpoint_grants(f"peagle-{MODEL}-{stage}").models.resource
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:{pattern.replace('?', '0')}"


def test_a_promotion_target_never_reads_the_source_models_environment(flow: Flow) -> None:
    """Issue 34, Low 2: DescribeModel shows a model's environment with its resolved
    secrets. The promotion's check of its source makes no DescribeModel on the source's
    models, and the target's role may not make one."""
    for source, target in (("dev", "staging"), ("staging", "prod")):
        described = [
            c.params["ModelName"]
            for c in flow.calls
            if c.stage == target and c.operation == "DescribeModel"
        ]
        assert not [m for m in described if m.startswith(f"peagle-{MODEL}-{source}")]
        decisions = flow.roles.decide(
            flow.role(target), [Ask("sagemaker:DescribeModel", _model_arn(source))]
        )
        assert decisions == ["ImplicitlyDenied"], f"{target} may read {source}'s models"


def test_a_stage_may_point_its_endpoint_only_at_its_own_configs(flow: Flow) -> None:
    """CreateEndpoint/UpdateEndpoint require the endpoint config too: dev's role may put
    dev's endpoint on dev's configs, never on prod's (prod's model and secrets)."""
    endpoint = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/peagle-{MODEL}-dev"
    configs = {
        stage: _model_arn(stage)
        .replace(":model/", ":endpoint-config/")
        .replace(f"-{stage}-m", f"-{stage}-c")
        for stage in STAGES
    }
    asks = [
        Ask(action, resource)
        for action in ("sagemaker:CreateEndpoint", "sagemaker:UpdateEndpoint")
        for resource in (endpoint, configs["dev"], configs["prod"])
    ]
    decided = flow.roles.decide(flow.role("dev"), asks)
    assert decided == ["Allowed", "Allowed", "ImplicitlyDenied"] * 2


def test_a_stage_role_may_simulate_only_itself(flow: Flow) -> None:
    """`peagle doctor` asks the simulator about the caller's own role."""
    own = flow.roles.role_arn(flow.role("dev"))
    other = flow.roles.role_arn(flow.role("prod"))
    decided = flow.roles.decide(
        flow.role("dev"),
        [Ask("iam:SimulatePrincipalPolicy", own), Ask("iam:SimulatePrincipalPolicy", other)],
    )
    assert decided == ["Allowed", "ImplicitlyDenied"]


def test_ledger_figures(flow: Flow) -> None:
    """The figures the issue asks for (`pytest -s -k ledger_figures` prints them): distinct
    calls, how many the map resolves from the reference, and iam-simulate's verdicts."""
    calls = {
        (c.stage, c.service, c.operation, json.dumps(c.params, sort_keys=True, default=str))
        for c in flow.calls
    }
    resolved = sum(1 for c in flow.calls if asks_for(c) or c.operation == "GetCallerIdentity")
    lines = [f"distinct calls {len(calls)}; calls resolved by the map {resolved}/{len(flow.calls)}"]
    for stage in STAGES:
        asks = list(_unique(flow, stage))
        own = flow.roles.decide(flow.role(stage), asks)
        allowed = sum(d == "Allowed" for d in own)
        lines.append(f"{stage}: own role allows {allowed}/{len(asks)} requests")
    print("\n".join(lines))
    assert resolved == len(flow.calls)
