"""Shapes and limits of the SageMaker API (botocore's `sagemaker/2017-07-24` model).

Names, S3 URIs, image URIs, ARNs, tags and the container environment: what botocore
does not check client-side (patterns, maxima) is checked here. The `check_*(dep)` rules
take a resolved Deployment (peagle_deploy.plan.check runs them); the value-level
helpers they use also serve the CLI's own flags.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Mapping

from peagle_serve.contract import ENDPOINT_NAME_ENV, SPECULATIVE_CONFIG_ENV, VARIANT_NAME_ENV
from peagle_serve.numeric_env import NumericEnvError, check_numeric_env

from peagle_deploy.catalog.images import domains, parse_image_uri
from peagle_deploy.deployment import MAX_MODEL_LEN_ENV, TENSOR_PARALLEL_ENV, Deployment
from peagle_deploy.env_limits import MAX_ENV_BYTES, check_env_size
from peagle_deploy.errors import InputError
from peagle_deploy.findings import PlanWarning
from peagle_deploy.naming import MANAGED_TAG_COUNT
from peagle_deploy.spec.models import VpcSpec
from peagle_deploy.spec.stage import check_stage_name

REGION_RE = re.compile(r"^[a-z]{2,4}(-gov|-iso[a-z]?)?(-[a-z]+){1,2}-\d{1,2}$")
NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
CHANNEL_RE = re.compile(r"^[A-Za-z0-9.\-_]{1,64}$")
S3_BUCKET = r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]"
S3_PREFIX_RE = re.compile(rf"^s3://{S3_BUCKET}/(\S+/)?$")
S3_TARGZ_RE = re.compile(rf"^s3://{S3_BUCKET}/\S+\.tar\.gz$")
MAX_ROLE_ARN = 2048
ROLE_ARN_RE = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-/]+$")
KMS_RE = re.compile(
    r"^(arn:aws[a-z\-]*:kms:[a-z0-9\-]+:\d{12}:(key|alias)/[a-zA-Z0-9/_\-]+"
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|alias/[a-zA-Z0-9/_\-]+)$"
)
SUBNET_RE = re.compile(r"^subnet-[0-9a-f]{8,17}$")
SG_RE = re.compile(r"^sg-[0-9a-f]{8,17}$")
KMS_KEY_ARN_RE = re.compile(r"^arn:aws[a-z\-]*:kms:[a-z0-9\-]+:\d{12}:key/[a-zA-Z0-9\-]+$")
ENV_KEY_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
CUSTOM_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,62}$")
TAG_EXTRA_CHARS = frozenset("_.:/=+-@")
"""Tag keys/values are `[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*` (botocore TagKey/TagValue): letters,
separators (space, not tab or newline) and numbers of any script, plus these."""
MAX_MODEL_DATA_KMS_KEYS = 5

INFERENCE_AMI_VERSIONS = (
    "al2-ami-sagemaker-inference-gpu-2",
    "al2-ami-sagemaker-inference-gpu-2-1",
    "al2-ami-sagemaker-inference-gpu-3-1",
    "al2023-ami-sagemaker-inference-gpu-4-1",
)
"""GPU values of botocore's ProductionVariantInferenceAmiVersion enum (neuron left out)."""

MAX_TAGS = 50
RESERVED_TAG_PREFIXES = ("aws:", "peagle:")


PARTITION_REGIONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("aws-cn", re.compile(r"^cn\-\w+\-\d+$")),
    ("aws-us-gov", re.compile(r"^us\-gov\-\w+\-\d+$")),
    ("aws-iso", re.compile(r"^us\-iso\-\w+\-\d+$")),
    ("aws-iso-b", re.compile(r"^us\-isob\-\w+\-\d+$")),
    ("aws-iso-e", re.compile(r"^eu\-isoe\-\w+\-\d+$")),
    ("aws-iso-f", re.compile(r"^us\-isof\-\w+\-\d+$")),
    ("aws-eusc", re.compile(r"^eusc\-(de)\-\w+\-\d+$")),
)
"""Each partition's `regionRegex` but the commercial one's (botocore's
`data/partitions.json`); a region none of them matches is in `aws`."""


def partition_of(region: str) -> str:
    """The ARN partition of a region (`aws`, `aws-cn`, `aws-us-gov`, ...)."""
    for partition, regions in PARTITION_REGIONS:
        if regions.match(region):
            return partition
    return "aws"


def check_region(region: str, field: str = "region") -> None:
    """Region names look like `us-east-1`, `eu-central-2`, `us-gov-west-1`."""
    if not REGION_RE.fullmatch(region):
        raise InputError(field, f"{region!r} is not a region name", "e.g. us-east-1, eu-west-2")


