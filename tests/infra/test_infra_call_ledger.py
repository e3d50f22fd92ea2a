"""The call ledger: every AWS call the project makes, decided by IAM's own rules.

`ledger_run.record_all` runs, against the emulator, what a stage's CI job, a person at
`peagle` and CloudFormation's model handler run (see its docstring), each as the role
that makes the call in the synthesized templates: the stage's PeagleCiRoles role, or the
stage stack's model-handler role. Every call is recorded (`call_ledger.Recorder`) and
turned into the IAM requests AWS authorizes by the product's map
(`peagle_deploy.catalog.iam_calls`, from the Service Authorization Reference); a call the
map cannot resolve fails. Then @cloud-copilot/iam-simulate decides each request against
the synthesized policies:

- allowed to the role of the stage that made it (a role that breaks its own job is not
  least privilege, it is broken), but for `EXPECTED_DENIALS`;
- denied, for every request that changes something, to the same role of every other
  stage.

`pytest -s -k ledger_figures tests/infra/test_infra_call_ledger.py` prints the figures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from call_ledger import Call, Tags, ask_key, asks_for, requests_of
from cdk_helpers import ROOT, Synthesized, cdk_context, synthesize_once
from iam_oracle import ACCOUNT, Ask, TemplateRoles, run
from ledger_run import REGION, STAGES, endpoint, execution_role, experiment_role, record_all

from infra.ci_stack import CI_STACK_ID, CiRolesStack
from infra.github_oidc import GitHubRepo
from infra.stages import STAGES_CONTEXT_KEY, stage_configs
from peagle_deploy.catalog.iam_calls import Where, iam_requests
from peagle_deploy.catalog.iam_reference import reference
from peagle_deploy.stages import stack_name

pytestmark = [pytest.mark.xdist_group(name="cdk"), pytest.mark.slow, pytest.mark.doctor_gate]


def _ci_template(outdir: Path) -> dict[str, Any]:
    """PeagleCiRoles for cdk.json's stages, as `cdk synth -c peagle:github_repo=...`."""
    configs = stage_configs(cdk_context()[STAGES_CONTEXT_KEY], ROOT)
    app = cdk.App(outdir=str(outdir))
    CiRolesStack(
        app,
        CI_STACK_ID,
        repo=GitHubRepo.parse("acme/llm-serving", "test"),
        stages=configs,
        plans=[c.plan() for c in configs],
        account=ACCOUNT,
    )
    app.synth()
    template: dict[str, Any] = json.loads((outdir / f"{CI_STACK_ID}.template.json").read_text())
    return template


@dataclass
class Ledger:
    calls: list[Call]
    ci: TemplateRoles
    stacks: dict[str, TemplateRoles]
    """stage -> its PeagleEndpoint stack's roles."""
    role_tags: dict[str, dict[str, str]]
    asked: dict[tuple[str, str], list[Any]]
    """(stage, command) -> the calls the doctor asked IAM about before that command."""


def _build(outdir: Path, stacks: Synthesized) -> Ledger:
    template = _ci_template(outdir / "ci")
    done = record_all(outdir, template, stacks)
    role_tags = {execution_role(s): {"peagle:stage": s} for s in STAGES} | {
        experiment_role(s): {"peagle:experiment-stage": s} for s in STAGES
    }
    return Ledger(
        calls=done.recorder.calls,
        ci=done.ci,
        stacks={
            s: TemplateRoles(stacks.templates[stack_name(s)], REGION, stack=stack_name(s))
            for s in STAGES
        },
        role_tags=role_tags,
        asked=done.asked,
    )


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory, stage_synth: Synthesized) -> Ledger:
    return synthesize_once(  # type: ignore[return-value]
        "call-ledger",
        tmp_path_factory,
        lambda out: _build(out, stage_synth),  # type: ignore[arg-type,return-value]
    )


# --- the questions -----------------------------------------------------------------------


def provider_role_id(roles: TemplateRoles) -> str:
    """The role of the stack's model handler (the Lambda function running handler.py)."""
    from infra.model import HANDLER

    (function,) = [
        r
        for r in roles.template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Handler") == HANDLER
    ]
    role_id: str = function["Properties"]["Role"]["Fn::GetAtt"][0]
    return role_id


def role_of(ledger: Ledger, stage: str, kind: str) -> tuple[TemplateRoles, str]:
    """The role of kind `kind` (`ci`, `provider`) of `stage` in the synthesized templates."""
    if kind == "ci":
        return ledger.ci, ledger.ci.role_id(f"Deploy{stage}Role")
    roles = ledger.stacks[stage]
    return roles, provider_role_id(roles)


