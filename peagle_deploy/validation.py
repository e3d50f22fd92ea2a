"""The project's own checks, before any AWS call.

botocore validates required fields and minimums client-side but not enums, maxima or
anything that needs to know the instance or the model; SageMaker would only refuse
those minutes into a deployment (or start a container that cannot work). Every check
raises SpecError naming the field and what is allowed, or returns warnings.
"""

from __future__ import annotations

import itertools
import math
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from peagle_serve.contract import SPECULATIVE_CONFIG_ENV

from peagle_deploy.catalog.instances import INSTANCE_TYPES, InstanceType, get_instance, is_gpu_less
from peagle_deploy.errors import SpecError
from peagle_deploy.render import MAX_MODEL_LEN_ENV, TENSOR_PARALLEL_ENV
from peagle_deploy.spec.models import CFN_ROUTING_STRATEGIES, DeploymentSpec, RolloutSpec
from peagle_deploy.spec.stage import check_stage_name

# --- shapes (from botocore's sagemaker model; FACTS.md 4) ----------------------------
REGION_RE = re.compile(r"^[a-z]{2,4}(-gov|-iso[a-z]?)?(-[a-z]+){1,2}-\d{1,2}$")
NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
CHANNEL_RE = re.compile(r"^[A-Za-z0-9.\-_]{1,64}$")
S3_BUCKET = r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]"
S3_PREFIX_RE = re.compile(rf"^s3://{S3_BUCKET}/(\S+/)?$")
S3_TARGZ_RE = re.compile(rf"^s3://{S3_BUCKET}/\S+\.tar\.gz$")
ECR_IMAGE_RE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/"
    r"[a-z0-9][a-z0-9._/\-]*(:[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}|@sha256:[0-9a-f]{64})$"
)
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

MAX_ENV_ENTRIES = 100
MAX_ENV_BYTES = 1024
MAX_ENV_TOTAL_BYTES = 32 * 1024
MAX_TAGS = 50
MAX_ALARMS = 10
MAX_ALARM_NAME = 255
RESERVED_TAG_PREFIXES = ("aws:", "peagle:")

V2_RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"
"""vLLM's switch to the V2 model runner, which has no parallel drafting (FACTS.md 2)."""

GPU_MEMORY_UTILIZATION = 0.9
"""vLLM's default share of each GPU it may use."""
OVERHEAD_GB_PER_GPU = 1.5
"""CUDA context, activations and graphs per GPU (estimate; keeps the fit check honest)."""


def check_region(region: str) -> None:
    """Region names look like `us-east-1`, `eu-central-2`, `us-gov-west-1`."""
    if not REGION_RE.match(region):
        raise SpecError("region", f"{region!r} is not a region name", "e.g. us-east-1, eu-west-2")


CUSTOM_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,62}$")


def check_names(spec: DeploymentSpec, endpoint_name: str) -> None:
    """Stage, endpoint and custom model names must fit SageMaker names and tag values.

    `custom.name` becomes the `peagle:model` tag value on every resource (TagValue
    pattern, 256 characters) and part of the default endpoint name.
    """
    custom_name = spec.custom.name if spec.custom is not None else None
    if custom_name is not None and not CUSTOM_NAME_RE.match(custom_name):
        raise SpecError(
            "custom.name",
            f"{custom_name!r} is not a short model name",
            "1-63 of [A-Za-z0-9._-], starting with a letter or digit",
        )
    check_stage_name(spec.stage, "stage")
    if not NAME_RE.match(endpoint_name):
        raise SpecError(
            "endpoint_name",
            f"{endpoint_name!r} is not a valid endpoint name",
            "1-63 of [a-zA-Z0-9-], starting and ending with a letter or digit",
        )


def check_image(field: str, image: str, region: str) -> list[str]:
    """SageMaker pulls serving images from ECR in the endpoint's region."""
    match = ECR_IMAGE_RE.match(image)
    if not match or len(image) > 255:
        raise SpecError(
            field,
            f"{image!r} is not an ECR image URI",
            "<account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag> (max 255 chars)",
        )
    if match.group("region") != region:
        return [
            f"{field}: image is in {match.group('region')} but the endpoint is in {region}; "
            "SageMaker needs the image in the endpoint's region"
        ]
    return []