ENDPOINT_NAME_RULE = "1-63 of [a-zA-Z0-9-], starting and ending with a letter or digit"


def check_endpoint_name(name: str, field: str = "endpoint_name") -> None:
    """botocore's EndpointName: 1-63 characters, `[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}`."""
    if not NAME_RE.fullmatch(name):
        raise InputError(field, f"{name!r} is not a valid endpoint name", ENDPOINT_NAME_RULE)


def check_names(dep: Deployment) -> list[PlanWarning]:
    """Stage, endpoint and custom model names must fit SageMaker names and tag values.

    `custom.name` becomes the `peagle:model` tag value on every resource (TagValue
    pattern, 256 characters) and part of the default endpoint name.
    """
    spec = dep.spec
    custom_name = spec.custom.name if spec.custom is not None else None
    if custom_name is not None and not CUSTOM_NAME_RE.fullmatch(custom_name):
        raise InputError(
            "custom.name",
            f"{custom_name!r} is not a short model name",
            "1-63 of [A-Za-z0-9._-], starting with a letter or digit",
        )
    check_stage_name(spec.stage, "stage")
    check_endpoint_name(dep.endpoint_name)
    return []


def check_image(dep: Deployment) -> list[PlanWarning]:
    """SageMaker pulls serving images from ECR in the endpoint's region (a default image
    is one of AWS's, published in the region: resolve chose it so)."""
    if dep.origin("image_uri") == "default":
        return []
    field, image, region = dep.image_field, dep.image_uri, dep.region
    parsed = parse_image_uri(image)
    if parsed is None or len(image) > 255 or parsed.domain not in domains():
        raise InputError(
            field,
            f"{image!r} is not an ECR image URI",
            "<account>.dkr.ecr.<region>.<domain>/<repo>:<tag> (max 255 chars; domain "
            f"{', '.join(sorted(domains()))})",
        )
    if parsed.region != region:
        return [
            PlanWarning(
                field,
                f"{field}: image is in {parsed.region} but the endpoint is in {region}; "
                "SageMaker needs the image in the endpoint's region",
            )
        ]
    return []


def check_s3_location(field: str, uri: str) -> None:
    """What the execution role may read is derived from the location, so it must name one
    prefix or object: not a whole bucket (that would grant every object in it), and no
    `*` or `?`, which an IAM resource or `s3:prefix` condition reads as a pattern."""
    if "*" in uri or "?" in uri:
        raise InputError(
            field,
            f"{uri!r} has a wildcard character; the execution role's S3 grant would read "
            "it as a pattern over other keys",
            "an S3 location without * or ?",
        )
    bucket_root = re.fullmatch(rf"s3://{S3_BUCKET}/?", uri)
    if bucket_root:
        raise InputError(
            field,
            f"{uri!r} is a whole bucket; the execution role would be granted every object in it",
            "s3://bucket/prefix/ (the prefix the files are under)",
        )


S3_BUCKET_RULE = (
    "a bucket name of 3-63 characters: lowercase letters, digits, '.' and '-', beginning "
    "and ending with a letter or digit"
)


def _check_bucket(field: str, uri: str) -> None:
    """The bucket of an `s3://` location, named when it is what is wrong (`s3://d/p/`
    is a well-formed prefix in a bucket whose name is too short)."""
    if not uri.startswith("s3://"):
        return
    bucket = uri[len("s3://") :].split("/", 1)[0]
    if re.fullmatch(S3_BUCKET, bucket):
        return
    if not bucket:
        problem = "names no bucket"
    elif len(bucket) < 3:
        problem = f"bucket name {bucket!r} is too short"
    elif len(bucket) > 63:
        problem = f"bucket name {bucket[:20]!r}... is too long ({len(bucket)} characters)"
    else:
        problem = f"{bucket!r} is not a valid S3 bucket name"
    raise InputError(field, f"{uri!r}: {problem}", S3_BUCKET_RULE)


def check_model_data_uri(field: str, uri: str | None) -> None:
    """Target weights: an S3 prefix ending in `/`, or a `.tar.gz` object."""
    if uri is None:
        raise InputError(field, "is required", "s3://bucket/prefix/ or s3://bucket/key.tar.gz")
    check_s3_location(field, uri)
    _check_bucket(field, uri)
    if len(uri) > 1024 or not (S3_PREFIX_RE.fullmatch(uri) or S3_TARGZ_RE.fullmatch(uri)):
        raise InputError(
            field,
            f"{uri!r} is not an S3 prefix or .tar.gz object",
            "s3://bucket/prefix/ or s3://bucket/key.tar.gz",
        )


