"""The README's SDK example runs as written (against the local emulator)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.doctor_gate  # as written, the example passes the real doctor gate
def test_readme_sdk_example_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Deploy, watch, invoke, delete (SDK and CLI)", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    source = code.group(1).replace("creating_s=3.0", "creating_s=0.0")  # no need to wait here
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    exec(compile(source, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.startswith("create InService")
    assert "'completion_tokens': 32" in out
