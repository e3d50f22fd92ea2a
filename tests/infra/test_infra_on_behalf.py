"""What SageMaker does on the caller's behalf, decided by IAM's own rules (issue 34 item 3).

Two roles are SageMaker's to assume, and no call of the project's names what SageMaker
then does with them, so the call ledger cannot record it. It is derived here from each
stage's plan, with the same access helpers the roles are built from
(`peagle_deploy.access`: the model's S3 locations, its image's repository, the
endpoint's log group), as the calls AWS documents them:

- the execution role (CreateModel's `ExecutionRoleArn`): the model data and drafter
  read from S3, the image pulled from ECR, the storage volume's key (through SageMaker)
  and SSE-KMS weights' keys (through S3), the container's log streams and instance
  metrics;
- the experiment role (CreateInferenceExperiment's `RoleArn`: "to access model
  artifacts and container images, and manage Amazon SageMaker Inference endpoints",
  botocore): both models' data and images, and the endpoint's update onto a config of
  its two models that SageMaker makes and names (its name is in no source read: an
  untagged config of a name of SageMaker's stands for it), and back.

Each call is mapped by the product's map and decided by @cloud-copilot/iam-simulate
against the synthesized roles, in one batch: allowed to the role of the stage whose plan
it comes from, denied to the same role of every other stage (what two stages share, the
public JumpStart model data and AWS's image, is nobody's and left out).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from cdk_helpers import Synthesized, experiment_stage
from iam_oracle import ACCOUNT, Ask, TemplateRoles, run
from model_provider_kit import execution_role_id

from infra.execution_policy import INSTANCE_METRICS_NAMESPACE, volume_key_services
from peagle_deploy.access import bucket_owner, ecr_repositories, s3_reads
from peagle_deploy.catalog.iam_calls import Where, iam_requests
from peagle_deploy.naming import STAGE_TAG, endpoint_log_group_name
from peagle_deploy.plan import Plan

pytestmark = [pytest.mark.xdist_group(name="cdk"), pytest.mark.slow]

Call = tuple[str, str, Mapping[str, Any], Mapping[str, Any]]
"""(service, operation, parameters, what the request context adds: the caller service
a key is used through, the bucket's account)."""

SAGEMAKERS_CONFIG = "sagemaker-made-config"
"""Stands for the endpoint config SageMaker makes for an experiment (untagged)."""


@dataclass(frozen=True)
class Side:
    """One stage's role of one kind, its template and what its plan makes SageMaker do."""

    stage: str
    roles: TemplateRoles
    role_id: str
    calls: list[Call] = field(default_factory=list)
    key_policies: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    """key ARN -> its key policy (KMS asks the key's policy as well as the role's)."""


def _s3(create_model: Mapping[str, Any], account: str) -> list[Call]:
    """Reading the model data and the drafter (a prefix is listed, then read)."""
    out: list[Call] = []
    for read in s3_reads(create_model):
        owner = bucket_owner(read.bucket, account)
        context = {} if owner is None else {"s3:ResourceAccount": owner}
        key = f"{read.key}config.json" if read.is_prefix else read.key
        out.append(("s3", "GetObject", {"Bucket": read.bucket, "Key": key}, context))
        if read.is_prefix:
            out.append(
                ("s3", "ListObjectsV2", {"Bucket": read.bucket, "Prefix": read.key}, context)
            )
    return out


def _image(create_model: Mapping[str, Any]) -> list[Call]:
    """Pulling the serving image (the identity's side: AWS's own repositories grant the
    other side by their policy)."""
    out: list[Call] = [("ecr", "GetAuthorizationToken", {}, {})]
    for repo in ecr_repositories(create_model):
        params = {"registryId": repo.account, "repositoryName": repo.name}
        for op in ("BatchCheckLayerAvailability", "BatchGetImage", "GetDownloadUrlForLayer"):
            out.append(("ecr", op, params, {}))
    return out


def _keys(plan: Plan, key_arn: str | None) -> list[Call]:
    """The storage volume's key, used through SageMaker and EBS; SSE-KMS weights' keys,
    through S3."""
    out: list[Call] = []
    if key_arn is not None:
        for service in volume_key_services(plan.region):
            out.append(("kms", "Decrypt", {"KeyId": key_arn}, {"kms:ViaService": service}))
    for data_key in plan.spec.model_data_kms_key_arns:
        via = f"s3.{plan.region}.amazonaws.com"
        out.append(("kms", "Decrypt", {"KeyId": data_key}, {"kms:ViaService": via}))
    return out


def execution_calls(plan: Plan, account: str, key_arn: str | None) -> list[Call]:
    """What SageMaker does with the execution role for `plan`."""
    group = endpoint_log_group_name(plan.endpoint_name)
    stream = {"logGroupName": group, "logStreamName": "AllTraffic/i-0123456789abcdef0"}
    return [
        *_s3(plan.create_model, account),
        *_image(plan.create_model),
        *_keys(plan, key_arn),
        ("logs", "CreateLogStream", stream, {}),
        ("logs", "PutLogEvents", stream, {}),
        ("cloudwatch", "PutMetricData", {"Namespace": INSTANCE_METRICS_NAMESPACE}, {}),
    ]


def experiment_calls(plan: Plan, models: Sequence[Mapping[str, Any]], account: str) -> list[Call]:
    """What SageMaker does with the experiment role on the endpoint `plan` serves, the
    variants being `models` (CreateModel requests): load them, make its config of both,
    put the endpoint on it and back, remove it. `plan`'s stage tags its own configs."""
    name = plan.endpoint_name
    stage = {f"aws:ResourceTag/{STAGE_TAG}": plan.spec.stage}
    variants = [{"VariantName": f"v{i}", "ModelName": m["ModelName"]} for i, m in enumerate(models)]
    out: list[Call] = [
        ("sagemaker", "DescribeEndpoint", {"EndpointName": name}, {}),
        (
            "sagemaker",
            "CreateEndpointConfig",
            {"EndpointConfigName": SAGEMAKERS_CONFIG, "ProductionVariants": variants},
            {},
        ),
        ("sagemaker", "DescribeEndpointConfig", {"EndpointConfigName": SAGEMAKERS_CONFIG}, {}),
        (
            "sagemaker",
            "UpdateEndpoint",
            {"EndpointName": name, "EndpointConfigName": SAGEMAKERS_CONFIG},
            {},
        ),
        (
            "sagemaker",
            "UpdateEndpoint",
            {"EndpointName": name, "EndpointConfigName": plan.endpoint_config_name},
            stage,
        ),
        ("sagemaker", "DeleteEndpointConfig", {"EndpointConfigName": SAGEMAKERS_CONFIG}, {}),
    ]
    for model in models:
        out.append(("sagemaker", "DescribeModel", {"ModelName": model["ModelName"]}, {}))
        out += _s3(model, account) + _image(model)
    return out


def _asks(calls: Sequence[Call], region: str) -> list[Ask]:
    """The product map's requests of each call, with what the request context adds."""
    return [
        Ask(
            r.action,
            r.resource,
            {**{k: list(v) if isinstance(v, tuple) else v for k, v in r.context.items()}, **extra},
        )
        for service, operation, params, extra in calls
        for r in iam_requests(service, operation, params, Where(region, ACCOUNT))
    ]


def _key(roles: TemplateRoles, role_id: str) -> str | None:
    """The stack's key, where the execution role may decrypt with it (EBS families)."""
    if "kms:Decrypt" not in str(roles.identity_policies(role_id)):
        return None
    (key,) = [lid for lid, r in roles.template["Resources"].items() if r["Type"] == "AWS::KMS::Key"]
    return roles.key_arn(key)


def _key_policies(roles: TemplateRoles, plan: Plan) -> dict[str, Mapping[str, Any]]:
    """The stack's key's own policy; a model-data key (another owner's) with the default
    key policy, which lets the account's IAM policies decide (docs/platform-facts.md,
    "How IAM decides")."""
    policies: dict[str, Mapping[str, Any]] = {
        roles.key_arn(lid): roles.key_policy(lid)
        for lid, r in roles.template["Resources"].items()
        if r["Type"] == "AWS::KMS::Key"
    }
    for arn in plan.spec.model_data_kms_key_arns:
        owner = arn.split(":")[4]
        policies[arn] = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:aws:iam::{owner}:root"},
                    "Action": "kms:*",
                    "Resource": "*",
                }
            ],
        }
    return policies


