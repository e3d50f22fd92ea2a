"""The training spec: a P-EAGLE drafter to train for the team's own target model.

A spec file whose top-level key is `train:` (`is_training_spec`); the mapping under it is a
`TrainingSpec`. As strict as the deployment spec (spec/models.py): unknown fields and
empty strings are refused, field docstrings are the documentation. `peagle plan --file`
renders it as the `CreateTrainingJob` request (peagle_deploy.train.plan).

The target's architecture is checked before any AWS call, from what the job itself will
read: `target.config_dir` is a local copy of the target's `config.json` and tokenizer
files (a few KB, the same files as under `model_data_uri`), so the decoder family, hidden
size, vocabulary, chat template and mask token are read, not transcribed. Where no local
copy exists, `target.architecture` states the four numbers instead; the chat template and
mask token then cannot be checked before the job (the plan warns, the driver checks).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from peagle_deploy.errors import InputError
from peagle_deploy.spec.errors import input_error_from
from peagle_deploy.spec.models import AWS_INT_MAX, refuse_empty
from peagle_deploy.spec.stage import StageName
from peagle_deploy.stage_training import JOB_PREFIX_PATTERN, MAX_JOB_PREFIX

TRAIN_KEY = "train"
"""The top-level key of a training spec file."""

DataFormat = Literal["openai-chat", "sharegpt", "openai-completions"]
"""peagle_train.contract.DATA_FORMATS, spelled out for the type checker (a test keeps
the two equal)."""
ServingFormat = Literal["speculators", "eagle3-native"]
"""peagle_train.contract.SERVING_FORMATS, likewise."""

MAX_RUNTIME_HOURS = 28 * 24
"""StoppingCondition.MaxRuntimeInSeconds: "The maximum value is 28 days" (botocore 1.44.8)."""

NAME_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$"


class _Strict(BaseModel):
    # Docstrings are read from the source here (the deployment spec's precomputed
    # field_docs.json keeps pydantic's source scan off `peagle plan MODEL`'s start; a
    # training spec is never on that path).
    model_config = ConfigDict(
        extra="forbid", frozen=True, allow_inf_nan=False, use_attribute_docstrings=True
    )

    _no_empty_strings = field_validator("*", mode="before")(refuse_empty)


class TargetArchitecture(_Strict):
    """The target's architecture, stated (without a local copy of its config files)."""

    model_type: str
    """config.json `model_type` (the decoder family: `qwen3`, `llama`)."""
    hidden_size: int = Field(ge=1, le=AWS_INT_MAX)
    """config.json `hidden_size`."""
    num_hidden_layers: int = Field(ge=1, le=AWS_INT_MAX)
    """config.json `num_hidden_layers`."""
    vocab_size: int = Field(ge=1, le=AWS_INT_MAX)
    """config.json `vocab_size` (the embedding rows, at least the tokenizer's length)."""


class TrainTarget(_Strict):
    """The model the drafter is trained for."""

    model_data_uri: str
    """S3 prefix (ending in `/`) of the target's weights with its tokenizer and chat
    template, as `peagle deploy` serves it: the training job's `target` channel."""
    config_dir: str | None = None
    """Local folder with the target's `config.json`, `tokenizer_config.json` and (when not
    inside it) `chat_template.jinja`: the plan reads the architecture, chat template and
    mask token from them. Relative to the spec file."""
    architecture: TargetArchitecture | None = None
    """The architecture stated instead of `config_dir` (chat template and mask token are
    then checked only by the job)."""
    mask_token_id: int | None = Field(default=None, ge=0, le=AWS_INT_MAX)
    """The token P-EAGLE's parallel drafts are masked with. Default: the tokenizer's mask
    token, else a new `<|MASK|>` in an unused embedding row (speculators' rule); a
    tokenizer with neither is refused, since speculators would fall back to pad/eos."""


class TrainData(_Strict):
    """The conversations the drafter learns from."""

    data_uri: str
    """S3 prefix (ending in `/`) of JSONL files: the training job's `data` channel."""
    format: DataFormat = "openai-chat"
    """`openai-chat` (`{"messages": [...]}`), `sharegpt` (`{"conversations": [...]}`) or
    `openai-completions` (`{"prompt", "completion"}`): the formats SageMaker's
    optimization job accepts for speculative-decoding data."""


class SpotSpec(_Strict):
    """Managed spot training: cheaper capacity that may be interrupted and resumed."""

    enabled: bool = False
    """EnableManagedSpotTraining; the job resumes from its checkpoints after an interruption."""
    max_wait_hours: float | None = Field(default=None, gt=0, le=MAX_RUNTIME_HOURS * 2)
    """MaxWaitTimeInSeconds in hours: waiting for capacity plus running; at least
    `max_runtime_hours` (default: twice it)."""


class TrainVpc(_Strict):
    """The training containers' VPC attachment."""

    subnets: list[str]
    """Subnet ids (1-16)."""
    security_groups: list[str]
    """Security group ids (1-5)."""


