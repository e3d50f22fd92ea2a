"""An emulated account in which a plan would deploy: the test double's data for `peagle doctor`.

`stage_world(plan, ...)` writes into the emulator (moto in-process or `LocalAWS`) what a
real account needs before CreateEndpoint can succeed: the model data and a P-EAGLE
drafter at the plan's S3 locations (tiny but real files: a `config.json` and a
safetensors file whose header has the tensors the rules look for), the execution role
trusting SageMaker with a least-privilege policy derived from the plan's CreateModel
request, the serving image in its ECR registry, and the endpoint quota of the instance
type. Tests then break one piece at a time.

The weights are zero-filled and a few hundred bytes: only their headers are ever read.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from peagle_deploy.access import bucket_owner, ecr_repositories, owner_condition, s3_reads
from peagle_local.emulator.account_ext import (
    SAGEMAKER,
    AccountExtensions,
    endpoint_quota_name,
)

TINY_HIDDEN = 64
"""Hidden size of the emulated target; the drafter is built for it."""
DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4}
SAGEMAKER_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": "sagemaker.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    ],
}
ROLE_POLICY_NAME = "peagle-execution"
Tensors = Mapping[str, tuple[str, tuple[int, ...]]]

EMULATED_ACCOUNT = "123456789012"
"""moto's account (moto.core.DEFAULT_ACCOUNT_ID): what the emulated caller deploys as."""


def safetensors_bytes(tensors: Tensors) -> bytes:
    """A valid safetensors file whose tensors (name -> (dtype, shape)) are all zeros."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        count = 1
        for d in shape:
            count *= d
        size = count * DTYPE_BYTES[dtype]
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    return struct.pack("<Q", len(blob)) + blob + b"\0" * offset


def target_files(hidden: int = TINY_HIDDEN) -> dict[str, bytes]:
    """A tiny Llama-shaped target: config.json and one safetensors file."""
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": 4,
        "vocab_size": 256,
    }
    weights = {"model.embed_tokens.weight": ("BF16", (256, hidden))}
    return {
        "config.json": json.dumps(config).encode(),
        "model.safetensors": safetensors_bytes(weights),
    }


def drafter_config(hidden: int = TINY_HIDDEN, **changes: Any) -> dict[str, Any]:
    """config.json of a tiny P-EAGLE head (EAGLE-3 shape, mask token as AWS's heads carry it)."""
    config: dict[str, Any] = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": hidden,
        "target_hidden_size": hidden,
        "num_hidden_layers": 1,
        "vocab_size": 256,
        "draft_vocab_size": 128,
        "ptd_token_id": 255,
    }
    config.update(changes)
    return {k: v for k, v in config.items() if v is not None}


def drafter_tensors(hidden: int = TINY_HIDDEN, *, mask_hidden: bool = True) -> dict[str, Any]:
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {
        "fc.weight": ("BF16", (hidden, 3 * hidden)),
        "d2t": ("I64", (128,)),
    }
    if mask_hidden:
        tensors["mask_hidden"] = ("BF16", (1, 3 * hidden))
    return tensors


def drafter_files(
    config: Mapping[str, Any] | None = None, tensors: Tensors | None = None
) -> dict[str, bytes]:
    """A drafter checkpoint: config.json and model.safetensors."""
    return {
        "config.json": json.dumps(config if config is not None else drafter_config()).encode(),
        "model.safetensors": safetensors_bytes(
            tensors if tensors is not None else drafter_tensors()
        ),
    }


def split_s3_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def put_files(s3: Any, prefix_uri: str, files: Mapping[str, bytes]) -> None:
    """Write `files` under an S3 prefix (the bucket is created when missing)."""
    bucket, prefix = split_s3_uri(prefix_uri)
    _ensure_bucket(s3, bucket)
    for name, body in files.items():
        s3.put_object(Bucket=bucket, Key=f"{prefix}{name}", Body=body)


def clear_prefix(s3: Any, prefix_uri: str) -> None:
    """Delete every object under an S3 prefix (an emptied drafter location)."""
    bucket, prefix = split_s3_uri(prefix_uri)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            s3.delete_object(Bucket=bucket, Key=item["Key"])


def _ensure_bucket(s3: Any, bucket: str) -> None:
    region = s3.meta.region_name
    try:
        s3.head_bucket(Bucket=bucket)
    except Exception:
        extra = (
            {}
            if region == "us-east-1"
            else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        )
        s3.create_bucket(Bucket=bucket, **extra)


def execution_policy(
    plan: Any, *, partition: str = "aws", owner: str = EMULATED_ACCOUNT
) -> dict[str, Any]:
    """A least-privilege policy for the plan's model (the CDK role's S3, ECR and KMS
    grants): reads pinned to the bucket owner (`s3:ResourceAccount`: the spec's
    `expected_bucket_owner`, else `owner`, the emulated account; JumpStart's buckets
    apart), as the CDK stack's role is."""

    reads = s3_reads(plan.create_model)
    expected = plan.spec.expected_bucket_owner or owner
    statements: list[dict[str, Any]] = []
    for read in reads:
        condition = owner_condition(bucket_owner(read.bucket, expected))
        statements.append(
            {
                "Effect": "Allow",
                "Action": "s3:GetObject",
                "Resource": f"arn:{partition}:s3:::{read.object_pattern}",
                **({"Condition": condition} if condition else {}),
            }
        )
        if read.list_prefix is not None:
            statements.append(
                {
                    "Effect": "Allow",
                    "Action": "s3:ListBucket",
                    "Resource": f"arn:{partition}:s3:::{read.bucket}",
                    "Condition": {"StringLike": {"s3:prefix": [read.list_prefix]}, **condition},
                }
            )
    statements.append(
        {
            "Effect": "Allow",
            "Action": [
                "ecr:BatchCheckLayerAvailability",
                "ecr:BatchGetImage",
                "ecr:GetDownloadUrlForLayer",
            ],
            "Resource": [r.arn(partition) for r in ecr_repositories(plan.create_model)],
        }
    )
    statements.append({"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"})
    account = plan.execution_role_arn.split(":")[4]
    keys = sorted(
        key if key.startswith("arn:") else f"arn:{partition}:kms:{plan.region}:{account}:key/{key}"
        for key in [*plan.spec.model_data_kms_key_arns, *filter(None, [plan.spec.kms_key_id])]
    )
    if keys:
        statements.append({"Effect": "Allow", "Action": "kms:Decrypt", "Resource": keys})
    return {"Version": "2012-10-17", "Statement": statements}


