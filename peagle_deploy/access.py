"""What a plan's requests give SageMaker access to, as IAM resource strings.

Pure functions over the renderer's CreateModel dictionary (no aws_cdk import), so the
least-privilege rules are unit-testable, the CDK role construct (infra/role.py) only turns
their output into policy statements, and the emulator grants a staged account's role the
same access. Everything the execution role may read is derived from the
exact request the model is created with: the role can never grant more (or less) than
the model uses.

What an endpoint's own roles may change (the CI deploy role, the CDK model provider, the
execution role's log group) is derived from its identity (`peagle_deploy.naming`) by
`endpoint_grants`, once; `grants_overlap` says whether two endpoints' grants could ever
name one resource.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from peagle_deploy.catalog.buckets import is_jumpstart_bucket
from peagle_deploy.errors import InputError
from peagle_deploy.naming import derived_grant, endpoint_log_group_name, provider_log_group_name

_S3_URI = re.compile(r"^(?:s3|https)://(?P<bucket>[^/]+)/?(?P<key>.*)$")
# <account>.dkr.ecr.<region>.amazonaws.com[.cn]/<repository>[:tag|@digest]
_ECR_IMAGE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/"
    r"(?P<repository>[a-z0-9._/-]+?)(?:[:@].+)?$"
)


@dataclass(frozen=True)
class S3Read:
    """Read access to one S3 object or every object under one prefix."""

    bucket: str
    key: str
    """The object key, or the prefix (never empty: a whole bucket is refused)."""
    is_prefix: bool
    source: str
    """Which request field asked for it (for error messages and tests)."""

    @property
    def object_pattern(self) -> str:
        """The `arn:...:s3:::bucket/...` suffix GetObject is granted on."""
        return f"{self.bucket}/{self.key}*" if self.is_prefix else f"{self.bucket}/{self.key}"

    @property
    def list_prefix(self) -> str | None:
        """The `s3:prefix` value ListBucket is limited to (None: no listing needed)."""
        return f"{self.key}*" if self.is_prefix else None


@dataclass(frozen=True)
class EcrRepository:
    """The one ECR repository the serving image is pulled from."""

    account: str
    region: str
    name: str

    def arn(self, partition: str = "aws") -> str:
        """ARN of the repository (ecr:BatchGetImage and friends are granted on it)."""
        return f"arn:{partition}:ecr:{self.region}:{self.account}:repository/{self.name}"


def parse_s3_uri(uri: str, *, data_type: str, source: str) -> S3Read:
    """Turn one S3 location of the request into the access it needs.

    `S3Prefix` data (uncompressed weights, the drafter) is read by prefix;
    `S3Object` data (a `model.tar.gz`) is one object.
    """
    match = _S3_URI.match(uri)
    if not match:
        raise InputError(source, f"{uri!r} is not an S3 location", "s3://bucket/prefix/")
    bucket, key = match["bucket"], match["key"]
    # The grant is derived from the location: never the whole bucket, never a pattern.
    if "*" in key or "?" in key:
        raise InputError(
            source, f"{uri!r} has a wildcard character", "an S3 location without * or ?"
        )
    if data_type == "S3Prefix":
        if not key:
            raise InputError(
                source, f"{uri!r} is a whole bucket", "s3://bucket/prefix/ (not the bucket root)"
            )
        return S3Read(bucket=bucket, key=key, is_prefix=True, source=source)
    if data_type == "S3Object":
        if not key:
            raise InputError(source, f"{uri!r} names a bucket, not an object", "s3://bucket/key")
        return S3Read(bucket=bucket, key=key, is_prefix=False, source=source)
    raise InputError(f"{source}.S3DataType", f"unknown value {data_type!r}", "S3Prefix, S3Object")


def _containers(create_model: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    primary = create_model.get("PrimaryContainer")
    if primary:
        yield "PrimaryContainer", primary
    for index, container in enumerate(create_model.get("Containers") or []):
        yield f"Containers[{index}]", container


def s3_reads(create_model: Mapping[str, Any]) -> list[S3Read]:
    """Every S3 location the model's containers load: weights and additional sources."""
    reads: list[S3Read] = []
    for where, container in _containers(create_model):
        source = container.get("ModelDataSource", {}).get("S3DataSource")
        if source:
            reads.append(
                parse_s3_uri(
                    source["S3Uri"],
                    data_type=source.get("S3DataType", "S3Prefix"),
                    source=f"{where}.ModelDataSource",
                )
            )
        elif container.get("ModelDataUrl"):
            reads.append(
                parse_s3_uri(
                    container["ModelDataUrl"], data_type="S3Object", source=f"{where}.ModelDataUrl"
                )
            )
        for index, extra in enumerate(container.get("AdditionalModelDataSources") or []):
            s3 = extra["S3DataSource"]
            reads.append(
                parse_s3_uri(
                    s3["S3Uri"],
                    data_type=s3.get("S3DataType", "S3Prefix"),
                    source=f"{where}.AdditionalModelDataSources[{index}]",
                )
            )
    # Deterministic and without duplicates, so templates do not churn.
    unique = {(r.bucket, r.key, r.is_prefix): r for r in reads}
    return [unique[k] for k in sorted(unique)]


