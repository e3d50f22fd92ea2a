"""A handful of the corpus through a real `peagle` process: the exit code and stderr the
shell sees, and a real SIGINT while DescribeEndpoint is in flight."""

from __future__ import annotations

import codecs
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile_kit import HF_TOKEN, MAX_OUTPUT_BYTES, billion_laughs
from peagle_local.emulator import LocalAWS

ROOT = Path(__file__).resolve().parents[2]
MODEL = "gpt-oss-20b"


def peagle(*argv: str) -> list[str]:
    script = Path(sys.executable).with_name("peagle")
    if script.exists():
        return [str(script), *argv]
    return [sys.executable, "-m", "peagle_deploy.cli.app", *argv]


def with_default_sigint(cmd: list[str]) -> list[str]:
    """`cmd` started with SIGINT at its default, as from a terminal.

    A shell starts background jobs with SIGINT ignored, and an ignored signal stays
    ignored across exec: a CI run launched in the background would hand that on and the
    child Python would never see Ctrl-C. Resetting it in the parent with preexec_fn is
    unsafe while the moto server's threads run, so a tiny launcher resets it and execs.
    """
    launcher = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    launcher += "os.execv(sys.argv[1], sys.argv[1:])"
    return [sys.executable, "-c", launcher, *cmd]


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PEAGLE_AWS_"))}
    # Credentials that work nowhere and an endpoint nothing listens on: a refusal that
    # came after an AWS call would show up as a connection error, not as exit 2.
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL="http://127.0.0.1:9",
        PEAGLE_AWS_MAX_ATTEMPTS="1",
        PYTHONIOENCODING="utf-8",
    )
    env.update(extra)
    return env


CASES = [
    ("bomb", ("plan", "--file", "{tmp}/bomb.yaml"), "--file", {}),
    ("utf16", ("plan", "--file", "{tmp}/utf16.yaml"), "--file", {}),
    (
        "k-huge",
        ("plan", MODEL, "-k", "99999999999999999999"),
        "speculative.num_speculative_tokens",
        {},
    ),
    ("region-empty", ("plan", MODEL, "--region", ""), "--region", {}),
    ("tag-emoji", ("plan", MODEL, "--tag", "aws:x=1"), "tags.aws:x", {}),
    ("env-token", ("plan", MODEL, "-e", HF_TOKEN), "--env", {}),
    (
        "gates-twice",
        ("promote", "--from", "dev", "--to", "staging", "--gates", "{tmp}/gates.yaml"),
        "--gates",
        {},
    ),
    ("status-bad-name", ("status", "bad name"), "NAME", {}),
    ("aws-region-empty", ("list",), "AWS_REGION", {"AWS_REGION": ""}),
    ("usage", ("plan", "--bogus"), "No such option", {}),
]


@pytest.mark.parametrize(("name", "argv", "field", "env"), CASES, ids=[c[0] for c in CASES])
def test_real_process(
    name: str, argv: tuple[str, ...], field: str, env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "bomb.yaml").write_text(billion_laughs("rollout.alarms"))
    (tmp_path / "utf16.yaml").write_bytes(
        codecs.BOM_UTF16_LE + f"model: {MODEL}\n".encode("utf-16-le")
    )
    (tmp_path / "gates.yaml").write_text(
        "stages:\n  staging: {bench: null}\n  staging: {bench: null}\n"
    )
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    done = subprocess.run(
        peagle(*args),
        env=_environment(**env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and field in lines[0], done.stderr
    assert "Traceback" not in done.stderr and "\u274c" not in done.stderr
    assert HF_TOKEN not in done.stdout + done.stderr
    assert len((done.stdout + done.stderr).encode()) < MAX_OUTPUT_BYTES


@pytest.fixture
def creating_endpoint() -> Iterator[tuple[LocalAWS, str]]:
    """A dev endpoint that stays Creating, in the embedded local AWS."""
    local = LocalAWS(region="us-east-1")
    with local, local.patched_environ():
        from peagle_deploy.plan import build_plan
        from peagle_deploy.sdk import deploy_peagle
        from peagle_deploy.spec import load_spec

        name = build_plan(load_spec(model=MODEL, stage="dev")).endpoint_name
        local.script_endpoint(name, creating_s=3600.0)
        deploy_peagle(
            MODEL,
            role_arn="arn:aws:iam::123456789012:role/x",
            stage="dev",
            wait=False,
            progress=False,
            doctor=False,
        )
        yield local, name


def test_sigint_while_describe_endpoint_is_in_flight(
    creating_endpoint: tuple[LocalAWS, str],
) -> None:
    """The server holds the second DescribeEndpoint; SIGINT arrives while it waits."""
    from moto.sagemaker import models as sm_models

    local, name = creating_endpoint
    in_flight = threading.Event()
    release = threading.Event()
    backend = sm_models.SageMakerModelBackend
    real = backend.describe_endpoint
    calls = {"n": 0}

    def held(self: Any, endpoint_name: str) -> Any:
        calls["n"] += 1
        if calls["n"] >= 2:  # the first poll answers; the second one stays in flight
            in_flight.set()
            release.wait(30)
        return real(self, endpoint_name)

    backend.describe_endpoint = held  # type: ignore[method-assign]
    try:
        proc = subprocess.Popen(
            with_default_sigint(peagle("status", name, "--wait", "--no-progress")),
            env={**_environment(), **local.env()},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert in_flight.wait(60), "the CLI never polled twice"
            proc.send_signal(signal.SIGINT)  # the request is held by the server: in flight
            _, err = proc.communicate(timeout=60)
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        backend.describe_endpoint = real  # type: ignore[method-assign]
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert f"peagle status {name} --wait" in err.strip().splitlines()[-1]


SIZE_HINT_CASES = [
    ("columns-unicode-digit", {"COLUMNS": "\u00b2"}),
    ("lines-unicode-digit", {"LINES": "\u0663"}),
    ("columns-5000-digits", {"COLUMNS": "9" * 5000}),
]


@pytest.mark.parametrize("argv", [("models",), ("--help",)], ids=["models", "help"])
@pytest.mark.parametrize(
    ("name", "env"), SIZE_HINT_CASES, ids=[case[0] for case in SIZE_HINT_CASES]
)
def test_unreadable_terminal_size_is_ignored(
    name: str, env: dict[str, str], argv: tuple[str, ...]
) -> None:
    """rich reads COLUMNS/LINES with `isdigit()` then `int()`: `²` was a traceback in
    every command, `peagle --help` included. Such a value now counts as unset: the
    output is that of a run without it."""

    def run(extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
        environ = {k: v for k, v in _environment().items() if k not in env}
        return subprocess.run(
            peagle(*argv),
            env={**environ, **extra},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    done = run(env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    unset = run({})
    assert (done.stdout, done.stderr) == (unset.stdout, unset.stderr)
