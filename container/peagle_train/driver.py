"""`python -m peagle_train train`: the training job from hyperparameters to drafter.

Steps, in order (each below is one function):
  preflight  hyperparameters, target (chat template, layer ids, mask token), data split
             into training conversations and held-out prompts, checkpoints set aside
  accelerator  the GPUs torchrun and vLLM run on
  regenerate   (regenerate=true) the target answers the training prompts itself
  prepare      prepare-data through the target's chat template, then hidden states from
               a vLLM server running extract_hidden_states; checks trainable tokens and
               the draft vocabulary's coverage
  train        torchrun + speculators' trainer, every knob pinned, resumable
  export       the best checkpoint, in the serving format asked for, to /opt/ml/model
  validate     target + drafter served together on the held-out prompts; below the
               floor the job fails and says why
  metadata     peagle-drafter.json beside the weights
A failure writes one line to /opt/ml/output/failure (the job's FailureReason).
"""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Final

from peagle_train import checkpoints, commands, contract, data, processes, target
from peagle_train.failures import DriverError
from peagle_train.hyperparameters import HyperparameterError, Hyperparameters, load_hyperparameters

WORK_DIR: Final = "/opt/ml/peagle-work"
"""Scratch for the split data, the prepared dataset and the hidden states: on the
training volume (VolumeSizeInGB), never uploaded (unlike /opt/ml/output/data)."""
VERSIONED: Final = ("vllm", "speculators", "torch", "transformers")


@dataclass(frozen=True)
class Job:
    hp: Hyperparameters
    layout: commands.Layout
    info: target.TargetInfo
    layer_ids: tuple[int, ...]
    mask_id: int
    held_out: list[str]
    data_sha256: str
    model_dir: Path


def write_failure(message: str) -> None:
    path = contract.sm_path(contract.FAILURE_PATH)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(message + "\n", encoding="utf-8")


def preflight() -> Job:
    """Everything decidable before a GPU is touched."""
    hp = load_hyperparameters(contract.sm_path(contract.HYPERPARAMETERS_PATH))
    target_dir = contract.sm_path(contract.channel_path(contract.TARGET_CHANNEL))
    info = target.inspect_target(target_dir)
    target.require_chat_template(info)
    layer_ids = target.resolve_layer_ids(info, hp.target_layer_ids)
    mask_id = target.resolve_mask_token(info, hp.mask_token_id)
    if hp.draft_vocab_size > info.vocab_size:
        raise DriverError(
            f"hyperparameter {contract.HP_DRAFT_VOCAB}: {hp.draft_vocab_size} is larger than "
            f"the target's vocab_size {info.vocab_size}",
            exit_code=2,
        )
    channel = contract.sm_path(contract.channel_path(contract.DATA_CHANNEL))
    split = data.split_held_out(channel, hp.held_out_prompts, hp.seed, hp.data_format)
    layout = commands.Layout(
        python=sys.executable,
        target=target_dir,
        work=contract.sm_path(WORK_DIR),
        checkpoints=contract.sm_path(contract.CHECKPOINT_DIR),
    )
    data.write_conversations(layout.train_file, split.train)
    moved = checkpoints.set_aside_incomplete(layout.train_checkpoints)
    if moved:
        processes.log(f"checkpoints: set aside incomplete epoch folders {', '.join(moved)}")
    done = checkpoints.complete_checkpoints(layout.train_checkpoints)
    if done:
        processes.log(f"checkpoints: the trainer resumes after epoch {done[-1].epoch}")
    processes.log(
        f"preflight: {len(split.train)} training conversations, {len(split.held_out_prompts)} "
        f"held-out prompts, layers {list(layer_ids)}, mask id {mask_id}, data {split.sha256}"
    )
    return Job(
        hp,
        layout,
        info,
        layer_ids,
        mask_id,
        split.held_out_prompts,
        split.sha256,
        contract.sm_path(contract.MODEL_OUTPUT_DIR),
    )


def count_gpus(dev: Path = Path("/dev")) -> int:
    """NVIDIA's container runtime exposes each GPU as /dev/nvidia<N>."""
    return sum(1 for p in dev.glob("nvidia*") if re.fullmatch(r"nvidia\d+", p.name))


def require_accelerator() -> int:
    gpus = count_gpus()
    if gpus == 0:
        raise DriverError(
            "accelerator: no GPU in the container; speculators' trainer needs one (it raises "
            "'No accelerator found' on CPU) and so does hidden-state extraction; choose a GPU "
            "instance type"
        )
    return gpus


def regenerate(job: Job) -> Path:
    """The training answers rewritten by the target (on-policy); resumable."""
    if not job.hp.regenerate:
        return job.layout.train_file
    done = job.layout.regenerated.with_name("done")
    if not done.exists():
        port = processes.free_port()
        job.layout.regenerated.parent.mkdir(parents=True, exist_ok=True)
        with processes.server(
            "regenerate", commands.generation_server(job.layout, port, job.hp), port
        ):
            processes.run("regenerate", commands.regenerate(job.layout, port, job.hp))
        done.write_text("regenerate-responses finished\n")
    return job.layout.regenerated