def _key_policy(sides: Sequence[Side], resource: str) -> Mapping[str, Any] | None:
    return next((s.key_policies[resource] for s in sides if resource in s.key_policies), None)


@dataclass(frozen=True)
class Verdicts:
    broken: list[tuple[str, str, str]]
    """(stage, action, resource) its own role does not allow."""
    reaching: list[tuple[str, str, str, str]]
    """(role's stage, request's stage, action, resource) another stage's role allows."""
    own: int = 0
    """Requests asked of the role of their own stage."""
    others: int = 0
    """Requests asked of another stage's role."""

    def line(self, role: str) -> str:
        return (
            f"{role}: own stage allowed {self.own - len(self.broken)}/{self.own}; "
            f"other stages' denied {self.others - len(self.reaching)}/{self.others}"
        )


def judge(sides: Sequence[Side], foreign: Mapping[str, Sequence[Call]] = {}) -> Verdicts:
    """Each side's requests asked of its own role, and every other stage's (the sides'
    and `foreign`'s, by stage) asked of it too, less what both stages request alike
    (shared data is nobody's), in one batch."""
    requests = {s.stage: _asks(s.calls, s.roles.region) for s in sides}
    requests |= {stage: _asks(calls, "us-east-1") for stage, calls in foreign.items()}
    asked: list[tuple[Side, str, Ask]] = []
    for side in sides:
        own = {(a.action, a.resource) for a in requests[side.stage]}
        for stage, asks in requests.items():
            asked += [
                (side, stage, a)
                for a in asks
                if stage == side.stage or (a.action, a.resource) not in own
            ]
    results = run(
        [
            side.roles.simulation(side.role_id, a, _key_policy(sides, a.resource))
            for side, _, a in asked
        ]
    )
    own = sum(1 for side, stage, _ in asked if stage == side.stage)
    verdicts = Verdicts([], [], own, len(asked) - own)
    for (side, stage, ask), result in zip(asked, results, strict=True):
        assert result["decision"] != "Error", (ask, result["errors"])
        assert not result["ignored"], (ask, result["ignored"])
        allowed = result["decision"] == "Allowed"
        if stage == side.stage and not allowed:
            verdicts.broken.append((stage, ask.action, ask.resource))
        elif stage != side.stage and allowed:
            verdicts.reaching.append((side.stage, stage, ask.action, ask.resource))
    return verdicts