def check_model_data_uri(field: str, uri: str | None) -> None:
    """Target weights: an S3 prefix ending in `/`, or a `.tar.gz` object."""
    if uri is None:
        raise SpecError(field, "is required", "s3://bucket/prefix/ or s3://bucket/key.tar.gz")
    if len(uri) > 1024 or not (S3_PREFIX_RE.match(uri) or S3_TARGZ_RE.match(uri)):
        raise SpecError(
            field,
            f"{uri!r} is not an S3 prefix or .tar.gz object",
            "s3://bucket/prefix/ or s3://bucket/key.tar.gz",
        )


def check_drafter_uri(field: str, uri: str | None) -> None:
    """Drafters are uncompressed checkpoints: an S3 prefix ending in `/`."""
    if uri is None:
        raise SpecError(field, "is required for speculative decoding", "s3://bucket/prefix/")
    if len(uri) > 1024 or not S3_PREFIX_RE.match(uri):
        raise SpecError(field, f"{uri!r} is not an S3 prefix", "s3://bucket/prefix/")


def check_channel(channel: str) -> None:
    """AdditionalModelDataSources ChannelName pattern (FACTS.md 4)."""
    if not CHANNEL_RE.match(channel):
        raise SpecError(
            "speculative.drafter_channel",
            f"{channel!r} is not a valid channel name",
            "1-64 of [A-Za-z0-9.-_]",
        )


def check_instance(instance_type: str) -> InstanceType:
    """The instance must be one the catalog knows, with NVIDIA GPUs."""
    instance = get_instance(instance_type)
    if instance is not None:
        return instance
    if is_gpu_less(instance_type):
        problem = f"{instance_type!r} has no NVIDIA GPU; vLLM needs one"
    else:
        problem = f"unknown instance type {instance_type!r}"
    raise SpecError("instance_type", problem, list(INSTANCE_TYPES))


def check_tensor_parallel(tp: int, instance: InstanceType) -> list[str]:
    """TP must not exceed the GPUs and must divide them (one replica per instance)."""
    gpus = instance.gpu_count.value
    divisors = [str(d) for d in range(1, gpus + 1) if gpus % d == 0]
    if tp > gpus or gpus % tp:
        raise SpecError(
            "tensor_parallel_size",
            f"{tp} does not fit {instance.name} ({gpus} GPU{'s' if gpus > 1 else ''})",
            divisors,
        )
    if tp < gpus:
        return [
            f"tensor_parallel_size={tp} uses {tp} of {instance.name}'s {gpus} GPUs; "
            "the rest stay idle"
        ]
    return []


def required_memory_gb(
    weights_gb: float,
    drafter_gb: float,
    kv_gb_per_1k: float | None,
    max_model_len: int | None,
    tp: int,
) -> float:
    """Weights + drafter + KV cache for one full-length sequence + per-GPU overhead."""
    kv_floor = (kv_gb_per_1k or 0.0) * (max_model_len or 0) / 1000.0
    return weights_gb + drafter_gb + kv_floor + OVERHEAD_GB_PER_GPU * tp


def check_fit(
    *,
    weights_gb: float | None,
    drafter_gb: float,
    kv_gb_per_1k: float | None,
    max_model_len: int | None,
    tp: int,
    instance: InstanceType,
) -> list[str]:
    """Refuse a model whose weights plus a KV-cache floor exceed the GPUs it spans."""
    if weights_gb is None:
        return ["fit check skipped: weight size unknown (set custom.weights_gb)"]
    need = required_memory_gb(weights_gb, drafter_gb, kv_gb_per_1k, max_model_len, tp)
    have = instance.gpu_memory_gb.value * tp * GPU_MEMORY_UTILIZATION
    if need <= have:
        return []
    fits = [
        i.name
        for i in INSTANCE_TYPES.values()
        if need - OVERHEAD_GB_PER_GPU * tp + OVERHEAD_GB_PER_GPU * i.gpu_count.value
        <= i.total_gpu_memory_gb * GPU_MEMORY_UTILIZATION
    ]
    raise SpecError(
        "instance_type",
        f"model needs about {need:.0f} GB (weights {weights_gb:g} GB + drafter + KV cache for "
        f"{max_model_len} tokens) but {instance.name} with tensor_parallel_size={tp} offers "
        f"{have:.0f} GB",
        fits or ["none of the known instance types"],
    )


