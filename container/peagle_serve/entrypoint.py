"""`peagle-serve`: the container's ENTRYPOINT.

SageMaker starts an inference container as `docker run IMAGE serve`, so the one
positional argument accepted is `serve` (or none, for `docker run IMAGE`).

1. Turn SM_VLLM_* into vLLM's server arguments (envargs, the AWS images' semantics).
2. Run the P-EAGLE preflight (preflight); any problem -> one line on stderr, exit 2.
3. `--print-args`: print the full launch argv as one JSON list and exit 0.
4. Otherwise start vLLM the way the base image's own entrypoint does (launch: supervisor
   and route middleware when the image has them) in its own process group, forward
   SIGTERM/SIGINT to it, run the acceptance-metrics reporter beside it, and exit with
   its exit code (128+N when a signal N ended it). When it is gone its process group is
   killed, so no engine worker outlives the container's main process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Final

from peagle_serve import contract
from peagle_serve.envargs import ArgvError, build_args, resolve_model
from peagle_serve.launch import LaunchError, launch_argv
from peagle_serve.metrics import (
    DEFAULT_INTERVAL_S,
    METRICS_URL_ENV,
    MetricsReporter,
    metrics_url,
)
from peagle_serve.numeric_env import NumericEnvError, check_numeric_env
from peagle_serve.preflight import PreflightError, PreflightResult, run_preflight

PREFIX: Final = "peagle-serve"
EXIT_CONFIG: Final = 2
# What SageMaker passes as the container's argument (`docker run IMAGE serve`).
SERVE_COMMAND: Final = "serve"
# Seconds vLLM gets after a forwarded SIGTERM before its process group is killed.
STOP_GRACE_ENV: Final = contract.STOP_GRACE_ENV
DEFAULT_STOP_GRACE_S: Final = 25.0


# Flags whose values must not reach the logs.
SECRET_FLAGS: Final = frozenset({"--api-key", "--hf-token"})


def redact(argv: Sequence[str]) -> list[str]:
    """argv for logging, with the values of SECRET_FLAGS replaced by ***."""
    out: list[str] = []
    hiding = False
    for token in argv:
        if token.startswith("--"):
            hiding = token in SECRET_FLAGS
            out.append(token)
        else:
            out.append("***" if hiding else token)
    return out


def _log(kind: str, message: str) -> None:
    print(f"{PREFIX}: {kind}: {message}", file=sys.stderr, flush=True)


def prepare(env: Mapping[str, str]) -> tuple[list[str], PreflightResult]:
    """Preflight and vLLM server arguments for `env` (no program name); raises
    ArgvError / PreflightError."""
    target = resolve_model(env)
    result = run_preflight(env, target)
    overrides = {}
    if result.speculative_override is not None:
        overrides[contract.SPECULATIVE_CONFIG_ENV] = result.speculative_override
    args = build_args(env, overrides=overrides)
    return args, result


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def supervise(
    argv: Sequence[str],
    child_env: Mapping[str, str],
    *,
    reporter: MetricsReporter | None,
    stop_grace_s: float,
) -> int:
    """Run vLLM; forward SIGTERM/SIGINT/SIGHUP; return its exit code; leave nothing running.

    The handlers go in before vLLM starts, so a stop that arrives while it is being
    spawned is delivered to it right after, instead of killing only this process.
    """
    procs: list[subprocess.Popen[bytes]] = []
    pending: list[int] = []
    stop_requested_at: list[float] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        if not stop_requested_at:
            stop_requested_at.append(time.monotonic())
        if not procs:
            pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            procs[0].send_signal(signum)

    previous = {
        sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    }
    try:
        proc = subprocess.Popen(list(argv), env=dict(child_env), start_new_session=True)
    except BaseException:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        raise
    procs.append(proc)
    for signum in pending:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)
    if reporter is not None:
        reporter.start()
    try:
        killed = False
        while True:
            try:
                code = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                late = stop_requested_at and time.monotonic() - stop_requested_at[0] > stop_grace_s
                if late and not killed:
                    _log("warning", f"vLLM still up {stop_grace_s:g}s after a stop; killing it")
                    _kill_group(proc.pid)
                    killed = True
    finally:
        if reporter is not None:
            reporter.stop()
        _kill_group(proc.pid)  # engine workers vLLM may have left behind
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 - code if code < 0 else code


def main(args: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PREFIX,
        description="Start vLLM from SM_VLLM_* variables after a P-EAGLE preflight.",
    )
    parser.add_argument(
        "command",
        nargs="?",
        choices=[SERVE_COMMAND],
        help="what SageMaker passes (`docker run IMAGE serve`); optional",
    )
    parser.add_argument(
        "--print-args",
        action="store_true",
        help="run the preflight, print the argv that would start vLLM as one JSON list, and exit",
    )
    ns = parser.parse_args(args)
    env = dict(os.environ)
    try:
        numeric = check_numeric_env(env)  # the rule `peagle plan` applies too
        args, result = prepare(env)
        interval = float(numeric.get(contract.METRICS_INTERVAL_ENV, DEFAULT_INTERVAL_S))
        grace = float(numeric.get(STOP_GRACE_ENV, DEFAULT_STOP_GRACE_S))
        argv = launch_argv(args, env)
    except (ArgvError, PreflightError, NumericEnvError, LaunchError) as e:
        _log("preflight failed", str(e))
        return EXIT_CONFIG
    for note in result.notes:
        _log("note", note)
    for warning in result.warnings:
        _log("warning", warning)
    if ns.print_args:
        print(json.dumps(argv))
        return 0
    child_env = {**env, **result.env_updates}
    reporter = None
    if result.speculative is not None and interval > 0:
        url, problem = metrics_url(env.get(METRICS_URL_ENV))
        if problem:
            _log("warning", problem)
        reporter = MetricsReporter(
            url,
            interval,
            dimensions=contract.metric_dimensions(env),
        )
    _log("note", "starting " + " ".join(redact(argv)))
    try:
        return supervise(argv, child_env, reporter=reporter, stop_grace_s=grace)
    except OSError as e:
        _log("error", f"cannot start {argv[0]}: {e}")
        return 127


if __name__ == "__main__":
    sys.exit(main())
