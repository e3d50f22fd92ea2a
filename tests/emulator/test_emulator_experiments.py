"""The emulator's InferenceExperiment and detailed observability, against botocore's model.

Shadow tests run through SageMaker's InferenceExperiment API: the sampling percentage is
the shadow's share, a stop reverts the endpoint, the API's refusals are its own error
codes. Detailed observability answers CloudWatch's PromQL route with vLLM's series per
variant and instance, signed and sent as `peagle experiment status` sends it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from peagle_local.emulator import LocalAWS, MotoExtensions
from peagle_local.emulator.observability import DetailedMetrics, parse_selector
from peagle_local.emulator.traffic import VariantBehaviour
from peagle_serve.contract import VARIANT_DIMENSION, parse_metric_line

ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/peagle-shadow"
PEAGLE = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:x"
AWS_VLLM = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.30.0-gpu-py312-cu130"
BODY = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 16})


def _model_variant(name: str, model: str) -> dict[str, Any]:
    return {
        "ModelName": model,
        "VariantName": name,
        "InfrastructureConfig": {
            "InfrastructureType": "RealTimeInference",
            "RealTimeInferenceConfig": {"InstanceType": "ml.g7e.2xlarge", "InstanceCount": 1},
        },
    }


def _serving(sm: Any, iam: Any, image: str = PEAGLE) -> None:
    """An endpoint serving m-inc as AllTraffic, m-cand beside it, and the role."""
    iam.create_role(RoleName="peagle-shadow", AssumeRolePolicyDocument="{}")
    for model in ("m-inc", "m-cand"):
        sm.create_model(ModelName=model, ExecutionRoleArn=ROLE, PrimaryContainer={"Image": image})
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": "m-inc",
        "InstanceType": "ml.g7e.2xlarge",
        "InitialInstanceCount": 1,
    }
    sm.create_endpoint_config(EndpointConfigName="c-inc", ProductionVariants=[variant])
    sm.create_endpoint(EndpointName="ep", EndpointConfigName="c-inc")


def _experiment(sampling: int, **extra: Any) -> dict[str, Any]:
    return {
        "Name": "ep-shadow",
        "Type": "ShadowMode",
        "RoleArn": ROLE,
        "EndpointName": "ep",
        "ModelVariants": [
            _model_variant("AllTraffic", "m-inc"),
            _model_variant("Candidate", "m-cand"),
        ],
        "ShadowModeConfig": {
            "SourceModelVariantName": "AllTraffic",
            "ShadowModelVariants": [
                {"ShadowModelVariantName": "Candidate", "SamplingPercentage": sampling}
            ],
        },
        **extra,
    }


def _mirrored(ext: MotoExtensions, rt: Any, n: int) -> int:
    before = sum(
        1
        for m in ext.log_lines("ep")
        if (parse_metric_line(m) or {}).get(VARIANT_DIMENSION) == "Candidate"
    )
    for _ in range(n):
        rt.invoke_endpoint(EndpointName="ep", Body=BODY, ContentType="application/json")
    after = sum(
        1
        for m in ext.log_lines("ep")
        if (parse_metric_line(m) or {}).get(VARIANT_DIMENSION) == "Candidate"
    )
    return after - before


def test_a_shadow_test_samples_its_percentage_and_reverts_the_endpoint_when_stopped() -> None:
    with mock_aws(), MotoExtensions(seed=3) as ext:
        sm = boto3.client("sagemaker", region_name="us-east-1")
        rt = boto3.client("sagemaker-runtime", region_name="us-east-1")
        _serving(sm, boto3.client("iam", region_name="us-east-1"))
        ext.set_variant("ep", "AllTraffic", VariantBehaviour(step_s=0.001, ttft_s=0.0))
        ext.set_variant("ep", "Candidate", VariantBehaviour(step_s=0.001, ttft_s=0.0))
        arn = sm.create_inference_experiment(**_experiment(30))["InferenceExperimentArn"]
        assert arn.endswith(":inference-experiment/ep-shadow")
        desc = sm.describe_inference_experiment(Name="ep-shadow")
        assert desc["Status"] == "Running"
        assert desc["Schedule"]["EndTime"] - desc["Schedule"]["StartTime"] == timedelta(days=7)
        endpoint = sm.describe_endpoint(EndpointName="ep")
        assert [v["VariantName"] for v in endpoint["ShadowProductionVariants"]] == ["Candidate"]
        assert desc["EndpointMetadata"]["EndpointConfigName"] == endpoint["EndpointConfigName"]
        assert 40 <= _mirrored(ext, rt, 200) <= 80  # about 30 % of 200
        sm.update_inference_experiment(
            Name="ep-shadow",
            ShadowModeConfig=_experiment(100)["ShadowModeConfig"],
            Schedule={"EndTime": datetime.now(UTC) + timedelta(hours=2)},
        )
        assert _mirrored(ext, rt, 50) == 50
        with pytest.raises(ClientError) as busy:
            sm.delete_inference_experiment(Name="ep-shadow")
        assert busy.value.response["Error"]["Code"] == "ConflictException"
        sm.stop_inference_experiment(
            Name="ep-shadow",
            ModelVariantActions={"AllTraffic": "Retain", "Candidate": "Remove"},
            DesiredState="Cancelled",
            Reason="enough",
        )
        done = sm.describe_inference_experiment(Name="ep-shadow")
        assert (done["Status"], done["StatusReason"]) == ("Cancelled", "enough")
        endpoint = sm.describe_endpoint(EndpointName="ep")
        assert endpoint["EndpointConfigName"] == "c-inc"  # reverted
        assert not endpoint.get("ShadowProductionVariants")
        configs = {c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]}
        assert configs == {"c-inc"}  # the experiment's own config is gone
        listed = sm.list_inference_experiments(StatusEquals="Cancelled")["InferenceExperiments"]
        assert [e["Name"] for e in listed] == ["ep-shadow"]
        sm.delete_inference_experiment(Name="ep-shadow")
        with pytest.raises(ClientError) as gone:
            sm.describe_inference_experiment(Name="ep-shadow")
        assert gone.value.response["Error"]["Code"] == "ResourceNotFound"


def test_the_api_refuses_what_sagemaker_refuses() -> None:
    with mock_aws(), MotoExtensions():
        sm = boto3.client("sagemaker", region_name="us-east-1")
        _serving(sm, boto3.client("iam", region_name="us-east-1"))
        sm.create_inference_experiment(**_experiment(50))
        with pytest.raises(ClientError) as twice:
            sm.create_inference_experiment(**_experiment(50))
        assert twice.value.response["Error"]["Code"] == "ResourceInUse"
        other = {**_experiment(50), "Name": "other", "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/nope"}
        with pytest.raises(ClientError, match="Could not assume role"):
            sm.create_inference_experiment(**other)
        wrong = _experiment(50)
        wrong["ShadowModeConfig"]["ShadowModelVariants"][0]["ShadowModelVariantName"] = "X"
        with pytest.raises(ClientError, match="ShadowModeConfig"):
            sm.create_inference_experiment(**{**wrong, "Name": "third"})


def test_the_scheduled_end_reverts_the_endpoint() -> None:
    now = [datetime.now(UTC).timestamp()]
    with mock_aws(), MotoExtensions(wall=lambda: now[0]):
        sm = boto3.client("sagemaker", region_name="us-east-1")
        _serving(sm, boto3.client("iam", region_name="us-east-1"))
        end = datetime.fromtimestamp(now[0], UTC) + timedelta(hours=1)
        sm.create_inference_experiment(**_experiment(100, Schedule={"EndTime": end}))
        assert sm.describe_inference_experiment(Name="ep-shadow")["Status"] == "Running"
        now[0] += 3601
        done = sm.describe_inference_experiment(Name="ep-shadow")
        assert done["Status"] == "Completed"
        assert sm.describe_endpoint(EndpointName="ep")["EndpointConfigName"] == "c-inc"


def test_detailed_observability_answers_promql_with_each_variants_vllm_series(
    local_aws: LocalAWS, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Variants of another image than the project's write no peagle lines: what they
    served is read from vLLM's series, through the PromQL route, signed as on AWS."""
    from peagle_deploy.experiment.common import Clients
    from peagle_deploy.experiment.detailed import read_detailed, sigv4_post

    sm = local_aws.client("sagemaker")
    rt = local_aws.client("sagemaker-runtime")
    _serving(sm, local_aws.client("iam"), image=AWS_VLLM)
    sm.create_inference_experiment(**_experiment(100))
    local_aws.set_variant("ep", "AllTraffic", VariantBehaviour(step_s=0.002, ttft_s=0.0))
    local_aws.set_variant("ep", "Candidate", VariantBehaviour(step_s=0.001, ttft_s=0.0))
    start = datetime.now(UTC)
    for _ in range(20):
        rt.invoke_endpoint(EndpointName="ep", Body=BODY, ContentType="application/json")
    assert local_aws.log_lines("ep") == []  # no peagle-serve in AWS's image
    for key, value in local_aws.env().items():
        monkeypatch.setenv(key, value)
    clients = Clients("us-east-1", boto3.Session(region_name="us-east-1"))
    reading = read_detailed(
        sigv4_post(clients),
        "ep",
        start=start,
        end=datetime.now(UTC) + timedelta(seconds=2),
        step_s=1,
    )
    assert reading.missing is None
    finished = {
        v: sum(o.requests for o in reading.samples if o.variant == v)
        for v in ("AllTraffic", "Candidate")
    }
    assert finished == {"AllTraffic": 20, "Candidate": 20}
    speed = {
        v: sum(o.decode_tokens for o in reading.samples if o.variant == v)
        / sum(o.decode_s for o in reading.samples if o.variant == v)
        for v in finished
    }
    assert speed["Candidate"] > speed["AllTraffic"]  # half the step time
    assert all(o.histograms.get("ttft_s") is not None for o in reading.samples)