def check_speculative(
    spec: DeploymentSpec,
    *,
    k: int,
    drafter_kind: str | None,
    drafter_parallel_tokens: int | None,
    drafter_field: str,
) -> list[str]:
    """K against the drafter; parallel drafting only with a P-EAGLE (EAGLE-3) drafter."""
    s = spec.speculative
    warnings: list[str] = []
    if s.mode == "none":
        if s.num_speculative_tokens is not None or s.num_speculative_tokens_per_batch_size:
            warnings.append("speculative.mode is none: num_speculative_tokens is ignored")
        return warnings
    check_channel(s.drafter_channel)
    kind_field = "speculative.drafter_kind" if s.drafter_kind else drafter_field
    if s.mode == "p-eagle" and drafter_kind != "p-eagle":
        raise SpecError(
            kind_field,
            f"parallel drafting (mode p-eagle) needs a P-EAGLE drafter, got {drafter_kind!r}",
            ["p-eagle (an EAGLE-3 head trained for parallel drafting)"],
        )
    if s.mode == "eagle3" and drafter_kind not in ("eagle3", "p-eagle"):
        raise SpecError(
            kind_field,
            f"mode eagle3 needs an EAGLE-3 drafter, got {drafter_kind!r}",
            ["eagle3", "p-eagle"],
        )
    if s.mode == "eagle3" and drafter_kind == "p-eagle":
        warnings.append(
            "mode eagle3 with a P-EAGLE head drafts sequentially; "
            "use mode p-eagle or point speculative.drafter_uri at an EAGLE-3 head"
        )
    v2 = spec.env.get(V2_RUNNER_ENV, "").strip().lower()
    if s.mode == "p-eagle" and v2 not in ("", "0", "false", "no", "off"):
        raise SpecError(
            f"env.{V2_RUNNER_ENV}",
            f"is {spec.env[V2_RUNNER_ENV]!r}, but vLLM's V2 model runner does not do parallel "
            "drafting (it fell back to sequential drafting, newer vLLM refuses)",
            "0 or unset with mode p-eagle",
        )
    if s.mode == "p-eagle" and drafter_parallel_tokens is not None and k > drafter_parallel_tokens:
        warnings.append(
            f"speculative.num_speculative_tokens={k} is above the {drafter_parallel_tokens} "
            "parallel tokens the drafter was trained for; acceptance will drop"
        )
    if s.num_speculative_tokens_per_batch_size is not None:
        check_k_schedule(s.num_speculative_tokens_per_batch_size, k)
    return warnings


def check_k_schedule(schedule: list[tuple[int, int, int]], k: int) -> None:
    """vLLM's rules for `[[start, end, K], ...]` (vllm/v1/spec_decode/dynamic/utils.py).

    Batch ranges are inclusive, ascending, non-overlapping and start at 1; K may be 0
    (no speculation at that batch size). vLLM silently clamps K to num_speculative_tokens;
    a larger K is refused here because it cannot mean what the user wrote.
    """
    field = "speculative.num_speculative_tokens_per_batch_size"
    allowed = f"[[1, end, K], [end+1, end2, K2], ...] with 0 <= K <= {k}"
    if not schedule:
        raise SpecError(field, "is empty", allowed)
    previous_end = 0
    for i, (start, end, kk) in enumerate(schedule):
        if start < 1 or end < start:
            raise SpecError(f"{field}[{i}]", f"batch range {start}-{end} is empty", allowed)
        if i == 0 and start != 1:
            raise SpecError(f"{field}[0]", f"first batch range starts at {start}, not 1", allowed)
        if start <= previous_end:
            raise SpecError(
                f"{field}[{i}]", f"batch range {start}-{end} overlaps or is out of order", allowed
            )
        if kk < 0 or kk > k:
            raise SpecError(
                f"{field}[{i}]", f"K={kk} is outside 0..num_speculative_tokens ({k})", allowed
            )
        previous_end = end


