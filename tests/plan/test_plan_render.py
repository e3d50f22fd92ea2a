"""build_plan renders requests that botocore's sagemaker model accepts, named by content."""

from __future__ import annotations

import json
from typing import Any

import botocore.session
import pytest
from botocore.validate import validate_parameters

from peagle_deploy.catalog import MODELS
from peagle_deploy.plan import PLACEHOLDER_ROLE_ARN, build_plan
from peagle_deploy.spec import load_spec

ROLE = "arn:aws:iam::123456789012:role/peagle-exec"


@pytest.fixture(scope="module")
def sagemaker_model() -> Any:
    return botocore.session.get_session().get_service_model("sagemaker")


def _valid(model: Any, operation: str, params: dict[str, Any]) -> None:
    validate_parameters(params, model.operation_model(operation).input_shape)


def _all_requests_valid(model: Any, plan: Any) -> None:
    _valid(model, "CreateModel", plan.create_model)
    _valid(model, "CreateEndpointConfig", plan.create_endpoint_config)
    _valid(model, "CreateEndpoint", plan.create_endpoint)
    _valid(model, "UpdateEndpoint", plan.update_endpoint)


@pytest.mark.parametrize("key", sorted(MODELS))
def test_every_catalog_model_renders_valid_requests(sagemaker_model: Any, key: str) -> None:
    plan = build_plan(load_spec(model=key, accept_eula=True, execution_role_arn=ROLE))
    _all_requests_valid(sagemaker_model, plan)
    assert plan.instance_type.startswith("ml.g7e.")


def test_botocore_validation_can_fail(sagemaker_model: Any) -> None:
    plan = build_plan(load_spec(model="gpt-oss-20b"))
    broken = json.loads(json.dumps(plan.create_model))
    del broken["PrimaryContainer"]["AdditionalModelDataSources"][0]["ChannelName"]
    with pytest.raises(Exception, match="ChannelName"):
        _valid(sagemaker_model, "CreateModel", broken)


def test_p_eagle_request_shape() -> None:
    plan = build_plan(load_spec(model="qwen3-coder-30b-a3b-instruct"))
    container = plan.create_model["PrimaryContainer"]
    (extra,) = container["AdditionalModelDataSources"]
    assert extra["ChannelName"] == "eagle"
    assert extra["S3DataSource"]["S3DataType"] == "S3Prefix"
    assert extra["S3DataSource"]["S3Uri"] == plan.drafter_uri
    raw = container["Environment"]["SM_VLLM_SPECULATIVE_CONFIG"]
    assert raw == (
        '{"method":"eagle3","model":"/opt/ml/additional-model-data-sources/eagle",'
        '"num_speculative_tokens":7,"parallel_drafting":true}'
    )
    assert plan.create_model["EnableNetworkIsolation"] is True
    assert plan.has_placeholder_role
    assert plan.create_model["ExecutionRoleArn"] == PLACEHOLDER_ROLE_ARN
    assert any("execution_role_arn" in w for w in plan.warnings)


def test_eagle3_and_none_modes() -> None:
    e3 = build_plan(load_spec(model="gpt-oss-20b", speculative={"mode": "eagle3"}))
    config = json.loads(
        e3.create_model["PrimaryContainer"]["Environment"]["SM_VLLM_SPECULATIVE_CONFIG"]
    )
    assert config == {
        "method": "eagle3",
        "model": "/opt/ml/additional-model-data-sources/eagle",
        "num_speculative_tokens": 3,
    }
    none = build_plan(load_spec(model="gpt-oss-20b", speculative={"mode": "none"}))
    container = none.create_model["PrimaryContainer"]
    assert "AdditionalModelDataSources" not in container
    assert "SM_VLLM_SPECULATIVE_CONFIG" not in container["Environment"]
    assert none.num_speculative_tokens is None and none.drafter_uri is None


