"""The four P-EAGLE launch models (docs/platform-facts.md, "Launch models").

S3 locations are templates with `{region}`: JumpStart keeps one content bucket per
region (`jumpstart-cache-prod-<region>`, the sagemaker SDK's
sagemaker/core/jumpstart/region_config.json). What JumpStart's gpt-oss-20b spec states
(catalog/data/jumpstart.json) is verified; the other models follow the same layout and
stay unverified until a source confirms them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal

from peagle_deploy.catalog.facts import cite, load
from peagle_deploy.catalog.sourced import Sourced, unverified, verified

JUMPSTART_BUCKET = "jumpstart-cache-prod-{region}"
"""JumpStart's public content bucket (sagemaker SDK region_config.json `content_bucket`)."""

_DRAFTER_PREFIX = f"s3://{JUMPSTART_BUCKET}/lmi-eagle-heads/models/"
_TARGET_GUESS = "JumpStart artifact prefix not confirmed; override with custom.model_data_uri"
_GPT_OSS_20B = load("jumpstart.json")["models"]["openai-reasoning-gpt-oss-20b"]
_JS = "JumpStart gpt-oss-20b spec v" + _GPT_OSS_20B["version"] + ", " + cite(_GPT_OSS_20B["source"])
_JS_TOP = f"{_JS}, top-ranked config {_GPT_OSS_20B['config']}"
_CARD_20B = "https://huggingface.co/amazon/GPT-OSS-20B-P-EAGLE (model card)"
_CARD_120B = "https://huggingface.co/amazon/gpt-oss-120b-p-eagle (model card)"
_CARD_QWEN = (
    "https://huggingface.co/amazon/Qwen3-Coder-30B-A3B-Instruct-P-EAGLE (model card README.md, "
    "read as the stored copy of its raw/main/README.md)"
)
_CARD_GEMMA = (
    "https://docs.api.nvidia.com/nim/reference/google-gemma-4-31b-it (links the model card "
    "huggingface.co/google/gemma-4-31B-it; Apache License 2.0)"
)
_HEAD_GUESS = "assumed like the GPT-OSS heads (~1.7-1.8B parameters, bf16); not published"
_LIKE_20B = "assumed like gpt-oss-20b's JumpStart config"

DrafterKind = Literal["p-eagle", "eagle3", "other"]

TIKTOKEN_ENV = "TIKTOKEN_ENCODINGS_BASE"
"""gpt-oss loads its Harmony (tiktoken) encoding at start; with no network it must read it
from the model directory (JumpStart's gpt-oss-20b spec sets it, required_for_model_class)."""


@dataclass(frozen=True)
class ModelEntry:
    """One launch model: where its weights and its P-EAGLE drafter live, and defaults.

    The `Sourced` wrappers say whether each value is confirmed (`verified`) and by what.
    """

    key: str
    display_name: str
    jumpstart_id: Sourced[str]
    hf_model_id: Sourced[str]
    architecture: Sourced[str]
    """The target's model class, which the engine must register."""
    model_data_uri: Sourced[str]
    drafter_hf_id: Sourced[str | None]
    drafter_uri: Sourced[str]
    drafter_kind: DrafterKind
    drafter_mask_token_key: Sourced[str | None]
    """config.json key the P-EAGLE head keeps its mask-token id in."""
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
    model_data_download_timeout_s: Sourced[int]
    container_startup_health_check_timeout_s: Sourced[int]
    isolated_env: Sourced[dict[str, str]] = field(
        default_factory=lambda: unverified({}, "no extra environment known to be needed offline")
    )
    """Environment the model needs when the container has no network (network isolation)."""

    def sourced_fields(self) -> dict[str, Sourced[object]]:
        """Every `Sourced` value of the entry, by field name."""
        out: dict[str, Sourced[object]] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Sourced):
                out[f.name] = value
        return out

    def unverified_fields(self) -> list[str]:
        """Names of the values no recorded source confirms."""
        return [name for name, v in self.sourced_fields().items() if not v.verified]

    def model_data_uri_for(self, region: str) -> str:
        """The target weights' S3 prefix in `region`."""
        return self.model_data_uri.value.format(region=region)

    def drafter_uri_for(self, region: str) -> str:
        """The drafter's S3 prefix in `region`."""
        return self.drafter_uri.value.format(region=region)


