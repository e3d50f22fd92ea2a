"""One stage's CI deploy role: assumable only from that stage's GitHub environment, and
allowed only on that stage's SageMaker resources (plus reads of the stage it is promoted
from).

What the role may do is derived from the stage's plan, as the execution role's is
(infra/role.py): its endpoint name, the content-derived model and config names
(`<head>-m` / `<head>-c` followed by exactly 8 characters, `peagle_deploy.naming`), its
`/peagle-deploy/<stage>/` parameters, its log group. It covers what `peagle deploy`,
`peagle promote` and `peagle doctor` call (tests/infra/test_infra_ci_roles.py records the
calls of a deploy and two promotions against the emulator and has an outside IAM
evaluator decide each one against the synthesized policy):

- SageMaker: create, update, describe, tag and delete the stage's endpoint, configs and
  models; invoke its endpoint; list (no resource-level permissions exist for List*);
  describe every endpoint and endpoint config of the region (read-only: the doctor counts
  the instances the account's endpoints hold against the quota; DescribeModel, which
  shows a model's environment, stays on the stage's own models).
- The promotion source stage (`promote_from`): describe, list tags of and invoke its
  endpoint, describe its configs and models, read its manifest and its endpoint's logs.
- `iam:PassRole` only to SageMaker (`iam:PassedToService`) and only of the stage's
  execution role: the spec's `execution_role_arn`, or any role tagged
  `peagle:stage=<stage>`; the doctor may GetRole and SimulatePrincipalPolicy on it.
- SSM: read and write only under `/peagle-deploy/<stage>/` (PutParameter included).
- Logs: the endpoint's log group (failure reports, acceptance metrics).
- Autoscaling of the stage's endpoint (Application Auto Scaling's documented needs for
  SageMaker endpoints: DescribeEndpoint, DescribeEndpointConfig,
  UpdateEndpointWeightsAndCapacities, and the target-tracking alarms).
- The doctor's reads: the model and drafter locations of the stage and of its source (a
  promotion deploys the source's model), the image's repository, SageMaker's quotas.

No managed policies; nothing on `*` but actions that have no resource-level permissions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.github_oidc import GITHUB_OIDC_HOST, STS_AUDIENCE, GitHubRepo
from infra.nag import acknowledge, nag_text
from infra.role import endpoint_log_group_name
from peagle_deploy.access import bucket_owner, ecr_repositories, owner_condition, s3_reads
from peagle_deploy.naming import DIGEST_LEN, derived_prefix
from peagle_deploy.records.paths import PARAMETER_ROOT

STAGE_TAG = "peagle:stage"
SAGEMAKER_SERVICE = "sagemaker.amazonaws.com"
AUTOSCALING_SLR_SERVICE = "sagemaker.application-autoscaling.amazonaws.com"
AUTOSCALING_SLR_NAME = "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
MAX_SESSION_HOURS = 4
"""Long enough for the example workflow's longest job (promote-prod, 180 minutes)."""

OWN_ENDPOINT_ACTIONS = (
    "sagemaker:AddTags",
    "sagemaker:CreateEndpoint",
    "sagemaker:DeleteEndpoint",
    "sagemaker:DescribeEndpoint",
    "sagemaker:InvokeEndpoint",
    "sagemaker:InvokeEndpointWithResponseStream",
    "sagemaker:ListTags",
    "sagemaker:UpdateEndpoint",
    "sagemaker:UpdateEndpointWeightsAndCapacities",
)
OWN_MODEL_ACTIONS = (
    "sagemaker:AddTags",
    "sagemaker:CreateEndpointConfig",
    "sagemaker:CreateModel",
    "sagemaker:DeleteEndpointConfig",
    "sagemaker:DeleteModel",
    "sagemaker:DescribeEndpointConfig",
    "sagemaker:DescribeModel",
    "sagemaker:ListTags",
)
SOURCE_ENDPOINT_ACTIONS = (
    "sagemaker:DescribeEndpoint",
    "sagemaker:InvokeEndpoint",
    "sagemaker:InvokeEndpointWithResponseStream",
    "sagemaker:ListTags",
)
SOURCE_MODEL_ACTIONS = (
    "sagemaker:DescribeEndpointConfig",
    "sagemaker:DescribeModel",
    "sagemaker:ListTags",
)
LIST_ACTIONS = ("sagemaker:ListEndpointConfigs", "sagemaker:ListEndpoints", "sagemaker:ListModels")
PARAMETER_READ_ACTIONS = ("ssm:GetParameter", "ssm:GetParametersByPath")
PARAMETER_WRITE_ACTIONS = ("ssm:AddTagsToResource", "ssm:PutParameter")
LOG_READ_ACTIONS = ("logs:DescribeLogStreams", "logs:FilterLogEvents", "logs:GetLogEvents")
AUTOSCALING_ACTIONS = (
    "application-autoscaling:DeleteScalingPolicy",
    "application-autoscaling:DeregisterScalableTarget",
    "application-autoscaling:DescribeScalableTargets",
    "application-autoscaling:DescribeScalingPolicies",
    "application-autoscaling:PutScalingPolicy",
    "application-autoscaling:RegisterScalableTarget",
)
QUOTA_ACTIONS = (
    "servicequotas:ListAWSDefaultServiceQuotas",
    "servicequotas:ListServiceQuotas",
)

