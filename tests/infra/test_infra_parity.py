"""The CDK stack deploys exactly what `deploy_peagle()` would: same requests, same names.

The SDK sends `plan.create_model` etc. (peagle_deploy.sdk); these tests rebuild the
plan from the stage's spec file independently of the stack and compare it with what
the synthesized template will send. For the model, they go one step further: the
custom resource's handler (loaded from the stack's Lambda asset) and `deploy_peagle()`
both run against moto, and the CreateModel requests they send are compared.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.validate import ParamValidator
from cdk_helpers import ROLE_PLACEHOLDER, ROOT, Synthesized
from model_provider_kit import (
    FakeContext,
    event,
    handler_asset,
    load_handler,
    model_properties,
    recording_handler,
)
from moto import mock_aws
from peagle_local.emulator import MotoExtensions

from infra.model import MODEL_RESOURCE_TYPE
from infra.model_provider.handler import PROPERTY
from peagle_deploy.plan import SPEC_HASH_TAG, build_plan
from peagle_deploy.sdk import deploy_peagle
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


def _create_model(synth: Synthesized, stack: str) -> dict[str, Any]:
    """The CreateModel request in the custom resource's properties (role resolved)."""
    properties = model_properties(synth, stack, ROLE_PLACEHOLDER)
    request: dict[str, Any] = json.loads(properties[PROPERTY])
    return request


def _expected_create_model(plan: Any) -> dict[str, Any]:
    expected = copy.deepcopy(plan.create_model)
    expected["ExecutionRoleArn"] = ROLE_PLACEHOLDER
    return dict(expected)


@pytest.mark.parametrize("stack", sorted(STAGE_FILES))
def test_custom_resource_create_model_equals_the_sdk_request(
    stage_synth: Synthesized, stack: str
) -> None:
    plan = _sdk_plan(stack)
    request = _create_model(stage_synth, stack)
    assert request == _expected_create_model(plan)
    drafters = request["PrimaryContainer"]["AdditionalModelDataSources"]
    assert [d["ChannelName"] for d in drafters] == ["eagle"]


def test_edge_custom_model_parity(edge_synth: Synthesized) -> None:
    (stack,) = edge_synth.stacks
    plan = edge_synth.stacks[stack].plan
    request = _create_model(edge_synth, stack)
    assert request == _expected_create_model(plan)
    assert request["VpcConfig"]["Subnets"] == [
        "subnet-0123456789abcdef0",
        "subnet-0fedcba9876543210",
    ]


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