def check_drafter_uri(field: str, uri: str | None) -> None:
    """Drafters are uncompressed checkpoints: an S3 prefix ending in `/`."""
    if uri is None:
        raise InputError(field, "is required for speculative decoding", "s3://bucket/prefix/")
    check_s3_location(field, uri)
    _check_bucket(field, uri)
    if len(uri) > 1024 or not S3_PREFIX_RE.fullmatch(uri):
        raise InputError(field, f"{uri!r} is not an S3 prefix", "s3://bucket/prefix/")


def check_channel(channel: str) -> None:
    """AdditionalModelDataSources ChannelName: 1-64 of [A-Za-z0-9.-_]."""
    if not CHANNEL_RE.fullmatch(channel):
        raise InputError(
            "speculative.drafter_channel",
            f"{channel!r} is not a valid channel name",
            "1-64 of [A-Za-z0-9.-_]",
        )


def check_env(
    user_env: Mapping[str, str], rendered: Mapping[str, str], secret_names: Collection[str] = ()
) -> None:
    """Environment limits (100 entries, 1024 bytes per key or value, 32 KB in total;
    `secret_names`, the variables given by reference, count with their names, their
    values being unknown here), the keys only the renderer may set, and the container's
    numeric variables under the rule the container itself applies when it starts
    (peagle_serve.numeric_env)."""
    owners = {
        SPECULATIVE_CONFIG_ENV: "use speculative.* instead",
        TENSOR_PARALLEL_ENV: "use tensor_parallel_size instead",
        MAX_MODEL_LEN_ENV: "use max_model_len instead",
        # the metric lines' names: another endpoint's would publish under it, another
        # variant's would count as that variant in an experiment
        ENDPOINT_NAME_ENV: "use endpoint_name instead",
        VARIANT_NAME_ENV: "leave it out: an experiment names its candidate's variant",
    }
    for key, value in user_env.items():
        if key in owners:
            raise InputError(f"env.{key}", "is set by peagle-deploy", owners[key])
        if not ENV_KEY_RE.fullmatch(key):
            raise InputError(f"env.{key}", "is not a valid variable name", "[a-zA-Z_][a-zA-Z0-9_]*")
        if len(key.encode()) > MAX_ENV_BYTES or len(str(value).encode()) > MAX_ENV_BYTES:
            raise InputError(
                f"env.{key}", "key or value is longer than 1024 bytes", "<= 1024 bytes"
            )
    for key, value in rendered.items():
        # the renderer's own values (e.g. a long K schedule in the speculative config)
        # must fit too; name the spec field that produced them
        if key not in user_env and len(value.encode()) > MAX_ENV_BYTES:
            field = {SPECULATIVE_CONFIG_ENV: "speculative.num_speculative_tokens_per_batch_size"}
            raise InputError(
                field.get(key, f"env.{key}"),
                f"renders {key} as {len(value.encode())} bytes; SageMaker allows 1024 per value",
                "fewer batch-size ranges" if key == SPECULATIVE_CONFIG_ENV else "<= 1024 bytes",
            )
    try:
        check_numeric_env(rendered)
    except NumericEnvError as e:
        raise InputError(f"env.{e.variable}", e.problem, e.allowed) from None
    known = {**dict.fromkeys(secret_names, ""), **rendered}
    with_secrets = " and the names of secrets" if secret_names else ""
    check_env_size(known, "env", f"(with peagle's own{with_secrets})")


def check_kms_key_id(kms_key_id: str | None, region: str) -> None:
    """A key id, key ARN, alias or alias ARN; an ARN must be in the endpoint's region."""
    if kms_key_id is None:
        return
    if not KMS_RE.fullmatch(kms_key_id):
        raise InputError(
            "kms_key_id",
            f"{kms_key_id!r} is not a KMS key id, key ARN, alias or alias ARN",
            "1234abcd-..., arn:aws:kms:<region>:<account>:key/<id>, alias/<name>",
        )
    if kms_key_id.startswith("arn:"):
        key_region = kms_key_id.split(":")[3]
        if key_region != region:
            raise InputError(
                "kms_key_id",
                f"the key is in {key_region} but the endpoint is in {region}; "
                "KMS keys are regional",
                f"a key or alias in {region}",
            )


def check_role(role: str | None, field: str = "execution_role_arn") -> None:
    """Execution role ARN shape (IAM role ARNs only, at most 2048 characters: botocore's
    sagemaker model, RoleArn)."""
    if role is not None and len(role) > MAX_ROLE_ARN:
        raise InputError(
            field,
            f"is {len(role)} characters long; an IAM role ARN has at most {MAX_ROLE_ARN}",
            "arn:aws:iam::<12 digits>:role/<name>",
        )
    if role is not None and not ROLE_ARN_RE.fullmatch(role):
        raise InputError(
            field,
            f"{role!r} is not an IAM role ARN",
            "arn:aws:iam::<12 digits>:role/<name>",
        )


