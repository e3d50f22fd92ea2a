"""ResolvedTraining -> warnings: every rule of a training job, once, before any AWS call.

As the deployment planner's check step (plan/check.py): a rule takes the resolved job and
returns warnings; it raises InputError (one line naming the `train.` field, exit 2) to
refuse, and the first refusal ends the check, in the order of `RULES`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from peagle_deploy.catalog.engines import capability_table
from peagle_deploy.catalog.images import domains, parse_image_uri
from peagle_deploy.catalog.training import TRAINING_INSTANCE_TYPES
from peagle_deploy.errors import InputError
from peagle_deploy.findings import PlanWarning
from peagle_deploy.naming import MANAGED_TAG_COUNT
from peagle_deploy.train.resolve import ResolvedTraining, reads_speculators_format
from peagle_deploy.validation.aws_shapes import (
    KMS_KEY_ARN_RE,
    SG_RE,
    SUBNET_RE,
    check_drafter_uri,
    check_region,
    check_role,
    check_tags,
)
from peagle_deploy.validation.speculative import VLLM_MAX_DRAFT_TOKENS, max_draft_tokens

Rule = Callable[[ResolvedTraining], list[PlanWarning]]

PEAGLE_DECODER_FAMILIES = ("llama", "qwen3")
"""Target `model_type`s vLLM's P-EAGLE drafter loader has a class for: `peagle_arch_map`
in vllm/transformers_utils/configs/speculators/algos.py (vLLM 0.30.0: qwen3 ->
PeagleQwen3ForCausalLM, llama -> PeagleLlamaForCausalLM; other types raise "Unsupported
model_type"). The same two have EAGLE-3 classes (`eagle3_arch_map`), the native layout."""


@contextmanager
def _in_train() -> Iterator[None]:
    """Shared validators name spec fields without the `train.` of a training spec."""
    try:
        yield
    except InputError as exc:
        field = exc.field if exc.field.startswith("train.") else f"train.{exc.field}"
        raise InputError(field, exc.problem, exc.allowed) from None


def check_identity(job: ResolvedTraining) -> list[PlanWarning]:
    """Region, role and tags as SageMaker takes them."""
    spec = job.spec
    check_region(spec.region, "train.region")
    check_role(spec.role_arn, "train.role_arn")
    with _in_train():
        check_tags(spec.tags, MANAGED_TAG_COUNT)
    return []


def check_image(job: ResolvedTraining) -> list[PlanWarning]:
    """An ECR image pinned by digest (a tag can move under a running job's resume)."""
    image, field = job.spec.image_uri, "train.image_uri"
    parsed = parse_image_uri(image)
    allowed = "<account>.dkr.ecr.<region>.amazonaws.com/<repo>@sha256:<64 hex> (max 255 chars)"
    if parsed is None or len(image) > 255 or parsed.domain not in domains():
        raise InputError(field, f"{image!r} is not an ECR image URI", allowed)
    if parsed.digest is None:
        raise InputError(field, "is not pinned by digest", allowed)
    if parsed.region != job.spec.region:
        return [
            PlanWarning(
                field,
                f"train.image_uri: the image is in {parsed.region} but the job in "
                f"{job.spec.region}; copy it to an ECR repository of the job's region",
            )
        ]
    return []


def check_locations(job: ResolvedTraining) -> list[PlanWarning]:
    """Channels and output are S3 prefixes; the output is outside both channels (a
    later job would read its predecessor's output as data)."""
    spec = job.spec
    places = {
        "train.target.model_data_uri": spec.target.model_data_uri,
        "train.data.data_uri": spec.data.data_uri,
        "train.output_uri": spec.output_uri,
    }
    for field, uri in places.items():
        check_drafter_uri(field, uri)
    for field in ("train.target.model_data_uri", "train.data.data_uri"):
        inside = places[field]
        if spec.output_uri.startswith(inside) or inside.startswith(spec.output_uri):
            raise InputError(
                "train.output_uri",
                f"overlaps {field} ({inside})",
                "a prefix outside the target's and the data's",
            )
    return []


def check_key_and_vpc(job: ResolvedTraining) -> list[PlanWarning]:
    """A KMS key ARN in the job's region; subnets and security groups by SageMaker's counts."""
    spec, warnings = job.spec, []
    key = spec.kms_key_arn
    if key is None:
        warnings.append(
            PlanWarning(
                "train.kms_key_arn",
                "no train.kms_key_arn: SageMaker encrypts the output with the account's "
                "default S3 KMS key, which every principal of the account with S3 access uses",
            )
        )
    elif not KMS_KEY_ARN_RE.fullmatch(key):
        raise InputError("train.kms_key_arn", f"{key!r} is not a KMS key ARN", _KEY_ALLOWED)
    elif key.split(":")[3] != spec.region:
        raise InputError(
            "train.kms_key_arn",
            f"the key is in {key.split(':')[3]} but the job in {spec.region}; KMS keys are "
            "regional",
            f"a key in {spec.region}",
        )
    if spec.vpc is not None:
        _check_ids("train.vpc.subnets", spec.vpc.subnets, 16, SUBNET_RE.fullmatch, "subnet-<hex>")
        _check_ids(
            "train.vpc.security_groups", spec.vpc.security_groups, 5, SG_RE.fullmatch, "sg-<hex>"
        )
    return warnings


_KEY_ALLOWED = "arn:aws:kms:<region>:<account>:key/<id>"


def _check_ids(
    field: str, ids: list[str], most: int, valid: Callable[[str], object], shape: str
) -> None:
    if not 1 <= len(ids) <= most:
        raise InputError(field, f"{len(ids)} given", f"1-{most} ids")
    for i, value in enumerate(ids):
        if not valid(value):
            raise InputError(f"{field}[{i}]", f"{value!r} is not an id of this kind", shape)


def check_instance(job: ResolvedTraining) -> list[PlanWarning]:
    """A GPU training type the catalog knows; what it cannot use from the spec."""
    spec, instance = job.spec, job.instance
    if instance is None:
        raise InputError(
            "train.instance_type",
            f"{spec.instance_type!r} is not a GPU training instance type peagle-deploy knows",
            sorted(TRAINING_INSTANCE_TYPES),
        )
    warnings = (
        [
            PlanWarning(
                "train.instance_type",
                f"{instance.name}: {', '.join(instance.unverified_fields())} unverified "
                "(catalog/instances.py)",
            )
        ]
        if instance.unverified_fields()
        else []
    )
    if spec.volume_size_gb is not None and job.volume_size_gb is None:
        warnings.append(
            PlanWarning(
                "train.volume_size_gb",
                f"{instance.family} has local NVMe storage of a fixed size: "
                "train.volume_size_gb is not sent",
            )
        )
    if spec.instance_count > 1:
        warnings.append(
            PlanWarning(
                "train.instance_count",
                f"{spec.instance_count} instances are billed for the whole job",
            )
        )
    return warnings


def check_spot(job: ResolvedTraining) -> list[PlanWarning]:
    """MaxWaitTimeInSeconds >= MaxRuntimeInSeconds (botocore's StoppingCondition); the
    checkpoints a resumed spot job needs are always configured (render)."""
    spot = job.spec.spot
    if not spot.enabled and spot.max_wait_hours is not None:
        return [
            PlanWarning(
                "train.spot.max_wait_hours",
                "train.spot.max_wait_hours is ignored: spot is not enabled",
            )
        ]
    if job.max_wait_s is not None and job.max_wait_s < job.max_runtime_s:
        raise InputError(
            "train.spot.max_wait_hours",
            f"{job.max_wait_s / 3600:g} h is shorter than max_runtime_hours "
            f"({job.max_runtime_s / 3600:g} h); the wait includes the run",
            f">= {job.max_runtime_s / 3600:g}",
        )
    return []


def check_depths(job: ResolvedTraining) -> list[PlanWarning]:
    """K trained within what vLLM verifies per step (and what a sequence leaves room for)."""
    spec = job.spec
    bound = max_draft_tokens(spec.max_seq_len)
    if spec.num_depths > bound:
        raise InputError(
            "train.num_depths",
            f"{spec.num_depths} is more than vLLM can verify per step "
            f"({VLLM_MAX_DRAFT_TOKENS}, validation/speculative.py)",
            f"1-{bound}",
        )
    if spec.held_out_prompts >= (spec.max_samples or spec.held_out_prompts + 1):
        raise InputError(
            "train.held_out_prompts",
            f"{spec.held_out_prompts} leaves nothing of max_samples ({spec.max_samples}) "
            "to train on",
            f"< {spec.max_samples}",
        )
    return []


def check_architecture(job: ResolvedTraining) -> list[PlanWarning]:
    """A decoder family vLLM's P-EAGLE loader knows, with a hidden size, layers and a
    vocabulary the drafter's knobs fit in."""
    t, spec = job.target, job.spec
    where = "train.target.config_dir" if t.known_by == "config_dir" else "train.target.architecture"
    if t.known_by == "stated" and spec.target.architecture is None:
        raise InputError("train.target", "states no architecture", "config_dir or architecture")
    if t.known_by == "config_dir" and spec.target.architecture is not None:
        raise InputError(
            "train.target.architecture",
            "is given with config_dir, which the plan reads instead",
            "one of config_dir or architecture",
        )
    if t.model_type not in PEAGLE_DECODER_FAMILIES:
        raise InputError(
            f"{where}.model_type" if t.known_by == "stated" else where,
            f"model_type {t.model_type!r} has no P-EAGLE drafter class in vLLM",
            PEAGLE_DECODER_FAMILIES,
        )
    for name, value in (
        ("hidden_size", t.hidden_size),
        ("num_hidden_layers", t.num_hidden_layers),
        ("vocab_size", t.vocab_size),
    ):
        if value is None or value < 1:
            raise InputError(where, f"config.json has no {name}", f"a positive {name}")
    assert t.num_hidden_layers is not None and t.vocab_size is not None
    if spec.num_layers > t.num_hidden_layers:
        raise InputError(
            "train.num_layers",
            f"{spec.num_layers} is more than the target's {t.num_hidden_layers} layers",
            f"1-{t.num_hidden_layers} (AWS's heads use 4)",
        )
    if spec.draft_vocab_size > t.vocab_size:
        raise InputError(
            "train.draft_vocab_size",
            f"{spec.draft_vocab_size} is more than the target's vocabulary ({t.vocab_size})",
            f"1-{t.vocab_size}",
        )
    return []


def check_fit(job: ResolvedTraining) -> list[PlanWarning]:
    """The target's bfloat16 weights against the instance's GPUs: vLLM serves the target
    (regeneration, hidden-state extraction) on the job's own GPUs."""
    weights, instance = job.target.weights_gb, job.instance
    if weights is None or instance is None:
        return []
    per_gpu = instance.gpu_memory_gb.value
    total = per_gpu * instance.gpu_count.value
    if weights >= total:
        raise InputError(
            "train.instance_type",
            f"the target's weights (about {weights:.1f} GB in bfloat16) do not fit in "
            f"{instance.name}'s {total:g} GB of GPU memory",
            sorted(
                name
                for name, t in TRAINING_INSTANCE_TYPES.items()
                if t.gpu_memory_gb.value * t.gpu_count.value > 2 * weights
            ),
        )
    if weights >= per_gpu:
        return [
            PlanWarning(
                "train.instance_type",
                f"the target's weights (about {weights:.1f} GB in bfloat16) exceed one "
                f"{instance.gpu_model} ({per_gpu:g} GB): vLLM must split the target across "
                "GPUs (tensor parallel)",
            )
        ]
    return []


def check_tokenizer(job: ResolvedTraining) -> list[PlanWarning]:
    """A chat template (the training masks are taken from it) and a mask token that is
    not pad/eos (speculators' silent fallback)."""
    t = job.target
    warnings: list[PlanWarning] = []
    if t.chat_template is False:
        raise InputError(
            "train.target.config_dir",
            "has no chat template (tokenizer_config.json chat_template, chat_template.jinja)",
            "the target's tokenizer files with its chat template",
        )
    if t.chat_template is None:
        warnings.append(
            PlanWarning(
                "train.target.architecture",
                "the chat template is not checked without train.target.config_dir; "
                "the job fails at its start without one",
            )
        )
    if t.mask_source == "none":
        raise InputError(
            "train.target.mask_token_id",
            "the tokenizer has no mask token and no unused embedding row: speculators would "
            "mask with pad/eos",
            f"an id below {t.vocab_size} that the data never uses",
        )
    if t.mask_source == "unknown":
        warnings.append(
            PlanWarning(
                "train.target.mask_token_id",
                "the mask token is not known before the job (state it, or give config_dir)",
            )
        )
    mask = t.mask_token_id
    if mask is not None and t.vocab_size is not None and mask >= t.vocab_size:
        raise InputError(
            "train.target.mask_token_id",
            f"{mask} is outside the target's vocabulary ({t.vocab_size})",
            f"0-{t.vocab_size - 1}",
        )
    return warnings


def check_serving(job: ResolvedTraining) -> list[PlanWarning]:
    """The drafter's format against the vLLM that will serve it (the catalog's engines)."""
    spec = job.spec
    vllm = spec.serving_vllm
    if vllm is not None and vllm not in capability_table():
        return [
            PlanWarning(
                "train.serving_vllm",
                f"vLLM {vllm} is not in the catalog: the serving format is not checked",
            )
        ]
    if job.serving_format != "speculators":
        return []
    if vllm is None:
        return [
            PlanWarning(
                "train.serving_format",
                "speculators format: vLLM 0.18.0 (the default image of some catalog models) "
                "cannot load it; state train.serving_vllm",
            )
        ]
    if not reads_speculators_format(vllm):
        readers = sorted(v for v in capability_table() if reads_speculators_format(v))
        raise InputError(
            "train.serving_format",
            f"vLLM {vllm} cannot load the speculators P-EAGLE format",
            f"eagle3-native for {vllm}; speculators for vLLM {', '.join(readers)}",
        )
    return []


RULES: tuple[Rule, ...] = (
    check_identity,
    check_image,
    check_locations,
    check_key_and_vpc,
    check_instance,
    check_spot,
    check_depths,
    check_architecture,
    check_fit,
    check_tokenizer,
    check_serving,
)
"""Every rule a training job must pass, in the order problems are reported."""


def check_training(job: ResolvedTraining) -> list[PlanWarning]:
    """Run every rule; InputError on the first refusal."""
    warnings: list[PlanWarning] = []
    for rule in RULES:
        warnings += rule(job)
    return warnings