def test_the_promql_stand_in_answers_selectors_only() -> None:
    assert parse_selector('{"vllm:x_total", "aws.sagemaker.endpoint.name"="ep"}') == {
        "__name__": "vllm:x_total",
        "aws.sagemaker.endpoint.name": "ep",
    }
    assert parse_selector('vllm:x{finished_reason="error"}') == {
        "__name__": "vllm:x",
        "finished_reason": "error",
    }
    assert parse_selector("sum(rate(vllm:x[5m]))") is None
    assert parse_selector('{"a"="b"}') is None  # no metric name: refused, as CloudWatch does
    answer = DetailedMetrics().query_range("rate(x[1m])", 0, 60, 60)
    assert (answer["status"], answer["errorType"]) == ("error", "bad_data")


def test_the_reset_forgets_inference_experiments(local_aws: LocalAWS) -> None:
    """A second test on the same endpoint name must not meet the first one's experiment
    (issue 35: the reset kept them, so the next CreateInferenceExperiment of the same name
    was ResourceInUse and the endpoint's sampling came from a dead experiment)."""
    from peagle_local.emulator import reset_moto_state

    sm = local_aws.client("sagemaker")
    _serving(sm, local_aws.client("iam"))
    sm.create_inference_experiment(**_experiment(100))
    assert sm.list_inference_experiments()["InferenceExperiments"]
    reset_moto_state()
    assert sm.list_inference_experiments()["InferenceExperiments"] == []
    _serving(sm, local_aws.client("iam"))
    sm.create_inference_experiment(**_experiment(100))  # the same name again
    assert sm.describe_inference_experiment(Name="ep-shadow")["Status"] == "Running"