NO_RESOURCE_LEVEL = (
    "the actions have no resource-level permissions (Service Authorization Reference)"
)
WILDCARD_REASONS = {
    "ListSageMaker": f"SageMaker List*: {NO_RESOURCE_LEVEL}; they return names and ARNs only.",
    "Autoscaling": (
        "Application Auto Scaling names a scalable target by an id it generates at "
        "registration, unknown before; registering an endpoint variant also needs SageMaker "
        "DescribeEndpoint/UpdateEndpointWeightsAndCapacities on it (Application Auto Scaling "
        "user guide), granted on the stage's endpoint only."
    ),
    "DescribeAlarms": f"cloudwatch:DescribeAlarms is read-only; {NO_RESOURCE_LEVEL} here.",
    "DoctorReadsQuotas": f"Service Quotas List*: {NO_RESOURCE_LEVEL}; read-only.",
    "DescribeRegionEndpoints": (
        "Read-only DescribeEndpoint/DescribeEndpointConfig on the region's endpoints: the "
        "doctor counts the instances they hold against the quota. No model environment."
    ),
    "OwnManifestRead": "The stage's own SSM path /peagle-deploy/<stage>/ only.",
    "OwnManifestWrite": "The stage's own SSM path /peagle-deploy/<stage>/ only.",
    "SourceManifestRead": "The promotion source's SSM path /peagle-deploy/<source>/ only.",
    "OwnEndpointLogs": "Log streams (generated names) of the stage's endpoint log group only.",
    "SourceEndpointLogs": "Log streams of the promotion source's endpoint log group only.",
    "PassOwnExecutionRoleToSageMaker": (
        "Only roles tagged peagle:stage=<stage>, only to sagemaker.amazonaws.com."
    ),
    "DoctorChecksOwnExecutionRole": "Only roles tagged peagle:stage=<stage>; read-only.",
    "AutoscalingAlarms": "The target-tracking alarms of the stage's endpoint only.",
    "DoctorReadsModelData": "The model and drafter S3 prefixes of the stage's plans only.",
}


@dataclass(frozen=True)
class StageResources:
    """What one stage's plan names: everything its deploy role is scoped to."""

    stage: str
    region: str
    endpoint_name: str
    create_model: Mapping[str, Any] = field(default_factory=dict)
    """The stage's CreateModel request (its S3 locations and image, for the doctor)."""
    execution_role_arn: str | None = None
    """The spec's execution role; None: roles tagged `peagle:stage=<stage>`."""
    expected_bucket_owner: str | None = None
    """The spec's bucket owner; None: the account of the CI stack."""
    secret_refs: Mapping[str, str] = field(default_factory=dict)
    """The plan's `secrets` (NAME -> ARN[:json-key]): read at CreateModel time."""


@dataclass(frozen=True)
class Arns:
    """ARN builder for one account and partition."""

    partition: str
    account: str

    def sagemaker(self, region: str, resource: str) -> str:
        return f"arn:{self.partition}:sagemaker:{region}:{self.account}:{resource}"

    def endpoint(self, r: StageResources) -> str:
        return self.sagemaker(r.region, f"endpoint/{r.endpoint_name}")

    def derived(self, r: StageResources) -> list[str]:
        """The stage's endpoint configs and models: the stable prefix and exactly
        DIGEST_LEN more characters, so `<endpoint>-mirror` and longer names never match."""
        digest = "?" * DIGEST_LEN
        return [
            self.sagemaker(r.region, f"endpoint-config/{derived_prefix(r.endpoint_name, 'c')}")
            + digest,
            self.sagemaker(r.region, f"model/{derived_prefix(r.endpoint_name, 'm')}") + digest,
        ]

    def parameters(self, r: StageResources) -> list[str]:
        path = f"{PARAMETER_ROOT}/{r.stage}".lstrip("/")
        base = f"arn:{self.partition}:ssm:{r.region}:{self.account}:parameter/{path}"
        return [base, f"{base}/*"]

    def log_group(self, r: StageResources) -> list[str]:
        base = (
            f"arn:{self.partition}:logs:{r.region}:{self.account}:log-group:"
            f"{endpoint_log_group_name(r.endpoint_name)}"
        )
        return [base, f"{base}:*"]

    def role(self, name: str) -> str:
        return f"arn:{self.partition}:iam::{self.account}:role/{name}"


