"""The four P-EAGLE launch models (FACTS.md 2, 6, 9).

S3 locations are templates with `{region}`: JumpStart keeps one content bucket per
region (`jumpstart-cache-prod-<region>`, read from the sagemaker SDK's
region_config.json). Only the GPT-OSS-20B drafter prefix is confirmed (FACTS.md 6);
the others follow the same layout and are marked unverified.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from peagle_deploy.catalog.sourced import Sourced, unverified, verified

JUMPSTART_BUCKET = "jumpstart-cache-prod-{region}"
"""JumpStart's public content bucket (sagemaker SDK region_config.json `content_bucket`)."""

_DRAFTER_PREFIX = f"s3://{JUMPSTART_BUCKET}/lmi-eagle-heads/models/"
_TARGET_GUESS = "JumpStart artifact prefix not confirmed; override with custom.model_data_uri"

DrafterKind = Literal["p-eagle", "eagle3", "other"]


@dataclass(frozen=True)
class ModelEntry:
    """One launch model: where its weights and its P-EAGLE drafter live, and defaults.

    The `Sourced` wrappers say whether each value is confirmed (`verified`) and by what.
    """

    key: str
    display_name: str
    jumpstart_id: Sourced[str]
    hf_model_id: Sourced[str]
    model_data_uri: Sourced[str]
    drafter_hf_id: Sourced[str | None]
    drafter_uri: Sourced[str]
    drafter_kind: DrafterKind
    drafter_parallel_tokens: Sourced[int | None]
    drafter_weights_gb: Sourced[float]
    default_num_speculative_tokens: Sourced[int]
    default_instance_type: Sourced[str]
    weights_gb: Sourced[float]
    dtype: Sourced[str]
    default_tensor_parallel_size: Sourced[int]
    default_max_model_len: Sourced[int]
    kv_cache_gb_per_1k_tokens: Sourced[float]
    gated: Sourced[bool]

    def sourced_fields(self) -> dict[str, Sourced[object]]:
        """Every `Sourced` value of the entry, by field name."""
        out: dict[str, Sourced[object]] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Sourced):
                out[f.name] = value
        return out

    def unverified_fields(self) -> list[str]:
        """Names of the values not confirmed by FACTS.md."""
        return [name for name, v in self.sourced_fields().items() if not v.verified]

    def model_data_uri_for(self, region: str) -> str:
        """The target weights' S3 prefix in `region`."""
        return self.model_data_uri.value.format(region=region)

    def drafter_uri_for(self, region: str) -> str:
        """The drafter's S3 prefix in `region`."""
        return self.drafter_uri.value.format(region=region)


def _kv(gb: float, config: str) -> Sourced[float]:
    return unverified(gb, f"estimate from the HF config ({config}), bf16 KV, full attention")