def test_k_schedule_and_custom_channel() -> None:
    plan = build_plan(
        load_spec(
            model="gpt-oss-20b",
            speculative={
                "mode": "eagle3",
                "num_speculative_tokens": 7,
                "num_speculative_tokens_per_batch_size": [[1, 4, 7], [5, 64, 3]],
                "drafter_channel": "drafter.v2",
            },
        )
    )
    container = plan.create_model["PrimaryContainer"]
    config = json.loads(container["Environment"]["SM_VLLM_SPECULATIVE_CONFIG"])
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 4, 7], [5, 64, 3]]
    assert config["model"] == "/opt/ml/additional-model-data-sources/drafter.v2"
    assert container["AdditionalModelDataSources"][0]["ChannelName"] == "drafter.v2"
    # vLLM 0.18.0 (the first default) has no per-batch-size K: the next default image runs
    assert plan.vllm_version == "0.30.0" and plan.image_uri.endswith(
        "/vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker"
    )


def test_names_are_content_derived() -> None:
    a = build_plan(load_spec(model="gpt-oss-20b"))
    b = build_plan(load_spec(model="gpt-oss-20b"))
    assert a.names == b.names and a.content_hash == b.content_hash
    c = build_plan(load_spec(model="gpt-oss-20b", speculative={"num_speculative_tokens": 5}))
    assert c.endpoint_name == a.endpoint_name == "peagle-gpt-oss-20b-dev"
    assert c.model_name != a.model_name
    assert c.endpoint_config_name != a.endpoint_config_name
    # only the instance count changes: same model, new config
    d = build_plan(load_spec(model="gpt-oss-20b", initial_instance_count=2))
    assert d.model_name == a.model_name and d.endpoint_config_name != a.endpoint_config_name
    prod = build_plan(load_spec(model="gpt-oss-20b", stage="prod"))
    assert prod.model_name != a.model_name and prod.endpoint_name == "peagle-gpt-oss-20b-prod"
    for name in (*a.names.values(), *c.names.values()):
        assert len(name) <= 63


def test_tags_on_every_resource() -> None:
    plan = build_plan(load_spec(model="gpt-oss-20b", stage="staging", tags={"team": "ml"}))
    expected = {
        "peagle:managed": "true",
        "peagle:stage": "staging",
        "peagle:spec-hash": plan.content_hash,
        "team": "ml",
    }
    for request in (plan.create_model, plan.create_endpoint_config, plan.create_endpoint):
        tags = {t["Key"]: t["Value"] for t in request["Tags"]}
        assert expected.items() <= tags.items()


