"""The contract between the SDK's `CreateTrainingJob` request and the training driver.

Standard library only: the training image installs this package beside vLLM and
speculators, and peagle_deploy imports it, so the request the SDK renders and what the
driver reads share one definition of channels, paths, hyperparameters and the metadata
file that travels with a trained drafter.

SageMaker's training-container layout (docs/platform-facts.md, "Training jobs"): input
channels are mounted at /opt/ml/input/data/<channel>, hyperparameters arrive as a JSON
object of strings at /opt/ml/input/config/hyperparameters.json, what the job leaves in
/opt/ml/model is uploaded to OutputDataConfig.S3OutputPath (uncompressed with
CompressionType NONE), /opt/ml/checkpoints is synced with CheckpointConfig.S3Uri (so a
spot job resumes from it), and the text of /opt/ml/output/failure becomes the job's
FailureReason.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Final

# --- SageMaker's paths inside a training container -----------------------------------
INPUT_DATA_ROOT: Final = "/opt/ml/input/data"
HYPERPARAMETERS_PATH: Final = "/opt/ml/input/config/hyperparameters.json"
MODEL_OUTPUT_DIR: Final = "/opt/ml/model"
CHECKPOINT_DIR: Final = "/opt/ml/checkpoints"
FAILURE_PATH: Final = "/opt/ml/output/failure"

SM_ROOT: Final = "/opt/ml"
SM_ROOT_ENV: Final = "PEAGLE_SM_ROOT"
"""Tests and local runs stand a directory in for /opt/ml by setting this variable;
SageMaker never sets it, so in a training job every path is the real one."""


def sm_path(path: str) -> Path:
    """`path` (one of the /opt/ml paths above) under $PEAGLE_SM_ROOT when it is set."""
    root = os.environ.get(SM_ROOT_ENV)
    if not root:
        return Path(path)
    return Path(root) / Path(path).relative_to(SM_ROOT)


# --- Channels (InputDataConfig[].ChannelName) -----------------------------------------
TARGET_CHANNEL: Final = "target"
"""The target model's weights with its tokenizer and chat template (S3 prefix)."""
DATA_CHANNEL: Final = "data"
"""The training conversations: chat JSONL files (S3 prefix)."""
CHANNELS: Final = (TARGET_CHANNEL, DATA_CHANNEL)


def channel_path(channel: str) -> str:
    return f"{INPUT_DATA_ROOT}/{channel}"


# --- Where the drafter lands in the job's output ----------------------------------------
DRAFTER_SUBDIR: Final = "drafter"
"""The drafter's files (config.json, model.safetensors, METADATA_FILE) sit in this
folder of /opt/ml/model, so the deployable prefix is
`<S3OutputPath>/<job>/output/model/drafter/`."""
METADATA_FILE: Final = "peagle-drafter.json"
"""Small JSON beside the weights: K trained, layers, mask id, acceptance per position,
data hash, versions (written by peagle_train.export, read by the SDK)."""
METADATA_SCHEMA_VERSION: Final = 1


def drafter_uri(s3_output_path: str, job_name: str) -> str:
    """The S3 prefix `peagle deploy` takes as `custom.drafter_uri` for a finished job
    whose OutputDataConfig has CompressionType NONE."""
    return f"{s3_output_path.rstrip('/')}/{job_name}/output/model/{DRAFTER_SUBDIR}/"


# --- Hyperparameters (CreateTrainingJob.HyperParameters; all values are strings) -------
HP_NUM_DEPTHS: Final = "num_depths"  # K the drafter is trained for (parallel tokens)
HP_NUM_LAYERS: Final = "num_layers"  # decoder layers of the drafter
HP_DRAFT_VOCAB: Final = "draft_vocab_size"
HP_MAX_SEQ_LEN: Final = "max_seq_len"
HP_EPOCHS: Final = "epochs"
HP_LEARNING_RATE: Final = "learning_rate"
HP_MAX_SAMPLES: Final = "max_samples"
HP_REGENERATE: Final = "regenerate"  # "true": the target rewrites the answers first
HP_SERVING_FORMAT: Final = "serving_format"  # one of SERVING_FORMATS
HP_ACCEPTANCE_FLOOR: Final = "acceptance_floor"  # tokens per step: floor_reason
HP_HELD_OUT: Final = "held_out_prompts"
HP_SEED: Final = "seed"
HP_DATA_FORMAT: Final = "data_format"  # one of DATA_FORMATS: how the data channel's JSONL reads
HP_MASK_TOKEN_ID: Final = "mask_token_id"  # sent only when the spec states it
HYPERPARAMETERS: Final = (
    HP_NUM_DEPTHS,
    HP_NUM_LAYERS,
    HP_DRAFT_VOCAB,
    HP_MAX_SEQ_LEN,
    HP_EPOCHS,
    HP_LEARNING_RATE,
    HP_MAX_SAMPLES,
    HP_REGENERATE,
    HP_SERVING_FORMAT,
    HP_ACCEPTANCE_FLOOR,
    HP_HELD_OUT,
    HP_SEED,
    HP_DATA_FORMAT,
    HP_MASK_TOKEN_ID,
)

DATA_FORMATS: Final = ("openai-chat", "sharegpt", "openai-completions")
"""The conversation formats of the data channel: those CreateOptimizationJob's speculative
decoding accepts for its training data (botocore 1.44.8, ModelSpeculativeDecodingConfig.
TrainingDataSource: ShareGPT, OpenAI Completions or OpenAI Chat Completions), one JSON
object per line: `openai-chat` `{"messages": [{"role", "content"}, ...]}`, `sharegpt`
`{"conversations": [{"from", "value"}, ...]}`, `openai-completions` `{"prompt",
"completion"}`."""

