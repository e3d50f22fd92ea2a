"""PeagleModel in the synthesized templates: the Provider framework, its two Lambda
functions, their roles and logs (the handler itself runs in test_infra_model_provider.py)."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk.aws_lambda as lambda_
import pytest
from cdk_helpers import ROLE_PLACEHOLDER, Synthesized
from model_provider_kit import execution_role_id, handler_function, model_resource

from infra.model import HANDLER, PROVIDER_RUNTIME
from infra.model_provider import handler

pytestmark = pytest.mark.xdist_group(name="cdk")

STAGES = ("PeagleEndpoint-dev", "PeagleEndpoint-staging", "PeagleEndpoint-prod")


def _policy(synth: Synthesized, stack: str, path_part: str) -> list[dict[str, Any]]:
    policies = synth.resources(stack, "AWS::IAM::Policy")
    (policy,) = [p for lid, p in policies.items() if path_part in lid]
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        return "".join(_text(p) for p in value["Fn::Join"][1])
    if "Ref" in value:
        return f"<{value['Ref']}>"
    return f"<{value['Fn::GetAtt'][0]}.Arn>"


def _framework_function(synth: Synthesized, stack: str) -> dict[str, Any]:
    functions = synth.resources(stack, "AWS::Lambda::Function")
    (function,) = [f for f in functions.values() if f["Properties"]["Handler"] != HANDLER]
    return function


def test_the_handler_runs_on_the_newest_python_runtime_cdk_offers() -> None:
    def version(name: str) -> tuple[int, ...]:
        return tuple(int(x) for x in name.removeprefix("PYTHON_").split("_"))

    newest = max((n for n in dir(lambda_.Runtime) if n.startswith("PYTHON_")), key=version)
    assert PROVIDER_RUNTIME.name == getattr(lambda_.Runtime, newest).name == "python3.14"


@pytest.mark.parametrize("stack", STAGES)
def test_the_handler_function(stage_synth: Synthesized, stack: str) -> None:
    props = handler_function(stage_synth, stack)["Properties"]
    assert props["Runtime"] == PROVIDER_RUNTIME.name
    assert props["Handler"] == "handler.on_event"
    assert props["Timeout"] == handler.LAMBDA_TIMEOUT_S
    assert "Environment" not in props  # nothing to configure, nothing to leak


def test_the_custom_resource_is_served_by_the_provider_framework(
    stage_synth: Synthesized,
) -> None:
    stack = "PeagleEndpoint-dev"
    _, resource = model_resource(stage_synth, stack)
    functions = stage_synth.resources(stack, "AWS::Lambda::Function")
    framework_id = resource["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
    framework = functions[framework_id]["Properties"]
    assert framework["Handler"] == "framework.onEvent"
    handler_id = next(lid for lid, f in functions.items() if f["Properties"]["Handler"] == HANDLER)
    assert framework["Environment"]["Variables"]["USER_ON_EVENT_FUNCTION_ARN"] == {
        "Fn::GetAtt": [handler_id, "Arn"]
    }
    # The framework logs every request at INFO; FATAL keeps the model's environment out.
    assert framework["LoggingConfig"]["ApplicationLogLevel"] == "FATAL"
    assert set(resource["Properties"]) == {"ServiceToken", handler.PROPERTY}


def test_the_property_is_the_create_model_json_with_the_stack_role(
    stage_synth: Synthesized,
) -> None:
    stack = "PeagleEndpoint-prod"
    _, resource = model_resource(stage_synth, stack)
    sep, parts = resource["Properties"][handler.PROPERTY]["Fn::Join"]
    role = {"Fn::GetAtt": [execution_role_id(stage_synth, stack), "Arn"]}
    assert sep == "" and parts.count(role) == 1
    text = "".join(ROLE_PLACEHOLDER if p == role else p for p in parts)
    request = json.loads(text)
    assert request["EnableNetworkIsolation"] is True  # a boolean, not CloudFormation's "true"
    assert request["ModelName"] == stage_synth.stacks[stack].plan.model_name


def test_model_resource_is_one_per_model_name(stage_synth: Synthesized) -> None:
    """The logical id carries the name's digest: a changed spec is a new resource
    (CreateModel), never an in-place CreateModel of an existing name."""
    for stack in STAGES:
        plan = stage_synth.stacks[stack].plan
        logical_id, resource = model_resource(stage_synth, stack)
        assert logical_id.startswith(f"EndpointModelModel{plan.model_name[-8:]}")
        assert resource["DeletionPolicy"] == "Delete"


def test_model_handler_policy_is_scoped(stage_synth: Synthesized) -> None:
    stack = "PeagleEndpoint-staging"
    sids = {s["Sid"]: s for s in _policy(stage_synth, stack, "ModelProviderPolicy")}
    assert set(sids) == {"ManagePeagleModels", "PassExecutionRoleToSageMaker"}
    manage = sids["ManagePeagleModels"]
    assert sorted(manage["Action"]) == [
        "sagemaker:AddTags",
        "sagemaker:CreateModel",
        "sagemaker:DeleteModel",
        "sagemaker:DescribeModel",
        "sagemaker:ListTags",  # an existing model is adopted only if its stage tag is ours
    ]
    # exactly the 8-character digest after the prefix: never `<endpoint>-mirror`
    assert _text(manage["Resource"]) == (
        "arn:<AWS::Partition>:sagemaker:us-east-1:<AWS::AccountId>:model/"
        "peagle-gpt-oss-20b-staging-m????????"
    )
    assert stage_synth.stacks[stack].plan.model_name.startswith("peagle-gpt-oss-20b-staging-m")
    pass_role = sids["PassExecutionRoleToSageMaker"]
    assert pass_role["Action"] == "iam:PassRole"
    assert pass_role["Resource"] == {"Fn::GetAtt": [execution_role_id(stage_synth, stack), "Arn"]}
    assert pass_role["Condition"] == {
        "StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}
    }


def test_the_framework_may_only_invoke_the_handler_and_log(stage_synth: Synthesized) -> None:
    stack = "PeagleEndpoint-dev"
    statements = _policy(stage_synth, stack, "ModelFrameworkRole")
    actions = sorted(
        a
        for s in statements
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    )
    assert actions == [
        "lambda:GetFunction",
        "lambda:InvokeFunction",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
    ]
    functions = stage_synth.resources(stack, "AWS::Lambda::Function")
    handler_id = next(lid for lid, f in functions.items() if f["Properties"]["Handler"] == HANDLER)
    invoke = next(s for s in statements if s["Action"] == "lambda:InvokeFunction")
    assert sorted(map(_text, invoke["Resource"])) == [
        f"<{handler_id}.Arn>",
        f"<{handler_id}.Arn>:*",
    ]


def test_both_functions_log_to_the_encrypted_provider_group(stage_synth: Synthesized) -> None:
    stack = "PeagleEndpoint-dev"
    groups = {
        f["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        for f in (handler_function(stage_synth, stack), _framework_function(stage_synth, stack))
    }
    (group_id,) = groups
    group = stage_synth.templates[stack]["Resources"][group_id]["Properties"]
    assert group["LogGroupName"] == "/peagle-deploy/peagle-gpt-oss-20b-dev/model-provider"
    assert "KmsKeyId" in group and "RetentionInDays" in group


def test_no_function_uses_a_managed_policy(stage_synth: Synthesized) -> None:
    for stack in STAGES:
        for role in stage_synth.resources(stack, "AWS::IAM::Role").values():
            assert "ManagedPolicyArns" not in role["Properties"]
