"""docs/deploy.md's SDK example runs as written (against the local emulator)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"


@pytest.mark.doctor_gate  # as written, the example passes the real doctor gate
def test_deploy_md_sdk_example_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = DOC.read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S)  # the first Python example
    assert code is not None
    source = code.group(1).replace("creating_s=3.0", "creating_s=0.0")  # no need to wait here
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    exec(compile(source, str(DOC), "exec"), {})
    out = capsys.readouterr().out
    assert out.startswith("create InService")
    assert "'completion_tokens': 32" in out
