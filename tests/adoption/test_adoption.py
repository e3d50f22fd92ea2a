"""The comparison of an existing model or endpoint config with a request, against
realistic Describe responses (issue 29: "adopt and promote by content").

moto echoes what it was sent and little else, so these responses are built the way
SageMaker answers: every field botocore's DescribeModel / DescribeEndpointConfig output
shapes allow that SageMaker fills in by itself (the container's Mode, an S3 source's
ETag, a variant's VolumeSizeInGB and InferenceAmiVersion, weights as floats, the
deployment recommendation, creation time and ARN). Each response is first checked
against botocore's output shape (the API's truth), so a test cannot pass on a key
SageMaker could never return.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import botocore.session
import pytest

from peagle_deploy.adoption import (
    ANY_VALUE,
    ENDPOINT_CONFIG,
    MODEL,
    difference,
    differences,
    refusal,
)
from peagle_deploy.plan import Plan, build_plan
from peagle_deploy.spec import load_spec

ROLE = "arn:aws:iam::123456789012:role/peagle-exec"
KEY_ID = "1234abcd-12ab-34cd-56ef-1234567890ab"
KEY_ARN = f"arn:aws:kms:us-east-1:123456789012:key/{KEY_ID}"
SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf-AbCdEf"
SECRET_VALUE = "hf_" + "Z" * 34
_SHAPES = botocore.session.get_session().get_service_model("sagemaker")


def conforms(value: Any, shape: Any, where: str = "") -> None:
    """Fail unless `value` could be parsed from the wire as `shape`."""
    kind = shape.type_name
    if kind == "structure":
        assert isinstance(value, dict), where
        for key, item in value.items():
            assert key in shape.members, f"{where}.{key} is not in {shape.name}"
            conforms(item, shape.members[key], f"{where}.{key}")
    elif kind == "list":
        assert isinstance(value, list), where
        for i, item in enumerate(value):
            conforms(item, shape.member, f"{where}[{i}]")
    elif kind == "map":
        assert isinstance(value, dict), where
        for key, item in value.items():
            conforms(key, shape.key, f"{where} key")
            conforms(item, shape.value, f"{where}.{key}")
    else:
        python = {
            "string": str,
            "integer": int,
            "long": int,
            "float": float,
            "double": float,
            "boolean": bool,
            "timestamp": datetime,
        }[kind]
        assert isinstance(value, python) and (kind == "boolean") == isinstance(value, bool), (
            f"{where}: {type(value).__name__} is not a {kind}"
        )
        if kind == "string" and shape.enum:
            assert value in shape.enum, f"{where}: {value!r} is not one of {shape.name}"


def output(operation: str) -> Any:
    return _SHAPES.operation_model(operation).output_shape


def plan(**knobs: Any) -> Plan:
    knobs.setdefault("execution_role_arn", ROLE)
    return build_plan(load_spec(None, model="qwen3-coder-30b-a3b-instruct", **knobs))


def described_model(request: dict[str, Any]) -> dict[str, Any]:
    """DescribeModel as SageMaker answers a CreateModel of `request`."""
    model = copy.deepcopy({k: v for k, v in request.items() if k != "Tags"})
    container = model["PrimaryContainer"]
    container["Mode"] = "SingleModel"
    for source in [container["ModelDataSource"], *container.get("AdditionalModelDataSources", [])]:
        source["S3DataSource"]["ETag"] = "0123456789abcdef"
    model.update(
        ModelArn=f"arn:aws:sagemaker:us-east-1:123456789012:model/{request['ModelName']}",
        CreationTime=datetime(2026, 11, 1, tzinfo=UTC),
        DeploymentRecommendation={
            "RecommendationStatus": "NOT_APPLICABLE",
            "RealTimeInferenceRecommendations": [],
        },
        InferenceExecutionConfig={"Mode": "Serial"},
    )
    conforms(model, output("DescribeModel"))
    return model


def described_config(request: dict[str, Any], kms_key: str | None = None) -> dict[str, Any]:
    """DescribeEndpointConfig as SageMaker answers a CreateEndpointConfig of `request`."""
    config = copy.deepcopy({k: v for k, v in request.items() if k != "Tags"})
    for variant in config["ProductionVariants"]:
        variant["InitialVariantWeight"] = float(variant.get("InitialVariantWeight", 1))
        variant.setdefault("VolumeSizeInGB", 512)
        variant.setdefault("InferenceAmiVersion", "al2-ami-sagemaker-inference-gpu-2")
    if kms_key is not None:
        config["KmsKeyId"] = kms_key
    config.update(
        EndpointConfigArn=(
            "arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/"
            + request["EndpointConfigName"]
        ),
        CreationTime=datetime(2026, 11, 1, tzinfo=UTC),
        EnableNetworkIsolation=False,
    )
    conforms(config, output("DescribeEndpointConfig"))
    return config


PLANS = {
    "default": {},
    "vpc, kms": {
        "vpc": {
            "subnet_ids": ["subnet-0a1b2c3d", "subnet-0e1f2a3b"],
            "security_group_ids": ["sg-0a1b2c3d"],
        },
        "kms_key_id": KEY_ID,
    },
    "secret": {"secrets": {"HF_TOKEN": SECRET}},
}


@pytest.mark.parametrize("knobs", PLANS.values(), ids=list(PLANS))
def test_what_sagemaker_fills_in_is_no_difference(knobs: dict[str, Any]) -> None:
    p = plan(**knobs)
    request = p.create_model
    if p.secret_refs:  # what CreateModel received: the values read from Secrets Manager
        env = {**request["PrimaryContainer"]["Environment"], "HF_TOKEN": SECRET_VALUE}
        request = {
            **request,
            "PrimaryContainer": {**request["PrimaryContainer"], "Environment": env},
        }
    model = described_model(request)
    model["VpcConfig"] = model.get("VpcConfig", {})
    if "VpcConfig" in request:  # sets: SageMaker may list them in another order
        model["VpcConfig"]["Subnets"] = list(reversed(request["VpcConfig"]["Subnets"]))
    assert difference(MODEL, request, model, []) is None
    config = described_config(p.create_endpoint_config, KEY_ARN if "kms_key_id" in knobs else None)
    assert difference(ENDPOINT_CONFIG, p.create_endpoint_config, config, []) is None


Change = Callable[[dict[str, Any]], Any]

MODEL_CHANGES: list[tuple[str, Change, str]] = [
    ("image", lambda m: m["PrimaryContainer"].update(Image="x:1"), "PrimaryContainer.Image"),
    (
        "model data",
        lambda m: m["PrimaryContainer"]["ModelDataSource"]["S3DataSource"].update(
            S3Uri="s3://their-bucket/model/"
        ),
        "PrimaryContainer.ModelDataSource.S3DataSource.S3Uri",
    ),
    (
        "drafter",
        lambda m: m["PrimaryContainer"]["AdditionalModelDataSources"][0]["S3DataSource"].update(
            S3Uri="s3://their-bucket/drafter/"
        ),
        "PrimaryContainer.AdditionalModelDataSources[eagle].S3DataSource.S3Uri",
    ),
    (
        "another channel",
        lambda m: m["PrimaryContainer"]["AdditionalModelDataSources"].append(
            {
                "ChannelName": "extra",
                "S3DataSource": {
                    "S3Uri": "s3://b/x/",
                    "S3DataType": "S3Prefix",
                    "CompressionType": "None",
                },
            }
        ),
        "PrimaryContainer.AdditionalModelDataSources[extra]",
    ),
    (
        "an environment value",
        lambda m: m["PrimaryContainer"]["Environment"].update(SM_VLLM_MAX_MODEL_LEN="1"),
        "PrimaryContainer.Environment.SM_VLLM_MAX_MODEL_LEN",
    ),
    (
        "an extra variable",
        lambda m: m["PrimaryContainer"]["Environment"].update(HTTP_PROXY="http://them:3128"),
        "PrimaryContainer.Environment.HTTP_PROXY",
    ),
    (
        "a missing variable",
        lambda m: m["PrimaryContainer"]["Environment"].pop("SM_VLLM_MAX_MODEL_LEN"),
        "PrimaryContainer.Environment.SM_VLLM_MAX_MODEL_LEN",
    ),
    ("the role", lambda m: m.update(ExecutionRoleArn=ROLE + "-other"), "ExecutionRoleArn"),
    ("isolation off", lambda m: m.update(EnableNetworkIsolation=False), "EnableNetworkIsolation"),
    (
        "a vpc",
        lambda m: m.update(
            VpcConfig={"Subnets": ["subnet-0a1b2c3d"], "SecurityGroupIds": ["sg-1"]}
        ),
        "VpcConfig",
    ),
    (
        "a second container",
        lambda m: m.update(Containers=[{"Image": "x:1"}]),
        "Containers",
    ),
    (
        "a private registry",
        lambda m: m["PrimaryContainer"].update(ImageConfig={"RepositoryAccessMode": "Vpc"}),
        "PrimaryContainer.ImageConfig",
    ),
    (
        "model data by url",
        lambda m: m["PrimaryContainer"].update(ModelDataUrl="s3://them/model.tar.gz"),
        "PrimaryContainer.ModelDataUrl",
    ),
]


@pytest.mark.parametrize(
    ("change", "field"),
    [(c, f) for _, c, f in MODEL_CHANGES],
    ids=[n for n, _, _ in MODEL_CHANGES],
)
def test_every_model_difference_is_named(change: Change, field: str) -> None:
    request = plan().create_model
    model = described_model(request)
    change(model)
    conforms(model, output("DescribeModel"))
    assert difference(MODEL, request, model) == field


CONFIG_CHANGES: list[tuple[str, Change, str]] = [
    (
        "another model",
        lambda c: c["ProductionVariants"][0].update(ModelName="theirs"),
        "ProductionVariants[AllTraffic].ModelName",
    ),
    (
        "instance type",
        lambda c: c["ProductionVariants"][0].update(InstanceType="ml.g5.xlarge"),
        "ProductionVariants[AllTraffic].InstanceType",
    ),
    (
        "instances",
        lambda c: c["ProductionVariants"][0].update(InitialInstanceCount=9),
        "ProductionVariants[AllTraffic].InitialInstanceCount",
    ),
    (
        "weight",
        lambda c: c["ProductionVariants"][0].update(InitialVariantWeight=0.5),
        "ProductionVariants[AllTraffic].InitialVariantWeight",
    ),
    (
        "a second variant",
        lambda c: c["ProductionVariants"].append(
            {**c["ProductionVariants"][0], "VariantName": "B", "ModelName": "theirs"}
        ),
        "ProductionVariants[B]",
    ),
    (
        "a shadow variant",
        lambda c: c.update(
            ShadowProductionVariants=[
                {**c["ProductionVariants"][0], "VariantName": "S", "ModelName": "theirs"}
            ]
        ),
        "ShadowProductionVariants",
    ),
    (
        "data capture",
        lambda c: c.update(
            DataCaptureConfig={
                "InitialSamplingPercentage": 100,
                "DestinationS3Uri": "s3://them/capture",
                "CaptureOptions": [{"CaptureMode": "Input"}],
            }
        ),
        "DataCaptureConfig",
    ),
    (
        "ssm access",
        lambda c: c["ProductionVariants"][0].update(EnableSSMAccess=True),
        "ProductionVariants[AllTraffic].EnableSSMAccess",
    ),
    (
        "core dumps",
        lambda c: c["ProductionVariants"][0].update(
            CoreDumpConfig={"DestinationS3Uri": "s3://them/dumps"}
        ),
        "ProductionVariants[AllTraffic].CoreDumpConfig",
    ),
    ("a key of theirs", lambda c: c.update(KmsKeyId=KEY_ARN), "KmsKeyId"),
]


@pytest.mark.parametrize(
    ("change", "field"),
    [(c, f) for _, c, f in CONFIG_CHANGES],
    ids=[n for n, _, _ in CONFIG_CHANGES],
)
def test_every_endpoint_config_difference_is_named(change: Change, field: str) -> None:
    request = plan().create_endpoint_config
    config = described_config(request)
    change(config)
    conforms(config, output("DescribeEndpointConfig"))
    assert difference(ENDPOINT_CONFIG, request, config) == field


@pytest.mark.parametrize(
    ("requested", "described", "same"),
    [
        (KEY_ID, KEY_ARN, True),
        (KEY_ARN, KEY_ID, True),
        ("alias/peagle", "arn:aws:kms:us-east-1:123456789012:alias/peagle", True),
        (KEY_ID, KEY_ARN.replace("1234abcd", "99999999"), False),
        ("alias/peagle", KEY_ARN, False),
    ],
)
def test_a_kms_key_is_the_same_in_each_of_its_spellings(
    requested: str, described: str, same: bool
) -> None:
    request = plan(kms_key_id=requested).create_endpoint_config
    config = described_config(request, kms_key=described)
    assert (difference(ENDPOINT_CONFIG, request, config) is None) is same


def test_numbers_compare_as_numbers_and_booleans_as_booleans() -> None:
    assert list(differences({"W": 1}, {"W": 1.0})) == []
    assert list(differences({"W": 1}, {"W": 1.5})) == ["W"]
    assert list(differences({"On": True}, {"On": 1})) == ["On"]
    assert list(differences({"N": "1"}, {"N": 1})) == ["N"]


def test_a_secret_the_comparer_cannot_know_must_be_there() -> None:
    request = {"PrimaryContainer": {"Environment": {"A": "1", "HF_TOKEN": ANY_VALUE}}}
    present = {"PrimaryContainer": {"Environment": {"A": "1", "HF_TOKEN": SECRET_VALUE}}}
    missing = {"PrimaryContainer": {"Environment": {"A": "1"}}}
    assert list(differences(request, present)) == []
    assert list(differences(request, missing)) == ["PrimaryContainer.Environment.HF_TOKEN"]


def test_the_stage_tag_is_identity_the_other_tags_are_not() -> None:
    request = plan().create_model
    model = described_model(request)
    tags = [dict(t) for t in request["Tags"]]
    spec_hash = next(t for t in tags if t["Key"] == "peagle:spec-hash")
    spec_hash["Value"] = "0" * 12
    assert difference(MODEL, request, model, tags) is None
    assert difference(MODEL, request, model, []) is None  # not made by peagle: content decides
    other = [t for t in tags if t["Key"] != "peagle:stage"] + [
        {"Key": "peagle:stage", "Value": "prod"}
    ]
    assert difference(MODEL, request, model, other) == "Tags.peagle:stage"


def test_the_refusal_names_the_resource_and_the_field_never_a_value() -> None:
    request = plan().create_model
    env = {**request["PrimaryContainer"]["Environment"], "HF_TOKEN": SECRET_VALUE}
    request = {**request, "PrimaryContainer": {**request["PrimaryContainer"], "Environment": env}}
    model = described_model(request)
    model["PrimaryContainer"]["Environment"]["HF_TOKEN"] = SECRET_VALUE[::-1]
    field = difference(MODEL, request, model)
    assert field == "PrimaryContainer.Environment.HF_TOKEN"
    text = refusal(MODEL, request["ModelName"], field)
    assert request["ModelName"] in text and field in text and "\n" not in text
    assert SECRET_VALUE not in text and SECRET_VALUE[::-1] not in text