class TrainingSpec(_Strict):
    """One P-EAGLE drafter training job (the mapping under `train:`)."""

    name: str = Field(pattern=NAME_PATTERN)
    """Short name of the drafter (1-40 of a-z, 0-9, -): part of the job name and tags."""
    stage: StageName = "dev"
    """Stage the job belongs to (its role and tags)."""
    job_prefix: str | None = Field(
        default=None, pattern=JOB_PREFIX_PATTERN, min_length=1, max_length=MAX_JOB_PREFIX
    )
    """What the job's name starts with: the stage's `training.job_prefix` in cdk.json,
    which its CI and training roles are granted on. Default `peagle-train-<stage>--`,
    the stage's default there."""
    region: str
    """AWS region of the job, its image, buckets and key."""
    role_arn: str
    """IAM role the training job runs as (reads the channels, writes the output)."""
    image_uri: str
    """The training image (Dockerfile.train), pinned by digest: `<ecr repo>@sha256:<64 hex>`."""
    target: TrainTarget
    """The target model's weights and architecture."""
    data: TrainData
    """The training conversations."""
    regenerate: bool = True
    """Rewrite the conversations' answers with the target first (on-policy data, which
    matters most for a fine-tuned target)."""
    num_depths: int = Field(default=8, ge=1, le=AWS_INT_MAX)
    """K trained: parallel draft tokens per step the drafter learns (serve K up to this)."""
    num_layers: int = Field(default=4, ge=1, le=64)
    """Decoder layers of the drafter (AWS's P-EAGLE heads use 4; speculators' default is 1)."""
    draft_vocab_size: int = Field(default=32000, ge=1, le=AWS_INT_MAX)
    """Tokens the drafter predicts over (the most frequent in the data; at most the
    target's vocabulary)."""
    max_seq_len: int = Field(default=2048, ge=256, le=AWS_INT_MAX)
    """Longest training sequence in tokens (longer conversations are cut)."""
    epochs: int = Field(default=3, ge=1, le=1000)
    """Passes over the training data."""
    learning_rate: float = Field(default=1e-4, gt=0, lt=1)
    """Peak learning rate."""
    max_samples: int | None = Field(default=None, ge=1, le=AWS_INT_MAX)
    """Cap on the conversations used (default: all)."""
    held_out_prompts: int = Field(default=64, ge=1, le=100000)
    """Prompts kept out of training, served with target and drafter to measure acceptance."""
    seed: int = Field(default=0, ge=0, le=AWS_INT_MAX)
    """Seed of the data split and training."""
    acceptance_floor: float = Field(default=1.2, ge=1, le=AWS_INT_MAX)
    """Tokens per decoding step on the held-out prompts (the target's own plus accepted
    drafts: vLLM's acceptance length, `peagle bench`'s `spec_decode_acceptance_length`)
    below which the job fails; 1 is no draft ever accepted."""
    instance_type: str
    """A GPU training instance type (`peagle plan` lists the known ones on refusal)."""
    instance_count: int = Field(default=1, ge=1, le=AWS_INT_MAX)
    """Instances of the job (each billed for the whole run)."""
    spot: SpotSpec = Field(default_factory=SpotSpec)
    """Managed spot training."""
    max_runtime_hours: float = Field(default=24, gt=0, le=MAX_RUNTIME_HOURS)
    """MaxRuntimeInSeconds in hours: the job is stopped after this (and its cost bound)."""
    volume_size_gb: int | None = Field(default=None, ge=1, le=16384)
    """VolumeSizeInGB of EBS-backed families (default 512); families with local NVMe
    storage ignore it."""
    kms_key_arn: str | None = None
    """KMS key (ARN, in the job's region) of the job's output (OutputDataConfig) and of its
    EBS volume where the family attaches one (local NVMe storage is encrypted by the
    instance)."""
    vpc: TrainVpc | None = None
    """Run the training containers in these subnets and security groups."""
    output_uri: str
    """S3 prefix (ending in `/`) the job writes under: `<output_uri><job>/output/model/
    drafter/` is the drafter, `<output_uri><job>/checkpoints/` its checkpoints."""
    serving_format: ServingFormat | None = None
    """How the drafter is written: `speculators` (read by vLLM with speculators' P-EAGLE
    reader, e.g. 0.30.0) or `eagle3-native` (`pard_token`, what vLLM 0.18.0 loads).
    Default: `speculators` when `serving_vllm` reads it, else `eagle3-native`."""
    serving_vllm: str | None = Field(default=None, pattern=r"^\d+\.\d+\.\d+$")
    """The vLLM of the image the drafter will be served with (the catalog's engines)."""
    tags: dict[str, str] = Field(default_factory=dict)
    """Extra tags on the job (peagle:* tags are added and reserved)."""


def is_training_spec(document: Mapping[str, Any]) -> bool:
    """Whether a spec document is a training spec (its top-level key is `train:`)."""
    return TRAIN_KEY in document


def load_training_spec(source: str | Path | Mapping[str, Any]) -> TrainingSpec:
    """A TrainingSpec from a spec file or a mapping (with or without the `train:` key).

    A relative `target.config_dir` is made relative to the spec file's folder (to the
    working directory for a mapping). InputError names the field (`train.<path>`).
    """
    base = Path.cwd()
    if isinstance(source, Mapping):
        document: Mapping[str, Any] = source
    else:
        from peagle_deploy.documents import load_mapping

        path = Path(source)
        document = load_mapping(path, "--file")
        base = path.parent
    body = document.get(TRAIN_KEY, document) if is_training_spec(document) else document
    if is_training_spec(document) and len(document) > 1:
        extra = sorted(k for k in document if k != TRAIN_KEY)
        raise InputError(extra[0], "is not allowed beside `train:`", "only the `train:` key")
    if not isinstance(body, Mapping):
        raise InputError(TRAIN_KEY, "is not a mapping", "train: {name: ..., ...}")
    try:
        spec = TrainingSpec.model_validate(dict(body))
    except ValidationError as exc:
        error = input_error_from(exc, TrainingSpec)
        raise InputError(f"{TRAIN_KEY}.{error.field}", error.problem, error.allowed) from None
    folder = spec.target.config_dir
    if folder is not None and not Path(folder).is_absolute():
        target = spec.target.model_copy(update={"config_dir": str(base / folder)})
        spec = spec.model_copy(update={"target": target})
    return spec
