"""Doctor against odd or hostile accounts: every loop and read bounded, the drafter read
by the container's rules, account strings harmless on a terminal."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError
from doctor_testkit import Account, by_check, make_plan, only_failure
from peagle_local.emulator.world import drafter_config, put_files

from peagle_deploy.doctor import capacity
from peagle_deploy.doctor.result import CheckResult, DoctorReport


def _answer(parsed: dict[str, Any]) -> Any:
    """A before-call handler that answers in place of the service."""

    def handler(**_: Any) -> Any:
        return AWSResponse("", 200, {}, None), parsed

    return handler


def test_duplicate_mask_token_key_fails_like_the_containers_preflight(
    inprocess: Account,
) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    assert plan.drafter_uri is not None
    text = json.dumps(drafter_config())[:-1] + ', "ptd_token_id": 7}'
    put_files(inprocess.client("s3"), plan.drafter_uri, {"config.json": text.encode()})
    failure = only_failure(inprocess.doctor(plan))
    assert failure.check == "drafter.config"
    assert "duplicate key 'ptd_token_id'" in failure.detail


def test_config_nested_100_levels_fails(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    assert plan.drafter_uri is not None
    config = drafter_config()
    nested: Any = 1
    for _ in range(100):
        nested = {"x": nested}
    config["extra"] = nested
    put_files(
        inprocess.client("s3"), plan.drafter_uri, {"config.json": json.dumps(config).encode()}
    )
    failure = only_failure(inprocess.doctor(plan))
    assert failure.check == "drafter.config" and "nested too deeply" in failure.detail


class _Endless(io.RawIOBase):
    """A body that never ends (a server ignoring Range on a huge object)."""

    def __init__(self) -> None:
        self.served = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            raise AssertionError("the whole body was asked for")
        self.served += size
        return b"{" * size


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "no-length"])
def test_body_ignoring_range_is_not_read_whole(inprocess: Account, declared: bool) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    body = _Endless()
    parsed: dict[str, Any] = {"Body": body}
    if declared:
        parsed["ContentLength"] = 50 * 1024**3
    inprocess.session.events.register("before-call.s3.GetObject", _answer(parsed))
    report = inprocess.doctor(plan)
    line = by_check(report)["drafter.config"]
    assert line.status == "warn" and "the Range header was ignored" in line.detail
    assert body.served <= 4 * 1024 * 1024 + 2  # the config's limit, plus one byte
    assert report.ok


def test_quotas_paging_forever_is_bounded(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    calls = {"n": 0}

    def empty_page(**_: Any) -> Any:
        calls["n"] += 1
        return AWSResponse("", 200, {}, None), {"Quotas": [], "NextToken": f"t{calls['n']}"}

    inprocess.session.events.register("before-call.service-quotas.ListServiceQuotas", empty_page)
    line = by_check(inprocess.doctor(plan))["capacity.quota"]
    assert line.status == "warn" and "still paging" in line.detail
    assert calls["n"] == capacity.MAX_QUOTA_PAGES


def test_endpoints_paging_forever_is_bounded(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    calls = {"n": 0}

    def empty_page(**_: Any) -> Any:
        calls["n"] += 1
        return AWSResponse("", 200, {}, None), {"Endpoints": [], "NextToken": f"t{calls['n']}"}

    inprocess.session.events.register("before-call.sagemaker.ListEndpoints", empty_page)
    line = by_check(inprocess.doctor(plan))["capacity.quota"]
    assert line.status == "warn" and "could not be counted" in line.detail
    assert calls["n"] == capacity.MAX_ENDPOINT_PAGES


ESCAPES = "\x1b[2J\x1b]0;owned\x07\u202e"


def test_account_strings_reach_the_terminal_escaped(
    inprocess: Account, capsys: pytest.CaptureFixture[str]
) -> None:
    """An AWS error message with terminal escapes: shown escaped, in the table too."""
    plan = make_plan()
    inprocess.stage(plan)

    def refuse(**_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "AccessDenied", "Message": f"no{ESCAPES}"}}, "GetBucketPolicy"
        )

    inprocess.session.events.register("before-call.s3.GetObject", refuse)
    report = inprocess.doctor(plan)
    assert any(ESCAPES in r.detail for r in report.results)  # kept in the data (JSON escapes)

    from peagle_deploy.cli.doctor import _print_report

    _print_report(report)
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\u202e" not in shown and "\x07" not in shown
    assert "\\x1b[2J" in shown


def test_table_escapes_s3_keys(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from peagle_deploy.cli.doctor import _print_report

    monkeypatch.setenv("COLUMNS", "1000")  # each cell on one line (piped tables fold at COLUMNS)

    key = f"s3://bucket/{ESCAPES}[red]x[/]"
    report = DoctorReport("e", "us-east-1", [CheckResult("drafter.config", "warn", key, key, key)])
    _print_report(report)
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "[red]x[/]" in shown