def _statement(
    sid: str,
    actions: Sequence[str],
    resources: Sequence[str],
    conditions: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    statement: dict[str, Any] = {
        "Sid": sid,
        "Effect": "Allow",
        "Action": sorted(set(actions)),
        "Resource": sorted(set(resources)) if len(set(resources)) > 1 else resources[0],
    }
    if conditions:
        statement["Condition"] = dict(conditions)
    return statement


def _s3_statements(arns: Arns, stages: Sequence[StageResources]) -> list[dict[str, Any]]:
    """The doctor's reads of the model and drafter locations, only in buckets of the
    expected owner (`s3:ResourceAccount`; JumpStart's own buckets, owned by AWS, apart)."""
    objects: dict[str | None, set[str]] = {}
    buckets: dict[str | None, set[str]] = {}
    for stage in stages:
        default = stage.expected_bucket_owner or arns.account
        for r in s3_reads(stage.create_model):
            owner = bucket_owner(r.bucket, default)
            objects.setdefault(owner, set()).add(f"arn:{arns.partition}:s3:::{r.object_pattern}")
            buckets.setdefault(owner, set()).add(f"arn:{arns.partition}:s3:::{r.bucket}")
    out = []
    for index, owner in enumerate(sorted(objects, key=lambda o: o or "")):
        suffix = str(index) if index else ""
        condition = owner_condition(owner)
        out.append(
            _statement(
                f"DoctorReadsModelData{suffix}", ["s3:GetObject"], sorted(objects[owner]), condition
            )
        )
        out.append(
            _statement(
                f"DoctorListsModelBuckets{suffix}",
                ["s3:ListBucket"],
                sorted(buckets[owner]),
                condition,
            )
        )
    return out


def _ecr_statement(arns: Arns, models: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    repos = {r.arn(arns.partition) for m in models for r in ecr_repositories(m)}
    if not repos:
        return []
    return [
        _statement("DoctorReadsImage", ["ecr:BatchGetImage", "ecr:DescribeImages"], sorted(repos))
    ]


def deploy_statements(
    arns: Arns, own: StageResources, source: StageResources | None
) -> list[dict[str, Any]]:
    """The identity-policy statements of `own`'s deploy role (JSON, no tokens needed)."""
    endpoint = arns.endpoint(own)
    region_endpoints = arns.sagemaker(own.region, "endpoint/*")
    region_configs = arns.sagemaker(own.region, "endpoint-config/*")
    statements = [
        _statement("OwnEndpoint", OWN_ENDPOINT_ACTIONS, [endpoint]),
        _statement("OwnConfigsAndModels", OWN_MODEL_ACTIONS, arns.derived(own)),
        # ListEndpoints/ListEndpointConfigs/ListModels have no resource-level permissions.
        _statement("ListSageMaker", LIST_ACTIONS, ["*"]),
        # Read-only and without any model environment: the doctor's capacity check counts
        # the instances every endpoint of the region holds.
        _statement(
            "DescribeRegionEndpoints",
            ["sagemaker:DescribeEndpoint", "sagemaker:DescribeEndpointConfig"],
            [region_endpoints, region_configs],
        ),
        _statement("OwnManifestRead", PARAMETER_READ_ACTIONS, arns.parameters(own)),
        _statement("OwnManifestWrite", PARAMETER_WRITE_ACTIONS, arns.parameters(own)),
        _statement("OwnEndpointLogs", LOG_READ_ACTIONS, arns.log_group(own)),
    ]

    # --- the execution role: passed to SageMaker only, and only the stage's own ----
    if own.execution_role_arn:
        role_resources, role_conditions = [own.execution_role_arn], {}
    else:
        role_resources = [arns.role("*")]
        role_conditions = {"StringEquals": {f"aws:ResourceTag/{STAGE_TAG}": own.stage}}
    statements.append(
        _statement(
            "PassOwnExecutionRoleToSageMaker",
            ["iam:PassRole"],
            role_resources,
            {
                "StringEquals": {
                    "iam:PassedToService": SAGEMAKER_SERVICE,
                    **role_conditions.get("StringEquals", {}),
                }
            },
        )
    )
    statements.append(
        _statement(
            "DoctorChecksOwnExecutionRole",
            ["iam:GetRole", "iam:SimulatePrincipalPolicy"],
            role_resources,
            role_conditions,
        )
    )

    # --- autoscaling of the stage's endpoint -------------------------------------------
    statements += [
        _statement("Autoscaling", AUTOSCALING_ACTIONS, ["*"]),
        _statement(
            "AutoscalingAlarms",
            ["cloudwatch:DeleteAlarms", "cloudwatch:PutMetricAlarm"],
            [
                f"arn:{arns.partition}:cloudwatch:{own.region}:{arns.account}:alarm:"
                f"TargetTracking-endpoint/{own.endpoint_name}/*"
            ],
        ),
        _statement("DescribeAlarms", ["cloudwatch:DescribeAlarms"], ["*"]),
        _statement(
            "AutoscalingServiceLinkedRole",
            ["iam:CreateServiceLinkedRole"],
            [arns.role(f"aws-service-role/{AUTOSCALING_SLR_SERVICE}/{AUTOSCALING_SLR_NAME}")],
            {"StringEquals": {"iam:AWSServiceName": AUTOSCALING_SLR_SERVICE}},
        ),
        _statement("DoctorReadsQuotas", QUOTA_ACTIONS, ["*"]),
    ]

    # --- the promotion source: read and invoke, nothing else -----------------------------
    stages = [own]
    if source is not None:
        statements += [
            _statement("SourceEndpoint", SOURCE_ENDPOINT_ACTIONS, [arns.endpoint(source)]),
            _statement("SourceConfigsAndModels", SOURCE_MODEL_ACTIONS, arns.derived(source)),
            _statement("SourceManifestRead", PARAMETER_READ_ACTIONS, arns.parameters(source)),
            _statement("SourceEndpointLogs", LOG_READ_ACTIONS, arns.log_group(source)),
        ]
        stages.append(source)
    # --- secrets by reference: read just before CreateModel, exactly these ARNs ----------
    secret_arns = sorted(
        {":".join(ref.split(":")[:7]) for stage in stages for ref in stage.secret_refs.values()}
    )
    if secret_arns:
        statements.append(
            _statement("ReadTheModelsSecrets", ["secretsmanager:GetSecretValue"], secret_arns)
        )
    statements += _s3_statements(arns, stages)
    statements += _ecr_statement(arns, [s.create_model for s in stages])
    return statements


def trust_conditions(repo: GitHubRepo, stage: str, branch: str) -> dict[str, Any]:
    """Only ID tokens GitHub issued for STS to a job in this repository's `stage`
    environment, in a run of `branch`.

    A job bound to an environment gets `sub` = `repo:OWNER/REPO:environment:NAME`, which
    does not name the branch; the `ref` claim does, and STS offers it as the condition key
    `token.actions.githubusercontent.com:ref` (Service Authorization Reference, AWS STS,
    AssumeRoleWithWebIdentity), so a run of another branch cannot use the role even where
    the environment's deployment-branch rule was left open.
    """
    return {
        "StringEquals": {
            f"{GITHUB_OIDC_HOST}:aud": STS_AUDIENCE,
            f"{GITHUB_OIDC_HOST}:sub": repo.environment_subject(stage),
            f"{GITHUB_OIDC_HOST}:ref": f"refs/heads/{branch}",
        }
    }


class StageDeployRole(Construct):
    """The role one stage's CI jobs assume with GitHub's ID token (OIDC, no stored keys).

    Trust: `sts:AssumeRoleWithWebIdentity` from the account's GitHub OIDC provider when the
    token's `aud` is STS, its `sub` is `repo:OWNER/REPO:environment:<stage>` and its `ref`
    is the deploy branch, compared with StringEquals. Permissions: `deploy_statements` as
    one inline policy.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        repo: GitHubRepo,
        branch: str,
        provider_arn: str,
        arns: Arns,
        own: StageResources,
        source: StageResources | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.stage = own.stage
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.FederatedPrincipal(
                provider_arn,
                conditions=trust_conditions(repo, own.stage, branch),
                assume_role_action="sts:AssumeRoleWithWebIdentity",
            ),
            description=(
                f"peagle-deploy CI: deploys stage {own.stage} (endpoint {own.endpoint_name}) "
                f"from {repo} environment {own.stage} on {branch}"
            ),
            max_session_duration=Duration.hours(MAX_SESSION_HOURS),
        )
        self.statements = deploy_statements(arns, own, source)
        self.policy = iam.Policy(
            self,
            "Policy",
            roles=[self.role],
            statements=[iam.PolicyStatement.from_json(s) for s in self.statements],
        )
        stack = Stack.of(self)
        for statement in self.statements:
            resources = statement["Resource"]
            for resource in [resources] if isinstance(resources, str) else resources:
                if "*" in resource:
                    acknowledge(
                        self.policy,
                        "AwsSolutions-IAM5",
                        WILDCARD_REASONS[statement["Sid"].rstrip("0123456789")],
                        "Resource::" + nag_text(stack, resource),
                    )

    @property
    def role_arn(self) -> str:
        return self.role.role_arn