def ecr_repositories(create_model: Mapping[str, Any]) -> list[EcrRepository]:
    """The ECR repositories of the model's images; non-ECR images are refused.

    SageMaker pulls hosting images from private ECR with the execution role; anything
    else (Docker Hub, the public ECR gallery) cannot be granted and would fail at
    endpoint creation, so it is refused at synth time.
    """
    repos: dict[tuple[str, str, str], EcrRepository] = {}
    for where, container in _containers(create_model):
        image = container.get("Image")
        if not image:
            raise InputError(f"{where}.Image", "missing", "an ECR image URI")
        match = _ECR_IMAGE.match(image)
        if not match:
            raise InputError(
                "image_uri",
                f"{image!r} is not a private ECR image; SageMaker hosting pulls from ECR",
                "<account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>",
            )
        repo = EcrRepository(match["account"], match["region"], match["repository"])
        repos[(repo.account, repo.region, repo.name)] = repo
    return [repos[k] for k in sorted(repos)]


def bucket_owner(bucket: str, expected_owner: str | None) -> str | None:
    """The account a read of `bucket` must find as the bucket's owner: the spec's
    `expected_bucket_owner` (or, given as `expected_owner`, the deploying account), except
    for JumpStart's own buckets, which AWS owns (catalog.buckets). None: no owner rule.

    It becomes `s3:ResourceAccount` in IAM grants and `ExpectedBucketOwner` on reads, so
    a bucket of the same name in another account (a squatted or deleted-and-recreated
    name) is never read.
    """
    return None if is_jumpstart_bucket(bucket) else expected_owner


def owner_condition(owner: str | None) -> dict[str, dict[str, str]]:
    """The IAM condition that pins the bucket owner (empty without an owner rule)."""
    return {"StringEquals": {"s3:ResourceAccount": owner}} if owner else {}


ECR_PULL_ACTIONS = (
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:GetDownloadUrlForLayer",
)


def s3_read_statements(
    create_model: Mapping[str, Any], *, partition: str, owner: str | None
) -> list[dict[str, Any]]:
    """The S3 grants loading the model needs, as IAM statements (one home for the CDK role
    and the planned policy): GetObject on its locations and ListBucket on its prefixes,
    pinned to the bucket `owner` (`s3:ResourceAccount`) except in JumpStart's buckets."""
    reads = s3_reads(create_model)
    owner_of = {r.bucket: bucket_owner(r.bucket, owner) for r in reads}
    statements: list[dict[str, Any]] = []
    for sid, pinned in (("ReadModelAndDrafter", True), ("ReadJumpStartModelData", False)):
        objects = [
            f"arn:{partition}:s3:::{r.object_pattern}"
            for r in reads
            if (owner_of[r.bucket] is not None) == pinned
        ]
        if objects:
            statements.append(
                {
                    "Sid": sid,
                    "Effect": "Allow",
                    "Action": "s3:GetObject",
                    "Resource": objects,
                    **({"Condition": owner_condition(owner)} if pinned and owner else {}),
                }
            )
    prefixes: dict[str, list[str]] = {}
    for read in reads:
        if read.list_prefix is not None:
            prefixes.setdefault(read.bucket, []).append(read.list_prefix)
    for index, (bucket, listed) in enumerate(sorted(prefixes.items())):
        statements.append(
            {
                "Sid": f"ListModelPrefixes{index}",
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": f"arn:{partition}:s3:::{bucket}",
                "Condition": {
                    "StringLike": {"s3:prefix": sorted(listed)},
                    **owner_condition(owner_of[bucket]),
                },
            }
        )
    return statements


