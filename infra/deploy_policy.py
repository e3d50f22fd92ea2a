"""The identity policy of one stage's CI deploy role, as JSON statements (no aws_cdk).

What the role may do is derived from the stage's plan, as the execution role's is
(infra/execution_policy.py): its endpoint name, the content-derived model, config and
experiment names (`peagle_deploy.access.endpoint_grants`, the one spelling of every name
pattern), its `/peagle-deploy/<stage>/` parameters, its log group. It covers what
`peagle deploy`, `status`, `list`, `invoke`, `delete`, `peagle promote`, `peagle
experiment` and `peagle doctor` call (tests/infra/test_infra_call_ledger.py runs them as
this role against the emulator, records every call, and has an outside IAM evaluator
decide each one against the synthesized policy):

- SageMaker: create, update, describe, tag and delete the stage's endpoint, configs and
  models; an endpoint config only of the stage's own models (`sagemaker:ModelArn`); the
  endpoint created or updated only onto the stage's own configs (both are required);
  invoke its endpoint; list (no resource-level permissions exist for List*); describe
  every endpoint and endpoint config of the region (read-only: the doctor counts the
  instances the account's endpoints hold against the quota; DescribeModel, which shows a
  model's environment, stays on the stage's own models).
- The promotion source stage (`promote_from`): describe, list tags of and invoke its
  endpoint, describe its configs and list their and its models' tags, read its manifest
  and its endpoint's logs; never its secrets (stage-owned: the stage reads only the ARNs
  of its own plan) nor its models (DescribeModel shows their resolved secrets).
- `iam:PassRole` only to SageMaker (`iam:PassedToService`) and only of the stage's
  execution role: the spec's `execution_role_arn`, or any role tagged
  `peagle:stage=<stage>`; the doctor may GetRole and SimulatePrincipalPolicy on it, and
  SimulatePrincipalPolicy on the deploy role itself (the caller's own permissions for
  the coming run).
- Experiments on the stage's own endpoint (`experiment_statements`): its own
  InferenceExperiments, created only tagged with the stage; the stage's experiment role
  (tagged `peagle:experiment-stage=<stage>`, never `peagle:stage`) passed to SageMaker;
  the metric reads of `status`; and what `peagle doctor --stage` reads.
- SSM: read and write only under `/peagle-deploy/<stage>/` (PutParameter, never
  DeleteParameter: the versions of a record are the stage's audit trail).
- Logs: the endpoint's log group (failure reports, acceptance metrics).
- Autoscaling of SageMaker endpoint variants only (`application-autoscaling:
  service-namespace` and `scalable-dimension`) whose scalable target is tagged with the
  stage (`aws:ResourceTag`; a new target must be registered with that tag,
  `aws:RequestTag`; an experiment re-registers a tagged one to hold its scaling), the
  stage's endpoint's SageMaker calls and target-tracking alarms.
- The doctor's reads: the model and drafter locations of the stage and of its source (a
  promotion deploys the source's model), the image's repository, SageMaker's quotas.

No managed policies; nothing on `*` but actions that have no resource-level permissions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from peagle_deploy.access import (
    Grant,
    bucket_owner,
    ecr_repositories,
    endpoint_grants,
    owner_condition,
    s3_reads,
)
from peagle_deploy.naming import EXPERIMENT_STAGE_TAG, STAGE_TAG
from peagle_deploy.records.paths import PARAMETER_ROOT
from peagle_deploy.stage_training import TRAINING_LOG_GROUP, TRAINING_STAGE_TAG, StageTraining
from peagle_deploy.stages import stack_name

SAGEMAKER_SERVICE = "sagemaker.amazonaws.com"
AUTOSCALING_SLR_SERVICE = "sagemaker.application-autoscaling.amazonaws.com"
AUTOSCALING_SLR_NAME = "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
SCALING_NAMESPACE = "sagemaker"
SCALING_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
"""What the plan registers (peagle_deploy/plan/render.py, `autoscaling`)."""

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
SOURCE_MODEL_ACTIONS = ("sagemaker:DescribeEndpointConfig", "sagemaker:ListTags")
"""Never DescribeModel: it shows the source model's environment, with the source stage's
resolved secrets (a promotion compares the source's config, `promote.store`)."""
ENDPOINT_ON_CONFIG_ACTIONS = ("sagemaker:CreateEndpoint", "sagemaker:UpdateEndpoint")
"""CreateEndpoint and UpdateEndpoint require the endpoint AND the endpoint config
(Service Authorization Reference): on the stage's own configs only, so a stage's
endpoint can never be pointed at another stage's config (its model and secrets)."""
LIST_ACTIONS = ("sagemaker:ListEndpointConfigs", "sagemaker:ListEndpoints", "sagemaker:ListModels")
PARAMETER_READ_ACTIONS = ("ssm:GetParameter", "ssm:GetParametersByPath")
PARAMETER_WRITE_ACTIONS = ("ssm:AddTagsToResource", "ssm:PutParameter")
"""Never DeleteParameter: a record's versions are the stage's audit trail (docs/ci.md);
`peagle delete` run as the role removes the endpoint and says the record stays."""
LOG_READ_ACTIONS = ("logs:DescribeLogStreams", "logs:FilterLogEvents", "logs:GetLogEvents")
AUTOSCALING_REGISTER_ACTIONS = ("application-autoscaling:RegisterScalableTarget",)
AUTOSCALING_TARGET_ACTIONS = (
    "application-autoscaling:DeleteScalingPolicy",
    "application-autoscaling:DeregisterScalableTarget",
    "application-autoscaling:PutScalingPolicy",
    # an experiment suspends and restores a registered target's scaling (SuspendedState),
    # a registration that names no tags: only of a target tagged with the stage
    "application-autoscaling:RegisterScalableTarget",
)
AUTOSCALING_READ_ACTIONS = (
    "application-autoscaling:DescribeScalableTargets",
    "application-autoscaling:DescribeScalingPolicies",
    "application-autoscaling:DescribeScheduledActions",
)
OWN_EXPERIMENT_ACTIONS = (
    "sagemaker:DeleteInferenceExperiment",
    "sagemaker:DescribeInferenceExperiment",
    "sagemaker:StopInferenceExperiment",
    "sagemaker:UpdateInferenceExperiment",
)
"""What `peagle experiment` does to the stage's own InferenceExperiments (content-derived
names) after creating one: read it, set its end, stop it, replace a finished one."""
METRIC_READ_ACTIONS = ("cloudwatch:GetMetricData", "cloudwatch:ListMetrics")
"""`peagle experiment status`: SageMaker's per-variant metrics, and detailed
observability's PromQL (which needs both)."""
OWN_TRAINING_JOB_ACTIONS = (
    "sagemaker:DescribeTrainingJob",
    "sagemaker:StopTrainingJob",
    # `peagle train` compares an existing job's tags before adopting or resuming it
    "sagemaker:ListTags",
)
TRAINING_ENCRYPTION = {
    "Bool": {
        "sagemaker:NetworkIsolation": "true",
        "sagemaker:InterContainerTrafficEncryption": "true",
    },
}
"""A training job of the stage runs with network isolation and encrypted traffic between
its instances, or is not created (the condition keys of sagemaker:CreateTrainingJob in the
Service Authorization Reference; a request without them fails the condition)."""
QUOTA_ACTIONS = (
    "servicequotas:ListAWSDefaultServiceQuotas",
    "servicequotas:ListServiceQuotas",
)

NO_RESOURCE_LEVEL = (
    "the actions have no resource-level permissions (Service Authorization Reference)"
)
WILDCARD_REASONS = {
    "ListSageMaker": f"SageMaker List*: {NO_RESOURCE_LEVEL}; they return names and ARNs only.",
    "AutoscalingRegister": (
        "Application Auto Scaling names a scalable target by an id it generates at "
        "registration, unknown before, and offers no condition key on the resource id: "
        "registering is limited to SageMaker endpoint variants (service-namespace, "
        "scalable-dimension), the new target tagged with the stage (aws:RequestTag), an "
        "existing one only if tagged with the stage (aws:ResourceTag, if it has the tag)."
    ),
    "AutoscalingOwnTargets": (
        "Scalable targets have generated ids: the policy and deregistration writes are "
        "limited to SageMaker endpoint variants whose target is tagged with the stage "
        "(aws:ResourceTag)."
    ),
    "AutoscalingReads": f"Application Auto Scaling Describe*: {NO_RESOURCE_LEVEL}; read-only.",
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
    "OwnEndpointOnOwnConfigs": "The stage's own endpoint configs (content-derived names).",
    "AutoscalingAlarms": "The target-tracking alarms of the stage's endpoint only.",
    "DoctorReadsModelData": "The model and drafter S3 prefixes of the stage's plans only.",
    "OwnExperiments": "The stage's own InferenceExperiments (content-derived names) only.",
    "CreateOwnExperiments": (
        "The stage's own InferenceExperiments (content-derived names), tagged with the stage."
    ),
    "PassOwnExperimentRoleToSageMaker": (
        "Only roles tagged peagle:experiment-stage=<stage>, only to sagemaker.amazonaws.com."
    ),
    "DoctorReadsOwnExperimentRole": (
        "Only roles tagged peagle:experiment-stage=<stage>; read-only (their tags)."
    ),
    "ReadMetrics": (
        "cloudwatch:GetMetricData and ListMetrics name no resource (their dataset type is "
        "optional, and the endpoint is a metric dimension IAM cannot see): read-only."
    ),
    "ListExperiments": f"sagemaker:ListInferenceExperiments: {NO_RESOURCE_LEVEL}.",
    "DoctorReadsOwnStack": "The stage's own stack (its id is CloudFormation's); read-only.",
    "OwnTrainingJobs": "The stage's own training jobs (its job_prefix) only.",
    "CreateOwnTrainingJobs": (
        "The stage's own training jobs (its job_prefix) only, with network isolation, "
        "inter-container encryption and a KMS key of the account (conditions)."
    ),
    "TagOwnTrainingJobsOnCreate": (
        "The stage's own training jobs only, and only in their CreateTrainingJob "
        "(sagemaker:TaggingAction)."
    ),
    "ListTrainingJobs": f"sagemaker:ListTrainingJobs: {NO_RESOURCE_LEVEL}.",
    "PassOwnTrainingRoleToSageMaker": (
        "Only roles tagged peagle:training-stage=<stage>, only to sagemaker.amazonaws.com."
    ),
    "DoctorReadsOwnTrainingRole": (
        "Only roles tagged peagle:training-stage=<stage>; read-only (doctor: the role and a "
        "simulation of its grants on the job's prefixes)."
    ),
    "DoctorReadsTrainingInputs": (
        "The objects under the stage's own target and data prefixes only (doctor: the "
        "tokenizer's chat template, the conversations)."
    ),
    "DoctorDescribesOwnKeys": (
        "KMS keys are named by generated ids: only keys tagged peagle:stage=<stage>; "
        "read-only (their state)."
    ),
    "OwnTrainingLogs": "Log streams of the stage's own training jobs (its job_prefix) only.",
    "TrainingLogStreamNames": (
        "logs:DescribeLogStreams names only the log group: the names (never the events) "
        "of /aws/sagemaker/TrainingJobs' streams, to find a job's generated stream names."
    ),
    "ReadOwnDrafterMetadata": (
        "The drafter metadata file of the stage's own jobs under its output prefix only."
    ),
    "DoctorListsTrainingPrefixes": "Listing (names only) of the stage's training prefixes.",
    "DecryptOwnTrainingObjects": (
        "KMS keys are named by generated ids: only keys tagged peagle:stage=<stage>, only "
        "through S3 (reading the stage's own drafter metadata)."
    ),
    "DescribeRegionExperiments": (
        "Read-only DescribeInferenceExperiment of the region's experiments: `peagle doctor "
        "--stage` finds which one runs on the stage's endpoint, whoever started it (a "
        "listing names no endpoint)."
    ),
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
    training: StageTraining | None = None
    """The stage's `training:` block (None: the role may not train)."""
    training_vpc: Mapping[str, Any] | None = None
    """The VpcConfig its training jobs must name (`stage_training.training_vpc`)."""


@dataclass(frozen=True)
class Arns:
    """ARNs of one account and partition; a stage's own come from its endpoint's grants."""

    partition: str
    account: str

    def of(self, r: StageResources, grant: Grant) -> str:
        return grant.arn(self.partition, r.region, self.account)

    def sagemaker(self, region: str, resource: str) -> str:
        return Grant("sagemaker", resource).arn(self.partition, region, self.account)

    def endpoint(self, r: StageResources) -> str:
        return self.of(r, endpoint_grants(r.endpoint_name).endpoint)

    def models(self, r: StageResources) -> str:
        return self.of(r, endpoint_grants(r.endpoint_name).models)

    def derived(self, r: StageResources) -> list[str]:
        """The stage's endpoint configs and models: the head and exactly DIGEST_LEN more
        characters, so `<endpoint>-mirror` and another endpoint's names never match."""
        grants = endpoint_grants(r.endpoint_name)
        return [self.of(r, grants.configs), self.of(r, grants.models)]

    def parameters(self, r: StageResources) -> list[str]:
        path = f"{PARAMETER_ROOT}/{r.stage}".lstrip("/")
        base = f"arn:{self.partition}:ssm:{r.region}:{self.account}:parameter/{path}"
        return [base, f"{base}/*"]

    def log_group(self, r: StageResources) -> list[str]:
        grants = endpoint_grants(r.endpoint_name)
        return [self.of(r, grants.log_group), self.of(r, grants.log_streams)]

    def scaling_alarms(self, r: StageResources) -> str:
        return self.of(r, endpoint_grants(r.endpoint_name).scaling_alarms)

    def scalable_targets(self, region: str) -> str:
        return Grant("application-autoscaling", "scalable-target/*").arn(
            self.partition, region, self.account
        )

    def role(self, name: str) -> str:
        return f"arn:{self.partition}:iam::{self.account}:role/{name}"

    def stack(self, region: str, name: str) -> str:
        """Every stack of that name (its id is CloudFormation's)."""
        return f"arn:{self.partition}:cloudformation:{region}:{self.account}:stack/{name}/*"


def statement(
    sid: str,
    actions: Sequence[str],
    resources: Sequence[str],
    conditions: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One Allow statement; actions and resources sorted and without repeats."""
    out: dict[str, Any] = {
        "Sid": sid,
        "Effect": "Allow",
        "Action": sorted(set(actions)),
        "Resource": sorted(set(resources)) if len(set(resources)) > 1 else resources[0],
    }
    if conditions:
        out["Condition"] = dict(conditions)
    return out


def own_statements(arns: Arns, own: StageResources) -> list[dict[str, Any]]:
    """The stage's endpoint, configs, models, manifest and logs; the region's reads."""
    configs, _models = arns.derived(own)
    return [
        statement("OwnEndpoint", OWN_ENDPOINT_ACTIONS, [arns.endpoint(own)]),
        statement("OwnConfigsAndModels", OWN_MODEL_ACTIONS, arns.derived(own)),
        statement("OwnEndpointOnOwnConfigs", ENDPOINT_ON_CONFIG_ACTIONS, [configs]),
        # A config of the stage's own name may only serve the stage's own models: a
        # config that serves another stage's model would run that model's environment.
        statement(
            "OwnConfigsOfOwnModels",
            ["sagemaker:CreateEndpointConfig"],
            [configs],
            {"ArnLike": {"sagemaker:ModelArn": arns.models(own)}},
        ),
        # ListEndpoints/ListEndpointConfigs/ListModels have no resource-level permissions.
        statement("ListSageMaker", LIST_ACTIONS, ["*"]),
        # Read-only and without any model environment: the doctor's capacity check counts
        # the instances every endpoint of the region holds.
        statement(
            "DescribeRegionEndpoints",
            ["sagemaker:DescribeEndpoint", "sagemaker:DescribeEndpointConfig"],
            [
                arns.sagemaker(own.region, "endpoint/*"),
                arns.sagemaker(own.region, "endpoint-config/*"),
            ],
        ),
        statement("OwnManifestRead", PARAMETER_READ_ACTIONS, arns.parameters(own)),
        statement("OwnManifestWrite", PARAMETER_WRITE_ACTIONS, arns.parameters(own)),
        statement("OwnEndpointLogs", LOG_READ_ACTIONS, arns.log_group(own)),
    ]


def experiment_statements(arns: Arns, own: StageResources) -> list[dict[str, Any]]:
    """`peagle experiment` on the stage's own endpoint (docs/ci.md, "Experiments from
    CI"): its own InferenceExperiments, created only tagged with the stage (their
    `aws:RequestTag`, the Service Authorization Reference's tag-on-create key), the
    stage's experiment role passed to SageMaker and no other (roles tagged
    `peagle:experiment-stage=<stage>`), the metrics status reads; the candidate's model and
    a split's config are own models and configs, the scaling hold own targets, the
    record own parameters. And what `peagle doctor --stage` reads: the stage stack's
    outputs, which experiment runs on the endpoint."""
    experiments = arns.of(own, endpoint_grants(own.endpoint_name).experiments)
    passed = {
        "iam:PassedToService": SAGEMAKER_SERVICE,
        f"aws:ResourceTag/{EXPERIMENT_STAGE_TAG}": own.stage,
    }
    return [
        statement("OwnExperiments", OWN_EXPERIMENT_ACTIONS, [experiments]),
        statement(
            "CreateOwnExperiments",
            ["sagemaker:CreateInferenceExperiment"],
            [experiments],
            {"StringEquals": {f"aws:RequestTag/{STAGE_TAG}": own.stage}},
        ),
        statement(
            "PassOwnExperimentRoleToSageMaker",
            ["iam:PassRole"],
            [arns.role("*")],
            {"StringEquals": passed},
        ),
        statement(
            "DoctorReadsOwnExperimentRole",
            ["iam:GetRole"],
            [arns.role("*")],
            {"StringEquals": {f"aws:ResourceTag/{EXPERIMENT_STAGE_TAG}": own.stage}},
        ),
        statement("ReadMetrics", METRIC_READ_ACTIONS, ["*"]),
        statement("ListExperiments", ["sagemaker:ListInferenceExperiments"], ["*"]),
        statement(
            "DescribeRegionExperiments",
            ["sagemaker:DescribeInferenceExperiment"],
            [arns.sagemaker(own.region, "inference-experiment/*")],
        ),
        statement(
            "DoctorReadsOwnStack",
            ["cloudformation:DescribeStacks"],
            [arns.stack(own.region, stack_name(own.stage))],
        ),
    ]


def _create_training_conditions(arns: Arns, own: StageResources) -> dict[str, Any]:
    """Network isolation and encryption always; an output key (and a volume key, where
    the instance has an EBS volume) of the stage's account and region; the stage's VPC and
    instance types when it names them. `sagemaker:VolumeKmsKeyArn` is IfExists: botocore
    (ResourceConfig.VolumeKmsKeyId) says a volume key cannot be requested for instance
    types with local storage, which many GPU training instances are."""
    assert own.training is not None
    keys = f"arn:{arns.partition}:kms:{own.region}:{arns.account}:key/*"
    conditions: dict[str, Any] = {
        **TRAINING_ENCRYPTION,
        "ArnLike": {"sagemaker:OutputKmsKeyArn": keys},
        "ArnLikeIfExists": {"sagemaker:VolumeKmsKeyArn": keys},
    }
    every: dict[str, list[str]] = {}
    if own.training.instance_types:
        every["sagemaker:InstanceTypes"] = sorted(own.training.instance_types)
    vpc = own.training_vpc or {}
    if vpc:
        every["sagemaker:VpcSubnets"] = sorted(vpc.get("Subnets", []))
        every["sagemaker:VpcSecurityGroupIds"] = sorted(vpc.get("SecurityGroupIds", []))
    if every:
        # ForAllValues is true of an absent key: the key must be there too.
        conditions["ForAllValues:StringEquals"] = every
        conditions["Null"] = {k: "false" for k in every}
    return conditions


def training_statements(arns: Arns, own: StageResources) -> list[dict[str, Any]]:
    """`peagle train` on the stage's own job names (its `training:` block): create them
    only isolated and encrypted, tag them only as they are created, describe and stop
    them, read their log streams and their drafter's metadata; pass the stage's training
    role to SageMaker and no other. What SageMaker then reads and writes is the training
    role's (infra/training.py), which only the stage's own prefixes and key allow."""
    t = own.training
    if t is None:
        return []
    jobs = arns.sagemaker(own.region, t.grants().jobs)
    group = f"arn:{arns.partition}:logs:{own.region}:{arns.account}:log-group:{TRAINING_LOG_GROUP}"
    streams = f"arn:{arns.partition}:logs:{own.region}:{arns.account}:{t.grants().log_streams}"
    passed = {
        "iam:PassedToService": SAGEMAKER_SERVICE,
        f"aws:ResourceTag/{TRAINING_STAGE_TAG}": own.stage,
    }
    return [
        statement(
            "CreateOwnTrainingJobs",
            ["sagemaker:CreateTrainingJob"],
            [jobs],
            _create_training_conditions(arns, own),
        ),
        statement(
            "TagOwnTrainingJobsOnCreate",
            ["sagemaker:AddTags"],
            [jobs],
            {"StringEquals": {"sagemaker:TaggingAction": "CreateTrainingJob"}},
        ),
        statement("OwnTrainingJobs", OWN_TRAINING_JOB_ACTIONS, [jobs]),
        statement("ListTrainingJobs", ["sagemaker:ListTrainingJobs"], ["*"]),
        statement(
            "PassOwnTrainingRoleToSageMaker",
            ["iam:PassRole"],
            [arns.role("*")],
            {"StringEquals": passed},
        ),
        statement(
            "DoctorReadsOwnTrainingRole",
            ["iam:GetRole", "iam:SimulatePrincipalPolicy"],
            [arns.role("*")],
            {"StringEquals": {f"aws:ResourceTag/{TRAINING_STAGE_TAG}": own.stage}},
        ),
        statement("OwnTrainingLogs", ["logs:GetLogEvents"], [streams]),
        statement("TrainingLogStreamNames", ["logs:DescribeLogStreams"], [group]),
        *training_read_statements(arns, own.region, t),
    ]


def training_read_statements(arns: Arns, region: str, t: StageTraining) -> list[dict[str, Any]]:
    """What `peagle train` and its doctor read of the stage's training data: the
    channels' objects (the target's tokenizer config, the conversations) and the
    drafter's metadata, SSE-KMS with the stage's key read through S3; the listing of its
    prefixes; the key's state; SageMaker's quotas."""
    listed: dict[str, set[str]] = {}
    for read in (*t.reads, *t.writes):
        listed.setdefault(read.bucket, set()).add(f"{read.key}*")
    own_account = {"s3:ResourceAccount": arns.account}
    channels = [f"arn:{arns.partition}:s3:::{r.object_pattern}" for r in (t.target, t.data)]
    return [
        statement(
            "DoctorReadsTrainingInputs", ["s3:GetObject"], channels, {"StringEquals": own_account}
        ),
        statement(
            "ReadOwnDrafterMetadata",
            ["s3:GetObject"],
            [f"arn:{arns.partition}:s3:::{t.grants().metadata}"],
            {"StringEquals": own_account},
        ),
        *[
            statement(
                f"DoctorListsTrainingPrefixes{i or ''}",
                ["s3:ListBucket"],
                [f"arn:{arns.partition}:s3:::{bucket}"],
                {"StringLike": {"s3:prefix": sorted(prefixes)}, "StringEquals": own_account},
            )
            for i, (bucket, prefixes) in enumerate(sorted(listed.items()))
        ],
        statement(
            "DecryptOwnTrainingObjects",
            ["kms:Decrypt"],
            [f"arn:{arns.partition}:kms:{region}:{arns.account}:key/*"],
            {
                "StringEquals": {
                    f"aws:ResourceTag/{STAGE_TAG}": t.stage,
                    "kms:ViaService": f"s3.{region}.amazonaws.com",
                }
            },
        ),
        statement(
            "DoctorDescribesOwnKeys",
            ["kms:DescribeKey"],
            [f"arn:{arns.partition}:kms:{region}:{arns.account}:key/*"],
            {"StringEquals": {f"aws:ResourceTag/{STAGE_TAG}": t.stage}},
        ),
    ]


def self_check_statements(self_arn: str | None) -> list[dict[str, Any]]:
    """`peagle doctor` asks iam:SimulatePrincipalPolicy whether the role may make the
    calls of the coming run: of this role itself only."""
    if self_arn is None:
        return []
    return [statement("DoctorSimulatesItself", ["iam:SimulatePrincipalPolicy"], [self_arn])]


def pass_role_statements(arns: Arns, own: StageResources) -> list[dict[str, Any]]:
    """The execution role: passed to SageMaker only, and only the stage's own."""
    if own.execution_role_arn:
        resources, conditions = [own.execution_role_arn], {}
    else:
        resources = [arns.role("*")]
        conditions = {"StringEquals": {f"aws:ResourceTag/{STAGE_TAG}": own.stage}}
    passed = {"iam:PassedToService": SAGEMAKER_SERVICE, **conditions.get("StringEquals", {})}
    return [
        statement(
            "PassOwnExecutionRoleToSageMaker",
            ["iam:PassRole"],
            resources,
            {"StringEquals": passed},
        ),
        statement(
            "DoctorChecksOwnExecutionRole",
            ["iam:GetRole", "iam:SimulatePrincipalPolicy"],
            resources,
            conditions,
        ),
    ]


def autoscaling_statements(arns: Arns, own: StageResources) -> list[dict[str, Any]]:
    """Application Auto Scaling of the stage's SageMaker endpoint variants, and the
    endpoint's alarms.

    Scalable targets are named by generated ids and no condition key names the resource
    id, but the ScalableTarget resource takes `aws:ResourceTag` and RegisterScalableTarget
    `aws:RequestTag` (Service Authorization Reference, Application Auto Scaling): the
    SDK tags a target with its stage when it registers it (`plan.render.autoscaling`),
    and the writes are bound to SageMaker variants (`service-namespace`,
    `scalable-dimension`) of targets tagged with the stage. Registering an existing
    target needs its tag to be the stage's when it has one (RegisterScalableTarget does
    not tag an existing target, so an untagged one registered before targets were
    tagged stays registrable, and only its own stage's CI can tag it: docs/ci.md).
    """
    variants = {
        "application-autoscaling:service-namespace": SCALING_NAMESPACE,
        "application-autoscaling:scalable-dimension": SCALING_DIMENSION,
    }
    stage_tag = {f"aws:ResourceTag/{STAGE_TAG}": own.stage}
    return [
        statement(
            "AutoscalingRegister",
            AUTOSCALING_REGISTER_ACTIONS,
            [arns.scalable_targets(own.region)],
            {
                "StringEquals": {**variants, f"aws:RequestTag/{STAGE_TAG}": own.stage},
                "StringEqualsIfExists": stage_tag,
            },
        ),
        statement(
            "AutoscalingOwnTargets",
            AUTOSCALING_TARGET_ACTIONS,
            [arns.scalable_targets(own.region)],
            {"StringEquals": {**variants, **stage_tag}},
        ),
        statement("AutoscalingReads", AUTOSCALING_READ_ACTIONS, ["*"]),
        statement(
            "AutoscalingAlarms",
            ["cloudwatch:DeleteAlarms", "cloudwatch:PutMetricAlarm"],
            [arns.scaling_alarms(own)],
        ),
        statement("DescribeAlarms", ["cloudwatch:DescribeAlarms"], ["*"]),
        statement(
            "AutoscalingServiceLinkedRole",
            ["iam:CreateServiceLinkedRole"],
            [arns.role(f"aws-service-role/{AUTOSCALING_SLR_SERVICE}/{AUTOSCALING_SLR_NAME}")],
            {"StringEquals": {"iam:AWSServiceName": AUTOSCALING_SLR_SERVICE}},
        ),
        statement("DoctorReadsQuotas", QUOTA_ACTIONS, ["*"]),
    ]


def source_statements(arns: Arns, source: StageResources) -> list[dict[str, Any]]:
    """The promotion source: read and invoke, nothing else."""
    return [
        statement("SourceEndpoint", SOURCE_ENDPOINT_ACTIONS, [arns.endpoint(source)]),
        statement("SourceConfigsAndModels", SOURCE_MODEL_ACTIONS, arns.derived(source)),
        statement("SourceManifestRead", PARAMETER_READ_ACTIONS, arns.parameters(source)),
        statement("SourceEndpointLogs", LOG_READ_ACTIONS, arns.log_group(source)),
    ]


def secret_statements(own: StageResources) -> list[dict[str, Any]]:
    """Secrets by reference: read just before CreateModel, exactly the stage's own ARNs.

    Never the promotion source's: secrets are stage-owned (a promotion binds the target's
    own, `promote.target.target_secrets`), and the source's model is only described.
    """
    secret_arns = sorted({":".join(ref.split(":")[:7]) for ref in own.secret_refs.values()})
    if not secret_arns:
        return []
    return [statement("ReadTheModelsSecrets", ["secretsmanager:GetSecretValue"], secret_arns)]


def s3_statements(arns: Arns, stages: Sequence[StageResources]) -> list[dict[str, Any]]:
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
            statement(
                f"DoctorReadsModelData{suffix}", ["s3:GetObject"], sorted(objects[owner]), condition
            )
        )
        out.append(
            statement(
                f"DoctorListsModelBuckets{suffix}",
                ["s3:ListBucket"],
                sorted(buckets[owner]),
                condition,
            )
        )
    return out


