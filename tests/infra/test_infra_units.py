"""Unit checks of the CDK mapping helpers (no synthesis)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw

from infra.endpoint import (
    NotExpressibleError,
    check_cdk_expressible,
    deployment_config_property,
    production_variant_property,
    volume_kms_allowed,
)
from infra.monitoring import cloudwatch_unit
from infra.nag import acknowledge, nag_text
from infra.stack import retention_days
from peagle_deploy.errors import InputError
from peagle_deploy.plan import build_plan
from peagle_deploy.spec import load_spec

VARIANT = {
    "VariantName": "AllTraffic",
    "ModelName": "m",
    "InstanceType": "ml.g7e.2xlarge",
    "InitialInstanceCount": 1,
}
BLUE_GREEN = {
    "BlueGreenUpdatePolicy": {
        "TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 60}
    }
}


def test_variant_fields_cloudformation_lacks_are_refused_by_name() -> None:
    with pytest.raises(NotExpressibleError, match=r"ProductionVariants\[0\]\.ShinyNewField"):
        production_variant_property({**VARIANT, "ShinyNewField": 1}, "ProductionVariants[0]")


def test_kv_aware_routing_is_refused_in_the_variant_mapping_too() -> None:
    variant = {**VARIANT, "RoutingConfig": {"RoutingStrategy": "KV_AWARE"}}
    with pytest.raises(InputError) as err:
        production_variant_property(variant, "ProductionVariants[0]")
    assert err.value.field == "routing_strategy"


def test_kv_aware_plan_is_refused_before_any_resource() -> None:
    plan = build_plan(load_spec(None, model="gpt-oss-20b", routing_strategy="KV_AWARE"))
    with pytest.raises(InputError) as err:
        check_cdk_expressible(plan)
    assert err.value.field == "routing_strategy"
    assert "peagle deploy" in str(err.value)


@pytest.mark.parametrize("count", [0, 11])
def test_rollback_alarm_count_is_bounded(count: int) -> None:
    with pytest.raises(InputError) as err:
        deployment_config_property(BLUE_GREEN, [f"a{i}" for i in range(count)])
    assert err.value.field == "rollout.alarms"


def test_rolling_update_policy_is_not_silently_dropped() -> None:
    with pytest.raises(NotExpressibleError, match="RollingUpdatePolicy"):
        deployment_config_property({**BLUE_GREEN, "RollingUpdatePolicy": {}}, ["a"])


def test_volume_key_only_for_known_ebs_families() -> None:
    assert volume_kms_allowed("ml.g7e.2xlarge") is False  # no EBS (catalog/data/instances.json)
    assert volume_kms_allowed("ml.p5.48xlarge") is False
    assert volume_kms_allowed("ml.m5.xlarge") is False  # unknown to the catalog


def test_retention_days_maps_cloudwatch_values_only() -> None:
    assert retention_days(14, "x") is cdk.aws_logs.RetentionDays.TWO_WEEKS
    assert retention_days(3653, "x") is cdk.aws_logs.RetentionDays.TEN_YEARS
    with pytest.raises(InputError) as err:
        retention_days(13, "peagle:stages.dev.log_retention_days")
    assert err.value.field == "peagle:stages.dev.log_retention_days"


def test_contract_units_map_to_cloudwatch_units() -> None:
    assert cloudwatch_unit("Count/Second") is cw.Unit.COUNT_PER_SECOND
    assert cloudwatch_unit("None") is cw.Unit.NONE
    with pytest.raises(ValueError, match="Furlongs"):
        cloudwatch_unit("Furlongs")


def test_nag_text_renders_tokens_like_cdk_nag_and_reasons_are_required() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "S", env=cdk.Environment(region="eu-west-1"))
    arn = stack.format_arn(service="sagemaker", resource="model", resource_name="p-m*")
    assert nag_text(stack, arn) == (
        "arn:<AWS::Partition>:sagemaker:eu-west-1:<AWS::AccountId>:model/p-m*"
    )
    with pytest.raises(ValueError, match="reason"):
        acknowledge(stack, "AwsSolutions-IAM5", "  ", "Resource::*")


def _cfn_schema(type_name: str) -> dict[str, object]:
    """cfn-lint's copy of CloudFormation's resource schema (us-east-1)."""
    import json
    from pathlib import Path

    import cfnlint

    schemas = Path(cfnlint.__file__).parent / "data" / "schemas"
    digest = json.loads((schemas / "providers" / "us-east-1.json").read_text())[type_name]
    schema: dict[str, object] = json.loads((schemas / "resources" / f"{digest}.json").read_text())
    return schema


def test_cfn_routing_strategies_follow_the_cloudformation_schema() -> None:
    """The one list of what AWS::SageMaker::EndpointConfig accepts (spec.models, used by
    validation and the CDK endpoint) matches its schema."""
    from infra.endpoint import CFN_ROUTING_STRATEGIES as INFRA_LIST
    from peagle_deploy.spec.models import CFN_ROUTING_STRATEGIES
    from peagle_deploy.validation.cloudformation import CFN_ROUTING_STRATEGIES as PLAN_LIST

    schema = _cfn_schema("AWS::SageMaker::EndpointConfig")
    definitions = schema["definitions"]
    assert isinstance(definitions, dict)
    enum = definitions["RoutingConfig"]["properties"]["RoutingStrategy"]["enum"]
    assert INFRA_LIST is PLAN_LIST is CFN_ROUTING_STRATEGIES
    assert set(CFN_ROUTING_STRATEGIES) == set(enum)
