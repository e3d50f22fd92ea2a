"""The role SageMaker assumes to run a stage's training jobs (CreateTrainingJob's RoleArn).

Derived from the stage's `training:` block (`peagle_deploy.stage_training`) and the
request a training job of the project sends (peagle_train.contract: the `target` and
`data` channels, OutputDataConfig, CheckpointConfig, the training image), as SageMaker's
Developer Guide lists what a training job does with the role ("CreateTrainingJob API:
Execution Role Permissions", sagemaker-roles.md) and the Service Authorization Reference
names the resources (docs/platform-facts.md, "Training: IAM"):

- S3: GetObject of the channels' prefixes, PutObject (and GetObject, a resumed job reads
  its checkpoints) of the output and checkpoint prefixes, ListBucket of those prefixes
  only, in buckets of the stage's account (`s3:ResourceAccount`);
- KMS: the stage's key (the stack's EndpointKey) only: Decrypt, Encrypt and
  GenerateDataKey through S3 (SSE-KMS objects: "kms:Encrypt" for an output key, S3's
  GenerateDataKey/Decrypt for uploads), CreateGrant for the storage volume only through
  SageMaker or EBS and only for an AWS resource (`kms:GrantIsForAWSResource`);
- ECR: pulls of the training image's repository; the token on `*` (no resource level);
- CloudWatch Logs: streams of the stage's own jobs in /aws/sagemaker/TrainingJobs;
  CloudWatch metrics in SageMaker's training namespace only;
- EC2: ENIs in the stage's subnets and security groups when its jobs run in a VPC.

Trust: sagemaker.amazonaws.com, only for this account (`aws:SourceAccount`) and only for
the stage's own training jobs (`aws:SourceArn` = `training-job/<job prefix>*`, the form
the guide's "Cross-Service Confused Deputy Prevention for SageMaker Training Jobs"
shows). The role carries `peagle:training-stage=<stage>` and no `peagle:stage`: only its
own stage's CI role may pass it, and only as a training job's role.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Stack, Tags
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.execution_policy import ExecutionPolicy, Where, volume_key_services, vpc_part
from infra.nag import acknowledge, nag_text
from peagle_deploy.access import ECR_PULL_ACTIONS, S3Read, bucket_owner, owner_condition
from peagle_deploy.naming import STAGE_TAG
from peagle_deploy.stage_training import (
    TRAINING_LOG_GROUP,
    TRAINING_METRICS_NAMESPACE,
    TRAINING_ROLE_TAG,
    TRAINING_STAGE_TAG,
    StageTraining,
    training_vpc,
)

LOG_WRITE_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents")
LOG_GROUP_ACTIONS = ("logs:CreateLogGroup", "logs:DescribeLogStreams")
S3_KEY_ACTIONS = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey")


def _allow(
    sid: str, actions: Sequence[str], resources: Sequence[str], condition: Any = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "Sid": sid,
        "Effect": "Allow",
        "Action": sorted(set(actions)),
        "Resource": sorted(set(resources)),
    }
    if condition:
        out["Condition"] = condition
    return out


def _s3_part(policy: ExecutionPolicy, t: StageTraining, where: Where) -> None:
    """Read the channels, write the output and checkpoints, list only those prefixes."""
    owner = bucket_owner(t.output.bucket, where.account)

    def objects(reads: Sequence[S3Read]) -> list[str]:
        return [f"arn:{where.partition}:s3:::{r.object_pattern}" for r in reads]

    policy.add(
        _allow(
            "ReadTrainingChannels",
            ["s3:GetObject"],
            objects(t.reads + t.writes),
            owner_condition(owner),
        ),
        _allow("WriteTrainingOutput", ["s3:PutObject"], objects(t.writes), owner_condition(owner)),
    )
    prefixes: dict[str, set[str]] = {}
    for read in (*t.reads, *t.writes):
        prefixes.setdefault(read.bucket, set()).add(f"{read.key}*")
    for index, (bucket, listed) in enumerate(sorted(prefixes.items())):
        policy.add(
            _allow(
                f"ListTrainingPrefixes{index}",
                ["s3:ListBucket"],
                [f"arn:{where.partition}:s3:::{bucket}"],
                {"StringLike": {"s3:prefix": sorted(listed)}, **owner_condition(owner)},
            )
        )
    for resource in objects(t.reads + t.writes):
        policy.wildcards.append(
            (
                resource,
                "A training job reads and writes every object under the stage's own "
                "training prefixes (channels, output, checkpoints); only those prefixes.",
            )
        )


def _key_part(policy: ExecutionPolicy, key_arn: str, where: Where) -> None:
    policy.add(
        _allow(
            "StageKeyForTrainingObjects",
            S3_KEY_ACTIONS,
            [key_arn],
            {"StringEquals": {"kms:ViaService": f"s3.{where.region}.amazonaws.com"}},
        ),
        _allow(
            "StageKeyForTrainingVolumes",
            ["kms:CreateGrant"],
            [key_arn],
            {
                "Bool": {"kms:GrantIsForAWSResource": "true"},
                "StringEquals": {"kms:ViaService": volume_key_services(where.region)},
            },
        ),
    )


def _image_logs_metrics(policy: ExecutionPolicy, t: StageTraining, where: Where) -> None:
    region = t.image_region or where.region
    account = t.image_account or where.account
    repo = f"arn:{where.partition}:ecr:{region}:{account}:repository/{t.image_repository}"
    group = where.arn("logs", f"log-group:{TRAINING_LOG_GROUP}")
    streams = where.arn("logs", t.grants().log_streams)
    policy.add(
        _allow("PullTrainingImage", ECR_PULL_ACTIONS, [repo]),
        _allow("EcrAuthToken", ["ecr:GetAuthorizationToken"], ["*"]),
        _allow("TrainingLogGroup", LOG_GROUP_ACTIONS, [group]),
        _allow("WriteOwnJobsLogStreams", LOG_WRITE_ACTIONS, [streams]),
        _allow(
            "PutTrainingMetrics",
            ["cloudwatch:PutMetricData"],
            ["*"],
            {"StringEquals": {"cloudwatch:namespace": TRAINING_METRICS_NAMESPACE}},
        ),
    )
    policy.wildcards += [
        (
            "*",
            "ecr:GetAuthorizationToken and cloudwatch:PutMetricData have no resource-level "
            f"permissions; pulls name the image's repository, metrics the "
            f"{TRAINING_METRICS_NAMESPACE} namespace (condition).",
        ),
        (
            streams,
            "SageMaker names a job's streams <job>/algo-<n>-<epoch>: only streams of "
            "the stage's own job names.",
        ),
    ]


def training_role_statements(
    where: Where,
    training: StageTraining,
    *,
    key_arn: str,
    vpc: dict[str, Any] | None = None,
) -> ExecutionPolicy:
    """Every statement of the stage's training role, with each wildcard's reason.
    `vpc`: {"Subnets": [...], "SecurityGroupIds": [...]} when the jobs run in a VPC."""
    policy = ExecutionPolicy()
    _s3_part(policy, training, where)
    _key_part(policy, key_arn, where)
    _image_logs_metrics(policy, training, where)
    vpc_part(policy, vpc, where)
    return policy


def training_trust_conditions(stack: Stack, training: StageTraining) -> dict[str, Any]:
    """SageMaker may assume the role only for this account's training jobs of the stage's
    names (the guide: "You can replace the aws:SourceArn in this template with the full
    ARN of one specific training job to further limit permissions")."""
    jobs = (
        f"arn:{stack.partition}:sagemaker:{stack.region}:{stack.account}:{training.grants().jobs}"
    )
    return {
        "StringEquals": {"aws:SourceAccount": stack.account},
        "ArnLike": {"aws:SourceArn": jobs},
    }


class TrainingRole(Construct):
    """The role the stage's training jobs run with, and its one inline policy."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        training: StageTraining,
        key: kms.IKey,
        spec_vpc: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.training = training
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com").with_conditions(
                training_trust_conditions(stack, training)
            ),
            description=(
                f"SageMaker runs training jobs {training.job_prefix}* of stage "
                f"{training.stage} (peagle-deploy)"
            ),
        )
        # Not an execution role of the stage (those carry peagle:stage): its training role.
        Tags.of(self.role).remove(STAGE_TAG, priority=1000)
        Tags.of(self.role).add(*TRAINING_ROLE_TAG, priority=1000)
        Tags.of(self.role).add(TRAINING_STAGE_TAG, training.stage, priority=1000)
        planned = training_role_statements(
            Where(stack.partition, stack.region, stack.account),
            training,
            key_arn=key.key_arn,
            vpc=training_vpc(training, spec_vpc),
        )
        self.statements = planned.statements
        self.policy = iam.Policy(
            self,
            "Policy",
            roles=[self.role],
            statements=[iam.PolicyStatement.from_json(s) for s in planned.statements],
        )
        for resource, reason in planned.acknowledged().items():
            acknowledge(
                self.policy, "AwsSolutions-IAM5", reason, "Resource::" + nag_text(stack, resource)
            )

    @property
    def role_arn(self) -> str:
        return self.role.role_arn