def check_env(user_env: Mapping[str, str], rendered: Mapping[str, str]) -> None:
    """Environment limits (FACTS.md 4) and keys only the renderer may set."""
    owners = {
        SPECULATIVE_CONFIG_ENV: "speculative.*",
        TENSOR_PARALLEL_ENV: "tensor_parallel_size",
        MAX_MODEL_LEN_ENV: "max_model_len",
    }
    for key, value in user_env.items():
        if key in owners:
            raise SpecError(f"env.{key}", "is set by peagle-deploy", f"use {owners[key]} instead")
        if not ENV_KEY_RE.match(key):
            raise SpecError(f"env.{key}", "is not a valid variable name", "[a-zA-Z_][a-zA-Z0-9_]*")
        if len(key.encode()) > MAX_ENV_BYTES or len(str(value).encode()) > MAX_ENV_BYTES:
            raise SpecError(f"env.{key}", "key or value is longer than 1024 bytes", "<= 1024 bytes")
    for key, value in rendered.items():
        # the renderer's own values (e.g. a long K schedule in the speculative config)
        # must fit too; name the spec field that produced them
        if key not in user_env and len(value.encode()) > MAX_ENV_BYTES:
            field = {SPECULATIVE_CONFIG_ENV: "speculative.num_speculative_tokens_per_batch_size"}
            raise SpecError(
                field.get(key, f"env.{key}"),
                f"renders {key} as {len(value.encode())} bytes; SageMaker allows 1024 per value",
                "fewer batch-size ranges" if key == SPECULATIVE_CONFIG_ENV else "<= 1024 bytes",
            )
    if len(rendered) > MAX_ENV_ENTRIES:
        raise SpecError(
            "env",
            f"{len(rendered)} variables in total (with peagle's own)",
            f"<= {MAX_ENV_ENTRIES}",
        )
    total = sum(len(k.encode()) + len(v.encode()) for k, v in rendered.items())
    if total > MAX_ENV_TOTAL_BYTES:
        raise SpecError("env", f"{total} bytes in total", f"<= {MAX_ENV_TOTAL_BYTES} bytes (32 KB)")


def check_variant(spec: DeploymentSpec, instance: InstanceType) -> list[str]:
    """Production-variant fields botocore does not check against the instance."""
    warnings: list[str] = []
    if spec.volume_size_gb is not None and not instance.ebs_volume.value:
        raise SpecError(
            "volume_size_gb",
            f"{instance.family} instances have local NVMe storage only and reject VolumeSizeInGB",
            "leave volume_size_gb unset for this instance type",
        )
    if spec.inference_ami_version is not None and (
        spec.inference_ami_version not in INFERENCE_AMI_VERSIONS
    ):
        raise SpecError(
            "inference_ami_version",
            f"{spec.inference_ami_version!r} is not a GPU inference AMI",
            INFERENCE_AMI_VERSIONS,
        )
    if spec.kms_key_id is not None:
        if not KMS_RE.match(spec.kms_key_id):
            raise SpecError(
                "kms_key_id",
                f"{spec.kms_key_id!r} is not a KMS key id, key ARN, alias or alias ARN",
                "1234abcd-..., arn:aws:kms:<region>:<account>:key/<id>, alias/<name>",
            )
        if not instance.ebs_volume.value:
            warnings.append(
                f"kms_key_id does not encrypt {instance.family}'s local NVMe storage "
                "(it is encrypted by the instance's hardware module)"
            )
    if spec.routing_strategy == "KV_AWARE":
        warnings.append(
            "routing_strategy KV_AWARE cannot be expressed in CloudFormation; "
            "the CDK path will refuse it (the SDK path works)"
        )
    if spec.scaling is not None:
        sc = spec.scaling
        if sc.min_instances > sc.max_instances:
            raise SpecError(
                "scaling.max_instances",
                f"{sc.max_instances} is below min_instances={sc.min_instances}",
                f">= {sc.min_instances}",
            )
        if not sc.min_instances <= spec.initial_instance_count <= sc.max_instances:
            raise SpecError(
                "initial_instance_count",
                f"{spec.initial_instance_count} is outside the scaling bounds",
                f"{sc.min_instances}-{sc.max_instances}",
            )
    return warnings