_MODELS: tuple[ModelEntry, ...] = (
    ModelEntry(
        key="gpt-oss-120b",
        display_name="GPT-OSS-120B",
        jumpstart_id=verified("openai-reasoning-gpt-oss-120b", "FACTS.md 6"),
        hf_model_id=unverified("openai/gpt-oss-120b", "public Hugging Face id"),
        model_data_uri=unverified(
            f"s3://{JUMPSTART_BUCKET}/openai-reasoning/openai-reasoning-gpt-oss-120b/"
            "artifacts/inference-prepack/v1.0.0/",
            _TARGET_GUESS,
        ),
        drafter_hf_id=verified("amazon/gpt-oss-120b-p-eagle", "FACTS.md 2"),
        drafter_uri=unverified(
            _DRAFTER_PREFIX + "gpt-oss-120b-p-eagle/", "same layout as gpt-oss-20b (FACTS.md 6)"
        ),
        drafter_kind="p-eagle",
        drafter_parallel_tokens=verified(8, "FACTS.md 2 (trained for 8 parallel tokens)"),
        drafter_weights_gb=unverified(1.5, "estimate: ~4 layers + draft vocab head"),
        default_num_speculative_tokens=verified(5, "FACTS.md 2 (model card example K=5)"),
        default_instance_type=unverified("ml.g7e.2xlarge", "fits 96 GB; not a JumpStart default"),
        weights_gb=unverified(65.0, "MXFP4 checkpoint size, approximate"),
        dtype=unverified("mxfp4", "OpenAI release format"),
        default_tensor_parallel_size=unverified(1, "one 96 GB GPU holds the MXFP4 weights"),
        default_max_model_len=unverified(8192, "same as gpt-oss-20b's JumpStart env"),
        kv_cache_gb_per_1k_tokens=_kv(0.074, "36 layers x 8 KV heads x 64"),
        gated=unverified(False, "Apache-2.0 weights"),
    ),
    ModelEntry(
        key="gpt-oss-20b",
        display_name="GPT-OSS-20B",
        jumpstart_id=verified("openai-reasoning-gpt-oss-20b", "FACTS.md 6"),
        hf_model_id=unverified("openai/gpt-oss-20b", "public Hugging Face id"),
        model_data_uri=unverified(
            f"s3://{JUMPSTART_BUCKET}/openai-reasoning/openai-reasoning-gpt-oss-20b/"
            "artifacts/inference-prepack/v1.0.0/",
            _TARGET_GUESS,
        ),
        drafter_hf_id=verified("amazon/GPT-OSS-20B-P-EAGLE", "FACTS.md 2"),
        drafter_uri=verified(
            _DRAFTER_PREFIX + "gpt-oss-20b-p-eagle/", "FACTS.md 6 (JumpStart spec, channel eagle)"
        ),
        drafter_kind="p-eagle",
        drafter_parallel_tokens=verified(10, "FACTS.md 2 (trained for 10 parallel tokens)"),
        drafter_weights_gb=unverified(1.0, "estimate: ~4 layers + draft vocab head"),
        default_num_speculative_tokens=verified(3, "FACTS.md 6 (JumpStart env K=3)"),
        default_instance_type=verified("ml.g7e.2xlarge", "FACTS.md 6 (JumpStart default)"),
        weights_gb=unverified(13.8, "MXFP4 checkpoint size, approximate"),
        dtype=unverified("mxfp4", "OpenAI release format"),
        default_tensor_parallel_size=verified(1, "FACTS.md 6 (SM_VLLM_TENSOR_PARALLEL_SIZE=1)"),
        default_max_model_len=verified(8192, "FACTS.md 6 (SM_VLLM_MAX_MODEL_LEN=8192)"),
        kv_cache_gb_per_1k_tokens=_kv(0.049, "24 layers x 8 KV heads x 64"),
        gated=unverified(False, "Apache-2.0 weights"),
    ),
    ModelEntry(
        key="qwen3-coder-30b-a3b-instruct",
        display_name="Qwen3-Coder-30B-A3B-Instruct",
        jumpstart_id=unverified(
            "huggingface-llm-qwen3-coder-30b-a3b-instruct", "FACTS.md 6: id not confirmed"
        ),
        hf_model_id=unverified("Qwen/Qwen3-Coder-30B-A3B-Instruct", "public Hugging Face id"),
        model_data_uri=unverified(
            f"s3://{JUMPSTART_BUCKET}/huggingface-llm/huggingface-llm-qwen3-coder-30b-a3b-instruct/"
            "artifacts/inference-prepack/v1.0.0/",
            _TARGET_GUESS,
        ),
        drafter_hf_id=verified("amazon/Qwen3-Coder-30B-A3B-Instruct-P-EAGLE", "FACTS.md 2"),
        drafter_uri=unverified(
            _DRAFTER_PREFIX + "qwen3-coder-30b-a3b-instruct-p-eagle/",
            "same layout as gpt-oss-20b (FACTS.md 6)",
        ),
        drafter_kind="p-eagle",
        drafter_parallel_tokens=unverified(None, "not published; K up to 11 measured (FACTS.md 9)"),
        drafter_weights_gb=unverified(1.0, "estimate: ~4 layers + draft vocab head"),
        default_num_speculative_tokens=unverified(3, "walkthrough K=3 (FACTS.md 9)"),
        default_instance_type=unverified("ml.g7e.2xlarge", "walkthrough instance (FACTS.md 9)"),
        weights_gb=unverified(61.1, "bf16: 30.5B parameters x 2 bytes"),
        dtype=unverified("bfloat16", "Hugging Face release"),
        default_tensor_parallel_size=unverified(1, "one 96 GB GPU holds the bf16 weights"),
        default_max_model_len=unverified(8192, "same as gpt-oss-20b's JumpStart env"),
        kv_cache_gb_per_1k_tokens=_kv(0.098, "48 layers x 4 KV heads x 128"),
        gated=unverified(False, "Apache-2.0 weights"),
    ),
    ModelEntry(
        key="gemma-4-31b-it",
        display_name="Gemma-4-31B-IT",
        jumpstart_id=verified("huggingface-vlm-gemma-4-31b-it", "FACTS.md 6"),
        hf_model_id=unverified("google/gemma-4-31b-it", "naming pattern of Gemma releases"),
        model_data_uri=unverified(
            f"s3://{JUMPSTART_BUCKET}/huggingface-vlm/huggingface-vlm-gemma-4-31b-it/"
            "artifacts/inference-prepack/v1.0.0/",
            _TARGET_GUESS,
        ),
        drafter_hf_id=unverified(None, "FACTS.md 2: no public head id found"),
        drafter_uri=unverified(
            _DRAFTER_PREFIX + "gemma-4-31b-it-p-eagle/", "same layout as gpt-oss-20b (FACTS.md 6)"
        ),
        drafter_kind="p-eagle",
        drafter_parallel_tokens=unverified(None, "not published"),
        drafter_weights_gb=unverified(2.0, "estimate: ~4 layers + draft vocab head"),
        default_num_speculative_tokens=unverified(3, "walkthrough K=3 (FACTS.md 9)"),
        default_instance_type=unverified("ml.g7e.2xlarge", "walkthrough instance (FACTS.md 9)"),
        weights_gb=unverified(62.0, "bf16: ~31B parameters x 2 bytes"),
        dtype=unverified("bfloat16", "Gemma release format"),
        default_tensor_parallel_size=unverified(1, "one 96 GB GPU holds the bf16 weights"),
        default_max_model_len=unverified(8192, "same as gpt-oss-20b's JumpStart env"),
        kv_cache_gb_per_1k_tokens=_kv(0.51, "Gemma-3-27B-like: 62 layers x 16 KV heads x 128"),
        gated=unverified(True, "Gemma terms of use need acceptance on JumpStart"),
    ),
)

MODELS: dict[str, ModelEntry] = {m.key: m for m in _MODELS}
"""The launch models by catalog key."""


def get_model(key: str) -> ModelEntry | None:
    """The catalog entry for a catalog key, or None (JumpStart ids resolve elsewhere)."""
    return MODELS.get(key)