def check_key_and_vpc(dep: Deployment) -> list[PlanWarning]:
    """The storage volume's KMS key and the VPC's subnet and security group ids."""
    check_kms_key_id(dep.spec.kms_key_id, dep.region)
    check_vpc_ids(dep.spec.vpc)
    return []


def check_execution_role(dep: Deployment) -> list[PlanWarning]:
    """The role's ARN shape; without one, the plan shows a placeholder that deploy refuses."""
    check_role(dep.spec.execution_role_arn)
    if dep.origin("execution_role_arn") == "spec":
        return []
    return [
        PlanWarning(
            "execution_role_arn",
            "no execution_role_arn given: the plan shows a placeholder role; "
            "deploy needs --role-arn (or execution_role_arn in the spec)",
        )
    ]


def check_tags_and_keys(dep: Deployment) -> list[PlanWarning]:
    """User tags (beside peagle's own) and the model data's KMS key ARNs."""
    check_tags(dep.spec.tags, MANAGED_TAG_COUNT)
    check_model_data_kms_keys(dep.spec.model_data_kms_key_arns)
    return []


def check_environment(dep: Deployment) -> list[PlanWarning]:
    """The container environment as rendered, and the keys only peagle-deploy sets."""
    check_env(dep.spec.env, dep.environment, list(dep.secret_refs))
    return []


def check_vpc_ids(vpc: VpcSpec | None) -> None:
    """Both subnets and security groups, within SageMaker's counts, with valid ids."""
    if vpc is None or (not vpc.subnet_ids and not vpc.security_group_ids):
        return
    if not 1 <= len(vpc.subnet_ids) <= 16:
        raise InputError(
            "vpc.subnet_ids", f"{len(vpc.subnet_ids)} subnets given", "1-16 subnet ids"
        )
    if not 1 <= len(vpc.security_group_ids) <= 5:
        raise InputError(
            "vpc.security_group_ids",
            f"{len(vpc.security_group_ids)} security groups given",
            "1-5 security group ids",
        )
    for i, subnet in enumerate(vpc.subnet_ids):
        if not SUBNET_RE.fullmatch(subnet):
            raise InputError(
                f"vpc.subnet_ids[{i}]", f"{subnet!r} is not a subnet id", "subnet-<hex>"
            )
    for i, group in enumerate(vpc.security_group_ids):
        if not SG_RE.fullmatch(group):
            raise InputError(
                f"vpc.security_group_ids[{i}]", f"{group!r} is not a security group id", "sg-<hex>"
            )


def check_tags(tags: Mapping[str, str], managed_count: int) -> None:
    """User tags: SageMaker's shape and limits; `aws:` and `peagle:` keys are reserved."""
    if len(tags) + managed_count > MAX_TAGS:
        raise InputError(
            "tags",
            f"{len(tags)} tags plus {managed_count} peagle tags",
            f"<= {MAX_TAGS - managed_count}",
        )
    for key, value in tags.items():
        if key.lower().startswith(RESERVED_TAG_PREFIXES):
            raise InputError(
                f"tags.{key}", "uses a reserved prefix", "keys not starting with aws: or peagle:"
            )
        if not 1 <= len(key) <= 128 or not _tag_text_ok(key):
            raise InputError(
                f"tags.{key}",
                "is not a valid tag key",
                "1-128 of letters, digits, spaces, _.:/=+-@",
            )
        if len(value) > 256 or not _tag_text_ok(value):
            raise InputError(
                f"tags.{key}",
                f"value {value!r} is not valid",
                "0-256 of letters, digits, spaces, _.:/=+-@",
            )


def _tag_text_ok(text: str) -> bool:
    """Whether every character is a letter, separator or number (any script) or _.:/=+-@."""
    return all(c in TAG_EXTRA_CHARS or unicodedata.category(c)[0] in ("L", "Z", "N") for c in text)


def check_model_data_kms_keys(arns: list[str]) -> None:
    """SSE-KMS keys of the model data: key ARNs (IAM grants Decrypt by key ARN, not alias)."""
    if len(arns) > MAX_MODEL_DATA_KMS_KEYS:
        raise InputError(
            "model_data_kms_key_arns",
            f"{len(arns)} keys given",
            f"<= {MAX_MODEL_DATA_KMS_KEYS} key ARNs",
        )
    for i, arn in enumerate(arns):
        if not KMS_KEY_ARN_RE.fullmatch(arn):
            raise InputError(
                f"model_data_kms_key_arns[{i}]",
                f"{arn!r} is not a KMS key ARN (aliases and key ids cannot be granted in IAM)",
                "arn:aws:kms:<region>:<account>:key/<key id>",
            )
