"""TrainingSpec -> ResolvedTraining: every default filled once, the target read once.

As the deployment planner's resolve step (plan/resolve.py): defaults come from the spec,
else the catalog (the training instance, the serving engine), else the project's; each
value's origin is recorded. The target's architecture is read here from
`target.config_dir` (or taken as stated); the rules that judge it are in train.check.
Resolve refuses only what it cannot read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from peagle_deploy.catalog.engines import capabilities_for
from peagle_deploy.catalog.training import TrainingInstance, training_instance
from peagle_deploy.documents import Limits, load_mapping
from peagle_deploy.errors import InputError
from peagle_deploy.train.spec import TrainingSpec

CONFIG_LIMITS = Limits(max_bytes=16 << 20)
"""config.json and tokenizer_config.json (a large tokenizer_config lists thousands of
added tokens, well under this)."""
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
"""Where transformers 5 reads a chat template besides tokenizer_config.json."""
SPECULATORS_MASK_KEY = "mask_token_id"
"""The config.json key of speculators' P-EAGLE format: a vLLM whose drafter loader reads
it (the catalog's engines `mask_token_keys`) reads that format."""
DEFAULT_VOLUME_GB = 512
"""EBS volume of families that attach one: the target's weights, the regenerated data
and the extracted hidden states (which grow with samples x sequence length)."""
DEFAULT_SPOT_WAIT_FACTOR = 2

Origin = Literal["spec", "config_dir", "catalog", "default"]
MaskSource = Literal["spec", "tokenizer", "added", "none", "unknown"]


@dataclass(frozen=True)
class TargetConfig:
    """What the plan knows of the target's architecture and tokenizer."""

    model_type: str | None
    hidden_size: int | None
    num_hidden_layers: int | None
    vocab_size: int | None
    known_by: Literal["config_dir", "stated"]
    chat_template: bool | None
    """Whether a chat template is present; None: not checkable (architecture stated)."""
    mask_token_id: int | None
    mask_source: MaskSource
    """`spec`; the `tokenizer`'s mask token; `added` (<|MASK|> in an unused row, the id
    being the tokenizer's length); `none` (no mask and no unused row); `unknown`."""
    tie_word_embeddings: bool | None = None
    weights_gb: float | None = None
    """bfloat16 weights of a dense decoder estimated from config.json (`dense_weights_gb`);
    None when a size it needs is missing."""


@dataclass(frozen=True)
class ResolvedTraining:
    """A training spec with every default filled."""

    spec: TrainingSpec
    target: TargetConfig
    instance: TrainingInstance | None
    """None when the catalog does not know the type (check refuses it)."""
    serving_format: str
    max_runtime_s: int
    max_wait_s: int | None
    """Only with spot."""
    volume_size_gb: int | None
    """None for families with local NVMe storage (fixed size)."""
    volume_kms_key: str | None
    origins: dict[str, Origin] = field(default_factory=dict)


def resolve_training(spec: TrainingSpec) -> ResolvedTraining:
    """Fill every default of `spec`; InputError only for a target config it cannot read."""
    origins: dict[str, Origin] = {}
    instance = training_instance(spec.instance_type)
    ebs = instance is not None and instance.ebs_volume.value
    volume = (spec.volume_size_gb or DEFAULT_VOLUME_GB) if ebs else None
    origins["volume_size_gb"] = "spec" if spec.volume_size_gb is not None else "default"
    runtime_s = round(spec.max_runtime_hours * 3600)
    wait_s = None
    if spec.spot.enabled:
        hours = spec.spot.max_wait_hours
        origins["spot.max_wait_hours"] = "spec" if hours is not None else "default"
        wait_s = round(hours * 3600) if hours is not None else runtime_s * DEFAULT_SPOT_WAIT_FACTOR
    serving_format, origins["serving_format"] = _serving_format(spec)
    return ResolvedTraining(
        spec=spec,
        target=read_target(spec),
        instance=instance,
        serving_format=serving_format,
        max_runtime_s=runtime_s,
        max_wait_s=wait_s,
        volume_size_gb=volume,
        volume_kms_key=spec.kms_key_arn if ebs else None,
        origins=origins,
    )


def reads_speculators_format(vllm: str) -> bool | None:
    """Whether that vLLM's drafter loader reads speculators' P-EAGLE `mask_token_id`;
    None when the catalog does not know the version."""
    caps = capabilities_for(vllm)
    return None if caps is None else SPECULATORS_MASK_KEY in caps.mask_token_keys


def _serving_format(spec: TrainingSpec) -> tuple[str, Origin]:
    """The spec's format; else `speculators` when the serving vLLM reads it, else the
    native EAGLE-3 layout every catalog engine loads."""
    if spec.serving_format is not None:
        return spec.serving_format, "spec"
    if spec.serving_vllm is not None and reads_speculators_format(spec.serving_vllm):
        return "speculators", "catalog"
    return "eagle3-native", "default"


def read_target(spec: TrainingSpec) -> TargetConfig:
    """The target's architecture from `config_dir`, or as stated in `architecture`."""
    target = spec.target
    if target.config_dir is None:
        arch = target.architecture
        mask_source: MaskSource = "spec" if target.mask_token_id is not None else "unknown"
        return TargetConfig(
            model_type=arch.model_type if arch else None,
            hidden_size=arch.hidden_size if arch else None,
            num_hidden_layers=arch.num_hidden_layers if arch else None,
            vocab_size=arch.vocab_size if arch else None,
            known_by="stated",
            chat_template=None,
            mask_token_id=target.mask_token_id,
            mask_source=mask_source,
        )
    folder = Path(target.config_dir)
    field_name = "train.target.config_dir"
    if not folder.is_dir():
        raise InputError(field_name, f"{folder} is not a folder", "a folder with config.json")
    config = _read_json(folder / "config.json", field_name)
    tokenizer = _read_json(folder / "tokenizer_config.json", field_name)
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else None
    arch_config = text or config  # a multimodal wrapper keeps the decoder in text_config
    vocab = _int(arch_config.get("vocab_size"))
    mask_id, mask_source = _mask_token(target.mask_token_id, tokenizer, vocab)
    return TargetConfig(
        model_type=_str(arch_config.get("model_type")),
        hidden_size=_int(arch_config.get("hidden_size")),
        num_hidden_layers=_int(arch_config.get("num_hidden_layers")),
        vocab_size=vocab,
        known_by="config_dir",
        chat_template=bool(tokenizer.get("chat_template"))
        or any((folder / name).is_file() for name in CHAT_TEMPLATE_FILES),
        mask_token_id=mask_id,
        mask_source=mask_source,
        tie_word_embeddings=arch_config.get("tie_word_embeddings")
        if isinstance(arch_config.get("tie_word_embeddings"), bool)
        else None,
        weights_gb=dense_weights_gb(arch_config),
    )


BYTES_PER_PARAMETER = 2
"""bfloat16, the dtype the target is served in for extraction and regeneration."""


def dense_weights_gb(config: dict[str, Any]) -> float | None:
    """The weights of a dense llama/qwen3-style decoder in GB: embeddings (and an untied
    output head), per layer the q/k/v/o projections (grouped-query k and v) and the
    gated MLP's three matrices. Norms and biases are left out (well under 1 %)."""
    sizes = {
        key: _int(config.get(key))
        for key in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "intermediate_size",
            "num_attention_heads",
        )
    }
    if any(v is None or v < 1 for v in sizes.values()):
        return None
    vocab, hidden, layers, mlp, heads = (int(v or 0) for v in sizes.values())
    kv_heads = _int(config.get("num_key_value_heads")) or heads
    head_dim = _int(config.get("head_dim")) or hidden // heads
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") is True else 2)
    parameters = embeddings + layers * (attention + 3 * hidden * mlp)
    return parameters * BYTES_PER_PARAMETER / 1e9


