"""deploy_peagle adopts what exists under a planned name only by content, and never
deploys an endpoint another stage holds (issue 29: "adopt and promote by content").

Model and config names come from the spec's content, so they are predictable: each test
makes the resource first, the way someone else could, and checks what the deploy did and
left (every refusal is one line naming the resource and the field, the running endpoint
keeps serving, and what the run created is removed).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from sdk_testkit import MODEL, REGION, ROLE, AwsEnv

from peagle_deploy.errors import DeployError
from peagle_deploy.plan import Plan
from peagle_deploy.sdk import DeploymentManifest, deploy_peagle, plan_for, write_manifest

NAME = "peagle-qwen3-coder-30b-a3b-instruct-dev"
OTHER_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/someone-else:latest"


def _deploy(aws: AwsEnv, **kwargs: Any) -> Any:
    kwargs.setdefault("role_arn", ROLE)
    kwargs.setdefault("progress", False)
    return deploy_peagle(MODEL, boto_session=aws.session, **kwargs)


def _next(**knobs: Any) -> Plan:
    return plan_for(MODEL, role_arn=ROLE, num_speculative_tokens=5, **knobs)


def _serving(aws: AwsEnv, name: str = NAME) -> str:
    return str(aws.client("sagemaker").describe_endpoint(EndpointName=name)["EndpointConfigName"])


def _with_image(request: dict[str, Any], image: str) -> dict[str, Any]:
    return {**request, "PrimaryContainer": {**request["PrimaryContainer"], "Image": image}}


def test_a_precreated_config_of_the_next_name_serving_another_image_is_refused(
    aws: AwsEnv,
) -> None:
    """The issue's case: the next config name, made first, pointing at a model of another
    image. The update stops before UpdateEndpoint, removes the model it created and
    leaves the other config alone; the endpoint keeps serving what it served."""
    first = _deploy(aws).deployment
    nxt = _next()
    sm = aws.client("sagemaker")
    sm.create_model(**_with_image({**nxt.create_model, "ModelName": "theirs"}, OTHER_IMAGE))
    theirs = json.loads(json.dumps(nxt.create_endpoint_config))
    theirs["ProductionVariants"][0]["ModelName"] = "theirs"
    sm.create_endpoint_config(**theirs)
    aws.calls.clear()
    with pytest.raises(DeployError) as caught:
        _deploy(aws, num_speculative_tokens=5)
    message = str(caught.value)
    assert "\n" not in message
    assert (
        f"endpoint config {nxt.endpoint_config_name} already exists with a different "
        "ProductionVariants[AllTraffic].ModelName" in message
    )
    assert f"removed what it had created (model:{nxt.model_name})" in message
    assert "UpdateEndpoint" not in aws.calls
    assert _serving(aws) == first.endpoint_config_name
    assert aws.names()["models"] == sorted([first.model_name, "theirs"])
    assert nxt.endpoint_config_name in aws.names()["configs"]


def test_a_precreated_model_of_the_planned_name_with_another_image_is_refused(
    aws: AwsEnv,
) -> None:
    first = _deploy(aws).deployment
    nxt = _next()
    aws.client("sagemaker").create_model(**_with_image(nxt.create_model, OTHER_IMAGE))
    with pytest.raises(DeployError) as caught:
        _deploy(aws, num_speculative_tokens=5)
    assert f"model {nxt.model_name} already exists with a different PrimaryContainer.Image" in str(
        caught.value
    )
    assert nxt.endpoint_config_name not in aws.names()["configs"]
    assert _serving(aws) == first.endpoint_config_name


def test_an_identical_precreated_model_and_config_are_adopted(aws: AwsEnv) -> None:
    """What an interrupted run leaves (the same requests, network isolation included) is
    used as it is: no false refusal."""
    _deploy(aws)
    nxt = _next()
    sm = aws.client("sagemaker")
    sm.create_model(**nxt.create_model)
    sm.create_endpoint_config(**nxt.create_endpoint_config)
    out = _deploy(aws, num_speculative_tokens=5).deployment
    assert out.action == "update" and out.created == []
    assert _serving(aws) == nxt.endpoint_config_name


def test_a_secret_compared_by_value_is_named_never_shown(aws: AwsEnv) -> None:
    token = "hf_" + "A" * 34
    other = "hf_" + "B" * 34
    arn = aws.client("secretsmanager").create_secret(Name="hf", SecretString=token)["ARN"]
    plan = plan_for(MODEL, role_arn=ROLE, secrets={"HF_TOKEN": arn})
    request = json.loads(json.dumps(plan.create_model))
    request["PrimaryContainer"]["Environment"]["HF_TOKEN"] = other
    aws.client("sagemaker").create_model(**request)
    with pytest.raises(DeployError) as caught:
        _deploy(aws, secrets={"HF_TOKEN": arn})
    message = str(caught.value)
    assert "a different PrimaryContainer.Environment.HF_TOKEN" in message
    assert token not in message and other not in message
    assert aws.names()["endpoints"] == []


def test_an_endpoint_tagged_with_another_stage_is_refused_before_any_write(aws: AwsEnv) -> None:
    _deploy(aws)
    aws.calls.clear()
    with pytest.raises(DeployError) as caught:
        _deploy(aws, stage="prod", endpoint_name=NAME, num_speculative_tokens=5)
    message = str(caught.value)
    assert f"endpoint {NAME} belongs to stage dev (its peagle:stage tag), not prod" in message
    assert "\n" not in message
    assert aws.mutating_calls() == []


def test_a_record_of_another_stage_holds_an_absent_endpoint(aws: AwsEnv) -> None:
    dev = plan_for(MODEL, role_arn=ROLE, endpoint_name="shared-ep", stage="dev")
    ssm = aws.client("ssm")
    parameter = write_manifest(DeploymentManifest.from_plan(dev), ssm_client=ssm)
    aws.calls.clear()
    with pytest.raises(DeployError) as caught:
        _deploy(aws, stage="prod", endpoint_name="shared-ep")
    assert f"belongs to stage dev (its record {parameter}), not prod" in str(caught.value)
    assert aws.mutating_calls() == []
    # a dry run says so instead of refusing
    preview = _deploy(aws, stage="prod", endpoint_name="shared-ep", dry_run=True).deployment
    assert any("belongs to stage dev" in w for w in preview.warnings)


def test_a_record_of_the_same_stage_is_no_obstacle(aws: AwsEnv) -> None:
    plan = plan_for(MODEL, role_arn=ROLE, region=REGION)
    write_manifest(DeploymentManifest.from_plan(plan), ssm_client=aws.client("ssm"))
    assert _deploy(aws).deployment.action == "create"


def _denied(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
    response = AWSResponse("https://aws.example", 400, HTTPHeaders(), None)
    error = {"Code": "AccessDeniedException", "Message": "not authorized to perform"}
    return response, {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}


def test_an_identity_that_may_not_list_other_stages_relies_on_the_tag(aws: AwsEnv) -> None:
    """A stage's CI role reads only its own records: the SDK's look at every stage's is
    denied (tests/infra/test_infra_call_ledger.py), and the deploy goes on."""
    aws.on("before-call.ssm.GetParametersByPath", _denied)
    assert _deploy(aws).deployment.action == "create"


def test_a_scalable_target_is_tagged_with_its_stage_and_a_denied_one_says_how(
    aws: AwsEnv,
) -> None:
    """The target is registered with its stage tag (a stage's CI role changes only its
    own targets); a target that predates the tag is denied to the role, and the error
    says how to tag it."""
    sent: list[dict[str, Any]] = []
    aws.on(
        "provide-client-params.application-autoscaling.RegisterScalableTarget",
        lambda params, **_: sent.append(dict(params)),
    )
    aws.on("before-call.application-autoscaling.PutScalingPolicy", _denied)
    with pytest.raises(DeployError) as caught:
        _deploy(aws, scaling={"min_instances": 1, "max_instances": 2})
    assert sent[0]["Tags"] == {"peagle:stage": "dev"}
    message = str(caught.value)
    assert "is InService, but its autoscaling could not be applied" in message
    assert "aws application-autoscaling tag-resource --resource-arn arn:aws:" in message
    assert message.endswith("--tags peagle:stage=dev")