def _kv(gb: float, config: str) -> Sourced[float]:
    return unverified(gb, f"estimate from the HF config ({config}), bf16 KV, full attention")


def _timeout(verified_here: bool) -> Sourced[int]:
    value = int(_GPT_OSS_20B["model_data_download_timeout_s"])
    return verified(value, _JS_TOP) if verified_here else unverified(value, _LIKE_20B)


def _health_timeout(verified_here: bool) -> Sourced[int]:
    value = int(_GPT_OSS_20B["container_startup_health_check_timeout_s"])
    return verified(value, _JS_TOP) if verified_here else unverified(value, _LIKE_20B)


_TIKTOKEN = {TIKTOKEN_ENV: _GPT_OSS_20B["environment"][TIKTOKEN_ENV]}

_MODELS: tuple[ModelEntry, ...] = (
    ModelEntry(
        key="gpt-oss-120b",
        display_name="GPT-OSS-120B",
        jumpstart_id=unverified(
            "openai-reasoning-gpt-oss-120b", "named like gpt-oss-20b's; its spec not read"
        ),
        hf_model_id=verified("openai/gpt-oss-120b", _CARD_120B + ": target model"),
        architecture=unverified("GptOssForCausalLM", "same family as gpt-oss-20b"),
        model_data_uri=unverified(
            f"s3://{JUMPSTART_BUCKET}/openai-reasoning/openai-reasoning-gpt-oss-120b/"
            "artifacts/inference-prepack/v1.0.0/",
            _TARGET_GUESS,
        ),
        drafter_hf_id=verified("amazon/gpt-oss-120b-p-eagle", _CARD_120B),
        drafter_uri=unverified(
            _DRAFTER_PREFIX + "gpt-oss-120b-p-eagle/", "same layout as gpt-oss-20b's drafter"
        ),
        drafter_kind="p-eagle",
        drafter_mask_token_key=unverified("ptd_token_id", "assumed like the gpt-oss-20b head"),
        drafter_parallel_tokens=verified(8, _CARD_120B + ": 8 parallel-token predictions"),
        drafter_weights_gb=verified(3.4, _CARD_120B + ": 1.7B parameters, bf16 (x 2 bytes)"),
        default_num_speculative_tokens=verified(5, _CARD_120B + ": vLLM example K=5"),
        default_instance_type=unverified("ml.g7e.2xlarge", "fits 96 GB; not a JumpStart default"),
        weights_gb=unverified(65.0, "MXFP4 checkpoint size, approximate"),
        dtype=unverified("mxfp4", "OpenAI release format"),
        default_tensor_parallel_size=unverified(1, "one 96 GB GPU holds the MXFP4 weights"),
        default_max_model_len=unverified(8192, _LIKE_20B),
        kv_cache_gb_per_1k_tokens=_kv(0.074, "36 layers x 8 KV heads x 64"),
        gated=verified(False, _CARD_120B + ": Apache License 2.0"),
        model_data_download_timeout_s=_timeout(False),
        container_startup_health_check_timeout_s=_health_timeout(False),
        isolated_env=unverified(dict(_TIKTOKEN), "same tokenizer loading as gpt-oss-20b"),
    ),
    ModelEntry(
        key="gpt-oss-20b",
        display_name="GPT-OSS-20B",
        jumpstart_id=verified("openai-reasoning-gpt-oss-20b", _JS),
        hf_model_id=verified(_GPT_OSS_20B["huggingface_id"], _JS),
        architecture=unverified("GptOssForCausalLM", "vLLM's gpt-oss class; config.json not read"),
        model_data_uri=verified(
            f"s3://{JUMPSTART_BUCKET}/{_GPT_OSS_20B['model_data_key']}",
            _JS + " (hosting_prepacked_artifact_key)",
        ),
        drafter_hf_id=verified("amazon/GPT-OSS-20B-P-EAGLE", _CARD_20B),
        drafter_uri=verified(
            f"s3://{JUMPSTART_BUCKET}/{_GPT_OSS_20B['drafter']['s3_uri']}",
            _JS_TOP + " (channel eagle)",
        ),
        drafter_kind="p-eagle",
        drafter_mask_token_key=unverified(
            "ptd_token_id", "AWS's P-EAGLE heads; the head's config.json not read here"
        ),
        drafter_parallel_tokens=verified(10, _CARD_20B + ": 10 parallel-token predictions"),
        drafter_weights_gb=verified(3.6, _CARD_20B + ": 1.8B parameters, bf16 (x 2 bytes)"),
        default_num_speculative_tokens=verified(3, _JS_TOP + " (SM_VLLM_SPECULATIVE_CONFIG K=3)"),
        default_instance_type=verified(_GPT_OSS_20B["default_instance_type"], _JS),
        weights_gb=unverified(13.8, "MXFP4 checkpoint size, approximate"),
        dtype=unverified("mxfp4", "OpenAI release format"),
        default_tensor_parallel_size=verified(1, _JS_TOP + " (SM_VLLM_TENSOR_PARALLEL_SIZE=1)"),
        default_max_model_len=verified(8192, _JS_TOP + " (SM_VLLM_MAX_MODEL_LEN=8192)"),
        kv_cache_gb_per_1k_tokens=_kv(0.049, "24 layers x 8 KV heads x 64"),
        gated=verified(False, _JS + f" (license {_GPT_OSS_20B['license']}, not gated)"),
        model_data_download_timeout_s=_timeout(True),
        container_startup_health_check_timeout_s=_health_timeout(True),
        isolated_env=verified(dict(_TIKTOKEN), _JS_TOP + f" ({TIKTOKEN_ENV})"),
    ),
    ModelEntry(
        key="qwen3-coder-30b-a3b-instruct",
        display_name="Qwen3-Coder-30B-A3B-Instruct",
        jumpstart_id=unverified(
            "huggingface-llm-qwen3-coder-30b-a3b-instruct", "JumpStart id not confirmed"
        ),
        hf_model_id=verified(
            "Qwen/Qwen3-Coder-30B-A3B-Instruct", _CARD_QWEN + ": the model its vLLM example serves"
        ),
        architecture=unverified("Qwen3MoeForCausalLM", "vLLM's Qwen3 MoE class"),
        model_data_uri=unverified(
            f"s3://{JUMPSTART_BUCKET}/huggingface-llm/huggingface-llm-qwen3-coder-30b-a3b-instruct/"
            "artifacts/inference-prepack/v1.0.0/",
            _TARGET_GUESS,
        ),
        drafter_hf_id=verified("amazon/Qwen3-Coder-30B-A3B-Instruct-P-EAGLE", _CARD_QWEN),
        drafter_uri=unverified(
            _DRAFTER_PREFIX + "qwen3-coder-30b-a3b-instruct-p-eagle/",
            "same layout as gpt-oss-20b's drafter",
        ),
        drafter_kind="p-eagle",
        drafter_mask_token_key=unverified("ptd_token_id", "assumed like the gpt-oss-20b head"),
        drafter_parallel_tokens=verified(
            18,
            _CARD_QWEN + ": a 4-layer P-EAGLE head trained with 18 parallel-token predictions "
            "against Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8",
        ),
        drafter_weights_gb=unverified(
            3.6, _HEAD_GUESS.replace("; not published", "; the card gives 4 layers, no size")
        ),
        default_num_speculative_tokens=unverified(
            7,
            "one K for every load (vLLM 0.30.0 takes no per-batch-size K with parallel "
            "drafting): the launch benchmark's best at concurrency 128 (best K 11 at low "
            "concurrency; docs/platform-facts.md, Published results); the card's vLLM example "
            "uses K=10 at concurrency 1, where its acceptance length on HumanEval is 4.30 at "
            "K=4, 6.66 at K=10, 7.51 at K=18 (drafts 5-10 add ~0.4 accepted tokens each, "
            "11-18 ~0.1); measure yours with peagle bench recommend-k",
        ),
        default_instance_type=unverified("ml.g7e.2xlarge", "one 96 GB GPU fits the weights"),
        weights_gb=unverified(61.1, "bf16: 30.5B parameters x 2 bytes"),
        dtype=unverified("bfloat16", "Hugging Face release"),
        default_tensor_parallel_size=unverified(1, "one 96 GB GPU holds the bf16 weights"),
        default_max_model_len=unverified(8192, _LIKE_20B),
        kv_cache_gb_per_1k_tokens=_kv(0.098, "48 layers x 4 KV heads x 128"),
        gated=unverified(False, "Apache-2.0 weights"),
        model_data_download_timeout_s=_timeout(False),
        container_startup_health_check_timeout_s=_health_timeout(False),
    ),
    ModelEntry(
        key="gemma-4-31b-it",
        display_name="Gemma-4-31B-IT",
        jumpstart_id=unverified("huggingface-vlm-gemma-4-31b-it", "JumpStart spec not read"),
        hf_model_id=verified("google/gemma-4-31B-it", _CARD_GEMMA),
        architecture=unverified(
            "Gemma4ForConditionalGeneration",
            "vLLM's Gemma-4 multimodal class (not in vLLM 0.18.0, in 0.27.1 and 0.30.0: "
            "engines.json); the checkpoint's config.json not read",
        ),
        model_data_uri=unverified(
            f"s3://{JUMPSTART_BUCKET}/huggingface-vlm/huggingface-vlm-gemma-4-31b-it/"
            "artifacts/inference-prepack/v1.0.0/",
            _TARGET_GUESS,
        ),
        drafter_hf_id=unverified(None, "no public P-EAGLE head id found"),
        drafter_uri=unverified(
            _DRAFTER_PREFIX + "gemma-4-31b-it-p-eagle/", "same layout as gpt-oss-20b's drafter"
        ),
        drafter_kind="p-eagle",
        drafter_mask_token_key=unverified("ptd_token_id", "assumed like the gpt-oss-20b head"),
        drafter_parallel_tokens=unverified(None, "not published"),
        drafter_weights_gb=unverified(3.6, _HEAD_GUESS),
        default_num_speculative_tokens=unverified(3, _LIKE_20B),
        default_instance_type=unverified("ml.g7e.2xlarge", "one 96 GB GPU fits the weights"),
        weights_gb=unverified(62.0, "bf16: 30.7B parameters + vision encoder x 2 bytes"),
        dtype=unverified("bfloat16", "Gemma release format"),
        default_tensor_parallel_size=unverified(1, "one 96 GB GPU holds the bf16 weights"),
        default_max_model_len=unverified(8192, _LIKE_20B),
        kv_cache_gb_per_1k_tokens=_kv(0.51, "Gemma-3-27B-like: 62 layers x 16 KV heads x 128"),
        gated=verified(False, _CARD_GEMMA + ": Apache-2.0, no acceptance gate"),
        model_data_download_timeout_s=_timeout(False),
        container_startup_health_check_timeout_s=_health_timeout(False),
    ),
)

MODELS: dict[str, ModelEntry] = {m.key: m for m in _MODELS}
"""The launch models by catalog key."""


def get_model(key: str) -> ModelEntry | None:
    """The catalog entry for a catalog key, or None (JumpStart ids resolve elsewhere)."""
    return MODELS.get(key)


def catalog_match(jumpstart_id: str) -> ModelEntry | None:
    """The catalog entry whose JumpStart id is `jumpstart_id`, if any."""
    for entry in MODELS.values():
        if entry.jumpstart_id.value == jumpstart_id:
            return entry
    return None
