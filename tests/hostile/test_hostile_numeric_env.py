"""The container's numeric variables: `peagle plan --env` and `peagle-serve` give the same
answer for the same value, because both call peagle_serve.numeric_env.

The plan runs in this process (exit 2, one line naming `env.<VARIABLE>`, no AWS call);
`peagle-serve --print-args` runs as a real process, as the image starts it (exit 2, one
line naming the variable, no traceback). The positive controls go through both too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_kit import MODEL, assert_refused, recording_aws_calls, run_cli
from peagle_serve.numeric_env import NUMERIC_VARIABLES

TRAINED = "PEAGLE_DRAFTER_TRAINED_TOKENS"
GRACE = "PEAGLE_STOP_GRACE_SECONDS"
INTERVAL = "PEAGLE_METRICS_INTERVAL_SECONDS"

REFUSED = [
    (TRAINED, "\u00b2"),  # superscript two: str.isdigit() says yes, int() says no
    (TRAINED, "9" * 900),  # under SageMaker's 1024 bytes, far over any bound
    (TRAINED, "0"),
    (TRAINED, "1e3"),
    (TRAINED, "-5"),
    (TRAINED, " 10"),
    (TRAINED, "10.0"),
    (TRAINED, "1025"),
    (GRACE, "nan"),  # would never force-kill vLLM
    (GRACE, "inf"),
    (GRACE, "1e999"),
    (GRACE, "3601"),
    (GRACE, "\u0663"),  # ARABIC-INDIC DIGIT THREE: float() reads it as 3
    (GRACE, "1."),
    (INTERVAL, "nan"),  # would silently stop the acceptance metrics
    (INTERVAL, "-0"),
    (INTERVAL, "0x10"),
    (INTERVAL, "1_000"),
    (INTERVAL, "\uff15"),  # FULLWIDTH DIGIT FIVE
]
ACCEPTED = [(TRAINED, "18"), (GRACE, "0.5"), (GRACE, "0"), (INTERVAL, "60"), (INTERVAL, "0")]


def test_every_numeric_variable_is_in_the_corpus() -> None:
    assert {name for name, _ in REFUSED} == set(NUMERIC_VARIABLES)


def _serve(tmp_path: Path, variable: str, value: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SM_VLLM_", "PEAGLE_", "VLLM_"))
    }
    env.update(SM_VLLM_MODEL=str(tmp_path), PEAGLE_MODEL_DIR="/nonexistent", **{variable: value})
    return subprocess.run(
        [sys.executable, "-m", "peagle_serve.entrypoint", "serve", "--print-args"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


CASES = [(name, value, False) for name, value in REFUSED] + [
    (name, value, True) for name, value in ACCEPTED
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: ascii(c[:2])[:32])
def test_plan_and_container_give_the_same_answer(
    case: tuple[str, str, bool],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    variable, value, accepted = case
    with recording_aws_calls(monkeypatch) as calls:
        result = run_cli(capsys, calls, ["plan", MODEL, "--env", f"{variable}={value}"])
    done = _serve(tmp_path, variable, value)
    if accepted:
        assert result.code == 0, result.err
        assert done.returncode == 0, done.stderr
        return
    assert_refused(result, f"env.{variable}")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and variable in lines[0], done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
