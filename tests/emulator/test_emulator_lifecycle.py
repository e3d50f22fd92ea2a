"""The moto extensions' control plane: GPU types, scripted lifecycles, updates, rollback."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from peagle_local.emulator import LocalAWS, MotoExtensions
from peagle_local.emulator.moto_ext import log_group_name
from peagle_serve.contract import parse_metric_line

ROLE = "arn:aws:iam::123456789012:role/peagle-test"


def _model_and_config(sm: Any, suffix: str, instance_type: str = "ml.g7e.2xlarge") -> str:
    sm.create_model(
        ModelName=f"m-{suffix}",
        ExecutionRoleArn=ROLE,
        PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm:x"},
    )
    sm.create_endpoint_config(
        EndpointConfigName=f"c-{suffix}",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": f"m-{suffix}",
                "InstanceType": instance_type,
                "InitialInstanceCount": 1,
            }
        ],
    )
    return f"c-{suffix}"


def _status(sm: Any, name: str) -> str:
    return str(sm.describe_endpoint(EndpointName=name)["EndpointStatus"])


@pytest.mark.parametrize(
    "instance_type",
    [
        "ml.g7e.2xlarge",
        "ml.g7e.48xlarge",
        "ml.g6e.12xlarge",
        "ml.p5.48xlarge",
        "ml.p6-b200.48xlarge",
    ],
)
def test_modern_gpu_instance_types_are_accepted(instance_type: str) -> None:
    with mock_aws(), MotoExtensions():
        sm = boto3.client("sagemaker", region_name="us-east-1")
        _model_and_config(sm, "a", instance_type)
        pv = sm.describe_endpoint_config(EndpointConfigName="c-a")["ProductionVariants"]
        assert pv[0]["InstanceType"] == instance_type


def test_unknown_instance_type_still_rejected_and_patches_are_undone() -> None:
    with mock_aws():
        sm = boto3.client("sagemaker", region_name="us-east-1")
        with MotoExtensions(), pytest.raises(ClientError, match=r"ml\.nope\.xlarge"):
            _model_and_config(sm, "x", "ml.nope.xlarge")
        # After exit moto is back to its own (old) list: g7e is refused again.
        with pytest.raises(ClientError, match="ValidationException"):
            _model_and_config(sm, "y", "ml.g7e.2xlarge")
        from moto.sagemaker.responses import SageMakerResponse

        assert not hasattr(SageMakerResponse, "update_endpoint")


def test_only_one_installation_at_a_time() -> None:
    with MotoExtensions(), pytest.raises(RuntimeError, match="already installed"):
        MotoExtensions().install()


def test_creating_then_inservice(local_aws: LocalAWS, clock: Any) -> None:
    sm = local_aws.client("sagemaker")
    local_aws.script_endpoint("ep", creating_s=30.0)
    sm.create_endpoint(EndpointName="ep", EndpointConfigName=_model_and_config(sm, "1"))
    assert _status(sm, "ep") == "Creating"
    clock.advance(29.0)
    assert _status(sm, "ep") == "Creating"
    clock.advance(1.5)
    assert _status(sm, "ep") == "InService"
    # The history stamps the transition with the time it was due, not when it was read.
    assert [(t.endpoint_name, t.status, t.at) for t in local_aws.history] == [
        ("ep", "InService", 1030.0)
    ]
    listed = sm.list_endpoints()["Endpoints"]
    assert [(e["EndpointName"], e["EndpointStatus"]) for e in listed] == [("ep", "InService")]


def test_creating_then_failed_with_reason_and_logs(local_aws: LocalAWS, clock: Any) -> None:
    sm = local_aws.client("sagemaker")
    local_aws.script_endpoint(
        "bad",
        creating_s=5.0,
        fail_reason=(
            "The primary container for production variant AllTraffic did not pass the "
            "ping health check."
        ),
        log_lines=["INFO starting vLLM", "ERROR drafter config.json has no mask_token_id"],
    )
    sm.create_endpoint(EndpointName="bad", EndpointConfigName=_model_and_config(sm, "1"))
    clock.advance(5.0)
    desc = sm.describe_endpoint(EndpointName="bad")
    assert desc["EndpointStatus"] == "Failed"
    assert "ping health check" in desc["FailureReason"]
    logs = local_aws.client("logs")
    events = logs.filter_log_events(logGroupName=log_group_name("bad"))["events"]
    assert [e["message"] for e in events][-1] == "ERROR drafter config.json has no mask_token_id"
    streams = logs.describe_log_streams(logGroupName="/aws/sagemaker/Endpoints/bad")
    assert streams["logStreams"][0]["logStreamName"].startswith("AllTraffic/i-")


def test_duplicate_creates_are_refused(local_aws: LocalAWS) -> None:
    sm = local_aws.client("sagemaker")
    config = _model_and_config(sm, "1")
    with pytest.raises(ClientError, match="Cannot create already existing model"):
        sm.create_model(ModelName="m-1", ExecutionRoleArn=ROLE, PrimaryContainer={"Image": "x"})
    with pytest.raises(ClientError, match="already existing endpoint configuration"):
        sm.create_endpoint_config(
            EndpointConfigName=config,
            ProductionVariants=[
                {"VariantName": "v", "ModelName": "m-1", "InstanceType": "ml.g7e.2xlarge"}
            ],
        )
    sm.create_endpoint(EndpointName="ep", EndpointConfigName=config)
    with pytest.raises(ClientError, match="Cannot create already existing endpoint"):
        sm.create_endpoint(EndpointName="ep", EndpointConfigName=config)


def test_update_endpoint_rolls_forward(local_aws: LocalAWS, clock: Any) -> None:
    sm = local_aws.client("sagemaker")
    sm.create_endpoint(EndpointName="ep", EndpointConfigName=_model_and_config(sm, "old"))
    assert _status(sm, "ep") == "InService"
    local_aws.script_endpoint("ep", updating_s=10.0)
    new = _model_and_config(sm, "new", "ml.p5.48xlarge")
    deployment = {
        "BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": {
                "Type": "CANARY",
                "WaitIntervalInSeconds": 300,
                "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 10},
            },
            "MaximumExecutionTimeoutInSeconds": 1800,
        },
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "peagle-5xx"}]},
    }
    sm.update_endpoint(EndpointName="ep", EndpointConfigName=new, DeploymentConfig=deployment)
    desc = sm.describe_endpoint(EndpointName="ep")
    assert desc["EndpointStatus"] == "Updating"
    assert desc["EndpointConfigName"] == "c-old"
    assert desc["PendingDeploymentSummary"]["EndpointConfigName"] == new
    with pytest.raises(ClientError, match="only InService endpoints can be updated"):
        sm.update_endpoint(EndpointName="ep", EndpointConfigName=new)
    clock.advance(10.0)
    desc = sm.describe_endpoint(EndpointName="ep")
    assert (desc["EndpointStatus"], desc["EndpointConfigName"]) == ("InService", new)
    assert "PendingDeploymentSummary" not in desc
    assert desc["LastDeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"][0]["AlarmName"] == (
        "peagle-5xx"
    )


def test_update_endpoint_scripted_rollback(local_aws: LocalAWS, clock: Any) -> None:
    sm = local_aws.client("sagemaker")
    sm.create_endpoint(EndpointName="ep", EndpointConfigName=_model_and_config(sm, "old"))
    local_aws.script_endpoint(
        "ep", updating_s=4.0, rollback_on_update=True, rolling_back_s=2.0, rollback_reason="alarm"
    )
    sm.update_endpoint(EndpointName="ep", EndpointConfigName=_model_and_config(sm, "new"))
    seen = []
    for _ in range(4):
        seen.append(_status(sm, "ep"))
        clock.advance(2.0)
    assert seen == ["Updating", "Updating", "RollingBack", "InService"]
    desc = sm.describe_endpoint(EndpointName="ep")
    assert desc["EndpointConfigName"] == "c-old"
    assert desc["FailureReason"] == "alarm"


def test_update_errors_name_missing_things(local_aws: LocalAWS) -> None:
    sm = local_aws.client("sagemaker")
    with pytest.raises(ClientError, match="Could not find endpoint"):
        sm.update_endpoint(EndpointName="nope", EndpointConfigName="c")
    sm.create_endpoint(EndpointName="ep", EndpointConfigName=_model_and_config(sm, "1"))
    with pytest.raises(ClientError, match="Could not find endpoint configuration"):
        sm.update_endpoint(EndpointName="ep", EndpointConfigName="missing")


def test_an_autoscaled_variant_cannot_change_its_instance_type(local_aws: LocalAWS) -> None:
    """As SageMaker: an update that would change the instance type of a variant that is
    a scalable target fails (docs/platform-facts.md, "Deploying onto an autoscaled
    endpoint"); its model may change, and once deregistered its type may too."""
    sm = local_aws.client("sagemaker")
    aas = local_aws.client("application-autoscaling")
    sm.create_endpoint(EndpointName="ep", EndpointConfigName=_model_and_config(sm, "old"))
    target = {
        "ServiceNamespace": "sagemaker",
        "ResourceId": "endpoint/ep/variant/AllTraffic",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
    }
    aas.register_scalable_target(**target, MinCapacity=1, MaxCapacity=4)
    other_type = _model_and_config(sm, "p5", "ml.p5.48xlarge")
    with pytest.raises(ClientError, match="target for auto scaling"):
        sm.update_endpoint(EndpointName="ep", EndpointConfigName=other_type)
    assert sm.describe_endpoint(EndpointName="ep")["EndpointStatus"] == "InService"
    sm.update_endpoint(EndpointName="ep", EndpointConfigName=_model_and_config(sm, "same"))
    assert sm.describe_endpoint(EndpointName="ep")["EndpointConfigName"] == "c-same"
    aas.deregister_scalable_target(**target)
    sm.update_endpoint(EndpointName="ep", EndpointConfigName=other_type)
    assert sm.describe_endpoint(EndpointName="ep")["EndpointConfigName"] == other_type


def test_update_in_process_mock_aws() -> None:
    with mock_aws(), MotoExtensions():
        sm = boto3.client("sagemaker", region_name="us-east-1")
        sm.create_endpoint(EndpointName="ep", EndpointConfigName=_model_and_config(sm, "a"))
        sm.update_endpoint(EndpointName="ep", EndpointConfigName=_model_and_config(sm, "b"))
        assert sm.describe_endpoint(EndpointName="ep")["EndpointConfigName"] == "c-b"


def test_spec_metric_lines_written_per_invocation(local_aws: LocalAWS) -> None:
    import json

    sm = local_aws.client("sagemaker")
    sm.create_endpoint(EndpointName="ep", EndpointConfigName=_model_and_config(sm, "1"))
    local_aws.set_acceptance_metrics("ep", acceptance_rate=0.5, num_speculative_tokens=4)
    rt = local_aws.client("sagemaker-runtime")
    body = json.dumps({"messages": [{"role": "user", "content": "hello"}]})
    rt.invoke_endpoint(EndpointName="ep", Body=body, ContentType="application/json")
    docs = [parse_metric_line(m) for m in local_aws.log_lines("ep")]
    assert len(docs) == 1 and docs[0] is not None
    assert docs[0]["acceptance_rate"] == 0.5
    assert docs[0]["mean_acceptance_length"] == 3.0
    assert len(docs[0]["acceptance_rate_per_position"]) == 4