def _read_json(path: Path, field_name: str) -> dict[str, Any]:
    if not path.is_file():
        raise InputError(
            field_name,
            f"has no {path.name} ({path.parent})",
            "a folder with the target's config.json and tokenizer_config.json",
        )
    return load_mapping(path, field_name, CONFIG_LIMITS, fmt="json")


def _mask_token(
    stated: int | None, tokenizer: dict[str, Any], vocab: int | None
) -> tuple[int | None, MaskSource]:
    """speculators' resolve_mask_token_id order (0.9.0, speculators/train/utils.py): the
    given id, the tokenizer's mask token, a new <|MASK|> when the embedding has an unused
    row; past that it falls back to pad/eos/unk, which the plan refuses."""
    if stated is not None:
        return stated, "spec"
    added = _added_tokens(tokenizer)
    mask = tokenizer.get("mask_token")
    mask_text = mask.get("content") if isinstance(mask, dict) else mask
    if isinstance(mask_text, str) and mask_text:
        return added.get(mask_text), "tokenizer"
    if not added or vocab is None:
        return None, "unknown"
    length = max(added.values()) + 1  # added tokens follow the base vocabulary
    if length < vocab:
        return length, "added"
    return None, "none"


def _added_tokens(tokenizer: dict[str, Any]) -> dict[str, int]:
    """Token text -> id from tokenizer_config.json's `added_tokens_decoder`."""
    decoder = tokenizer.get("added_tokens_decoder")
    if not isinstance(decoder, dict):
        return {}
    out: dict[str, int] = {}
    for key, entry in decoder.items():
        if isinstance(entry, dict) and isinstance(entry.get("content"), str) and key.isdigit():
            out[entry["content"]] = int(key)
    return out


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