def ecr_statements(arns: Arns, models: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The doctor's reads of the images' repositories."""
    repos = {r.arn(arns.partition) for m in models for r in ecr_repositories(m)}
    if not repos:
        return []
    return [
        statement("DoctorReadsImage", ["ecr:BatchGetImage", "ecr:DescribeImages"], sorted(repos))
    ]


def deploy_statements(
    arns: Arns,
    own: StageResources,
    source: StageResources | None,
    self_arn: str | None = None,
) -> list[dict[str, Any]]:
    """The identity-policy statements of `own`'s deploy role (JSON, no tokens needed);
    `self_arn`: the role's own ARN (doctor simulates it)."""
    stages = [own] if source is None else [own, source]
    return [
        *own_statements(arns, own),
        *pass_role_statements(arns, own),
        *self_check_statements(self_arn),
        *autoscaling_statements(arns, own),
        *experiment_statements(arns, own),
        *training_statements(arns, own),
        *(source_statements(arns, source) if source is not None else []),
        *secret_statements(own),
        *s3_statements(arns, stages),
        *ecr_statements(arns, [s.create_model for s in stages]),
    ]


def wildcard_reason(sid: str) -> str:
    """Why statement `sid` (a numbered one too) names a resource with `*`."""
    return WILDCARD_REASONS[sid.rstrip("0123456789")]