def changes(action: str) -> bool:
    """Whether the action changes something (its access level in the reference)."""
    found = reference().action(action)
    assert found is not None, action
    return found.changes


@dataclass(frozen=True, eq=False)
class Question:
    stage: str
    kind: str
    ask: Ask
    call: Call
    """The first call that asked it."""


def questions(ledger: Ledger) -> list[Question]:
    """Each distinct IAM request of each stage's role, in the order the calls made them
    (the scalable targets' tags followed through every call)."""
    tags = Tags(roles=dict(ledger.role_tags))
    seen: dict[tuple[str, str, Any], Question] = {}
    for call in ledger.calls:
        asks = asks_for(call, tags)
        tags.follow(call)
        for ask in asks:
            seen.setdefault(
                (call.stage, call.who.role, ask_key(ask)),
                Question(call.stage, call.who.role, ask, call),
            )
    return list(seen.values())


@dataclass
class Verdicts:
    """iam-simulate's decision of every question for its own role and, for a change, for
    the same role of every other stage."""

    own: dict[Question, str]
    others: dict[tuple[Question, str], str]


@pytest.fixture(scope="module")
def verdicts(ledger: Ledger) -> Verdicts:
    asked: list[tuple[Question, str]] = []
    simulations = []
    for q in questions(ledger):
        for stage in STAGES:
            if stage != q.stage and not changes(q.ask.action):
                continue
            roles, role_id = role_of(ledger, stage, q.kind)
            asked.append((q, stage))
            simulations.append(roles.simulation(role_id, q.ask))
    results = run(simulations)  # one batch: one node process
    own: dict[Question, str] = {}
    others: dict[tuple[Question, str], str] = {}
    for (q, stage), result in zip(asked, results, strict=True):
        assert result["decision"] != "Error", (q.ask, result["errors"])
        assert not result["ignored"], (q.ask, "context keys the action lacks", result["ignored"])
        if stage == q.stage:
            own[q] = result["decision"]
        else:
            others[(q, stage)] = result["decision"]
    return Verdicts(own, others)