def test_the_execution_role_does_for_sagemaker_only_what_its_own_stage_needs(
    stage_synth: Synthesized, edge_synth: Synthesized
) -> None:
    sides = []
    for synth in (stage_synth, edge_synth):
        for stack, info in synth.stacks.items():
            roles = TemplateRoles(synth.templates[stack], info.region, stack=stack)
            role_id = execution_role_id(synth, stack)
            calls = execution_calls(info.plan, roles.account, _key(roles, role_id))
            policies = _key_policies(roles, info.plan)
            sides.append(Side(info.plan.spec.stage, roles, role_id, calls, policies))
    assert {s.stage for s in sides} == {"dev", "staging", "prod", "edge"}
    edge = next(s for s in sides if s.stage == "edge")
    assert {c[0] for c in edge.calls} == {"s3", "ecr", "kms", "logs", "cloudwatch"}
    verdicts = judge(sides)
    print(verdicts.line("execution roles"))
    assert verdicts.others > 0
    assert verdicts.broken == [], "SageMaker could not load or run a stage's own model"
    assert verdicts.reaching == [], "a stage's execution role reaches another stage's data"


def test_the_experiment_role_does_for_sagemaker_only_what_its_own_stage_needs(
    experiment_synth: Synthesized, stage_synth: Synthesized, edge_synth: Synthesized
) -> None:
    from peagle_deploy.experiment.plan import experiment_plan

    stack = "PeagleEndpoint-dev"
    roles = TemplateRoles(experiment_synth.templates[stack], "us-east-1", stack=stack)
    (role_id,) = [
        lid
        for lid in experiment_synth.resources(stack, "AWS::IAM::Role")
        if "ShadowExperimentRole" in lid
    ]
    xp = experiment_plan(experiment_stage().load_spec())
    own = experiment_calls(
        xp.incumbent, [xp.incumbent.create_model, xp.create_candidate_model], ACCOUNT
    )
    others = {
        info.plan.spec.stage: experiment_calls(info.plan, [info.plan.create_model], ACCOUNT)
        for synth in (stage_synth, edge_synth)
        for info in synth.stacks.values()
        if info.plan.spec.stage != "dev"
    }
    assert set(others) == {"staging", "prod", "edge"}
    verdicts = judge([Side("dev", roles, role_id, own)], others)
    print(verdicts.line("experiment role"))
    assert verdicts.others > 0
    assert verdicts.broken == [], "SageMaker could not run the stage's own experiment"
    assert verdicts.reaching == [], "the experiment role reaches another stage"