def check_kms_region(kms_key_id: str | None, region: str) -> None:
    """A KMS key (or alias) ARN must be in the endpoint's region: keys are regional."""
    if kms_key_id is None or not kms_key_id.startswith("arn:"):
        return
    key_region = kms_key_id.split(":")[3]
    if key_region != region:
        raise SpecError(
            "kms_key_id",
            f"the key is in {key_region} but the endpoint is in {region}; KMS keys are regional",
            f"a key or alias in {region}",
        )


def check_role(role: str | None) -> None:
    """Execution role ARN shape (IAM role ARNs only)."""
    if role is not None and not ROLE_ARN_RE.match(role):
        raise SpecError(
            "execution_role_arn",
            f"{role!r} is not an IAM role ARN",
            "arn:aws:iam::<12 digits>:role/<name>",
        )


def check_vpc(spec: DeploymentSpec) -> None:
    """Both subnets and security groups, within SageMaker's counts, with valid ids."""
    vpc = spec.vpc
    if vpc is None or (not vpc.subnet_ids and not vpc.security_group_ids):
        return
    if not 1 <= len(vpc.subnet_ids) <= 16:
        raise SpecError("vpc.subnet_ids", f"{len(vpc.subnet_ids)} subnets given", "1-16 subnet ids")
    if not 1 <= len(vpc.security_group_ids) <= 5:
        raise SpecError(
            "vpc.security_group_ids",
            f"{len(vpc.security_group_ids)} security groups given",
            "1-5 security group ids",
        )
    for i, subnet in enumerate(vpc.subnet_ids):
        if not SUBNET_RE.match(subnet):
            raise SpecError(
                f"vpc.subnet_ids[{i}]", f"{subnet!r} is not a subnet id", "subnet-<hex>"
            )
    for i, group in enumerate(vpc.security_group_ids):
        if not SG_RE.match(group):
            raise SpecError(
                f"vpc.security_group_ids[{i}]", f"{group!r} is not a security group id", "sg-<hex>"
            )


def check_network(spec: DeploymentSpec) -> list[str]:
    """Warn when a spec gives up network isolation (the secure default).

    Without EnableNetworkIsolation and without a VPC the container reaches the internet
    through SageMaker's own network; in a VPC, egress is whatever its routes allow.
    """
    if spec.network_isolation:
        return []
    in_vpc = spec.vpc is not None and bool(spec.vpc.subnet_ids)
    where = (
        "the VPC's routes decide its egress"
        if in_vpc
        else "with no vpc it has outbound internet access through SageMaker's network"
    )
    return [
        f"network_isolation is false: the model container can make network calls; {where}. "
        "P-EAGLE serving needs no network (weights and drafter come from S3)"
    ]


def check_tags(tags: Mapping[str, str], managed_count: int) -> None:
    """User tags: SageMaker's shape and limits; `aws:` and `peagle:` keys are reserved."""
    if len(tags) + managed_count > MAX_TAGS:
        raise SpecError(
            "tags",
            f"{len(tags)} tags plus {managed_count} peagle tags",
            f"<= {MAX_TAGS - managed_count}",
        )
    for key, value in tags.items():
        if key.lower().startswith(RESERVED_TAG_PREFIXES):
            raise SpecError(
                f"tags.{key}", "uses a reserved prefix", "keys not starting with aws: or peagle:"
            )
        if not 1 <= len(key) <= 128 or not _tag_text_ok(key):
            raise SpecError(
                f"tags.{key}",
                "is not a valid tag key",
                "1-128 of letters, digits, spaces, _.:/=+-@",
            )
        if len(value) > 256 or not _tag_text_ok(value):
            raise SpecError(
                f"tags.{key}",
                f"value {value!r} is not valid",
                "0-256 of letters, digits, spaces, _.:/=+-@",
            )


