"""Hostile `secrets:` (issue 29): what a variable given by reference may be, and the
references and secret values that must end in one line, never a traceback.

- the container contract's own variables (`PEAGLE_*`, and those whose value the plan
  renders or checks) may not be given by reference: `PEAGLE_VARIANT_NAME` by reference
  would name every metric line with the secret;
- a variable that becomes a vLLM argument may not either: the argument list reaches the
  endpoint's log in clear on every image;
- a secret of another partition than the endpoint region's is refused;
- a JSON-key reference nested (`ARN:a:b:c`) or huge, and a JSON secret nested thousands
  deep, end in one line with the bound.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hostile_kit import (
    HF_TOKEN,
    MODEL,
    AwsCalls,
    assert_refused,
    recording_aws_calls,
    run_cli,
)

ACCOUNT = "123456789012"


def arn(partition: str = "aws", region: str = "us-east-1") -> str:
    return f"arn:{partition}:secretsmanager:{region}:{ACCOUNT}:secret:team/k-AbCdEf"


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsCalls]:
    with recording_aws_calls(monkeypatch) as recorded:
        yield recorded


CASES: list[tuple[str, list[str], str, tuple[str, ...]]] = [
    # the container contract's variables
    ("variant-name", ["--secret", f"PEAGLE_VARIANT_NAME={arn()}"], "PEAGLE_VARIANT_NAME", ()),
    (
        "metrics-interval",
        ["--secret", f"PEAGLE_METRICS_INTERVAL_SECONDS={arn()}"],
        "PEAGLE_METRICS_INTERVAL_SECONDS",
        ("PEAGLE_*",),
    ),
    ("vllm-command", ["--secret", f"PEAGLE_VLLM_COMMAND={arn()}"], "PEAGLE_VLLM_COMMAND", ()),
    (
        "v2-runner",
        ["--secret", f"VLLM_USE_V2_MODEL_RUNNER={arn()}"],
        "VLLM_USE_V2_MODEL_RUNNER",
        (),
    ),
    ("model-ladder", ["--secret", f"HF_MODEL_ID={arn()}"], "HF_MODEL_ID", ()),
    ("port", ["--secret", f"SM_VLLM_PORT={arn()}"], "SM_VLLM_PORT", ()),
    ("rendered", ["--secret", f"SM_VLLM_MAX_MODEL_LEN={arn()}"], "SM_VLLM_MAX_MODEL_LEN", ()),
    # a vLLM argument: in the log in clear, whatever the image
    ("api-key-arg", ["--secret", f"SM_VLLM_API_KEY={arn()}"], "SM_VLLM_API_KEY", ("VLLM_API_KEY",)),
    ("hf-token-arg", ["--secret", f"SM_VLLM_HF_TOKEN={arn()}"], "SM_VLLM_HF_TOKEN", ("HF_TOKEN:",)),
    (
        "api-key-arg-masking-vllm",
        [
            "--secret",
            f"SM_VLLM_API_KEY={arn()}",
            "--image-uri",
            f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:0.1.0",
        ],
        "SM_VLLM_API_KEY",
        ("standard-supervisor", "vLLM 0.30.0", "masks it"),
    ),
    ("other-arg", ["--secret", f"SM_VLLM_SSL_KEYFILE={arn()}"], "SM_VLLM_SSL_KEYFILE", ()),
    # another partition than the region's
    ("china-arn", ["--secret", f"HF_TOKEN={arn('aws-cn')}"], "secrets.HF_TOKEN", ("aws-cn",)),
    ("govcloud-arn", ["--secret", f"HF_TOKEN={arn('aws-us-gov')}"], "secrets.HF_TOKEN", ()),
    (
        "commercial-arn-in-china",
        ["--region", "cn-north-1", "--secret", f"HF_TOKEN={arn('aws', 'cn-north-1')}"],
        "secrets.HF_TOKEN",
        ("arn:aws-cn:",),
    ),
    (
        "commercial-arn-in-govcloud",
        ["--region", "us-gov-west-1", "--secret", f"HF_TOKEN={arn('aws', 'us-gov-west-1')}"],
        "secrets.HF_TOKEN",
        ("arn:aws-us-gov:",),
    ),
    # JSON keys nested, many, or huge
    ("nested-key", ["--secret", f"HF_TOKEN={arn()}:a:b:c"], "secrets.HF_TOKEN", ("1-256",)),
    (
        "deep-key",
        ["--secret", f"HF_TOKEN={arn()}:" + ":".join(["k"] * 50_000)],
        "secrets.HF_TOKEN",
        ("1-256",),
    ),
    (
        "huge-key",
        ["--secret", f"HF_TOKEN={arn()}:" + "k" * 200_000],
        "secrets.HF_TOKEN",
        ("1-256",),
    ),
    ("token-as-key", ["--secret", f"HF_TOKEN={arn()}:{HF_TOKEN}:x"], "secrets.HF_TOKEN", ()),
]


@pytest.mark.parametrize(("argv", "fld", "also"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_hostile_reference_is_one_line(
    argv: list[str],
    fld: str,
    also: tuple[str, ...],
    calls: AwsCalls,
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = run_cli(capsys, calls, ["plan", MODEL, *argv])
    assert_refused(result, fld, also)


def deep_document(depth: int = 20_000) -> str:
    """Nested `depth` deep, under Secrets Manager's 64 KiB."""
    return '{"token": ' + "[" * depth + "]" * depth + "}"


class _SecretsManager:
    """What GetSecretValue answers, for the SDK's reading of the values."""

    def __init__(self, secret_string: str) -> None:
        self.secret_string = secret_string

    def get_secret_value(self, SecretId: str) -> dict[str, Any]:  # noqa: N803 (boto3's name)
        return {"ARN": SecretId, "SecretString": self.secret_string}


@pytest.mark.parametrize(
    "secret_string",
    [
        deep_document(),
        '{"token": "a", "token": "b"}',
        '{"token": ' + "[" * 70 + "]" * 70 + "}",
    ],
    ids=["deep", "duplicate-key", "past-the-depth-bound"],
)
def test_a_hostile_json_secret_is_one_line_in_the_sdk(secret_string: str) -> None:
    from peagle_deploy.errors import InputError
    from peagle_deploy.sdk.secrets import read_secret_values

    with pytest.raises(InputError) as err:
        read_secret_values(_SecretsManager(secret_string), {"HF_TOKEN": f"{arn()}:token"})
    text = str(err.value)
    assert err.value.field == "secrets.HF_TOKEN"
    assert "\n" not in text and len(text) < 600
    assert "64" in text or "duplicate" in text


def test_a_json_secret_nested_deeply_is_one_line_in_the_model_provider() -> None:
    from infra.model_provider import handler

    with pytest.raises(RuntimeError) as err:
        handler.resolve_secrets(_SecretsManager(deep_document()), {"HF_TOKEN": f"{arn()}:token"})
    assert "\n" not in str(err.value) and "HF_TOKEN" in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__
    json.dumps(str(err.value))  # plain text, fit for the stack event
