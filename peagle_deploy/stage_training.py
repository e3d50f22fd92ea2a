"""A stage's `training:` block (cdk.json `peagle:stages.<stage>.training`): where the
stage's training jobs read and write, which image they run, and how they are named.

Everything the stage's training role (infra/training.py) and its CI role's training
grants (infra/deploy_policy.py) are scoped to comes from here, as IAM resource patterns
(`TrainingGrants`), so two stages' training grants can be compared for overlap at synth
(`training_overlap`), as their endpoints' are (`peagle_deploy.access.grants_overlap`).

Keys (all text):
  bucket: one bucket for all of the stage's training data; the prefixes below default to
    `peagle-train/<stage>/{target,data,output,checkpoints}/` in it
  target_uri, data_uri: the `target` and `data` channels' S3 prefixes (read)
  output_uri: OutputDataConfig.S3OutputPath (write; the drafter and its metadata land
    under it, `peagle_train.contract.drafter_uri`)
  checkpoint_uri: CheckpointConfig.S3Uri's prefix (read and write); without `bucket` and
    without it, checkpoints go under output_uri
  image_repository: the training image's ECR repository: a name (in the stage's account
    and region) or an image URI `<account>.dkr.ecr.<region>.amazonaws.com/<repo>[:tag]`
  job_prefix: what every training job name of the stage starts with (default
    `peagle-train-<stage>--`: stage names never hold two dashes in a row, so no stage's
    default prefix starts another's)
  instance_types: the instance types the stage's CI role may train on (optional)
  vpc: {subnet_ids, security_group_ids} of the jobs (default: the stage spec's `vpc`)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from peagle_train.contract import DRAFTER_SUBDIR, METADATA_FILE

from peagle_deploy.access import S3Read, parse_s3_uri, patterns_intersect
from peagle_deploy.errors import InputError

TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"
"""The log group SageMaker writes every training job's container output to, one stream
per instance named `<job name>/algo-<n>-<epoch seconds>` (docs/platform-facts.md: what
Airflow's SageMakerHook and the SageMaker Python SDK's log reader list)."""
TRAINING_METRICS_NAMESPACE = "/aws/sagemaker/TrainingJobs"
"""The CloudWatch namespace of a training job's instance metrics (SageMaker Developer
Guide, monitoring-cloudwatch.md, "SageMaker Jobs and Endpoint Metrics")."""
TRAINING_ROLE_TAG = ("peagle:role", "training")
TRAINING_STAGE_TAG = "peagle:training-stage"
"""On the role SageMaker assumes to run a stage's training jobs: the one role that stage's
CI role may pass as a training job's RoleArn. Never `peagle:stage` (which marks the
execution roles the CI role may pass to CreateModel)."""

_KEYS = {
    "bucket",
    "target_uri",
    "data_uri",
    "output_uri",
    "checkpoint_uri",
    "image_repository",
    "job_prefix",
    "instance_types",
    "vpc",
}
JOB_PREFIX_PATTERN = r"^[a-z0-9](-*[a-z0-9])*-*$"
_JOB_PREFIX = re.compile(JOB_PREFIX_PATTERN)
MAX_JOB_PREFIX = 40
_MAX_JOB_PREFIX = MAX_JOB_PREFIX
"""A training job name has at most 63 characters (botocore, TrainingJobName): the prefix
leaves 23 or more for the job's own part."""
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_REPOSITORY = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")
_ECR_IMAGE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/"
    r"(?P<repository>[a-z0-9._/-]+?)(?:[:@].+)?$"
)
_INSTANCE = re.compile(r"^ml\.[a-z0-9]+\.[a-z0-9]+$")


def default_job_prefix(stage: str) -> str:
    """`peagle-train-<stage>--`: the two dashes end the stage's part (see the module)."""
    return f"peagle-train-{stage}--"


@dataclass(frozen=True)
class StageTraining:
    """One stage's training locations, image and job names (checked)."""

    stage: str
    job_prefix: str
    target: S3Read
    data: S3Read
    output: S3Read
    checkpoints: S3Read | None
    """None: checkpoints are written under `output`."""
    image_repository: str
    image_account: str | None = None
    """The repository's account and region when `image_repository` was an image URI
    (None: the stage's own)."""
    image_region: str | None = None
    instance_types: tuple[str, ...] = ()
    subnets: tuple[str, ...] = ()
    security_groups: tuple[str, ...] = ()

    @property
    def reads(self) -> tuple[S3Read, ...]:
        """The channels' prefixes (and the checkpoints', which a resumed job reads)."""
        return (self.target, self.data) + ((self.checkpoints,) if self.checkpoints else ())

    @property
    def writes(self) -> tuple[S3Read, ...]:
        return (self.output,) + ((self.checkpoints,) if self.checkpoints else ())

    def grants(self) -> TrainingGrants:
        return TrainingGrants(self)


@dataclass(frozen=True)
class TrainingGrants:
    """Every name pattern a stage's training is granted on (ARN parts, `*` as IAM reads it)."""

    training: StageTraining

    @property
    def jobs(self) -> str:
        """`training-job/<prefix>*` (sagemaker)."""
        return f"training-job/{self.training.job_prefix}*"

    @property
    def log_streams(self) -> str:
        """The stage's jobs' streams of the TrainingJobs log group (logs)."""
        return f"log-group:{TRAINING_LOG_GROUP}:log-stream:{self.training.job_prefix}*"

    def objects(self) -> list[str]:
        """The S3 object patterns (`bucket/key*`) the stage reads or writes."""
        reads = (*self.training.reads, *self.training.writes)
        return sorted({r.object_pattern for r in reads})

    @property
    def metadata(self) -> str:
        """The drafter metadata file of any of the stage's jobs (`bucket/key`): under the
        output prefix, at `<job>/output/model/drafter/peagle-drafter.json`
        (peagle_train.contract.drafter_uri, METADATA_FILE)."""
        out = self.training.output
        return f"{out.bucket}/{out.key}*/output/model/{DRAFTER_SUBDIR}/{METADATA_FILE}"

    def named(self) -> list[tuple[str, str]]:
        """(service, pattern) of every grant by name, for the overlap check."""
        return [("sagemaker", self.jobs), ("logs", self.log_streams)] + [
            ("s3", o) for o in self.objects()
        ]