def test_update_endpoint_retains_instance_counts_when_asked() -> None:
    """RetainAllVariantProperties keeps a same-named variant's current count (here 6, its
    config says 1) and, with DesiredWeight excluded, takes the new config's weights; a
    new variant takes its config's count. Without it, the config's counts apply."""
    with mock_aws(), MotoExtensions() as ext:
        sm = boto3.client("sagemaker", region_name="us-east-1")
        aas = boto3.client("application-autoscaling", region_name="us-east-1")
        _serving(sm, boto3.client("iam", region_name="us-east-1"))
        resource = "endpoint/ep/variant/AllTraffic"
        aas.register_scalable_target(
            ServiceNamespace="sagemaker",
            ResourceId=resource,
            ScalableDimension="sagemaker:variant:DesiredInstanceCount",
            MinCapacity=1,
            MaxCapacity=8,
        )
        assert ext.autoscale("ep", 6) == 6
        two = [
            {"VariantName": "AllTraffic", "ModelName": "m-inc", "InitialVariantWeight": 0.5},
            {"VariantName": "Candidate", "ModelName": "m-cand", "InitialVariantWeight": 0.5},
        ]
        for v in two:
            v.update({"InstanceType": "ml.g7e.2xlarge", "InitialInstanceCount": 3})
        sm.create_endpoint_config(EndpointConfigName="c-two", ProductionVariants=two)
        sm.update_endpoint(
            EndpointName="ep",
            EndpointConfigName="c-two",
            RetainAllVariantProperties=True,
            ExcludeRetainedVariantProperties=[{"VariantPropertyType": "DesiredWeight"}],
        )
        variants = sm.describe_endpoint(EndpointName="ep")["ProductionVariants"]
        assert [
            (v["VariantName"], v["CurrentInstanceCount"], v["CurrentWeight"]) for v in variants
        ] == [
            ("AllTraffic", 6, 0.5),
            ("Candidate", 3, 0.5),
        ]
        sm.update_endpoint(EndpointName="ep", EndpointConfigName="c-inc")
        (only,) = sm.describe_endpoint(EndpointName="ep")["ProductionVariants"]
        assert only["CurrentInstanceCount"] == 1  # the default: the config's count


