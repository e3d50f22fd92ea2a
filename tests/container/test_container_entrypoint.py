"""`peagle-serve` as a process: --print-args, preflight failures, signals, exit codes.

vLLM is replaced by data/fake_vllm.py through PEAGLE_VLLM_COMMAND. The image itself, run
the way SageMaker runs it, is tested in test_container_image.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from container_helpers import MakeDrafter
from peagle_serve import contract
from peagle_serve.entrypoint import main, redact
from peagle_serve.launch import SERVER_COMMAND

DATA = Path(__file__).parent / "data"
FAKE_VLLM = DATA / "fake_vllm.py"


def base_env(target: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SM_VLLM_", "PEAGLE_", "VLLM_"))
    }
    env.update({"SM_VLLM_MODEL": str(target), "PEAGLE_MODEL_DIR": "/nonexistent", **extra})
    return env


def peagle_serve(
    env: dict[str, str], *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "peagle_serve.entrypoint", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def p_eagle_config(drafter: Path, **fields: Any) -> str:
    return json.dumps(
        {"model": str(drafter), "num_speculative_tokens": 7, "parallel_drafting": True, **fields}
    )


def test_print_args_prints_one_json_list(make_drafter: MakeDrafter, target_dir: Path) -> None:
    drafter = make_drafter()
    env = base_env(
        target_dir,
        SM_VLLM_SPECULATIVE_CONFIG=p_eagle_config(drafter),
        SM_VLLM_MAX_MODEL_LEN="8192",
        SM_VLLM_ENABLE_PREFIX_CACHING="true",
    )
    done = peagle_serve(env, "--print-args")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1
    argv = json.loads(lines[0])
    assert argv[:6] == [*SERVER_COMMAND, "--port", "8080", "--enable-prefix-caching"]
    assert argv[argv.index("--model") + 1] == str(target_dir)
    speculative = json.loads(argv[argv.index("--speculative-config") + 1])
    assert speculative["method"] == "eagle3"  # set by the preflight
    assert "--enable-prefix-caching" in argv
    assert argv[argv.index("--max-model-len") + 1] == "8192"
    assert "method" in done.stderr and "eagle3" in done.stderr  # the log line


def test_preflight_failure_is_one_line_and_exit_2(
    make_drafter: MakeDrafter, target_dir: Path
) -> None:
    env = base_env(
        target_dir,
        SM_VLLM_SPECULATIVE_CONFIG=p_eagle_config(make_drafter(), num_speculative_tokens=0),
    )
    for args in (["--print-args"], [], ["serve"]):
        done = peagle_serve(env, *args)
        assert done.returncode == 2
        assert done.stdout == ""
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert "SM_VLLM_SPECULATIVE_CONFIG.num_speculative_tokens" in lines[0]
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("SM_VLLM_SPECULATIVE_CONFIG", '{"a":' * 5000 + "1" + "}" * 5000, "nested too deeply"),
        ("SM_VLLM_SPECULATIVE_CONFIG", '{"model": "/a", "model": "/b"}', "duplicate key"),
        ("SM_VLLM_CUDA_GRAPH_SIZES", "[" * 20000 + "]" * 20000, "nested too deeply"),
        ("SM_VLLM_HF_OVERRIDES", '{"a": 1} {"b": NaN}', "NaN is not a JSON number"),
    ],
)
def test_hostile_json_in_the_environment_is_one_line(
    target_dir: Path, variable: str, value: str, problem: str
) -> None:
    for args in (["--print-args"], ["serve"]):
        done = peagle_serve(base_env(target_dir, **{variable: value}), *args)
        assert done.returncode == 2
        assert "Traceback" not in done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(f"peagle-serve: preflight failed: {variable}")
        assert problem in line


def test_a_deeply_nested_drafter_config_is_one_line(
    make_drafter: MakeDrafter, target_dir: Path
) -> None:
    drafter = make_drafter()
    (drafter / "config.json").write_text('{"a":' * 20000 + "1" + "}" * 20000)
    env = base_env(target_dir, SM_VLLM_SPECULATIVE_CONFIG=p_eagle_config(drafter))
    done = peagle_serve(env, "serve")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "config.json: nested too deeply (more than 64 levels" in line


@pytest.mark.parametrize("args", [["train"], ["serve", "extra"]])
def test_only_serve_is_accepted_as_an_argument(target_dir: Path, args: list[str]) -> None:
    done = peagle_serve(base_env(target_dir), *args)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("peagle-serve: error:")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        (contract.METRICS_INTERVAL_ENV, "soon"),
        ("PEAGLE_STOP_GRACE_SECONDS", "-1"),
        ("PEAGLE_VLLM_COMMAND", "[1, 2]"),
    ],
)
def test_bad_container_variables_fail(target_dir: Path, variable: str, value: str) -> None:
    done = peagle_serve(base_env(target_dir, **{variable: value}), "--print-args")
    assert done.returncode == 2
    assert variable in done.stderr


# --- running "vLLM" -------------------------------------------------------------------


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def wait_for(predicate: Any, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def read_state(path: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(path.read_text())
    return value


def fake_env(target: Path, state: Path, mode: str, **extra: str) -> dict[str, str]:
    return base_env(
        target,
        PEAGLE_VLLM_COMMAND=json.dumps([sys.executable, str(FAKE_VLLM)]),
        FAKE_VLLM_STATE=str(state),
        FAKE_VLLM_MODE=mode,
        **extra,
    )


@pytest.mark.parametrize("args", [[], ["serve"]])
def test_exit_code_propagates_and_env_reaches_vllm(
    make_drafter: MakeDrafter, target_dir: Path, tmp_path: Path, args: list[str]
) -> None:
    """`docker run IMAGE serve` (how SageMaker starts it) and `docker run IMAGE`."""
    state = tmp_path / "state.json"
    env = fake_env(
        target_dir, state, "exit:7", SM_VLLM_SPECULATIVE_CONFIG=p_eagle_config(make_drafter())
    )
    done = peagle_serve(env, *args)
    assert done.returncode == 7
    recorded = read_state(state)
    assert recorded["argv"][:2] == ["--port", "8080"]
    assert recorded["argv"][recorded["argv"].index("--model") + 1] == str(target_dir)
    assert recorded["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    assert wait_for(lambda: not alive(recorded["grandchild"]))


def test_sigterm_reaches_vllm_and_nothing_is_left(target_dir: Path, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "peagle_serve.entrypoint"],
        env=fake_env(target_dir, state, "term:3"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_for(state.exists), "fake vLLM did not start"
        before = read_state(state)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, stderr
    assert read_state(state)["signals"] == [signal.SIGTERM]
    assert wait_for(lambda: not alive(before["pid"]))
    assert wait_for(lambda: not alive(before["grandchild"]))


def test_vllm_ignoring_sigterm_is_killed_after_the_grace_period(
    target_dir: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "peagle_serve.entrypoint"],
        env=fake_env(target_dir, state, "ignore", PEAGLE_STOP_GRACE_SECONDS="0.5"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_for(state.exists), "fake vLLM did not start"
        before = read_state(state)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGKILL
    assert "killing it" in stderr
    assert wait_for(lambda: not alive(before["pid"]))
    assert wait_for(lambda: not alive(before["grandchild"]))


def test_missing_vllm_executable_exits_127(target_dir: Path) -> None:
    env = base_env(target_dir, PEAGLE_VLLM_COMMAND="/nonexistent/vllm")
    done = peagle_serve(env)
    assert done.returncode == 127
    assert "cannot start" in done.stderr


# --- the metrics reporter runs beside vLLM -------------------------------------------------


@pytest.fixture
def metrics_url() -> Iterator[tuple[str, list[int]]]:
    pages = [(DATA / f"vllm_metrics_{i}.txt").read_text() for i in (1, 2)]
    hits = [0]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages[min(hits[0], 1)].encode()
            hits[0] += 1
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics", hits
    finally:
        server.shutdown()
        server.server_close()


def test_metric_lines_are_printed_while_vllm_runs(
    make_drafter: MakeDrafter, target_dir: Path, tmp_path: Path, metrics_url: tuple[str, list[int]]
) -> None:
    url, hits = metrics_url
    state = tmp_path / "state.json"
    env = fake_env(
        target_dir,
        state,
        "term:0",
        SM_VLLM_SPECULATIVE_CONFIG=p_eagle_config(make_drafter()),
        PEAGLE_METRICS_URL=url,
        **{contract.METRICS_INTERVAL_ENV: "0.05", contract.ENDPOINT_NAME_ENV: "peagle-x-dev"},
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "peagle_serve.entrypoint"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_for(lambda: hits[0] >= 4), "reporter never read /metrics"
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    lines = [line for line in stdout.splitlines() if contract.parse_metric_line(line)]
    assert len(lines) == 1  # one change (page 1 -> page 2), then nothing
    assert json.loads(lines[0])["mean_acceptance_length"] == 4.0
    assert json.loads(lines[0])[contract.METRIC_DIMENSION] == "peagle-x-dev"


def test_main_in_process_print_args(
    make_drafter: MakeDrafter,
    target_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for k in list(os.environ):
        if k.startswith(("SM_VLLM_", "PEAGLE_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("SM_VLLM_MODEL", str(target_dir))
    speculative = p_eagle_config(make_drafter(), method="eagle3")
    monkeypatch.setenv("SM_VLLM_SPECULATIVE_CONFIG", speculative)
    assert main(["--print-args"]) == 0
    argv = json.loads(capsys.readouterr().out)
    assert argv[argv.index("--speculative-config") + 1] == speculative  # unchanged: verbatim


def test_stop_arriving_while_vllm_is_spawned_still_reaches_it(tmp_path: Path) -> None:
    """A SIGTERM that lands before Popen returns is delivered to vLLM right after."""
    state = tmp_path / "state.json"
    code = f"""
