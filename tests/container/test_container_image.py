"""The real image, run the way SageMaker runs it.

The repository's Dockerfile is built (Debian's docker client, BuildKit, offline) on a
stand-in for AWS's vLLM SageMaker image (standin_image.py: a debootstrap'd Debian with
the AWS image's launch pieces and a stand-in `vllm` that records how it was started),
then started as SageMaker starts inference containers: `docker run IMAGE serve`, the
model at /opt/ml/model, the drafter at /opt/ml/additional-model-data-sources/eagle, and
the environment peagle_deploy.plan.build_plan renders for CreateModel. Then:

- /ping answers 200 on port 8080 and /invocations answers a chat completion;
- vLLM was started under the supervisor with the route middleware, port 8080, the
  model and the parallel-drafting speculative config, and the V2 runner off;
- acceptance metric lines appear in the container's output;
- `docker stop` delivers SIGTERM to vLLM and the container exits cleanly within
  SageMaker's 30 s;
- with a broken drafter the container stops within seconds, printing one preflight line
  and no traceback.

Docker comes from docker_engine.py (installed and started when absent); on a machine
that cannot provide it the tests skip with the reason, and under CI=true they fail.
Everything is observed once (under a lock, shared by pytest-xdist workers) and each test
checks one aspect of the observation; runs of other worktrees on the machine share the
engine and wait for each other's builds, prunes and containers
(docker_engine.serialized).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import docker_engine
import pytest
import standin_image
from container_helpers import drafter_config, drafter_tensors, write_drafter, write_target
from peagle_serve import contract
from peagle_serve.launch import ROUTE_MIDDLEWARE, SERVER_COMMAND, SUPERVISOR

pytestmark = pytest.mark.slow

K = 5
# SageMaker gives a container 30 s between SIGTERM and SIGKILL (`docker stop -t 30`).
STOP_TIMEOUT_S = 30
CHAT = {"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 8}


@dataclass
class Observed:
    """What happened to the containers (JSON-serializable, shared across workers)."""

    image: str
    env: dict[str, str]
    ping_status: int = 0
    invocation: dict[str, Any] = field(default_factory=dict)
    started: dict[str, Any] = field(default_factory=dict)
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    stop_seconds: float = -1.0
    exit_code: int = -1
    broken_seconds: float = -1.0
    broken_exit_code: int = -1
    broken_stdout: list[str] = field(default_factory=list)
    broken_stderr: list[str] = field(default_factory=list)


def plan_environment() -> dict[str, str]:
    """The container environment of a real plan (what the SDK and CDK send)."""
    from peagle_deploy.plan import build_plan
    from peagle_deploy.spec import load_spec

    spec = load_spec(
        model="gpt-oss-20b", accept_eula=True, speculative={"num_speculative_tokens": K}
    )
    env: dict[str, str] = build_plan(spec).create_model["PrimaryContainer"]["Environment"]
    return dict(env)


def _http(url: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _logs(engine: docker_engine.Engine, name: str) -> tuple[list[str], list[str]]:
    done = engine.run("logs", name, timeout=60)
    return done.stdout.splitlines(), done.stderr.splitlines()


def _run_args(name: str, model: Path, drafter: Path, env: dict[str, str]) -> list[str]:
    args = ["run", "-d", "--name", name, "-p", "127.0.0.1::8080"]
    args += ["-v", f"{model}:{contract.MODEL_DIR}:ro"]
    args += ["-v", f"{drafter}:{contract.drafter_mount_path()}:ro"]
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    return args


def _wait(predicate: Any, timeout: float, step: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


def observe(engine: docker_engine.Engine, work: Path) -> Observed:
    base = standin_image.standin_base_image(engine)
    image = standin_image.project_image(engine, base)
    standin_image.prune(
        engine,
        keep=[standin_image.rootfs_image(engine), base, image],
        repos=[standin_image.ROOTFS_REPO, standin_image.BASE_REPO, standin_image.IMAGE_REPO],
    )
    model = write_target(work / "model")
    drafter = write_drafter(work / "eagle")
    broken = write_drafter(work / "broken", drafter_config(), drafter_tensors(mask_hidden=False))
    # The plan's environment, plus one test knob: acceptance lines every second.
    env = {**plan_environment(), contract.METRICS_INTERVAL_ENV: "1"}
    seen = Observed(image=image, env=env)
    suffix = f"{os.getpid()}-{int(time.time())}"
    good, bad = f"peagle-test-{suffix}", f"peagle-test-broken-{suffix}"
    try:
        engine.run(*_run_args(good, model, drafter, env), image, "serve")
        port = engine.run("port", good, "8080").stdout.splitlines()[0].strip()
        url = f"http://{port}"

        def ping() -> bool:
            try:
                seen.ping_status = _http(url + "/ping")[0]
            except OSError:
                return False
            return seen.ping_status == 200

        _wait(ping, 60)
        status, body = _http(url + "/invocations", CHAT)
        seen.invocation = {"status": status, "body": json.loads(body or b"null")}

        def metric_line() -> bool:
            _http(url + "/invocations", CHAT)  # keep drafting so each window has some
            out, _ = _logs(engine, good)
            return any(contract.parse_metric_line(line) for line in out)

        _wait(metric_line, 30, step=0.5)
        start = time.monotonic()
        engine.run("stop", "-t", str(STOP_TIMEOUT_S), good, timeout=STOP_TIMEOUT_S + 30)
        seen.stop_seconds = time.monotonic() - start
        seen.exit_code = int(engine.run("inspect", "-f", "{{.State.ExitCode}}", good).stdout)
        seen.stdout, seen.stderr = _logs(engine, good)
        for line in seen.stdout:
            if line.startswith('{"stub_vllm": "started"'):
                seen.started = json.loads(line)

        start = time.monotonic()
        engine.run(*_run_args(bad, model, broken, env), image, "serve")
        engine.run("wait", bad, timeout=60)
        seen.broken_seconds = time.monotonic() - start
        seen.broken_exit_code = int(engine.run("inspect", "-f", "{{.State.ExitCode}}", bad).stdout)
        seen.broken_stdout, seen.broken_stderr = _logs(engine, bad)
    finally:
        engine.run("rm", "-f", good, bad, check=False, timeout=60)
    return seen


@pytest.fixture(scope="session")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Observed:
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "container-image"
    shared.mkdir(exist_ok=True)
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "observed.json"
        skipped = shared / "skipped.txt"
        if done.exists():
            return Observed(**json.loads(done.read_text()))
        if skipped.exists():
            pytest.skip(skipped.read_text())
        try:
            with docker_engine.engine() as engine, docker_engine.serialized("images"):
                seen = observe(engine, shared)
        except docker_engine.DockerUnavailableError as e:
            reason = f"cannot run Docker here: {e}"
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail("CI must run the container image test: " + reason)
            skipped.write_text(reason)
            pytest.skip(reason)
        done.write_text(json.dumps(asdict(seen)))
        return seen


def test_ping_answers_200_on_port_8080(observed: Observed) -> None:
    assert observed.ping_status == 200


def test_invocations_answers_a_chat_completion(observed: Observed) -> None:
    assert observed.invocation["status"] == 200
    body = observed.invocation["body"]
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["role"] == "assistant"


def test_vllm_got_the_parallel_drafting_config(observed: Observed) -> None:
    argv = observed.started["argv"]
    assert argv[:2] == ["--port", str(contract.SERVING_PORT)]
    assert argv[argv.index("--model") + 1] == contract.MODEL_DIR
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {
        "method": "eagle3",
        "model": contract.drafter_mount_path(),
        "num_speculative_tokens": K,
        "parallel_drafting": True,
    }
    assert spec == json.loads(observed.env[contract.SPECULATIVE_CONFIG_ENV])
    assert observed.started["env"]["VLLM_USE_V2_MODEL_RUNNER"] == "0"


def test_vllm_runs_as_the_aws_image_runs_it(observed: Observed) -> None:
    """Supervisor, server module and route middleware, as sagemaker_entrypoint.sh."""
    argv = observed.started["argv"]
    assert argv[-2:] == ["--middleware", ROUTE_MIDDLEWARE]
    supervisord, supervisor, *_, pid1 = observed.started["parents"]
    assert "supervisord -c" in supervisord
    assert f"{SUPERVISOR} {' '.join(SERVER_COMMAND)} --port 8080" in supervisor
    assert pid1.endswith("peagle-serve serve")  # PID 1: `docker run IMAGE serve`


def test_acceptance_metric_lines_appear(observed: Observed) -> None:
    docs = [d for d in map(contract.parse_metric_line, observed.stdout) if d]
    assert docs, "no acceptance metric line in the container's output"
    doc = docs[-1]
    # The stand-in accepts 3 of K=5 tokens per draft.
    assert doc["acceptance_rate"] == pytest.approx(3 / K)
    assert doc["mean_acceptance_length"] == pytest.approx(4.0)
    assert doc["acceptance_rate_per_position"] == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert doc[contract.METRIC_DIMENSION] == observed.env[contract.ENDPOINT_NAME_ENV]


def test_docker_stop_delivers_sigterm_and_exits_within_sagemakers_30s(
    observed: Observed,
) -> None:
    signals = [json.loads(x)["signal"] for x in observed.stdout if '"stub_vllm": "signal"' in x]
    assert signals == [15]
    assert '{"stub_vllm": "stopped"}' in observed.stdout
    assert 0 <= observed.stop_seconds < STOP_TIMEOUT_S
    assert observed.exit_code == 0  # not 137: nothing had to be killed


def test_a_broken_drafter_stops_the_container_with_one_preflight_line(
    observed: Observed,
) -> None:
    assert observed.broken_exit_code == 2
    assert 0 <= observed.broken_seconds < 20
    assert observed.broken_stdout == []
    (line,) = observed.broken_stderr
    assert line.startswith(
        f"peagle-serve: preflight failed: {contract.SPECULATIVE_CONFIG_ENV}.model:"
    )
    assert "mask_hidden" in line
    assert "Traceback" not in "\n".join(observed.broken_stderr)
