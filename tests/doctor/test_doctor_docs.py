"""docs/doctor.md's commands run as written, against an emulated account that holds
what each plan needs (ROLE_ARN stands for a role of that account)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from peagle_local.emulator import LocalAWS
from peagle_local.emulator.world import stage_world

from peagle_deploy.cli.app import main
from peagle_deploy.cli.cdk_stage import stage_plan
from peagle_deploy.plan import build_plan
from peagle_deploy.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
ROLE = "arn:aws:iam::123456789012:role/sm"


def _commands() -> list[list[str]]:
    text = (ROOT / "docs" / "doctor.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block is not None
    lines = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    return [shlex.split(line.replace("ROLE_ARN", ROLE)) for line in lines if line]


def test_doctor_md_commands_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = _commands()
    assert [c[:2] for c in commands] == [
        ["peagle", "doctor"],
        ["peagle", "doctor"],
        ["peagle", "deploy"],
    ]
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with LocalAWS(region="us-east-1") as aws:
        for key, value in aws.env().items():
            monkeypatch.setenv(key, value)
        first = build_plan(load_spec(None, model=commands[0][2], execution_role_arn=ROLE))
        stage_world(first, aws.session(), aws.account)
        _, prod = stage_plan("prod", ROOT)
        stage_world(prod, aws.session(), aws.account, endpoint_quota=8)
        for argv in commands:
            code = main(argv[1:])
            captured = capsys.readouterr()
            assert code == 0, (argv, captured.out[-2000:], captured.err[-2000:])
