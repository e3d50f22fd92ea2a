"""The CDK stack deploys exactly what `deploy_peagle()` would: same requests, same names.

The SDK sends `plan.create_model` etc. (peagle_deploy.sdk); these tests rebuild the
plan from the stage's spec file independently of the stack and compare it with what
the synthesized template will send.
"""

from __future__ import annotations

import copy
from typing import Any

import botocore.session
import pytest
from botocore.validate import ParamValidator
from cdk_helpers import ROLE_PLACEHOLDER, ROOT, Synthesized, decode_sdk_call

from infra.model import MODEL_RESOURCE_TYPE
from peagle_deploy.plan import build_plan
from peagle_deploy.spec import load_spec

pytestmark = pytest.mark.xdist_group(name="cdk")

STAGE_FILES = {
    "PeagleEndpoint-dev": ("dev", ROOT / "stages" / "dev.yaml"),
    "PeagleEndpoint-staging": ("staging", ROOT / "stages" / "staging.yaml"),
    "PeagleEndpoint-prod": ("prod", ROOT / "stages" / "prod.yaml"),
}


def _sdk_plan(stack: str) -> Any:
    stage, path = STAGE_FILES[stack]
    return build_plan(load_spec(path, stage=stage))


def _model_calls(synth: Synthesized, stack: str) -> dict[str, dict[str, Any]]:
    model = synth.one(stack, MODEL_RESOURCE_TYPE)["Properties"]
    roles = synth.resources(stack, "AWS::IAM::Role")
    (role_id,) = [lid for lid in roles if "ExecutionRole" in lid]
    subs = {role_id: ROLE_PLACEHOLDER}
    return {event: decode_sdk_call(model[event], subs) for event in ("Create",)}


def _expected_create_model(plan: Any) -> dict[str, Any]:
    expected = copy.deepcopy(plan.create_model)
    expected["ExecutionRoleArn"] = ROLE_PLACEHOLDER
    return dict(expected)


@pytest.mark.parametrize("stack", sorted(STAGE_FILES))
def test_custom_resource_create_model_equals_the_sdk_request(
    stage_synth: Synthesized, stack: str
) -> None:
    plan = _sdk_plan(stack)
    calls = _model_calls(stage_synth, stack)
    for event, call in calls.items():
        assert call["service"] == "SageMaker", event
        assert call["action"] == "createModel", event
        assert call["parameters"] == _expected_create_model(plan), event
        assert call["physicalResourceId"] == {"id": plan.model_name}, event
    drafters = calls["Create"]["parameters"]["PrimaryContainer"]["AdditionalModelDataSources"]
    assert [d["ChannelName"] for d in drafters] == ["eagle"]


def test_edge_custom_model_parity(edge_synth: Synthesized) -> None:
    (stack,) = edge_synth.stacks
    plan = edge_synth.stacks[stack].plan
    calls = _model_calls(edge_synth, stack)
    assert calls["Create"]["parameters"] == _expected_create_model(plan)
    assert calls["Create"]["parameters"]["VpcConfig"]["Subnets"] == [
        "subnet-0123456789abcdef0",
        "subnet-0fedcba9876543210",
    ]


@pytest.mark.parametrize("stack", sorted(STAGE_FILES))
def test_create_model_parameters_pass_botocore_validation(
    stage_synth: Synthesized, stack: str
) -> None:
    params = _model_calls(stage_synth, stack)["Create"]["parameters"]
    model = botocore.session.get_session().get_service_model("sagemaker")
    shape = model.operation_model("CreateModel").input_shape
    report = ParamValidator().validate(params, shape)
    assert not report.has_errors(), report.generate_report()


@pytest.mark.parametrize("stack", sorted(STAGE_FILES))
def test_endpoint_config_equals_the_sdk_request(stage_synth: Synthesized, stack: str) -> None:
    plan = _sdk_plan(stack)
    props = stage_synth.one(stack, "AWS::SageMaker::EndpointConfig")["Properties"]
    request = plan.create_endpoint_config
    assert props["EndpointConfigName"] == request["EndpointConfigName"]
    # CloudFormation's ProductionVariant property names are the API's.
    assert props["ProductionVariants"] == request["ProductionVariants"]
    sort = sorted(request["Tags"], key=lambda t: t["Key"])
    assert props["Tags"] == sort
    assert ("KmsKeyId" in props) == ("KmsKeyId" in request)


def test_edge_endpoint_config_equals_the_sdk_request_but_the_volume_key(
    edge_synth: Synthesized,
) -> None:
    (stack,) = edge_synth.stacks
    request = edge_synth.stacks[stack].plan.create_endpoint_config
    props = edge_synth.one(stack, "AWS::SageMaker::EndpointConfig")["Properties"]
    assert props["ProductionVariants"] == request["ProductionVariants"]


@pytest.mark.parametrize("stack", sorted(STAGE_FILES))
def test_endpoint_and_rollout_equal_the_sdk_requests(stage_synth: Synthesized, stack: str) -> None:
    plan = _sdk_plan(stack)
    props = stage_synth.one(stack, "AWS::SageMaker::Endpoint")["Properties"]
    assert props["EndpointName"] == plan.create_endpoint["EndpointName"]
    deployment = plan.update_endpoint["DeploymentConfig"]
    assert props["DeploymentConfig"]["BlueGreenUpdatePolicy"] == deployment["BlueGreenUpdatePolicy"]
    assert sorted(props["Tags"], key=lambda t: t["Key"]) == sorted(
        plan.create_endpoint["Tags"], key=lambda t: t["Key"]
    )


@pytest.mark.parametrize("stack", ["PeagleEndpoint-staging", "PeagleEndpoint-prod"])
def test_autoscaling_equals_the_sdk_requests(stage_synth: Synthesized, stack: str) -> None:
    plan = _sdk_plan(stack)
    assert plan.autoscaling is not None
    target = dict(
        stage_synth.one(stack, "AWS::ApplicationAutoScaling::ScalableTarget")["Properties"]
    )
    target.pop("Tags")  # the stack tags every taggable resource; the SDK does not tag targets
    assert target == plan.autoscaling["register_scalable_target"]
    policy = stage_synth.one(stack, "AWS::ApplicationAutoScaling::ScalingPolicy")["Properties"]
    request = plan.autoscaling["put_scaling_policy"]
    assert policy["PolicyName"] == request["PolicyName"]
    assert policy["PolicyType"] == request["PolicyType"]
    assert (
        policy["TargetTrackingScalingPolicyConfiguration"]
        == request["TargetTrackingScalingPolicyConfiguration"]
    )


def test_same_spec_same_names_across_synths(stage_synth: Synthesized) -> None:
    """Content-derived names: rebuilding the plan gives the names in the template."""
    for stack in STAGE_FILES:
        plan = _sdk_plan(stack)
        assert stage_synth.stacks[stack].plan.names == plan.names
        assert stage_synth.one(stack, MODEL_RESOURCE_TYPE)  # exists
        assert plan.model_name in str(stage_synth.templates[stack]["Outputs"]["ModelName"])


def test_changed_spec_changes_the_physical_model_name(stage_synth: Synthesized) -> None:
    """A different K is a different model (new physical id -> CloudFormation replaces it)."""
    _, path = STAGE_FILES["PeagleEndpoint-dev"]
    changed = build_plan(load_spec(path, stage="dev", **{"speculative.num_speculative_tokens": 4}))
    current = stage_synth.stacks["PeagleEndpoint-dev"].plan
    assert changed.model_name != current.model_name
    assert changed.model_name[:-8] == current.model_name[:-8]  # same IAM name prefix
