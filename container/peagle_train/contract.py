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

import os
from pathlib import Path
from typing import Final

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
HP_ACCEPTANCE_FLOOR: Final = "acceptance_floor"  # mean accepted tokens per step
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
