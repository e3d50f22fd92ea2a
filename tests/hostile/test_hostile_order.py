"""Refusals that can be made before an AWS call are made before it: counted against an
account (the embedded local AWS) that holds a deployed dev stage, so that every refused
promotion would otherwise have had something to read."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hostile_kit import billion_laughs
from peagle_local.emulator import LocalAWS

from peagle_deploy.cli.app import main

ROLE = "arn:aws:iam::123456789012:role/peagle-hostile"
MODEL = "qwen3-coder-30b-a3b-instruct"
REGION = "us-east-1"
GATES = "stages:\n  staging:\n    smoke: {max_tokens: 8}\n    bench: null\n"


@contextmanager
def counting_calls() -> Iterator[list[str]]:
    """Every botocore API call made meanwhile (each one still goes through)."""
    from botocore.client import BaseClient

    real = BaseClient._make_api_call
    seen: list[str] = []

    def call(self: Any, op: str, params: dict[str, Any]) -> Any:
        seen.append(op)
        return real(self, op, params)

    BaseClient._make_api_call = call  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        BaseClient._make_api_call = real  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def account() -> Iterator[LocalAWS]:
    """A dev stage serving, with its manifest: what a promotion reads first."""
    local = LocalAWS(region=REGION)
    with local, local.patched_environ():
        from peagle_deploy.sdk import deploy_peagle

        deploy_peagle(
            MODEL,
            role_arn=ROLE,
            region=REGION,
            stage="dev",
            poll_interval_s=0.05,
            progress=False,
            doctor=False,
        )
        yield local


CASES = [
    (
        "same stage twice in the gates",
        GATES + "  staging:\n    bench: null\n",
        "staging",
        (),
        "--gates",
    ),
    ("--to the same stage as --from", GATES, "dev", (), "--to"),
    (
        "stage file with a bomb",
        GATES,
        "staging",
        ("--stage-file", "{tmp}/bomb.yaml"),
        "--stage-file",
    ),
    (
        "stage file with a bad field",
        GATES,
        "staging",
        ("--stage-file", "{tmp}/bad.yaml"),
        "--stage-file",
    ),
    ("a source name AWS would refuse", GATES, "staging", ("--name", "dev_endpoint"), "--name"),
    ("a role that is no ARN", GATES, "staging", ("--role-arn", "admin"), "--role-arn"),
    ("a region that is no region", GATES, "staging", ("--region", "eu-west"), "--region"),
    (
        "a write-spec path that is a directory",
        GATES,
        "staging",
        ("--write-spec", "{tmp}"),
        "--write-spec",
    ),
]


def _argv(tmp_path: Path, to: str, extra: tuple[str, ...] = ()) -> list[str]:
    gates = str(tmp_path / "gates.yaml")
    more = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    return ["promote", "--from", "dev", "--to", to, "--gates", gates, *more]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_promote_refuses_before_any_aws_call(
    account: LocalAWS,
    case: tuple[str, str, str, tuple[str, ...], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, gates, to, extra, field = case
    (tmp_path / "gates.yaml").write_text(gates)
    (tmp_path / "bomb.yaml").write_text(billion_laughs("model"))
    (tmp_path / "bad.yaml").write_text(f"model: {MODEL}\ninitial_instance_count: 0\n")
    with counting_calls() as calls:
        code = main(_argv(tmp_path, to, extra))
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: {field}"), err
    assert calls == [], calls


def test_the_counter_sees_the_calls_of_a_promotion_that_goes_ahead(
    account: LocalAWS, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The control: with good input the same command reads the account."""
    (tmp_path / "gates.yaml").write_text(GATES)
    with counting_calls() as calls:
        assert main([*_argv(tmp_path, "staging"), "--dry-run"]) == 0, capsys.readouterr().err
    assert "DescribeEndpoint" in calls and len(calls) >= 3
