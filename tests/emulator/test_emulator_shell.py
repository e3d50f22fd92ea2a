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
from typing import Any

import pytest
from peagle_local.emulator.shell import EMULATOR_ROLE_ARN, emulator_endpoint

from peagle_deploy.errors import InputError

MODEL = "gpt-oss-20b"
ENDPOINT = "peagle-gpt-oss-20b-dev"
PEAGLE = [sys.executable, "-m", "peagle_deploy.cli.app"]
INTERRUPTIBLE = [
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]
"""Run a command with Ctrl-C as at a terminal: a shell's background job (`pytest ... &`)
starts with SIGINT ignored, which its children inherit."""


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
    """`peagle emulator start` (on a free port: its default), once it says it is ready;
    killed if the test did not stop it."""
    process = subprocess.Popen(
        [*INTERRUPTIBLE, *PEAGLE, "emulator", "start", *options],
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
    assert emulator.exports["AWS_ACCESS_KEY_ID"] != "testing"  # its own key, not moto's


def test_another_key_gets_nothing_from_it(emulator: Emulator) -> None:
    """Another local user, or a program with the well-known moto key: refused."""
    import boto3
    from botocore.exceptions import ClientError

    for key, secret in (("testing", "testing"), (emulator.exports["AWS_ACCESS_KEY_ID"], "x")):
        ssm = boto3.client(
            "ssm",
            endpoint_url=emulator.exports["AWS_ENDPOINT_URL"],
            region_name="us-east-1",
            aws_access_key_id=key,
            aws_secret_access_key=secret,
        )
        with pytest.raises(ClientError) as refused:
            ssm.describe_parameters()
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_the_default_port_is_any_free_one() -> None:
    """Not a fixed port another program can count on (it was 5599): started without
    --port while 5599 is taken, it serves on another."""
    import socket

    taken = socket.socket()
    try:
        taken.bind(("127.0.0.1", 5599))
        taken.listen(1)
    except OSError:
        pass  # in use already: taken either way
    try:
        with _served() as (_, banner):
            url = _parse_exports(banner)["AWS_ENDPOINT_URL"]
    finally:
        taken.close()
    assert url.startswith("http://127.0.0.1:") and not url.endswith(":5599")


def _one_line_error(done: subprocess.CompletedProcess[str], field: str) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: "), done.stderr
    return lines[0]


def test_a_port_in_use_is_one_line() -> None:
    """A second `peagle emulator start --port N`: werkzeug printed its own two lines."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*PEAGLE, "emulator", "start", "--port", str(port)],
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    line = _one_line_error(done, "--port")
    assert f"{port} is in use" in line and "any free one" in line


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "1e9", "-inf", "abc"])
def test_creating_s_must_be_a_number_of_seconds(value: str) -> None:
    try:
        done = subprocess.run(
            [*PEAGLE, "emulator", "start", f"--creating-s={value}"],
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=60,  # an accepted value serves until killed: a failure, not a hang
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"--creating-s {value} was accepted: the emulator started")
    assert "0 to 3600 seconds" in _one_line_error(done, "--creating-s")


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
    twice = "+2: initial_instance_count, twice for a blue/green update"
    assert f"for endpoint usage = 2 ({twice})" in first.stdout
    assert f"for endpoint usage = 4 ({twice})" in second.stdout
    assert f"peagle doctor {MODEL} --stage staging --role-arn" in second.stdout
    # staging again sets what the staged specs need: the totals do not add up (issue 35)
    again = emulator.peagle("emulator", "stage", MODEL)
    assert again.returncode == 0, again.stderr
    assert f"for endpoint usage = 4 ({twice})" in again.stdout


def test_a_stopped_emulator_is_one_line_naming_it_and_how_to_start_it() -> None:
    """AWS_ENDPOINT_URL still points at an emulator that was stopped: one line with the
    URL and `peagle emulator start` (issue 35: a bare connection error)."""
    import socket

    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    env = {
        **_clean_env(),
        "AWS_ENDPOINT_URL": url,
        "AWS_ACCESS_KEY_ID": "stopped",
        "AWS_SECRET_ACCESS_KEY": "stopped",
        "AWS_DEFAULT_REGION": "us-east-1",
        "PEAGLE_AWS_MAX_ATTEMPTS": "1",
        "AWS_MAX_ATTEMPTS": "1",
    }
    for argv in (["status", "peagle-x-dev"], ["experiment", "status", "peagle-x-dev"]):
        done = subprocess.run(
            [*PEAGLE, *argv], env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 1, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert url in done.stderr and "peagle emulator start" in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        (None, "is not set"),
        ("https://sagemaker.us-east-1.amazonaws.com", "is not on this machine's loopback"),
        ("http://10.0.0.5:5599", "is not on this machine's loopback"),
        ("http://127.0.0.1.example.com:5599", "is not on this machine's loopback"),
        ("http://127.0.0.1:99999", "has no port a server can listen on"),
        ("http://127.0.0.1:abc", "has no port a server can listen on"),
        ("http://127.0.0.1:0", "has no port a server can listen on"),
        ("http://[::1]:-1", "has no port a server can listen on"),
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


def test_stage_needs_the_emulators_key(emulator: Emulator) -> None:
    """No key in the shell: one line naming it. The key of an earlier start: one line
    saying so (the emulator refuses it)."""
    no_key = {k: v for k, v in emulator.env().items() if k != "AWS_ACCESS_KEY_ID"}
    done = subprocess.run(
        [*PEAGLE, "emulator", "stage", MODEL],
        env=no_key,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "is not set" in _one_line_error(done, "AWS_ACCESS_KEY_ID")
    old_key = {**emulator.env(), "AWS_ACCESS_KEY_ID": "PEAGLEANEARLIERSTART"}
    done = subprocess.run(
        [*PEAGLE, "emulator", "stage", MODEL],
        env=old_key,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: the emulator at {emulator.exports['AWS_ENDPOINT_URL']} refuses this shell's "
        "AWS_ACCESS_KEY_ID (InvalidClientTokenId): paste the export lines of its current "
        "start (a new key on every start)"
    ]


EXPERIMENT_SPEC = f"""\
model: {MODEL}
image_uri: 123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:0.1.0
instance_type: ml.g7e.2xlarge
initial_instance_count: 2
execution_role_arn: {EMULATOR_ROLE_ARN}
speculative: {{mode: p-eagle, num_speculative_tokens: 3}}
experiment:
  mode: shadow
  candidate: {{num_speculative_tokens: 7}}
  sampling_percent: 100
"""


def test_stage_makes_room_for_an_experiment(emulator: Emulator, tmp_path: Any) -> None:
    """docs/experiments.md on the emulator (issue 30): after stage and deploy, starting
    the experiment needs both of its fleets beside the one the endpoint runs until the
    update has moved traffic (2 + 2 + 2); stage gave 4, so doctor refused the start."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(EXPERIMENT_SPEC, encoding="utf-8")
    staged = emulator.peagle("emulator", "stage", str(spec))
    assert staged.returncode == 0, staged.stderr
    deployed = emulator.peagle("deploy", "-f", str(spec))
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    # what `peagle experiment start` asks first: the same doctor, with the endpoint running
    report = json.loads(emulator.peagle("doctor", "-f", str(spec), "--json").stdout)
    quota = next(c for c in report["checks"] if c["check"] == "capacity.quota")
    assert quota["status"] == "pass", quota
    assert (  # and the summary says what the figure is made of
        "for endpoint usage = 6 (+6: 2 for initial_instance_count + 2 for the experiment's "
        "candidate, and the 2 the endpoint runs until `peagle experiment start` has moved "
        "traffic)"
    ) in " ".join(staged.stdout.split())


def _blocked_signals(tid_status: str) -> int:
    line = next(x for x in tid_status.splitlines() if x.startswith("SigBlk:"))
    return int(line.split()[1], 16)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads Linux's /proc")
def test_only_the_main_thread_takes_sigint_and_sigterm(emulator: Emulator) -> None:
    """The kernel hands a process's signal to any thread that does not block it, and
    Python runs handlers only in the main thread: a SIGTERM taken by a request thread
    while the main thread waited was never handled, and the emulator kept serving."""
    import socket
    import time

    port = int(emulator.exports["AWS_ENDPOINT_URL"].rsplit(":", 1)[1])
    pid = emulator.process.pid
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(b"POST / HTTP/1.1\r\n")  # half a request: its thread waits for more
        deadline = time.monotonic() + 60  # a hang guard, not a timing check
        while len(tasks := [t for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid]) < 2:
            assert time.monotonic() < deadline, "no thread took the connection"
            time.sleep(0.05)
        wanted = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))
        for tid in tasks:  # the server's and the connection's
            with open(f"/proc/{pid}/task/{tid}/status", encoding="ascii") as status:
                assert _blocked_signals(status.read()) & wanted == wanted, tid


def test_sigterm_right_after_clients_connect_stops_the_emulator() -> None:
    """The same, end to end: requests in flight on fresh connections, then SIGTERM."""
    import socket

    for _ in range(3):
        with _served() as (process, banner):
            exports = _parse_exports(banner)
            port = int(exports["AWS_ENDPOINT_URL"].rsplit(":", 1)[1])
            clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
            for client in clients:
                client.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port)
            process.send_signal(signal.SIGTERM)
            try:
                assert process.wait(timeout=60) == 0
            finally:
                for client in clients:
                    client.close()