def _tag_text_ok(text: str) -> bool:
    """Whether every character is a letter, separator or number (any script) or _.:/=+-@."""
    return all(c in TAG_EXTRA_CHARS or unicodedata.category(c)[0] in ("L", "Z", "N") for c in text)


def check_rollout(spec: DeploymentSpec) -> list[str]:
    """Alarm limits; warn where SageMaker's step caps make canary/linear doubtful.

    The API reference caps a canary at 50% and a linear step at 10-50% of the variant's
    instances; with one instance that cannot hold, so the update may be refused.
    """
    check_alarms(spec)
    rollout = spec.rollout.resolved(spec.initial_instance_count)
    warnings = check_rollout_timeout(rollout)
    strategy = rollout.strategy
    if strategy in ("canary", "linear") and spec.initial_instance_count < 2:
        warnings.append(
            f"rollout.strategy={strategy} with initial_instance_count=1: SageMaker caps the "
            "first step at 50% of the instances; use all-at-once or 2+ instances"
        )
    return warnings


def check_rollout_timeout(rollout: RolloutSpec) -> list[str]:
    """MaximumExecutionTimeoutInSeconds must exceed the rollout's waits.

    botocore's BlueGreenUpdatePolicy documentation: the timeout "should be larger than the
    total waiting time specified in TerminationWaitInSeconds and WaitIntervalInSeconds";
    SageMaker refuses the UpdateEndpoint otherwise (only at update time, i.e. on the
    first changed spec, long after the endpoint was created). A linear rollout waits once
    per step; a timeout below that total is only warned about (the per-step accounting
    is not documented).
    """
    wait, term, limit = (
        rollout.wait_interval_s,
        rollout.termination_wait_s,
        rollout.max_execution_timeout_s,
    )
    if limit <= wait + term:
        raise SpecError(
            "rollout.max_execution_timeout_s",
            f"{limit} s is not larger than wait_interval_s + termination_wait_s "
            f"({wait} + {term} s)",
            f"{wait + term + 1}-28800",
        )
    if rollout.strategy == "linear":
        steps = math.ceil(100 / rollout.linear_step_percent)
        total = wait * steps + term
        if limit <= total:
            return [
                f"rollout.max_execution_timeout_s={limit} s may end a linear rollout of {steps} "
                f"steps early: {steps} x wait_interval_s + termination_wait_s = {total} s"
            ]
    return []


def check_alarms(spec: DeploymentSpec) -> None:
    """AutoRollbackConfiguration takes 1-10 alarm names of 1-255 characters."""
    alarms = spec.rollout.alarms
    if len(alarms) > MAX_ALARMS:
        raise SpecError("rollout.alarms", f"{len(alarms)} alarms given", f"<= {MAX_ALARMS}")
    for i, name in enumerate(alarms):
        # AlarmName pattern `(?!\s*$).+`: not blank, and `.` matches no line break
        if not name.strip() or len(name) > MAX_ALARM_NAME or "\n" in name or "\r" in name:
            raise SpecError(
                f"rollout.alarms[{i}]",
                f"{name!r} is not an alarm name",
                f"1-{MAX_ALARM_NAME} characters, not blank, on one line",
            )


def cdk_incompatibilities(spec_or_plan: DeploymentSpec | Any) -> list[str]:
    """What CloudFormation cannot express about a spec or Plan (the CDK path refuses these).

    The CDK side calls this (or reads `plan.cdk_incompatibilities`) and raises when the
    list is not empty; the SDK path can deploy such specs.
    """
    spec: DeploymentSpec = getattr(spec_or_plan, "spec", spec_or_plan)
    problems = []
    if spec.routing_strategy is not None and spec.routing_strategy not in CFN_ROUTING_STRATEGIES:
        problems.append(
            f"routing_strategy: {spec.routing_strategy} is not supported by "
            f"AWS::SageMaker::EndpointConfig (allowed: {', '.join(CFN_ROUTING_STRATEGIES)})"
        )
    return problems


