"""Two variants on one emulated endpoint: weights, shadow mirroring, per-variant reports."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from peagle_local.emulator import LocalAWS, MotoExtensions
from peagle_local.emulator.traffic import VariantBehaviour
from peagle_serve.contract import SERVING_KEY, VARIANT_DIMENSION, parse_metric_line

ROLE = "arn:aws:iam::123456789012:role/peagle-test"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:x"
BODY = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 16})


def _variant(name: str, model: str, weight: float = 1.0) -> dict[str, Any]:
    return {
        "VariantName": name,
        "ModelName": model,
        "InstanceType": "ml.g7e.2xlarge",
        "InitialInstanceCount": 1,
        "InitialVariantWeight": weight,
    }


def _endpoint(sm: Any, *, shadow_weight: float | None, split: float | None = None) -> None:
    for model in ("m-inc", "m-cand"):
        sm.create_model(ModelName=model, ExecutionRoleArn=ROLE, PrimaryContainer={"Image": IMAGE})
    request: dict[str, Any] = {"EndpointConfigName": "c-exp"}
    if shadow_weight is not None:
        request["ProductionVariants"] = [_variant("AllTraffic", "m-inc")]
        request["ShadowProductionVariants"] = [_variant("Candidate", "m-cand", shadow_weight)]
    else:
        assert split is not None
        request["ProductionVariants"] = [
            _variant("AllTraffic", "m-inc", 1 - split),
            _variant("Candidate", "m-cand", split),
        ]
    sm.create_endpoint_config(**request)
    sm.create_endpoint(EndpointName="ep", EndpointConfigName="c-exp")


def _lines(aws: MotoExtensions) -> list[dict[str, Any]]:
    docs = [parse_metric_line(m) for m in aws.log_lines("ep")]
    return [d for d in docs if d is not None]


def _sum(cw: Any, metric: str, variant: str) -> float:
    now = datetime.now(UTC)
    out = cw.get_metric_data(
        MetricDataQueries=[
            {
                "Id": "m",
                "MetricStat": {
                    "Metric": {
                        "Namespace": "AWS/SageMaker",
                        "MetricName": metric,
                        "Dimensions": [
                            {"Name": "EndpointName", "Value": "ep"},
                            {"Name": "VariantName", "Value": variant},
                        ],
                    },
                    "Period": 60,
                    "Stat": "Sum",
                },
            }
        ],
        StartTime=now - timedelta(minutes=5),
        EndTime=now + timedelta(minutes=1),
    )
    return float(sum(out["MetricDataResults"][0]["Values"]))


def test_a_shadow_variant_gets_copies_its_answers_never_reach_the_caller() -> None:
    """A plain config's shadow variant: no source says what its weight means, so the
    emulator gives it none and mirrors every request (an InferenceExperiment's
    SamplingPercentage is the share: test_emulator_experiments.py)."""
    with mock_aws(), MotoExtensions(seed=1) as ext:
        sm = boto3.client("sagemaker", region_name="us-east-1")
        rt = boto3.client("sagemaker-runtime", region_name="us-east-1")
        _endpoint(sm, shadow_weight=0.5)
        desc = sm.describe_endpoint(EndpointName="ep")
        assert [v["VariantName"] for v in desc["ShadowProductionVariants"]] == ["Candidate"]
        config = sm.describe_endpoint_config(EndpointConfigName="c-exp")
        assert config["ShadowProductionVariants"][0]["ModelName"] == "m-cand"
        ext.set_variant("ep", "AllTraffic", VariantBehaviour(step_s=0.001, ttft_s=0.0))
        ext.set_variant("ep", "Candidate", VariantBehaviour(step_s=0.001, ttft_s=0.0))
        answered = {
            rt.invoke_endpoint(EndpointName="ep", Body=BODY, ContentType="application/json")[
                "InvokedProductionVariant"
            ]
            for _ in range(200)
        }
        assert answered == {"AllTraffic"}  # the shadow never answers
        by_variant: dict[str, int] = {}
        for doc in _lines(ext):
            by_variant[doc[VARIANT_DIMENSION]] = by_variant.get(doc[VARIANT_DIMENSION], 0) + 1
            assert doc[SERVING_KEY]["requests"] == 1
        assert by_variant["AllTraffic"] == 200
        assert by_variant["Candidate"] == 200  # every request mirrored, whatever the weight
        cw = boto3.client("cloudwatch", region_name="us-east-1")
        assert _sum(cw, "Invocations", "AllTraffic") == 200
        assert _sum(cw, "Invocations", "Candidate") == by_variant["Candidate"]


def test_split_weights_share_the_answers_and_a_failing_variant_counts_5xx() -> None:
    with mock_aws(), MotoExtensions(seed=2) as ext:
        sm = boto3.client("sagemaker", region_name="us-east-1")
        rt = boto3.client("sagemaker-runtime", region_name="us-east-1")
        _endpoint(sm, shadow_weight=None, split=0.25)
        ext.set_variant("ep", "AllTraffic", VariantBehaviour(step_s=0.001, ttft_s=0.0))
        ext.set_variant("ep", "Candidate", VariantBehaviour(step_s=0.001, error_rate=1.0))
        answered: dict[str, int] = {}
        failed = 0
        for _ in range(200):
            try:
                out = rt.invoke_endpoint(
                    EndpointName="ep", Body=BODY, ContentType="application/json"
                )
            except ClientError as exc:
                assert exc.response["Error"]["Code"] == "ModelError"
                failed += 1
                continue
            answered[out["InvokedProductionVariant"]] = (
                answered.get(out["InvokedProductionVariant"], 0) + 1
            )
        assert set(answered) == {"AllTraffic"}  # every candidate answer failed
        assert 25 <= failed <= 75  # about a quarter of the requests
        cw = boto3.client("cloudwatch", region_name="us-east-1")
        assert _sum(cw, "Invocation5XXErrors", "Candidate") == failed
        assert _sum(cw, "Invocation5XXErrors", "AllTraffic") == 0


def test_a_shadow_config_has_one_production_and_one_shadow_variant() -> None:
    with mock_aws(), MotoExtensions():
        sm = boto3.client("sagemaker", region_name="us-east-1")
        for model in ("a", "b", "c"):
            sm.create_model(
                ModelName=model, ExecutionRoleArn=ROLE, PrimaryContainer={"Image": IMAGE}
            )
        with pytest.raises(ClientError, match="only one production variant"):
            sm.create_endpoint_config(
                EndpointConfigName="bad",
                ProductionVariants=[_variant("A", "a"), _variant("B", "b")],
                ShadowProductionVariants=[_variant("C", "c")],
            )


def test_a_streamed_request_is_paced_and_reported_by_the_answering_variant(
    local_aws: LocalAWS,
) -> None:
    sm = local_aws.client("sagemaker")
    rt = local_aws.client("sagemaker-runtime")
    _endpoint(sm, shadow_weight=1.0)
    local_aws.set_variant("ep", "AllTraffic", VariantBehaviour(step_s=0.002, ttft_s=0.01))
    local_aws.set_variant("ep", "Candidate", VariantBehaviour(step_s=0.001, ttft_s=0.01))
    body = json.dumps({**json.loads(BODY), "stream": True})
    out = rt.invoke_endpoint_with_response_stream(
        EndpointName="ep", Body=body, ContentType="application/json"
    )
    assert out["InvokedProductionVariant"] == "AllTraffic"
    text = b"".join(e["PayloadPart"]["Bytes"] for e in out["Body"] if "PayloadPart" in e)
    assert b"[DONE]" in text
    variants = {d[VARIANT_DIMENSION] for d in _lines(local_aws)}
    assert variants == {"AllTraffic", "Candidate"}  # weight 1.0: every request mirrored