def test_autoscaling_honours_the_targets_bounds_and_suspension() -> None:
    with mock_aws(), MotoExtensions() as ext:
        sm = boto3.client("sagemaker", region_name="us-east-1")
        aas = boto3.client("application-autoscaling", region_name="us-east-1")
        _serving(sm, boto3.client("iam", region_name="us-east-1"))
        with pytest.raises(LookupError):
            ext.autoscale("ep", 3)  # no scalable target: no policy scales it
        target = {
            "ServiceNamespace": "sagemaker",
            "ResourceId": "endpoint/ep/variant/AllTraffic",
            "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
        }
        aas.register_scalable_target(**target, MinCapacity=2, MaxCapacity=5)
        assert ext.autoscale("ep", 9) == 5 and ext.autoscale("ep", 1) == 2
        aas.register_scalable_target(**target, SuspendedState={"DynamicScalingOutSuspended": True})
        assert ext.autoscale("ep", 4) == 2  # out held
        assert ext.autoscale("ep", 2) == 2
        aas.register_scalable_target(**target, SuspendedState={"DynamicScalingInSuspended": True})
        assert ext.autoscale("ep", 4) == 4 and ext.autoscale("ep", 3) == 4  # in held
        (described,) = aas.describe_scalable_targets(ServiceNamespace="sagemaker")[
            "ScalableTargets"
        ]
        assert (described["MinCapacity"], described["MaxCapacity"]) == (2, 5)  # unchanged


def test_the_two_stops_cloudformations_handler_sends() -> None:
    """AWS's InferenceExperiment handler (docs/platform-facts.md, "CloudFormation and the
    InferenceExperiment") stops an experiment two ways. Its update, for a stage's
    `experiment_state: completed`, keeps the variants the template lists (the incumbent)
    and removes the others: the endpoint reverts. Its delete keeps both ("Retain - Keep
    the variant as it is"): the candidate stays on the endpoint as its shadow variant,
    after the experiment's metadata is gone."""
    with mock_aws(), MotoExtensions():
        sm = boto3.client("sagemaker", region_name="us-east-1")
        _serving(sm, boto3.client("iam", region_name="us-east-1"))
        sm.create_inference_experiment(**_experiment(100))
        sm.stop_inference_experiment(  # UpdateHandler: updateModelVariantActionToStopRequest
            Name="ep-shadow",
            ModelVariantActions={"AllTraffic": "Retain", "Candidate": "Remove"},
            DesiredModelVariants=[_model_variant("AllTraffic", "m-inc")],
            DesiredState="Completed",
            Reason="experiment_state: completed",
        )
        done = sm.describe_inference_experiment(Name="ep-shadow")
        assert (done["Status"], done["StatusReason"]) == (
            "Completed",
            "experiment_state: completed",
        )
        endpoint = sm.describe_endpoint(EndpointName="ep")
        assert (endpoint["EndpointConfigName"], endpoint.get("ShadowProductionVariants")) == (
            "c-inc",
            None,
        )
        sm.delete_inference_experiment(Name="ep-shadow")

        sm.create_inference_experiment(**{**_experiment(100), "Name": "ep-shadow-2"})
        sm.stop_inference_experiment(  # DeleteHandler: updateDefaultModelVariantActionToStopRequest
            Name="ep-shadow-2",
            ModelVariantActions={"AllTraffic": "Retain", "Candidate": "Retain"},
            DesiredState="Completed",
        )
        assert sm.describe_inference_experiment(Name="ep-shadow-2")["Status"] == "Completed"
        sm.delete_inference_experiment(Name="ep-shadow-2")
        endpoint = sm.describe_endpoint(EndpointName="ep")
        assert [v["VariantName"] for v in endpoint["ShadowProductionVariants"]] == ["Candidate"]
        assert endpoint["EndpointConfigName"] != "c-inc"  # still the experiment's config
