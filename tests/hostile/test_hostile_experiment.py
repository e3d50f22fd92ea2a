"""Hostile input to the experiment commands: each refusal is one line, before any AWS call.

Issue 30: `status --plot` into a missing directory was a traceback; `doctor` ignored the
experiment block (a candidate equal to the incumbent passed doctor, which `plan`
refuses); a shadow start without the role SageMaker assumes must be refused up front.
Issue 35: `abort --reason` of 10,000 characters restored the endpoint and then failed
to write its record (over SSM's limit), leaving it `running`; `status --plot x.txt`
ended in a matplotlib traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile_kit import assert_refused, recording_aws_calls, run_cli

ROLE = "arn:aws:iam::123456789012:role/peagle-hostile"
SPEC = """\
model: gpt-oss-20b
image_uri: 123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:0.1.0
instance_type: ml.g7e.2xlarge
execution_role_arn: {role}
speculative: {{mode: p-eagle, num_speculative_tokens: 3}}
experiment:
  candidate: {{num_speculative_tokens: {k}}}
"""
ENDPOINT = "peagle-gpt-oss-20b-dev"

CASES = [
    (
        "status-plot-missing-dir",
        ["experiment", "status", ENDPOINT, "--plot", "{tmp}/no/such/dir/x.png"],
        "--plot",
    ),
    ("status-plot-is-a-dir", ["experiment", "status", ENDPOINT, "--plot", "{tmp}"], "--plot"),
    (
        "start-role-not-an-arn",
        ["experiment", "start", ENDPOINT, "--file", "{tmp}/spec.yaml", "--role-arn", "admin"],
        "--role-arn",
    ),
    (
        "start-experiment-role-not-an-arn",
        [
            "experiment",
            "start",
            ENDPOINT,
            "--file",
            "{tmp}/spec.yaml",
            "--experiment-role-arn",
            "arn:aws:iam::1:user/x",
        ],
        "--experiment-role-arn",
    ),
    (
        "start-shadow-without-experiment-role",
        ["experiment", "start", ENDPOINT, "--file", "{tmp}/spec.yaml"],
        "--experiment-role-arn",
    ),
    (
        "abort-reason-too-long",
        ["experiment", "abort", ENDPOINT, "--reason", "x" * 10_000],
        "--reason",
    ),
    (
        "abort-reason-two-lines",
        ["experiment", "abort", ENDPOINT, "--reason", "line one\nline two"],
        "--reason",
    ),
    ("status-plot-txt", ["experiment", "status", ENDPOINT, "--plot", "{tmp}/x.txt"], "--plot"),
    ("status-plot-no-suffix", ["experiment", "status", ENDPOINT, "--plot", "{tmp}/x"], "--plot"),
    (
        "doctor-candidate-equals-incumbent",
        ["doctor", "--file", "{tmp}/same.yaml"],
        "experiment.candidate",
    ),
]


@pytest.mark.parametrize(("name", "argv", "fld"), CASES, ids=[c[0] for c in CASES])
def test_refused_in_one_line_before_any_aws_call(
    *,
    name: str,
    argv: list[str],
    fld: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC.format(role=ROLE, k=5))
    (tmp_path / "same.yaml").write_text(SPEC.format(role=ROLE, k=3))
    with recording_aws_calls(monkeypatch) as calls:
        result = run_cli(capsys, calls, [a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert_refused(result, fld)
