"""Ctrl-C anywhere in a wait (or a call in flight) says what to run to resume; exit 130.

Against the embedded local AWS (moto server on loopback + the endpoint emulator); the
Ctrl-C is raised by the botocore call itself, as when it arrives while the request is
in flight.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from peagle_local.emulator import LocalAWS

from peagle_deploy.cli.app import main

ROLE = "arn:aws:iam::123456789012:role/peagle-hostile"
MODEL = "qwen3-coder-30b-a3b-instruct"
REGION = "us-east-1"
DEV = "peagle-qwen3-coder-30b-a3b-instruct-dev"
STAGING = "peagle-qwen3-coder-30b-a3b-instruct-staging"


@pytest.fixture
def aws() -> Iterator[LocalAWS]:
    local = LocalAWS(region=REGION)
    local.set_stream(ttft_s=0.002, token_delay_s=0.0005, tokens_per_chunk=2)
    with local, local.patched_environ():
        yield local


@contextmanager
def ctrl_c_during(
    operation: str, *, after: str | None = None, endpoint: str | None = None
) -> Iterator[list[str]]:
    """Raise KeyboardInterrupt from the first `operation` call (once `after` was called,
    and for `endpoint` if given); yields the operations seen."""
    from botocore.client import BaseClient

    real = BaseClient._make_api_call
    seen: list[str] = []

    def call(self: Any, op: str, params: dict[str, Any]) -> Any:
        armed = after is None or after in seen
        seen.append(op)
        if op == operation and armed and endpoint in (None, params.get("EndpointName")):
            raise KeyboardInterrupt
        return real(self, op, params)

    BaseClient._make_api_call = call  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        BaseClient._make_api_call = real  # type: ignore[method-assign]


def _deploy(stage: str, *, wait: bool = True) -> None:
    from peagle_deploy.sdk import deploy_peagle

    deploy_peagle(
        MODEL,
        role_arn=ROLE,
        region=REGION,
        stage=stage,
        wait=wait,
        poll_interval_s=0.05,
        progress=False,
    )


def _interrupted(capsys: pytest.CaptureFixture[str], argv: list[str], resume: str) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 130, (code, out, err)
    assert "Traceback" not in out + err
    last = err.strip().splitlines()[-1]  # plan warnings may come first
    assert resume in last, err
    return last


def _endpoints(aws: LocalAWS) -> list[str]:
    sm = aws.client("sagemaker")  # its key (boto3's default session keeps an earlier one)
    return sorted(e["EndpointName"] for e in sm.list_endpoints()["Endpoints"])


def test_status_wait_with_describe_in_flight(
    aws: LocalAWS, capsys: pytest.CaptureFixture[str]
) -> None:
    _deploy("dev", wait=False)
    with ctrl_c_during("DescribeEndpoint"):
        _interrupted(capsys, ["status", DEV, "--wait"], f"peagle status {DEV} --wait")


def test_status_without_wait(aws: LocalAWS, capsys: pytest.CaptureFixture[str]) -> None:
    _deploy("dev", wait=False)
    with ctrl_c_during("DescribeEndpoint"):
        _interrupted(capsys, ["status", DEV], f"peagle status {DEV} --wait")


def test_deploy_wait_with_describe_in_flight_leaves_the_endpoint_going(
    aws: LocalAWS, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["deploy", MODEL, "--role-arn", ROLE, "--no-progress"]
    with ctrl_c_during("DescribeEndpoint", after="CreateEndpoint") as seen:
        _interrupted(capsys, argv, f"peagle status {DEV} --wait")
    assert "CreateEndpoint" in seen and "DeleteEndpoint" not in seen
    assert _endpoints(aws) == [DEV]  # nothing was cancelled


def test_deploy_interrupted_before_the_endpoint_request(
    aws: LocalAWS, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["deploy", MODEL, "--role-arn", ROLE, "--no-progress"]
    with ctrl_c_during("CreateEndpointConfig"):
        last = _interrupted(capsys, argv, f"peagle status {DEV} --wait")
    assert "Done so far: model:" in last
    assert main([*argv, "--no-wait"]) == 0
    assert _endpoints(aws) == [DEV]  # the same deploy again picks up


def test_delete_interrupted_says_how_to_finish(
    aws: LocalAWS, capsys: pytest.CaptureFixture[str]
) -> None:
    _deploy("dev")
    with ctrl_c_during("DeleteEndpointConfig"):
        _interrupted(capsys, ["delete", DEV, "--yes"], f"peagle delete {DEV} --yes")
    assert main(["delete", DEV, "--yes", "--json"]) == 0
    assert _endpoints(aws) == []


def test_promote_deploy_step_interrupted(
    aws: LocalAWS,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    _deploy("dev")
    gates = tmp_path / "gates.yaml"
    gates.write_text("stages:\n  staging:\n    smoke: {max_tokens: 8}\n    bench: null\n")
    monkeypatch.chdir(tmp_path)  # no stages/ directory: no default stage file
    argv = ["promote", "--from", "dev", "--to", "staging", "--gates", str(gates)]
    with ctrl_c_during("DescribeEndpoint", after="CreateEndpoint", endpoint=STAGING) as seen:
        last = _interrupted(capsys, argv, f"peagle status {STAGING} --wait")
    assert "promotion was not recorded" in last
    assert "PutParameter" not in seen[seen.index("CreateEndpoint") :]