@pytest.mark.parametrize("stack", sorted(STAGE_FILES))
def test_the_custom_resource_and_deploy_peagle_send_the_same_create_model(
    stage_synth: Synthesized,
    stack: str,
    aws_credentials: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Run both for real against moto: the handler from the stack's Lambda asset with
    the template's properties, and deploy_peagle() with the stage's spec file."""
    stage, path = STAGE_FILES[stack]
    region = stage_synth.stacks[stack].region
    monkeypatch.setenv("AWS_DEFAULT_REGION", region)
    sent: dict[str, list[dict[str, Any]]] = {"cdk": [], "sdk": []}

    module = recording_handler(stage_synth, stack, monkeypatch, sent["cdk"])
    with mock_aws():
        properties = model_properties(stage_synth, stack, ROLE_PLACEHOLDER)
        module.on_event(event("Create", properties), FakeContext())

    with mock_aws(), MotoExtensions():
        session = boto3.Session(region_name=region)
        session.events.register(
            "provide-client-params.sagemaker.CreateModel",
            lambda params, **_: sent["sdk"].append(copy.deepcopy(params)),
        )
        deploy_peagle(
            spec_file=str(path),
            stage=stage,
            role_arn=ROLE_PLACEHOLDER,
            boto_session=session,
            wait=False,
            progress=False,
        )
    ((cdk,), (sdk,)) = sent["cdk"], sent["sdk"]
    assert _without_identity(cdk) == _without_identity(sdk)
    assert cdk["PrimaryContainer"]["AdditionalModelDataSources"]
    # Names are content-derived without the role (the stack creates its own, unknown at
    # synth): the same spec names the same model through both.
    assert cdk["ModelName"] == stage_synth.stacks[stack].plan.model_name == sdk["ModelName"]


STACK_ROLE = "arn:aws:iam::123456789012:role/PeagleEndpoint-dev-EndpointExecutionRole1A2B3C4D"


@pytest.mark.parametrize("role", [STACK_ROLE, ROLE_PLACEHOLDER], ids=["stack-role", "other-role"])
def test_cdk_to_sdk_hand_over_reuses_the_stacks_model(
    stage_synth: Synthesized, role: str, aws_credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/ci.md's hand-over: after `cdk deploy`, `peagle deploy` of the same spec with
    the stack's role changes nothing (one model, one config) and only records the
    manifest; with another role it refuses (a model's role cannot change) and creates
    nothing."""
    from peagle_deploy.errors import DeployError

    stack = "PeagleEndpoint-dev"
    stage, path = STAGE_FILES[stack]
    region = stage_synth.stacks[stack].region
    plan = stage_synth.stacks[stack].plan
    monkeypatch.setenv("AWS_DEFAULT_REGION", region)
    module = load_handler(handler_asset(stage_synth, stack))
    with mock_aws(), MotoExtensions():
        # What CloudFormation does for the stack: the custom resource's CreateModel with
        # the stack's role, then the native endpoint config and endpoint.
        module.on_event(
            event("Create", model_properties(stage_synth, stack, STACK_ROLE)), FakeContext()
        )
        sm = boto3.client("sagemaker", region_name=region)
        sm.create_endpoint_config(**plan.create_endpoint_config)
        sm.create_endpoint(**plan.create_endpoint)
        deploy = functools.partial(
            deploy_peagle,
            spec_file=str(path),
            stage=stage,
            role_arn=role,
            boto_session=boto3.Session(region_name=region),
            wait=False,
            progress=False,
        )
        if role == STACK_ROLE:
            outcome = deploy().deployment
            assert outcome is not None
            assert (outcome.action, outcome.created) == ("noop", [])
            assert outcome.manifest_parameter
        else:
            with pytest.raises(DeployError, match=f"--role-arn {STACK_ROLE}"):
                deploy()
        models = [m["ModelName"] for m in sm.list_models()["Models"]]
        configs = [c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]]
        assert (models, configs) == ([plan.model_name], [plan.endpoint_config_name])


def _without_identity(request: dict[str, Any]) -> dict[str, Any]:
    """A CreateModel request without its content-derived name and spec-hash tag."""
    rest = {k: v for k, v in request.items() if k != "ModelName"}
    rest["Tags"] = [t for t in request["Tags"] if t["Key"] != SPEC_HASH_TAG]
    return rest


@pytest.mark.parametrize("stack", sorted(STAGE_FILES))
def test_create_model_parameters_pass_botocore_validation(
    stage_synth: Synthesized, stack: str
) -> None:
    params = _create_model(stage_synth, stack)
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
    # What an update keeps (a stage that scales keeps its instances: the SDK's request);
    # CloudFormation's property names are the API's.
    retained = ("RetainAllVariantProperties", "ExcludeRetainedVariantProperties")
    assert {k: props[k] for k in retained if k in props} == {
        k: plan.update_endpoint[k] for k in retained if k in plan.update_endpoint
    }
    assert ("RetainAllVariantProperties" in props) == (plan.autoscaling is not None)


@pytest.mark.parametrize("stack", ["PeagleEndpoint-staging", "PeagleEndpoint-prod"])
def test_autoscaling_equals_the_sdk_requests(stage_synth: Synthesized, stack: str) -> None:
    plan = _sdk_plan(stack)
    assert plan.autoscaling is not None
    target = dict(
        stage_synth.one(stack, "AWS::ApplicationAutoScaling::ScalableTarget")["Properties"]
    )
    request = dict(plan.autoscaling["register_scalable_target"])
    # the stack tags every taggable resource; the SDK tags the target with its stage
    stack_tags = {t["Key"]: t["Value"] for t in target.pop("Tags")}
    assert request.pop("Tags").items() <= stack_tags.items()
    # the stack writes the suspension out (lifted: no experiment runs), since a
    # RegisterScalableTarget without it keeps an earlier one (infra/scaling.py)
    assert set(target.pop("SuspendedState").values()) == {False}
    assert target == request
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
