"""The values read from Secrets Manager never leave the paths that hold them (issue 29).

SageMaker's CreateModel ValidationException quotes the environment, a Secrets Manager
value included; the SDK, `peagle experiment` and (through the SDK) a promotion printed it.
Every path that reads the values masks them, with the one masking the CDK model
provider's handler uses too (`peagle_deploy.redaction.SecretValues`); and an environment
that the values push past CreateModel's limits is refused before CreateModel, naming the
variable, never the value.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import ClientError
from moto import mock_aws

from peagle_deploy.errors import EndpointFailedError, InputError
from peagle_deploy.redaction import MASK

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/peagle-masking-test"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:0.1.0"
# Looks like no known token, so only the masking of the value read can hide it.
VALUE = "orchid-Velvet-42-quartz"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        yield boto3.Session(region_name=REGION)


def _secret(session: Any, value: str = VALUE) -> str:
    client = session.client("secretsmanager")
    return str(client.create_secret(Name="team/db", SecretString=value)["ARN"])


def _refuse_create_model(session: Any, calls: list[dict[str, Any]]) -> None:
    """CreateModel answers a ValidationException that quotes the environment, as
    SageMaker does, once in its own form and once in a form no pattern knows."""

    def record(params: dict[str, Any], **_: Any) -> None:
        calls.append(params)

    def answer(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        env = calls[-1]["PrimaryContainer"]["Environment"]
        quoted = ", ".join(f"{k}={v}" for k, v in env.items())
        message = (
            f"1 validation error detected: Value '{{{quoted}}}' at "
            "'primaryContainer.environment' failed to satisfy constraint; the container "
            f"environment was {json.dumps(env)}"
        )
        response = AWSResponse("https://api.sagemaker", 400, HTTPHeaders(), None)
        parsed = {
            "Error": {"Code": "ValidationException", "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }
        return response, parsed

    session.events.register("provide-client-params.sagemaker.CreateModel", record)
    session.events.register_first("before-call.sagemaker.CreateModel", answer)


def _texts(exc: BaseException) -> str:
    """Everything a caller can print of `exc` and the exceptions chained to it."""
    from peagle_deploy.cli.app import aws_error_message

    parts = []
    seen: list[BaseException | None] = [exc]
    while seen:
        current = seen.pop()
        if current is None:
            continue
        parts += [str(current), repr(current.args), repr(vars(current))]
        parts.append(aws_error_message(current) or "")  # what the CLI prints
        seen += [current.__cause__, current.__context__]
    return "\n".join(parts)


def test_the_sdk_masks_the_value_in_a_create_model_error(aws: Any) -> None:
    from peagle_deploy.sdk import deploy_peagle

    arn = _secret(aws)
    calls: list[dict[str, Any]] = []
    _refuse_create_model(aws, calls)
    with pytest.raises(ClientError) as err:
        deploy_peagle(
            "gpt-oss-20b",
            secrets={"DB_PASSWORD": arn},
            region=REGION,
            role_arn=ROLE,
            boto_session=aws,
            wait=False,
            progress=False,
            doctor=False,
        )
    assert calls and calls[0]["PrimaryContainer"]["Environment"]["DB_PASSWORD"] == VALUE
    text = _texts(err.value)
    assert VALUE not in text
    assert MASK in err.value.response["Error"]["Message"]
    assert "primaryContainer.environment" in text  # the rest of the message stays


def test_an_experiment_masks_the_value_in_the_candidates_create_model_error(
    aws: Any,
) -> None:
    from peagle_deploy.experiment import start
    from peagle_deploy.experiment.common import Clients, ExperimentError
    from peagle_deploy.experiment.plan import experiment_plan
    from peagle_deploy.spec import spec_from_dict

    arn = _secret(aws)
    spec = spec_from_dict(
        {
            "model": "gpt-oss-20b",
            "region": REGION,
            "image_uri": IMAGE,
            "instance_type": "ml.g7e.2xlarge",
            "execution_role_arn": ROLE,
            "secrets": {"DB_PASSWORD": arn},
            "experiment": {"candidate": {"num_speculative_tokens": 5}},
        }
    )
    calls: list[dict[str, Any]] = []
    _refuse_create_model(aws, calls)
    xp = experiment_plan(spec)
    clients = Clients(REGION, aws)
    with pytest.raises(ExperimentError) as err:
        start._create(xp, start.new_record(xp, spec), clients, False)
    assert calls and calls[0]["PrimaryContainer"]["Environment"]["DB_PASSWORD"] == VALUE
    text = _texts(err.value)
    assert VALUE not in text and "SageMaker refused the shadow experiment" in text


def test_a_secret_value_longer_than_sagemaker_allows_is_refused_before_create_model(
    aws: Any,
) -> None:
    """1024 bytes per value (botocore's EnvironmentValue): refused after the value is
    read and before CreateModel, whose ValidationException would quote it."""
    from peagle_deploy.sdk import deploy_peagle

    long_value = VALUE + "x" * 1100
    arn = _secret(aws, long_value)
    calls: list[dict[str, Any]] = []
    aws.events.register(
        "provide-client-params.sagemaker.CreateModel", lambda params, **_: calls.append(params)
    )
    with pytest.raises(InputError) as err:
        deploy_peagle(
            "gpt-oss-20b",
            secrets={"DB_PASSWORD": arn},
            region=REGION,
            role_arn=ROLE,
            boto_session=aws,
            wait=False,
            progress=False,
            doctor=False,
        )
    assert calls == []
    assert err.value.field == "secrets.DB_PASSWORD" and "1024 bytes" in str(err.value)
    assert "\n" not in str(err.value) and VALUE not in _texts(err.value)


def test_secret_names_count_in_the_plans_environment_limits() -> None:
    """100 variables at most (botocore's EnvironmentMap): the names given by reference
    count, so a plan that cannot fit is refused before anything is read."""
    from peagle_deploy.plan import build_plan
    from peagle_deploy.spec import load_spec

    arn = f"arn:aws:secretsmanager:{REGION}:123456789012:secret:db-AbCdEf"
    fits = build_plan(load_spec(model="gpt-oss-20b", region=REGION))
    room = 100 - len(fits.create_model["PrimaryContainer"]["Environment"])
    env = {f"SETTING_{i}": "1" for i in range(room)}
    build_plan(load_spec(model="gpt-oss-20b", region=REGION, env=env))
    with pytest.raises(InputError) as err:
        build_plan(load_spec(model="gpt-oss-20b", region=REGION, env=env, secrets={"DB": arn}))
    assert err.value.field == "env" and "names of secrets" in str(err.value)


def test_one_masking_for_messages_exceptions_and_their_chains() -> None:
    from peagle_deploy.redaction import SecretValues, environment_values, masked

    values = SecretValues()
    assert values.text(f"x {VALUE}") == f"x {VALUE}"  # nothing read: nothing changed
    values.add([VALUE, "short"])
    assert values.text(f"a {VALUE} b {VALUE!r} c {json.dumps(VALUE)}").count(MASK) == 3
    assert values.text("short") == "short"  # too short to mask anywhere but in quotes
    cause = RuntimeError(f"inner {VALUE}")
    failure = EndpointFailedError("ep", f"reason {VALUE}", [f"log {VALUE}"])
    failure.__cause__ = cause
    with pytest.raises(EndpointFailedError) as err, values:
        raise failure
    assert VALUE not in _texts(err.value) + " ".join(err.value.log_tail)
    assert err.value.failure_reason == f"reason {MASK}"
    # the handler's own use: every environment value of the requests, in each form
    forms = environment_values([{"PrimaryContainer": {"Environment": {"A": VALUE}}}])
    assert masked(f"A={VALUE}", forms) == f"A={MASK}"
