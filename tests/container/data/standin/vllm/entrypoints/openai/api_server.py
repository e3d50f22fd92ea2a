"""Stand-in for `python3 -m vllm.entrypoints.openai.api_server` (NOT vLLM).

What it does, so the container test can check what the image really started:
- prints one JSON line `{"stub_vllm": "started", ...}` with its argv, the environment
  variables the preflight sets, and the chain of parent processes (to see the
  supervisor); imports every `--middleware` class as vLLM would;
- serves on `--port`: GET/POST /ping -> 200; POST /invocations -> an OpenAI chat
  completion (400 on a body that is not JSON); GET /metrics -> vLLM's speculative
  decoding counters (`vllm:spec_decode_*_total`), which grow by one draft of K tokens
  with ACCEPTED_PER_DRAFT accepted per invocation;
- on SIGTERM prints `{"stub_vllm": "signal", "signal": 15}` and exits 0.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ACCEPTED_PER_DRAFT = 3
WATCHED_ENV = ("VLLM_USE_V2_MODEL_RUNNER", "PEAGLE_ENDPOINT_NAME", "PYTHONPATH")


def log(event: str, **fields: Any) -> None:
    print(json.dumps({"stub_vllm": event, **fields}), flush=True)


def parent_chain() -> list[str]:
    """Command names from this process's parent up to PID 1."""
    names: list[str] = []
    pid = os.getppid()
    while pid > 0 and len(names) < 10:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                names.append(" ".join(p.decode() for p in f.read().split(b"\0") if p))
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return names


class Counters:
    def __init__(self, k: int) -> None:
        self.k = k
        self.lock = threading.Lock()
        self.drafts = 0
        self.draft_tokens = 0
        self.accepted = 0
        self.per_position = [0] * k

    def draft(self) -> None:
        accepted = min(ACCEPTED_PER_DRAFT, self.k)
        with self.lock:
            self.drafts += 1
            self.draft_tokens += self.k
            self.accepted += accepted
            for i in range(accepted):
                self.per_position[i] += 1

    def prometheus(self) -> str:
        labels = 'engine="0",model_name="standin"'
        with self.lock:
            lines = []
            for name, value in (
                ("vllm:spec_decode_num_drafts", self.drafts),
                ("vllm:spec_decode_num_draft_tokens", self.draft_tokens),
                ("vllm:spec_decode_num_accepted_tokens", self.accepted),
            ):
                lines += [f"# TYPE {name} counter", f"{name}_total{{{labels}}} {float(value)}"]
            name = "vllm:spec_decode_num_accepted_tokens_per_pos"
            lines.append(f"# TYPE {name} counter")
            for i, value in enumerate(self.per_position):
                lines.append(f'{name}_total{{{labels},position="{i}"}} {float(value)}')
        return "\n".join(lines) + "\n"


def handler(counters: Counters, model: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/ping":
                self._send(200, b"", "application/json")
            elif self.path == "/metrics":
                self._send(200, counters.prometheus().encode(), "text/plain; version=0.0.4")
            else:
                self._send(404, b'{"error": "not found"}', "application/json")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if self.path == "/ping":
                self._send(200, b"", "application/json")
                return
            if self.path != "/invocations":
                self._send(404, b'{"error": "not found"}', "application/json")
                return
            try:
                request = json.loads(body)
            except ValueError:
                self._send(400, b'{"error": "body is not JSON"}', "application/json")
                return
            counters.draft()
            answer = {
                "id": f"chatcmpl-standin-{counters.drafts}",
                "object": "chat.completion",
                "model": request.get("model") or model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "stand-in answer"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
            }
            self._send(200, json.dumps(answer).encode(), "application/json")

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def main() -> int:
    argv = sys.argv[1:]
    parser = argparse.ArgumentParser(prog="api_server (stand-in)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--speculative-config")
    parser.add_argument("--middleware", action="append", default=[])
    ns, _ = parser.parse_known_args(argv)
    for dotted in ns.middleware:  # vLLM imports each class when it builds the app
        module, _, name = dotted.rpartition(".")
        getattr(importlib.import_module(module), name)
    spec = json.loads(ns.speculative_config) if ns.speculative_config else {}
    counters = Counters(int(spec.get("num_speculative_tokens", 0)))
    server = ThreadingHTTPServer(("0.0.0.0", ns.port), handler(counters, ns.model))

    def stop(signum: int, _frame: object) -> None:
        log("signal", signal=signum)
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    log(
        "started",
        argv=argv,
        env={name: os.environ.get(name) for name in WATCHED_ENV},
        parents=parent_chain(),
    )
    server.serve_forever()
    server.server_close()
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