SERVING_FORMATS: Final = ("speculators", "eagle3-native")
"""`speculators`: config.json with `speculators_model_type: peagle` (vLLM reads it since
its speculators P-EAGLE support, e.g. 0.30.0); `eagle3-native`: the EAGLE-3 layout with
`pard_token`/`ptd_token_id` that AWS's heads use and vLLM 0.18.0 loads."""


# --- The metadata file (METADATA_FILE) --------------------------------------------------
@dataclass(frozen=True)
class DrafterMetadata:
    """What travels with a trained drafter: how it was trained and what it accepted on
    held-out prompts when served by vLLM with its target."""

    schema_version: int
    serving_format: str  # one of SERVING_FORMATS
    num_depths: int  # K trained
    num_layers: int
    mask_token_id: int
    draft_vocab_size: int
    target_model_type: str
    target_hidden_size: int
    aux_layer_ids: tuple[int, ...]
    acceptance_per_position: tuple[float, ...]  # accepted / drafts, position 1..K
    mean_accepted_per_step: float  # accepted draft tokens per drafting step
    held_out_prompts: int
    data_sha256: str
    versions: dict[str, str]


_INT_FIELDS: Final = (
    "schema_version",
    "num_depths",
    "num_layers",
    "mask_token_id",
    "draft_vocab_size",
    "target_hidden_size",
    "held_out_prompts",
)
_MAX_DEPTHS: Final = 64  # far above what any drafter drafts per step


def metadata_to_json(metadata: DrafterMetadata) -> str:
    doc = asdict(metadata)
    doc["aux_layer_ids"] = list(metadata.aux_layer_ids)
    doc["acceptance_per_position"] = list(metadata.acceptance_per_position)
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def _int_field(doc: dict[str, Any], name: str, low: int) -> int:
    value = doc.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name}: an integer >= {low} is required, got {value!r}")
    return value


def _float_field(value: object, name: str, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}: a number is required, got {value!r}")
    if not 0.0 <= float(value) <= high:
        raise ValueError(f"{name}: must lie in [0, {high:g}], got {value!r}")
    return float(value)


def _str_field(doc: dict[str, Any], name: str) -> str:
    value = doc.get(name)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name}: a non-empty string is required, got {value!r}")
    return value


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}: one of {', '.join(allowed)} is required, got {value!r}")


def parse_metadata(text: str) -> DrafterMetadata:
    """The metadata file's content; ValueError (one line naming the field) otherwise."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{METADATA_FILE}: not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{METADATA_FILE}: a JSON object is required")
    names = {f.name for f in fields(DrafterMetadata)}
    unknown = sorted(set(doc) - names)
    if unknown:
        raise ValueError(f"{unknown[0]}: not a field of {METADATA_FILE}")
    ints = {
        name: _int_field(doc, name, 1 if name != "mask_token_id" else 0) for name in _INT_FIELDS
    }
    if ints["schema_version"] != METADATA_SCHEMA_VERSION:
        raise ValueError(f"schema_version: {METADATA_SCHEMA_VERSION} is required")
    if ints["num_depths"] > _MAX_DEPTHS:
        raise ValueError(f"num_depths: at most {_MAX_DEPTHS}, got {ints['num_depths']}")
    serving_format = _str_field(doc, "serving_format")
    _check_choice("serving_format", serving_format, SERVING_FORMATS)
    aux = doc.get("aux_layer_ids")
    if not isinstance(aux, list) or not aux or not all(_is_int(x) and x >= 0 for x in aux):
        raise ValueError(f"aux_layer_ids: a non-empty list of layer indices, got {aux!r}")
    per_position = doc.get("acceptance_per_position")
    if not isinstance(per_position, list) or len(per_position) != ints["num_depths"]:
        raise ValueError("acceptance_per_position: one rate per trained depth (num_depths)")
    rates = tuple(_float_field(v, "acceptance_per_position", 1.0) for v in per_position)
    mean = _float_field(
        doc.get("mean_accepted_per_step"), "mean_accepted_per_step", float(ints["num_depths"])
    )
    digest = _str_field(doc, "data_sha256")
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError("data_sha256: 64 lower-case hex digits are required")
    versions = doc.get("versions")
    if not isinstance(versions, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in versions.items()
    ):
        raise ValueError("versions: an object of package name -> version strings is required")
    return DrafterMetadata(
        serving_format=serving_format,
        target_model_type=_str_field(doc, "target_model_type"),
        aux_layer_ids=tuple(aux),
        acceptance_per_position=rates,
        mean_accepted_per_step=mean,
        data_sha256=digest,
        versions=dict(versions),
        **ints,
    )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def tokens_per_step(mean_accepted_per_step: float) -> float:
    """What the acceptance floor is compared with: tokens one decoding step yields, the
    target's own plus the accepted draft tokens (vLLM's mean acceptance length, which
    `peagle bench` reports as `spec_decode_acceptance_length`; 1.0: no draft accepted)."""
    return 1.0 + mean_accepted_per_step


def floor_reason(
    mean_accepted_per_step: float, per_position: tuple[float, ...], drafts: int, floor: float
) -> str | None:
    """The job's FailureReason when the drafter yields fewer than `floor` tokens per step
    on the held-out prompts (one rule for the driver and the emulator's rehearsal)."""
    if drafts == 0:
        return "drafter validation: vLLM drafted nothing on the held-out prompts"
    length = tokens_per_step(mean_accepted_per_step)
    if length >= floor:
        return None
    rates = ", ".join(f"{r:.2f}" for r in per_position)
    return (
        f"drafter validation: {length:.2f} tokens per step ({mean_accepted_per_step:.2f} "
        f"accepted draft tokens) on held-out prompts, below the floor {floor:g} "
        f"(acceptance per position: {rates}; {drafts} drafting steps)"
    )