# --- secrets in the container environment ---------------------------------------------
_SECRET_KEY_WORDS = frozenset({"TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "CREDENTIAL"})
_SECRET_KEY_WORDS |= {"CREDENTIALS", "PASSPHRASE"}
_SECRET_KEY_PAIRS = frozenset({("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY")})
_SECRET_VALUE_RE = re.compile(
    r"(hf_[A-Za-z0-9]{30,}"  # Hugging Face access token
    r"|\b(AKIA|ASIA)[0-9A-Z]{16}\b"  # AWS access key id
    r"|\bsk-[A-Za-z0-9_\-]{20,}"  # OpenAI-style API key
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"  # GitHub token
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----)"
)


def looks_like_secret(key: str, value: str) -> bool:
    """Whether an environment entry looks like a credential (by its name or its value).

    Names are split on `_` so that `SM_VLLM_API_KEY`, `HF_TOKEN` or
    `AWS_SECRET_ACCESS_KEY` match but `SM_VLLM_TOKENIZER` or `..._BATCHED_TOKENS` do not.
    """
    words = key.upper().split("_")
    if _SECRET_KEY_WORDS.intersection(words):
        return True
    if any(pair in _SECRET_KEY_PAIRS for pair in itertools.pairwise(words)):
        return True
    return bool(_SECRET_VALUE_RE.search(value))


def secret_env_keys(env: Mapping[str, str]) -> list[str]:
    """The keys of `env` whose entries look like secrets, sorted."""
    return sorted(k for k, v in env.items() if looks_like_secret(k, str(v)))


def check_secrets(spec: DeploymentSpec) -> list[str]:
    """Warn, naming the key (never the value), about secrets in the model environment.

    CreateModel's Environment is not secret storage: anyone with DescribeModel reads it,
    and the CDK path puts it in the CloudFormation template and in the log of the
    custom-resource Lambda (AwsCustomResource logs every request event). With network isolation (the
    default) the container cannot reach the Hugging Face Hub or any API anyway.
    """
    warnings = []
    for key in secret_env_keys(spec.env):
        hint = (
            "; with network_isolation the container has no network, so a hub token is useless"
            if spec.network_isolation
            else ""
        )
        warnings.append(
            f"env.{key} looks like a secret: SageMaker model environments are readable with "
            "sagemaker:DescribeModel and the CDK path writes them in clear into the "
            "CloudFormation template and the model provider's log; keep credentials out "
            f"of env (stage the weights in S3 instead){hint}"
        )
    return warnings


REDACTED = "<redacted>"


def redact_environment(request: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a CreateModel request with secret-looking environment values replaced.

    For showing a plan (`peagle plan`, logs); the request sent to SageMaker is unchanged.
    """
    redacted = dict(request)
    for field in ("PrimaryContainer",):
        container = redacted.get(field)
        if isinstance(container, Mapping) and isinstance(container.get("Environment"), Mapping):
            env = dict(container["Environment"])
            for key in secret_env_keys(env):
                env[key] = REDACTED
            redacted[field] = {**container, "Environment": env}
    return redacted


def check_model_data_kms_keys(arns: list[str]) -> None:
    """SSE-KMS keys of the model data: key ARNs (IAM grants Decrypt by key ARN, not alias)."""
    if len(arns) > MAX_MODEL_DATA_KMS_KEYS:
        raise SpecError(
            "model_data_kms_key_arns",
            f"{len(arns)} keys given",
            f"<= {MAX_MODEL_DATA_KMS_KEYS} key ARNs",
        )
    for i, arn in enumerate(arns):
        if not KMS_KEY_ARN_RE.match(arn):
            raise SpecError(
                f"model_data_kms_key_arns[{i}]",
                f"{arn!r} is not a KMS key ARN (aliases and key ids cannot be granted in IAM)",
                "arn:aws:kms:<region>:<account>:key/<key id>",
            )
