"""The emulator from a shell, as the quickstart uses it (issue 23, item 6): `peagle emulator
start` in one process, then plan, stage, doctor, deploy, invoke and delete as separate
`peagle` processes pointed at it by the export lines it printed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from peagle_local.emulator.shell import EMULATOR_ROLE_ARN, emulator_endpoint

from peagle_deploy.errors import InputError

MODEL = "gpt-oss-20b"
ENDPOINT = "peagle-gpt-oss-20b-dev"
PEAGLE = [sys.executable, "-m", "peagle_deploy.cli.app"]


def _clean_env() -> dict[str, str]:
    """The test's environment without any AWS setting: nothing may reach a real account."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}


@dataclass
class Emulator:
    process: subprocess.Popen[str]
    exports: dict[str, str]
    banner: list[str]

    def env(self) -> dict[str, str]:
        return {**_clean_env(), **self.exports, "COLUMNS": "120"}

    def peagle(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*PEAGLE, *argv],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )


def _parse_exports(lines: list[str]) -> dict[str, str]:
    exports = {}
    for line in lines:
        if line.startswith("export "):
            key, _, value = line.removeprefix("export ").partition("=")
            exports[key] = value
    return exports


@contextlib.contextmanager
def _served(*options: str) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """`peagle emulator start` on a free port, once it says it is ready; killed if the
    test did not stop it."""
    process = subprocess.Popen(
        [*PEAGLE, "emulator", "start", "--port", "0", *options],
        env=_clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    banner: list[str] = []
    try:
        for line in process.stdout:  # until the server says it is ready (or exits)
            banner.append(line.rstrip("\n"))
            if line.startswith("# then:"):
                break
        assert banner and banner[-1].startswith("# then:"), process.stderr.read()
        yield process, banner
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stderr.close()


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with _served("--creating-s", "0.2") as (process, banner):
        yield Emulator(process, _parse_exports(banner), banner)
        # Ctrl-C stops it cleanly: exit 0, the port released, one line said.
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
        assert process.stderr is not None and "emulator stopped" in process.stderr.read()


def test_start_prints_the_exports_a_shell_needs(emulator: Emulator) -> None:
    assert set(emulator.exports) == {
        "AWS_ENDPOINT_URL",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_DEFAULT_REGION",
    }
    assert emulator.exports["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:")
    assert emulator_endpoint(emulator.exports) == emulator.exports["AWS_ENDPOINT_URL"]


def test_quickstart_plan_stage_doctor_deploy_invoke_delete(emulator: Emulator) -> None:
    # plan: offline
    planned = emulator.peagle("plan", MODEL)
    assert planned.returncode == 0, planned.stderr

    # doctor against the bare emulator: clear failures, each with its fix; the table
    # fits the width (a pipe here) and the quota check names the quota to raise
    bare = emulator.peagle("doctor", MODEL, "--role-arn", EMULATOR_ROLE_ARN)
    assert bare.returncode == 1, bare.stdout + bare.stderr
    assert "Traceback" not in bare.stderr
    table = [line for line in bare.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) <= 120
    report = json.loads(
        emulator.peagle("doctor", MODEL, "--role-arn", EMULATOR_ROLE_ARN, "--json").stdout
    )
    failed = {c["check"]: c for c in report["checks"] if c["status"] == "fail"}
    assert all(c["fix"] for c in failed.values())
    assert "role.trust" in failed and "image.exists" in failed
    quota = failed["capacity.quota"]
    assert quota["detail"].startswith("the AWS default quota is 0 instances; the endpoint needs 1")
    assert quota["fix"].startswith("aws service-quotas request-service-quota-increase")
    assert "--desired-value 1" in quota["fix"]

    # another region of the emulator: the same quotas, never moto's "not available"
    elsewhere = emulator.peagle(
        "doctor", MODEL, "--role-arn", EMULATOR_ROLE_ARN, "--json", "--region", "eu-west-1"
    )
    quota = next(
        c for c in json.loads(elsewhere.stdout)["checks"] if c["check"] == "capacity.quota"
    )
    assert quota["status"] == "fail" and "(eu-west-1)" in quota["resource"]
    assert "the AWS default quota is 0 instances" in quota["detail"]

    # stage: what the spec needs, and the commands to run next
    staged = emulator.peagle("emulator", "stage", MODEL)
    assert staged.returncode == 0, staged.stderr
    out = staged.stdout.splitlines()
    assert f"  role          {EMULATOR_ROLE_ARN}" in out
    next_commands = [line.strip() for line in out[out.index("next:") + 1 :]]
    assert next_commands == [
        f"peagle doctor {MODEL} --role-arn {EMULATOR_ROLE_ARN}",
        f"peagle deploy {MODEL} --role-arn {EMULATOR_ROLE_ARN}",
        f"peagle invoke {ENDPOINT} 'Write a Python function that reverses a string.'",
        f"peagle delete {ENDPOINT} --yes",
    ]

    # each printed command, run as printed (shlex splits it as a shell would)
    import shlex

    results = [emulator.peagle(*shlex.split(command)[1:]) for command in next_commands[:3]]
    doctor, deploy, invoke = results
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "nothing blocks the deployment" in doctor.stdout
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr
    assert f"{ENDPOINT} created: InService" in " ".join(deploy.stdout.split())
    assert invoke.returncode == 0, invoke.stderr
    assert invoke.stdout.strip()
    deleted = emulator.peagle(*shlex.split(next_commands[3])[1:])
    assert deleted.returncode == 0, deleted.stderr
    listed = emulator.peagle("list", "--json")
    assert listed.returncode == 0 and ENDPOINT not in listed.stdout


def test_staging_twice_makes_room_for_both_endpoints(emulator: Emulator) -> None:
    first = emulator.peagle("emulator", "stage", MODEL)
    second = emulator.peagle("emulator", "stage", MODEL, "--stage", "staging")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert "for endpoint usage = 1 (+1 for initial_instance_count)" in first.stdout
    assert "for endpoint usage = 2 (+1 for initial_instance_count)" in second.stdout
    assert f"peagle doctor {MODEL} --stage staging --role-arn" in second.stdout


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        (None, "is not set"),
        ("https://sagemaker.us-east-1.amazonaws.com", "is not on this machine's loopback"),
        ("http://10.0.0.5:5599", "is not on this machine's loopback"),
        ("http://127.0.0.1.example.com:5599", "is not on this machine's loopback"),
    ],
)
def test_stage_refuses_anything_but_a_loopback_endpoint(url: str | None, problem: str) -> None:
    env = {
        **_clean_env(),
        "AWS_ACCESS_KEY_ID": "AKIAREALLOOKING",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    if url is not None:
        env["AWS_ENDPOINT_URL"] = url
    done = subprocess.run(
        [*PEAGLE, "emulator", "stage", MODEL],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("error: AWS_ENDPOINT_URL: ") and problem in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.1", "localhost", "[::1]"])
def test_loopback_hosts_are_accepted(host: str) -> None:
    url = f"http://{host}:5599"
    assert emulator_endpoint({"AWS_ENDPOINT_URL": url}) == url


def test_a_role_of_another_account_is_refused(emulator: Emulator) -> None:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as spec:
        spec.write(f"model: {MODEL}\nexecution_role_arn: arn:aws:iam::210987654321:role/x\n")
    try:
        done = emulator.peagle("emulator", "stage", spec.name)
    finally:
        os.unlink(spec.name)
    assert done.returncode == 2
    assert "execution_role_arn" in done.stderr and "emulated account" in done.stderr


def test_emulator_endpoint_refusal_is_an_input_error() -> None:
    with pytest.raises(InputError) as info:
        emulator_endpoint({"AWS_ENDPOINT_URL": "http://192.168.1.2"})
    assert info.value.field == "AWS_ENDPOINT_URL"


def test_sigterm_stops_the_emulator_cleanly_too() -> None:
    """A supervisor's SIGTERM unwinds like Ctrl-C: the server is stopped, exit 0."""
    with _served() as (process, _):
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        assert process.stderr is not None
        assert process.stderr.read().strip() == "emulator stopped"