import os, signal, subprocess, sys
from peagle_serve import entrypoint
real = subprocess.Popen
def popen(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)  # the stop arrives during the spawn
    return real(*args, **kwargs)
entrypoint.subprocess.Popen = popen
env = dict(os.environ, FAKE_VLLM_STATE={str(state)!r}, FAKE_VLLM_MODE="term:0")
sys.exit(entrypoint.supervise([sys.executable, {str(FAKE_VLLM)!r}], env,
                              reporter=None, stop_grace_s=10))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    # The fake had no handler yet, so the forwarded SIGTERM ended it: 128 + 15.
    assert done.returncode == 128 + signal.SIGTERM, done.stderr


def test_secrets_are_not_logged() -> None:
    argv = ["vllm", "serve", "--api-key", "k1", "k2", "--hf-token", "t", "--dtype", "bf16"]
    assert redact(argv) == [
        "vllm",
        "serve",
        "--api-key",
        "***",
        "***",
        "--hf-token",
        "***",
        "--dtype",
        "bf16",
    ]


def test_api_key_stays_out_of_the_start_log(target_dir: Path, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    env = fake_env(target_dir, state, "exit:0", SM_VLLM_API_KEY="s3cret")
    done = peagle_serve(env)
    assert done.returncode == 0
    assert "s3cret" not in done.stderr and "--api-key ***" in done.stderr
    received = read_state(state)["argv"]
    assert received[received.index("--api-key") + 1] == "s3cret"  # vLLM still gets it