def _exists_ok(call: Any, **params: Any) -> None:
    """Create, unless it exists (one account may be staged for several plans)."""
    from botocore.exceptions import ClientError

    try:
        call(**params)
    except ClientError as exc:
        if "AlreadyExists" not in str(exc.response.get("Error", {}).get("Code", "")):
            raise


@dataclass(frozen=True)
class StagedWorld:
    """What `stage_world` created, for tests that break one piece."""

    role_name: str
    model_data_uri: str
    drafter_uri: str | None
    image_repository: str
    image_registry: str
    image_tag: str


def _endpoint_quota(quotas: Any, operation: str, instance_type: str) -> dict[str, Any] | None:
    """The hosting quota of `instance_type` as the Service Quotas listing `operation`
    gives it (None: not listed)."""
    name = endpoint_quota_name(instance_type)
    for page in quotas.get_paginator(operation).paginate(ServiceCode=SAGEMAKER):
        for quota in page.get("Quotas", []):
            if quota.get("QuotaName") == name:
                return dict(quota)
    return None


def applied_endpoint_quota(quotas: Any, instance_type: str) -> float:
    """The applied hosting quota of `instance_type` (0 when only the default is listed)."""
    quota = _endpoint_quota(quotas, "list_service_quotas", instance_type)
    return 0.0 if quota is None else float(quota.get("Value", 0))


def request_endpoint_quota(quotas: Any, instance_type: str, value: float) -> str:
    """Raise the hosting quota of `instance_type` to `value` through Service Quotas, as a
    user would (the code read from the AWS defaults list); returns the quota code."""
    quota = _endpoint_quota(quotas, "list_aws_default_service_quotas", instance_type)
    if quota is None:
        raise LookupError(
            f"Service Quotas lists no quota '{endpoint_quota_name(instance_type)}' in "
            f"{quotas.meta.region_name}"
        )
    quotas.request_service_quota_increase(
        ServiceCode=SAGEMAKER, QuotaCode=quota["QuotaCode"], DesiredValue=value
    )
    return str(quota["QuotaCode"])


def stage_world(
    plan: Any,
    session: Any,
    account: AccountExtensions | None,
    *,
    endpoint_quota: float = 4,
    endpoint_url: str | None = None,
) -> StagedWorld:
    """Create, in the emulator, everything the plan needs to pass `peagle doctor`.

    `session` is a boto3 Session for the emulator (its clients honour AWS_ENDPOINT_URL,
    or pass `endpoint_url`); `account` receives the endpoint quota, or, None (a server in
    another process), the quota is requested through Service Quotas.
    """
    from peagle_deploy.doctor.image import parse_image

    def client(service: str) -> Any:
        return session.client(service, region_name=plan.region, endpoint_url=endpoint_url)

    s3 = client("s3")
    model_uri = plan.model_data_uri
    if model_uri.endswith("/"):
        put_files(s3, model_uri, target_files())
    else:
        bucket, key = split_s3_uri(model_uri)
        _ensure_bucket(s3, bucket)
        s3.put_object(Bucket=bucket, Key=key, Body=b"\x1f\x8b emulated model archive")
    if plan.drafter_uri:
        put_files(s3, plan.drafter_uri, drafter_files())

    iam = client("iam")
    role_name = plan.execution_role_arn.rsplit("/", 1)[-1]
    _exists_ok(
        iam.create_role, RoleName=role_name, AssumeRolePolicyDocument=json.dumps(SAGEMAKER_TRUST)
    )
    iam.put_role_policy(
        RoleName=role_name,
        PolicyName=ROLE_POLICY_NAME,
        PolicyDocument=json.dumps(execution_policy(plan)),
    )

    image = parse_image(plan.image_uri)
    if image is None:
        raise ValueError(f"not an ECR image: {plan.image_uri}")
    repository, tag = image.repository, image.reference
    ecr = client("ecr")
    _exists_ok(ecr.create_repository, repositoryName=repository, registryId=image.account)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
    }
    _exists_ok(
        ecr.put_image, repositoryName=repository, imageManifest=json.dumps(manifest), imageTag=tag
    )

    if account is not None:
        account.set_endpoint_quota(plan.instance_type, endpoint_quota, region=plan.region)
    else:
        request_endpoint_quota(client("service-quotas"), plan.instance_type, endpoint_quota)
    return StagedWorld(
        role_name=role_name,
        model_data_uri=model_uri,
        drafter_uri=plan.drafter_uri,
        image_repository=repository,
        image_registry=image.account,
        image_tag=tag,
    )