def test_update_endpoint_blue_green_with_alarms(sagemaker_model: Any) -> None:
    plan = build_plan(
        load_spec(
            model="gpt-oss-20b",
            initial_instance_count=4,
            rollout={"strategy": "linear", "linear_step_percent": 20, "alarms": ["p99", "errors"]},
        )
    )
    deployment = plan.update_endpoint["DeploymentConfig"]
    routing = deployment["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]
    assert routing["Type"] == "LINEAR"
    assert routing["LinearStepSize"] == {"Type": "CAPACITY_PERCENT", "Value": 20}
    assert deployment["AutoRollbackConfiguration"] == {
        "Alarms": [{"AlarmName": "p99"}, {"AlarmName": "errors"}]
    }
    _valid(sagemaker_model, "UpdateEndpoint", plan.update_endpoint)
    no_alarms = build_plan(load_spec(model="gpt-oss-20b", rollout={"strategy": "all-at-once"}))
    deployment = no_alarms.update_endpoint["DeploymentConfig"]
    assert "AutoRollbackConfiguration" not in deployment
    assert (
        deployment["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]["Type"] == "ALL_AT_ONCE"
    )


def test_optional_variant_fields_render_valid(sagemaker_model: Any) -> None:
    plan = build_plan(
        load_spec(
            model="gpt-oss-20b",
            execution_role_arn=ROLE,
            region="eu-west-1",
            routing_strategy="PREFIX_AWARE",
            inference_ami_version="al2023-ami-sagemaker-inference-gpu-4-1",
            kms_key_id="alias/peagle",
            vpc={"subnet_ids": ["subnet-0123abcd"], "security_group_ids": ["sg-0123abcd"]},
            env={"SM_VLLM_GPU_MEMORY_UTILIZATION": "0.92"},
            scaling={"min_instances": 1, "max_instances": 3},
        )
    )
    _all_requests_valid(sagemaker_model, plan)
    variant = plan.create_endpoint_config["ProductionVariants"][0]
    assert variant["RoutingConfig"] == {"RoutingStrategy": "PREFIX_AWARE"}
    assert "VolumeSizeInGB" not in variant
    assert plan.create_model["VpcConfig"]["Subnets"] == ["subnet-0123abcd"]
    assert ".eu-west-1." in plan.image_uri and "eu-west-1" in plan.model_data_uri
    assert (
        plan.create_model["PrimaryContainer"]["Environment"]["SM_VLLM_GPU_MEMORY_UTILIZATION"]
        == "0.92"
    )
    assert plan.autoscaling is not None
    assert plan.autoscaling["register_scalable_target"]["MaxCapacity"] == 3


def test_region_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-southeast-2")
    assert build_plan(load_spec(model="gpt-oss-20b")).region == "ap-southeast-2"
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    assert build_plan(load_spec(model="gpt-oss-20b")).region == "us-west-2"
    assert build_plan(load_spec(model="gpt-oss-20b", region="eu-north-1")).region == "eu-north-1"


def test_custom_model_tar_gz_and_to_json(sagemaker_model: Any) -> None:
    plan = build_plan(
        load_spec(
            model="custom",
            instance_type="ml.g6e.12xlarge",
            tensor_parallel_size=4,
            custom={
                "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-vllm:1",
                "model_data_uri": "s3://my-bucket/models/target.tar.gz",
                "drafter_uri": "s3://my-bucket/models/drafter/",
                "weights_gb": 40,
                "name": "my-llm",
            },
        )
    )
    _all_requests_valid(sagemaker_model, plan)
    source = plan.create_model["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]
    assert source == {
        "S3Uri": "s3://my-bucket/models/target.tar.gz",
        "S3DataType": "S3Object",
        "CompressionType": "Gzip",
    }
    assert plan.endpoint_name == "peagle-my-llm-dev"
    doc = plan.to_json()
    assert set(doc) == {
        "create_model",
        "create_endpoint_config",
        "create_endpoint",
        "update_endpoint",
        "autoscaling",
        "secrets",
        "warnings",
        "engine",
        "names",
        "content_hash",
    }
    assert doc["secrets"] == {}
    json.dumps(doc)


def test_trained_token_count_reaches_the_container_for_p_eagle() -> None:
    env = build_plan(load_spec(model="gpt-oss-20b")).create_model["PrimaryContainer"]["Environment"]
    assert env["PEAGLE_DRAFTER_TRAINED_TOKENS"] == "10"
    qwen = build_plan(load_spec(model="qwen3-coder-30b-a3b-instruct"))
    qwen_env = qwen.create_model["PrimaryContainer"]["Environment"]
    assert qwen_env["PEAGLE_DRAFTER_TRAINED_TOKENS"] == "18"  # its model card
    unknown = build_plan(load_spec(model="gemma-4-31b-it"))
    assert (
        "PEAGLE_DRAFTER_TRAINED_TOKENS"
        not in unknown.create_model["PrimaryContainer"]["Environment"]
    )
    sequential = build_plan(load_spec(model="gpt-oss-20b", speculative={"mode": "eagle3"}))
    assert (
        "PEAGLE_DRAFTER_TRAINED_TOKENS"
        not in sequential.create_model["PrimaryContainer"]["Environment"]
    )


def test_speculative_plans_name_the_endpoint_for_the_metric_lines() -> None:
    from peagle_serve.contract import ENDPOINT_NAME_ENV

    spec_plan = build_plan(load_spec(model="gpt-oss-20b", stage="prod"))
    env = spec_plan.create_model["PrimaryContainer"]["Environment"]
    assert env[ENDPOINT_NAME_ENV] == spec_plan.endpoint_name == "peagle-gpt-oss-20b-prod"
    plain = build_plan(load_spec(model="gpt-oss-20b", speculative={"mode": "none"}))
    assert ENDPOINT_NAME_ENV not in plain.create_model["PrimaryContainer"]["Environment"]