def training_vpc(
    training: StageTraining, spec_vpc: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The VpcConfig of the stage's training jobs: the `training.vpc` block, else the stage
    spec's VpcConfig (a stage that serves in a VPC trains in it), else none."""
    if training.subnets or training.security_groups:
        return {
            "Subnets": list(training.subnets),
            "SecurityGroupIds": list(training.security_groups),
        }
    return dict(spec_vpc) if spec_vpc else None


def training_overlap(a: StageTraining, b: StageTraining) -> str | None:
    """What two stages' training grants share (`service:pattern` of each), or None."""
    for service, mine in a.grants().named():
        for other_service, theirs in b.grants().named():
            if service == other_service and patterns_intersect(mine, theirs):
                return f"{service}:{mine} and {other_service}:{theirs}"
    return None


def _text(raw: Mapping[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise InputError(f"{where}.{key}", f"{value!r}", "a non-empty string")
    return value


def _prefix(uri: str, where: str) -> S3Read:
    """An S3 prefix (never a bucket root, never a wildcard), ending with `/`."""
    read = parse_s3_uri(uri, data_type="S3Prefix", source=where)
    if not read.key.endswith("/"):
        raise InputError(where, f"{uri!r} does not end with /", "s3://bucket/prefix/")
    return read


def _locations(raw: Mapping[str, Any], stage: str, where: str) -> dict[str, S3Read | None]:
    bucket = _text(raw, "bucket", where)
    if bucket is not None and not _BUCKET.match(bucket):
        raise InputError(f"{where}.bucket", f"{bucket!r}", "an S3 bucket name")
    base = f"s3://{bucket}/peagle-train/{stage}/" if bucket else None
    out: dict[str, S3Read | None] = {}
    for name in ("target", "data", "output", "checkpoint"):
        uri = _text(raw, f"{name}_uri", where)
        if uri is None and base is not None:
            uri = base + ("checkpoints/" if name == "checkpoint" else f"{name}/")
        if uri is None and name != "checkpoint":
            raise InputError(f"{where}.{name}_uri", "missing", "an S3 prefix, or `bucket`")
        out[name] = None if uri is None else _prefix(uri, f"{where}.{name}_uri")
    return out


def _image(raw: Mapping[str, Any], where: str) -> tuple[str, str | None, str | None]:
    image = _text(raw, "image_repository", where)
    if image is None:
        raise InputError(f"{where}.image_repository", "missing", "an ECR repository or image URI")
    match = _ECR_IMAGE.match(image)
    if match:
        return match["repository"], match["account"], match["region"]
    if not _REPOSITORY.match(image):
        raise InputError(
            f"{where}.image_repository",
            f"{image!r}",
            "an ECR repository name or <account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>",
        )
    return image, None, None


def _strings(raw: Mapping[str, Any], key: str, where: str, pattern: str) -> tuple[str, ...]:
    values = raw.get(key) or []
    if not isinstance(values, list) or not all(
        isinstance(v, str) and re.match(pattern, v) for v in values
    ):
        raise InputError(f"{where}.{key}", f"{values!r}", f"a list of strings like {pattern}")
    return tuple(values)


def stage_training(raw: Any, stage: str, where: str) -> StageTraining:
    """The checked `training:` block of stage `stage`; InputError naming the key."""
    if not isinstance(raw, Mapping):
        raise InputError(where, f"is {type(raw).__name__}", "a mapping")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise InputError(f"{where}.{unknown[0]}", "unknown key", sorted(_KEYS))
    prefix = _text(raw, "job_prefix", where) or default_job_prefix(stage)
    if len(prefix) > _MAX_JOB_PREFIX or not _JOB_PREFIX.match(prefix):
        raise InputError(
            f"{where}.job_prefix",
            f"{prefix!r}",
            f"up to {_MAX_JOB_PREFIX} lowercase letters, digits and dashes, not starting "
            "with a dash (SageMaker names training jobs [a-zA-Z0-9](-*[a-zA-Z0-9])*; "
            "lowercase keeps IAM's case-sensitive ARN match exact)",
        )
    found = _locations(raw, stage, where)
    repository, account, region = _image(raw, where)
    vpc = raw.get("vpc") or {}
    if not isinstance(vpc, Mapping) or set(vpc) - {"subnet_ids", "security_group_ids"}:
        raise InputError(
            f"{where}.vpc", f"{vpc!r}", "{subnet_ids: [...], security_group_ids: [...]}"
        )
    target, data, output = found["target"], found["data"], found["output"]
    assert target is not None and data is not None and output is not None
    return StageTraining(
        stage=stage,
        job_prefix=prefix,
        target=target,
        data=data,
        output=output,
        checkpoints=found["checkpoint"],
        image_repository=repository,
        image_account=account,
        image_region=region,
        instance_types=_strings(raw, "instance_types", where, _INSTANCE.pattern),
        subnets=_strings(vpc, "subnet_ids", f"{where}.vpc", r"^subnet-[0-9a-f]+$"),
        security_groups=_strings(vpc, "security_group_ids", f"{where}.vpc", r"^sg-[0-9a-f]+$"),
    )