EXPECTED_DENIALS = {
    ("ssm:GetParametersByPath", f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/peagle-deploy"),
    (
        "ssm:DeleteParameter",
        f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/peagle-deploy/dev/{endpoint('dev')}/manifest",
    ),
}
"""Requests made and denied on purpose: the SDK's look for a record of the endpoint under
another stage's path (every stage's records, which no stage may read; denied, the SDK
relies on the endpoint's peagle:stage tag, tests/sdk/test_sdk_adopt.py), and `peagle
delete`'s removal of the stage's manifest (a record's versions are the stage's audit
trail, which its CI role may not erase; the command says the manifest stays)."""

NEEDED = {
    ("dev", "model provider", "CreateModel"),
    ("dev", "model provider", "AddTags"),
    ("dev", "model provider", "DeleteModel"),
    ("dev", "deploy", "CreateEndpoint"),
    ("dev", "deploy", "SimulatePrincipalPolicy"),
    ("dev", "deploy_peagle update", "UpdateEndpoint"),
    ("dev", "deploy_peagle update", "DeleteModel"),
    ("dev", "status", "DescribeEndpoint"),
    ("dev", "list", "ListEndpoints"),
    ("dev", "invoke", "InvokeEndpoint"),
    ("dev", "invoke", "InvokeEndpointWithResponseStream"),
    ("dev", "doctor", "ListInferenceExperiments"),
    ("dev", "doctor", "DescribeStacks"),
    ("dev", "experiment start", "CreateInferenceExperiment"),
    ("dev", "experiment start", "CreateEndpointConfig"),
    ("dev", "experiment status", "QueryMetrics"),
    ("dev", "experiment status", "GetMetricData"),
    ("dev", "experiment conclude", "StopInferenceExperiment"),
    ("dev", "experiment conclude", "UpdateEndpoint"),
    ("dev", "experiment abort", "DeleteEndpointConfig"),
    ("dev", "experiment watch", "StopInferenceExperiment"),
    ("staging", "promote", "InvokeEndpointWithResponseStream"),
    ("staging", "promote", "FilterLogEvents"),
    ("staging", "promote", "CreateEndpoint"),
    ("staging", "promote", "RegisterScalableTarget"),
    ("prod", "promote", "CreateEndpoint"),
    ("prod", "experiment start", "DescribeScalableTargets"),
    ("prod", "experiment start", "RegisterScalableTarget"),
    ("prod", "experiment abort", "UpdateEndpointWeightsAndCapacities"),
    ("prod", "experiment abort", "RegisterScalableTarget"),
    ("prod", "deploy_peagle update", "DescribeScheduledActions"),
    ("prod", "deploy_peagle update", "DeregisterScalableTarget"),
    ("prod", "deploy_peagle update", "DeleteScalingPolicy"),
    ("dev", "delete", "DeleteEndpoint"),
    ("dev", "delete", "DeleteParameter"),
}
"""What each run must have called for the ledger to stand for it."""


def test_the_runs_made_every_kind_of_call(ledger: Ledger) -> None:
    made = {(c.stage, c.who.command, c.operation) for c in ledger.calls}
    assert sorted(NEEDED - made) == []


def test_every_call_is_mapped_from_the_reference(ledger: Ledger) -> None:
    """A call the product's map cannot turn into IAM requests raises UnmappedCallError;
    only the one call IAM does not authorize maps to none."""
    free = [c.operation for c in ledger.calls if not requests_of(c)]
    assert set(free) == {"GetCallerIdentity"}


def test_every_request_is_allowed_to_the_role_that_makes_it(verdicts: Verdicts) -> None:
    denied = {
        (q.stage, q.kind, q.call.who.command, q.ask.action, q.ask.resource)
        for q, d in verdicts.own.items()
        if d != "Allowed" and (q.ask.action, q.ask.resource) not in EXPECTED_DENIALS
    }
    assert denied == set(), "a role would break its own run"
    expected = {(q.ask.action, q.ask.resource) for q, d in verdicts.own.items() if d != "Allowed"}
    assert expected == EXPECTED_DENIALS


def test_every_change_is_denied_to_every_other_stage(verdicts: Verdicts) -> None:
    allowed = {
        (q.stage, other, q.kind, q.ask.action, q.ask.resource)
        for (q, other), d in verdicts.others.items()
        if d == "Allowed"
    }
    assert allowed == set(), "a stage's role may change another stage"
    kinds = {(q.kind, q.ask.action.split(":")[0]) for q, _ in verdicts.others}
    assert {("ci", "sagemaker"), ("ci", "iam"), ("ci", "application-autoscaling")} <= kinds
    assert {("provider", "sagemaker"), ("provider", "iam")} <= kinds


def _model_arn(stage: str) -> str:
    from peagle_deploy.access import endpoint_grants

    pattern = endpoint_grants(endpoint(stage)).models.resource
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:{pattern.replace('?', '0')}"


def test_a_promotion_target_never_reads_the_source_models_environment(ledger: Ledger) -> None:
    """Issue 34, Low 2: DescribeModel shows a model's environment with its resolved
    secrets. The promotion's check of its source makes no DescribeModel on the source's
    models, and the target's role may not make one."""
    for source, target in (("dev", "staging"), ("staging", "prod")):
        described = [
            c.params["ModelName"]
            for c in ledger.calls
            if c.stage == target and c.operation == "DescribeModel"
        ]
        assert described and not [m for m in described if m.startswith(endpoint(source))]
        decisions = ledger.ci.decide(
            ledger.ci.role_id(f"Deploy{target}Role"),
            [Ask("sagemaker:DescribeModel", _model_arn(source))],
        )
        assert decisions == ["ImplicitlyDenied"], f"{target} may read {source}'s models"


def test_a_stage_may_point_its_endpoint_only_at_its_own_configs(ledger: Ledger) -> None:
    """CreateEndpoint/UpdateEndpoint require the endpoint config too: dev's role may put
    dev's endpoint on dev's configs, never on prod's (prod's model and secrets)."""
    own = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{endpoint('dev')}"
    configs = {
        stage: _model_arn(stage)
        .replace(":model/", ":endpoint-config/")
        .replace(f"-{stage}-m", f"-{stage}-c")
        for stage in STAGES
    }
    asks = [
        Ask(action, resource)
        for action in ("sagemaker:CreateEndpoint", "sagemaker:UpdateEndpoint")
        for resource in (own, configs["dev"], configs["prod"])
    ]
    decided = ledger.ci.decide(ledger.ci.role_id("DeploydevRole"), asks)
    assert decided == ["Allowed", "Allowed", "ImplicitlyDenied"] * 2


def test_a_stage_role_may_simulate_only_itself(ledger: Ledger) -> None:
    """`peagle doctor` asks the simulator about the caller's own role (the ledger holds
    that call: its jobs run as the role)."""
    own = ledger.ci.role_arn(ledger.ci.role_id("DeploydevRole"))
    other = ledger.ci.role_arn(ledger.ci.role_id("DeployprodRole"))
    simulated = {
        c.params["PolicySourceArn"]
        for c in ledger.calls
        if c.stage == "dev" and c.operation == "SimulatePrincipalPolicy"
    }
    assert own in simulated
    decided = ledger.ci.decide(
        ledger.ci.role_id("DeploydevRole"),
        [Ask("iam:SimulatePrincipalPolicy", own), Ask("iam:SimulatePrincipalPolicy", other)],
    )
    assert decided == ["Allowed", "ImplicitlyDenied"]


RUN_GROUPS = {
    "deploy": ("deploy",),
    "deploy_peagle update": ("deploy_peagle update",),
    "promote": ("promote",),
    "experiment start": (
        "experiment start",
        "experiment status",
        "experiment conclude",
        "experiment abort",
        "experiment watch",
    ),
}
"""The doctor before a command asks about the calls of these commands (an experiment's
start asks for its status and its end too)."""


def _shape(action: str, resource: str) -> tuple[str, str]:
    """A request with the content digest of a derived name left out (a run's next names
    are the digests of what it will create)."""
    return action, re.sub(r"-([mcx])[0-9a-f]{8}$", r"-\1<digest>", resource)


def _requests(calls: Sequence[Any]) -> set[tuple[str, str]]:
    out = set()
    for call in calls:
        service, operation, params = (
            (call.service, call.operation, call.params) if isinstance(call, Call) else call
        )
        for r in iam_requests(service, operation, params, Where(REGION, ACCOUNT)):
            out.add(_shape(r.action, r.resource))
    return out


@pytest.mark.parametrize("command", sorted(RUN_GROUPS))
def test_the_doctor_asks_about_every_call_the_run_makes(ledger: Ledger, command: str) -> None:
    """Item 4 of issue 34: before a deploy, a promotion or an experiment start,
    `caller.permissions` asks IAM about every request the run then makes (the doctor's own
    reads apart: they are the doctor's)."""
    stages = {stage for (stage, c) in ledger.asked if c == command}
    assert stages, f"no doctor ran before {command}"
    for stage in sorted(stages):
        made = _requests(
            [
                c
                for c in ledger.calls
                if c.stage == stage and not c.who.doctor and c.who.command in RUN_GROUPS[command]
            ]
        )
        asked = _requests(ledger.asked[(stage, command)])
        missing = sorted(made - asked - EXPECTED_DENIALS)
        assert missing == [], f"{stage} {command}: the doctor does not ask about {missing}"


def figures(ledger: Ledger, verdicts: Verdicts) -> list[str]:
    """The issue's figures: distinct calls, how many the map resolves from the reference,
    and iam-simulate's verdicts per stage and role."""
    distinct = {
        (
            c.stage,
            c.who.role,
            c.service,
            c.operation,
            json.dumps(c.params, sort_keys=True, default=str),
        )
        for c in ledger.calls
    }
    operations = {(c.service, c.operation) for c in ledger.calls}
    resolved = sum(1 for c in ledger.calls if requests_of(c) or c.operation == "GetCallerIdentity")
    lines = [
        f"calls recorded {len(ledger.calls)}; distinct calls {len(distinct)} "
        f"({len(operations)} operations); resolved by the map from the reference "
        f"{resolved}/{len(ledger.calls)}",
        f"distinct IAM requests {len(verdicts.own)}",
    ]
    for stage in STAGES:
        for kind in ("ci", "provider"):
            mine = [(q, d) for q, d in verdicts.own.items() if (q.stage, q.kind) == (stage, kind)]
            own = [d for _, d in mine]
            meant = sum(1 for q, _ in mine if (q.ask.action, q.ask.resource) in EXPECTED_DENIALS)
            others = [
                d for (q, _), d in verdicts.others.items() if (q.stage, q.kind) == (stage, kind)
            ]
            lines.append(
                f"{stage} {kind}: own role allows {own.count('Allowed')}/{len(own)} "
                f"({meant} denied on purpose); "
                f"other stages' roles deny {len(others) - others.count('Allowed')}/{len(others)} "
                "(changes)"
            )
    return lines


def test_ledger_figures(ledger: Ledger, verdicts: Verdicts) -> None:
    """`pytest -s -k ledger_figures tests/infra/test_infra_call_ledger.py` prints them."""
    print("\n".join(figures(ledger, verdicts)))