def model_access_policy(
    create_model: Mapping[str, Any],
    *,
    partition: str = "aws",
    model_data_kms_key_arns: Sequence[str] = (),
    owner: str | None = None,
) -> dict[str, Any]:
    """The grants of the CDK execution role (infra/role.py) that loading the model needs:
    S3 reads of its locations (in `owner`'s buckets: the spec's `expected_bucket_owner`,
    else the stack's account), pulls of its image, Decrypt of SSE-KMS weights through S3.

    `peagle doctor --stage` evaluates it for the role a stack has not created yet; a test
    keeps its decisions equal to the synthesized role's.
    """
    statements = s3_read_statements(create_model, partition=partition, owner=owner)
    statements.append(
        {
            "Effect": "Allow",
            "Action": list(ECR_PULL_ACTIONS),
            "Resource": [r.arn(partition) for r in ecr_repositories(create_model)],
        }
    )
    statements.append({"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"})
    if model_data_kms_key_arns:
        statements.append(
            {
                "Effect": "Allow",
                "Action": "kms:Decrypt",
                "Resource": sorted(set(model_data_kms_key_arns)),
                "Condition": {"StringLike": {"kms:ViaService": "s3.*.amazonaws.com"}},
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


@dataclass(frozen=True)
class Grant:
    """One IAM resource pattern (`*` and `?` as IAM reads them) of one service."""

    service: str
    resource: str
    """The ARN's resource part, e.g. `model/<head>-m????????`."""

    def arn(self, partition: str, region: str, account: str) -> str:
        """The ARN pattern in one partition, region and account (CDK tokens welcome)."""
        return f"arn:{partition}:{self.service}:{region}:{account}:{self.resource}"


@dataclass(frozen=True)
class EndpointGrants:
    """Everything a role that manages one endpoint is granted by name, derived from
    the endpoint's identity (`peagle_deploy.naming`) and nothing else."""

    endpoint_name: str

    @property
    def endpoint(self) -> Grant:
        return Grant("sagemaker", f"endpoint/{self.endpoint_name}")

    @property
    def configs(self) -> Grant:
        """Every endpoint config the planner can name for this endpoint."""
        return Grant("sagemaker", f"endpoint-config/{derived_grant(self.endpoint_name, 'c')}")

    @property
    def models(self) -> Grant:
        """Every model the planner can name for this endpoint (experiment candidates too)."""
        return Grant("sagemaker", f"model/{derived_grant(self.endpoint_name, 'm')}")

    @property
    def experiments(self) -> Grant:
        """Every InferenceExperiment the planner can name for this endpoint."""
        return Grant("sagemaker", f"inference-experiment/{derived_grant(self.endpoint_name, 'x')}")

    @property
    def log_group(self) -> Grant:
        return Grant("logs", f"log-group:{endpoint_log_group_name(self.endpoint_name)}")

    @property
    def log_streams(self) -> Grant:
        """The log group's streams (SageMaker names them per instance)."""
        return Grant("logs", f"{self.log_group.resource}:*")

    @property
    def provider_log_group(self) -> Grant:
        return Grant("logs", f"log-group:{provider_log_group_name(self.endpoint_name)}")

    @property
    def scaling_alarms(self) -> Grant:
        """The target-tracking alarms Application Auto Scaling makes for the endpoint."""
        return Grant("cloudwatch", f"alarm:TargetTracking-endpoint/{self.endpoint_name}/*")

    def all(self) -> tuple[Grant, ...]:
        return (
            self.endpoint,
            self.configs,
            self.models,
            self.experiments,
            self.log_group,
            self.log_streams,
            self.provider_log_group,
            self.scaling_alarms,
        )


def endpoint_grants(endpoint_name: str) -> EndpointGrants:
    """The grants of the roles that manage endpoint `endpoint_name`."""
    return EndpointGrants(endpoint_name)


def patterns_intersect(a: str, b: str) -> bool:
    """Whether some resource name matches both IAM patterns (`*`: any run of characters,
    `?`: one character), compared case-insensitively: SageMaker takes names so, and a
    wider test only refuses more.

    A walk over pairs of positions (how far each pattern has read one common name).
    """
    a, b = a.casefold(), b.casefold()
    seen: set[tuple[int, int]] = set()
    todo = [(0, 0)]
    while todo:
        i, j = todo.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i] == "*":
            todo.append((i + 1, j))
        if j < len(b) and b[j] == "*":
            todo.append((i, j + 1))
        if i < len(a) and j < len(b) and (a[i] in "*?" or b[j] in "*?" or a[i] == b[j]):
            todo.append((i if a[i] == "*" else i + 1, j if b[j] == "*" else j + 1))
    return False


def grants_overlap(a: str, b: str) -> str | None:
    """What endpoints `a` and `b` would share (`service:pattern` of each), or None when
    no resource either's roles are granted by name could be the other's."""
    for mine in endpoint_grants(a).all():
        for theirs in endpoint_grants(b).all():
            if mine.service == theirs.service and patterns_intersect(
                mine.resource, theirs.resource
            ):
                return f"{mine.service}:{mine.resource} and {theirs.service}:{theirs.resource}"
    return None