def prepare(job: Job, source: Path) -> None:
    """prepare-data and hidden states from one extraction server (its render endpoint
    applies the chat template; its connector writes the hidden states)."""
    port = processes.free_port()
    argv = commands.extraction_server(
        job.layout, port, job.hp, job.layer_ids, job.info.num_hidden_layers
    )
    with processes.server("extract", argv, port):
        if job.layout.prepared.exists():
            shutil.rmtree(job.layout.prepared)
        processes.run("prepare-data", commands.prepare_data(job.layout, port, job.hp, source))
        check_prepared(job.layout.prepared, job.hp.draft_vocab_size, job.info.vocab_size)
        processes.run("hidden-states", commands.hidden_states(job.layout, port, job.hp))


def check_prepared(prepared: Path, draft_vocab_size: int, target_vocab_size: int) -> float:
    """Zero trainable tokens and a draft vocabulary that misses the data are the two
    failures training itself would not report; returns the vocabulary's coverage."""
    import torch  # the image's; only the GPU-side steps need torch and datasets
    from datasets import load_from_disk

    # An empty result has no .arrow shard, which load_from_disk cannot open.
    rows = load_from_disk(str(prepared)).num_rows if any(prepared.glob("*.arrow")) else 0
    freq: dict[int, int] = torch.load(prepared / "token_freq.pt", weights_only=True)
    data.require_trainable(rows, sum(freq.values()))
    coverage = data.vocab_coverage(freq, draft_vocab_size, target_vocab_size)
    processes.log(f"prepare-data: draft vocabulary covers {coverage:.2%} of trainable tokens")
    data.require_coverage(coverage, draft_vocab_size)
    return coverage


def train(job: Job, gpus: int) -> checkpoints.Checkpoint:
    checkpoints.set_aside_incomplete(job.layout.train_checkpoints)
    processes.run("train", commands.train(job.layout, job.hp, gpus, job.layer_ids, job.mask_id))
    best = checkpoints.best_checkpoint(job.layout.train_checkpoints)
    if best is None:
        raise DriverError("train: the trainer finished without a complete checkpoint")
    if job.hp.draft_vocab_size < job.info.vocab_size:
        d2t = job.layout.prepared / f"d2t-{job.hp.draft_vocab_size}.npy"
        if not d2t.exists():
            raise DriverError(
                f"vocabulary: the trainer wrote no {d2t.name}, so it trained on the full "
                "target vocabulary instead of the draft vocabulary asked for"
            )
    processes.log(f"train: best checkpoint epoch {best.epoch} (val loss {best.val_loss})")
    return best


def versions() -> dict[str, str]:
    found = {}
    for name in VERSIONED:
        try:
            found[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def export_validate_record(job: Job, best: checkpoints.Checkpoint) -> None:
    from peagle_train import export, validate  # torch-side modules of the image

    out = job.model_dir / contract.DRAFTER_SUBDIR
    try:
        config = export.write_drafter(best.path, out, serving_format=job.hp.serving_format)
    except export.ExportError as e:
        raise DriverError(f"export: {e}") from None
    try:
        acceptance = validate.measure_acceptance(
            job.layout.target,
            out,
            job.held_out,
            num_speculative_tokens=job.hp.num_depths,
            chat=True,  # the held-out prompts are first user turns: sent as users send them
        )
    except validate.ValidationError as e:
        raise DriverError(f"validate: {e}") from None
    processes.log(f"validate: acceptance per position {list(acceptance.per_position)}")
    export.write_metadata(out, metadata(job, acceptance, config))
    reason = validate.floor_failure(acceptance, job.hp.acceptance_floor)
    if reason is not None:
        raise DriverError(reason)


def metadata(job: Job, acceptance: Any, config: dict[str, Any]) -> contract.DrafterMetadata:
    return contract.DrafterMetadata(
        schema_version=contract.METADATA_SCHEMA_VERSION,
        serving_format=job.hp.serving_format,
        num_depths=job.hp.num_depths,
        num_layers=job.hp.num_layers,
        mask_token_id=job.mask_id,
        draft_vocab_size=job.hp.draft_vocab_size,
        target_model_type=job.info.model_type,
        target_hidden_size=job.info.hidden_size,
        aux_layer_ids=tuple(job.layer_ids),
        acceptance_per_position=tuple(acceptance.per_position),
        mean_accepted_per_step=float(acceptance.mean_accepted_per_step),
        held_out_prompts=len(job.held_out),
        data_sha256=job.data_sha256,
        versions=versions(),
    )


def run_job() -> None:
    job = preflight()
    gpus = require_accelerator()
    source = regenerate(job)
    prepare(job, source)
    best = train(job, gpus)
    export_validate_record(job, best)
    processes.log(f"done: drafter in {job.model_dir / contract.DRAFTER_SUBDIR}")


USAGE: Final = "usage: python -m peagle_train train"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in (["train"], []):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        run_job()
    except HyperparameterError as e:
        return fail(str(e), 2)
    except DriverError as e:
        return fail(str(e), e.exit_code)
    except Exception as e:
        # Not one of the failures above: still one line for FailureReason, and the
        # traceback in the log for whoever fixes it.
        fail(f"driver: unexpected {type(e).__name__}: {e}".splitlines()[0], 1)
        raise
    return 0


def fail(message: str, code: int) -> int:
    write_failure(message)
    processes.log(f"failed: {message}")
    return code
