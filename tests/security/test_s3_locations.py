"""S3 locations the execution role is granted on: one prefix or object, never a whole
bucket, never a pattern (issue 19). Refused with exit code 2 naming the field, before any
AWS call; the access rules (the CDK role, the emulator) refuse them too."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from peagle_deploy.access import parse_s3_uri
from peagle_deploy.cli.app import main
from peagle_deploy.errors import InputError

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/peagle-vllm:1.0"


@pytest.fixture
def _plan(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> Callable[[str, str], tuple[int, str]]:
    def plan(model_data: str, drafter: str) -> tuple[int, str]:
        spec = tmp_path / "spec.json"
        custom = {
            "image_uri": IMAGE,
            "model_data_uri": model_data,
            "drafter_uri": drafter,
            "drafter_kind": "p-eagle",
            "weights_gb": 10,
        }
        body = {"model": "custom", "instance_type": "ml.g7e.2xlarge", "custom": custom}
        spec.write_text(json.dumps(body))
        code = main(["plan", "--file", str(spec)])
        out, err = capsys.readouterr()
        return code, out + err

    return plan


@pytest.mark.parametrize(
    ("model_data", "drafter", "field", "problem"),
    [
        ("s3://acme-models/", "s3://acme-drafters/d/", "custom.model_data_uri", "whole bucket"),
        ("s3://acme-models/m/", "s3://acme-drafters/", "custom.drafter_uri", "whole bucket"),
        ("s3://acme-models/m*/", "s3://acme-drafters/d/", "custom.model_data_uri", "wildcard"),
        ("s3://acme-models/m/", "s3://acme-drafters/d?/", "custom.drafter_uri", "wildcard"),
        ("s3://acme-models/*.tar.gz", "s3://acme-drafters/d/", "custom.model_data_uri", "wildcard"),
    ],
)
def test_bucket_roots_and_wildcards_are_refused_naming_the_field(
    _plan: Callable[[str, str], tuple[int, str]],
    model_data: str,
    drafter: str,
    field: str,
    problem: str,
) -> None:
    code, text = _plan(model_data, drafter)
    assert code == 2, text
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and field in lines[0] and problem in lines[0], text
    assert "Traceback" not in text


def test_a_prefix_and_an_object_are_accepted(
    _plan: Callable[[str, str], tuple[int, str]],
) -> None:
    code, text = _plan("s3://acme-models/qwen3/model.tar.gz", "s3://acme-drafters/d/")
    assert code == 0, text


@pytest.mark.parametrize(
    ("uri", "data_type"),
    [
        ("s3://bucket/", "S3Prefix"),
        ("s3://bucket", "S3Prefix"),
        ("s3://bucket/a*/", "S3Prefix"),
        ("s3://bucket/a?b.tar.gz", "S3Object"),
    ],
)
def test_the_access_rules_refuse_them_too(uri: str, data_type: str) -> None:
    """The backstop under every grant (infra/role.py, the emulator's staged role)."""
    with pytest.raises(InputError) as err:
        parse_s3_uri(uri, data_type=data_type, source="PrimaryContainer.ModelDataSource")
    assert err.value.field == "PrimaryContainer.ModelDataSource"


def test_the_cdk_role_never_grants_or_acknowledges_a_whole_bucket() -> None:
    """cdk-nag's IAM5 acknowledgement of an S3 prefix grant ("only that prefix") is added
    per location; a bucket-root location never reaches it."""
    import aws_cdk as cdk

    from infra.role import ExecutionRole

    stack = cdk.Stack(
        cdk.App(), "S", env=cdk.Environment(account="123456789012", region="us-east-1")
    )
    create_model = {
        "ModelName": "peagle-x-dev-m0123abcd",
        "PrimaryContainer": {
            "Image": IMAGE,
            "ModelDataSource": {
                "S3DataSource": {
                    "S3Uri": "s3://acme-models/",
                    "S3DataType": "S3Prefix",
                    "CompressionType": "None",
                }
            },
        },
    }
    with pytest.raises(InputError, match="whole bucket"):
        ExecutionRole(
            stack, "Role", create_model=create_model, endpoint_name="peagle-x-dev", key=None
        )
