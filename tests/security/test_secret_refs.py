"""Secrets by reference: the `secrets` entries, the value a reference selects, and the
refusal of a plaintext secret where the project would write it down (issue 19)."""

from __future__ import annotations

import json

import pytest

from peagle_deploy.errors import InputError
from peagle_deploy.secret_refs import SecretRef, parse_secret_ref, parse_secret_refs, secret_value
from peagle_deploy.validation.secrets import refuse_plaintext_secrets

ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:team/hf-token-AbCdEf"
TOKEN = "hf_" + "Q" * 34


def test_a_full_arn_and_an_arn_with_a_json_key() -> None:
    assert parse_secret_ref("HF_TOKEN", ARN) == SecretRef("HF_TOKEN", ARN, None)
    ref = parse_secret_ref("SM_VLLM_API_KEY", f"{ARN}:api_key")
    assert (ref.arn, ref.json_key, ref.text, ref.region) == (
        ARN,
        "api_key",
        f"{ARN}:api_key",
        "us-east-1",
    )


@pytest.mark.parametrize(
    "value",
    [
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf-token",  # partial: no suffix
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:*",
        "arn:aws:ssm:us-east-1:123456789012:parameter/x",
        TOKEN,  # the value itself
        f"{ARN}:",
        f"{ARN}: key",
        7,
    ],
)
def test_anything_else_is_refused_naming_the_entry(value: object) -> None:
    with pytest.raises(InputError) as err:
        parse_secret_ref("HF_TOKEN", value)
    assert err.value.field == "secrets.HF_TOKEN"
    assert TOKEN not in str(err.value)


def test_a_variable_is_given_by_value_or_by_reference_in_the_endpoints_region() -> None:
    assert list(parse_secret_refs({"HF_TOKEN": ARN}, {"A": "b"}, region="us-east-1")) == [
        "HF_TOKEN"
    ]
    with pytest.raises(InputError, match="also set in env"):
        parse_secret_refs({"HF_TOKEN": ARN}, {"HF_TOKEN": "x"})
    with pytest.raises(InputError, match="in us-east-1, the endpoint in eu-west-1"):
        parse_secret_refs({"HF_TOKEN": ARN}, {}, region="eu-west-1")
    with pytest.raises(InputError) as err:
        parse_secret_refs({"1BAD": ARN})
    assert err.value.field == "secrets.1BAD"


def test_the_value_of_a_reference_and_errors_that_never_show_it() -> None:
    plain = SecretRef("HF_TOKEN", ARN)
    assert secret_value(plain, TOKEN) == TOKEN
    keyed = SecretRef("HF_TOKEN", ARN, "token")
    assert secret_value(keyed, json.dumps({"token": TOKEN, "other": "x"})) == TOKEN
    for bad in (TOKEN, json.dumps({"other": TOKEN}), json.dumps({"token": 7}), "[1]"):
        with pytest.raises(InputError) as err:
            secret_value(keyed, bad)
        assert TOKEN not in str(err.value) and err.value.field == "secrets.HF_TOKEN"
    with pytest.raises(InputError, match="64 KiB"):
        secret_value(plain, "x" * 70_000)


def test_a_plaintext_secret_is_refused_naming_the_variable_and_the_secrets_field() -> None:
    refuse_plaintext_secrets({"SM_VLLM_MAX_MODEL_LEN": "8192"}, "cdk synth")
    with pytest.raises(InputError) as err:
        refuse_plaintext_secrets({"HF_TOKEN": TOKEN, "A": "b"}, "cdk synth")
    text = str(err.value)
    assert err.value.field == "env.HF_TOKEN"
    assert "secrets:" in text and "HF_TOKEN" in text and TOKEN not in text
    assert "\n" not in text


def test_an_experiment_candidate_carries_references_never_values() -> None:
    """The candidate model of an experiment shares the spec's secrets by reference: its
    CreateModel has no value (the SDK reads it just before creating it) and a changed
    reference names a new candidate, as it names a new incumbent."""
    from peagle_deploy.experiment.plan import experiment_plan
    from peagle_deploy.spec import spec_from_dict

    def spec(arn: str) -> object:
        return spec_from_dict(
            {
                "model": "gpt-oss-20b",
                "region": "us-east-1",
                "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:0.1.0",
                "instance_type": "ml.g7e.2xlarge",
                "initial_instance_count": 2,
                "speculative": {"mode": "p-eagle", "num_speculative_tokens": 3},
                "secrets": {"HF_TOKEN": arn},
                "experiment": {"candidate": {"num_speculative_tokens": 7}},
            }
        )

    one = experiment_plan(spec(ARN))  # type: ignore[arg-type]
    env = one.create_candidate_model["PrimaryContainer"]["Environment"]
    assert "HF_TOKEN" not in env
    assert one.incumbent.secret_refs == {"HF_TOKEN": ARN}
    other = experiment_plan(spec(ARN.replace("hf-token", "hf-token2")))  # type: ignore[arg-type]
    assert other.candidate_model_name != one.candidate_model_name


def test_a_regions_partition_is_botocores() -> None:
    """`partition_of` (which decides the partition a secret ARN must have) against
    botocore's own table: every regionRegex, and every region botocore lists."""
    from pathlib import Path

    import botocore

    from peagle_deploy.validation.aws_shapes import PARTITION_REGIONS, partition_of

    data = json.loads((Path(botocore.__file__).parent / "data" / "partitions.json").read_text())
    theirs = {p["id"]: p["regionRegex"] for p in data["partitions"] if p["id"] != "aws"}
    assert theirs == {name: regex.pattern for name, regex in PARTITION_REGIONS}
    listed = [(r, p["id"]) for p in data["partitions"] for r in p["regions"]]
    assert [(r, pid) for r, pid in listed if not r.endswith("-global")] == [
        (r, partition_of(r)) for r, _ in listed if not r.endswith("-global")
    ]
