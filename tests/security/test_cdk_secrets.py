"""`cdk synth` of a stage whose env holds a plaintext token refuses, naming the variable
and the `secrets` field, and leaves no trace of the value anywhere in cdk.out (issue 19:
the template, the assets and the CI's cdk.out artifact held it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "hf_" + "C" * 34


def _grep(directory: Path, needle: str) -> list[str]:
    found = []
    for path in directory.rglob("*"):
        if path.is_file() and needle.encode() in path.read_bytes():
            found.append(str(path.relative_to(directory)))
    return found


@pytest.mark.parametrize(
    "env",
    [
        {"HF_TOKEN": TOKEN},
        {"SOME_SETTING": TOKEN},  # a token under an innocent name
        {"OPENAI_KEY": "k3y-" + "x" * 20},
    ],
)
def test_cdk_synth_refuses_a_plaintext_secret_and_writes_no_trace(
    env: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.chdir(ROOT)
    import app

    out = tmp_path / "cdk.out"
    stages = {
        "dev": {"spec": "stages/dev.yaml"},
        "leaky": {"spec": "stages/dev.yaml", "overrides": {"env": env}},
    }
    code = app.main({"peagle:stages": json.dumps(stages), "@aws-cdk/core:outdir": str(out)})
    err = capsys.readouterr().err
    (name,) = env
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and f"env.{name}" in lines[0] and "secrets:" in lines[0], err
    (value,) = env.values()
    assert value not in err
    assert not out.exists() or _grep(out, value) == []
