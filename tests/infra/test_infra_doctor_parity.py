"""`peagle doctor --stage` evaluates the stack's execution role before it exists, from
`access.model_access_policy`. Its decisions must be the synthesized role's: every
permission doctor asks about is allowed by both, and decided the same way."""

from __future__ import annotations

from typing import Any

import pytest
from cdk_helpers import Synthesized

from peagle_deploy.access import bucket_owner, model_access_policy
from peagle_deploy.doctor import locations
from peagle_deploy.doctor.image import parse_image
from peagle_deploy.doctor.policy_eval import Principal, Request, evaluate
from peagle_deploy.doctor.role import CONTEXT_KMS_VIA, CONTEXT_S3_PREFIX, ECR_PULL_ACTIONS

pytestmark = pytest.mark.xdist_group(name="cdk")
ACCOUNT = "123456789012"


def _resolve(value: Any, region: str) -> Any:
    """A template value with its pseudo parameters substituted (other tokens kept
    visible as `<token>`)."""
    if isinstance(value, list):
        return [_resolve(v, region) for v in value]
    if isinstance(value, dict):
        if "Fn::Join" in value:
            sep, parts = value["Fn::Join"]
            return sep.join(str(_resolve(p, region)) for p in parts)
        if "Ref" in value:
            return {"AWS::Partition": "aws", "AWS::Region": region, "AWS::AccountId": ACCOUNT}.get(
                value["Ref"], "<token>"
            )
        if "Fn::GetAtt" in value:
            return "<token>"
        return {k: _resolve(v, region) for k, v in value.items()}
    return value


def _synthesized_policy(synth: Synthesized, stack: str) -> dict[str, Any]:
    policies = synth.resources(stack, "AWS::IAM::Policy")
    (policy,) = [p for lid, p in policies.items() if "ExecutionRolePolicy" in lid]
    document = _resolve(policy["Properties"]["PolicyDocument"], synth.stacks[stack].region)
    return dict(document)


def _asks(plan: Any, owner: str = ACCOUNT) -> list[tuple[str, str, dict[str, list[str]]]]:
    """What doctor asks; S3 reads carry the bucket's owner as S3 puts it in the request
    context (`s3:ResourceAccount`; JumpStart's buckets are AWS's)."""
    asks = []
    for loc in locations.all_locations(plan):
        pinned = {} if bucket_owner(loc.bucket, owner) is None else {"s3:ResourceAccount": [owner]}
        asks.append(("s3:GetObject", loc.object_arn("aws"), pinned))
        if loc.is_prefix:
            listing = {CONTEXT_S3_PREFIX: [loc.dir_key], **pinned}
            asks.append(("s3:ListBucket", loc.bucket_arn("aws"), listing))
    image = parse_image(plan.image_uri)
    assert image is not None
    asks += [(a, image.repository_arn("aws"), {}) for a in ECR_PULL_ACTIONS]
    asks.append(("ecr:GetAuthorizationToken", "*", {}))
    via = {CONTEXT_KMS_VIA: [f"s3.{plan.region}.amazonaws.com"]}
    asks += [("kms:Decrypt", key, via) for key in plan.spec.model_data_kms_key_arns]
    return asks


def _check(synth: Synthesized, stack: str) -> None:
    plan = synth.stacks[stack].plan
    synthesized = _synthesized_policy(synth, stack)
    planned = model_access_policy(
        plan.create_model, model_data_kms_key_arns=plan.spec.model_data_kms_key_arns, owner=ACCOUNT
    )
    # A bucket of that name owned by another account: both deny its reads.
    for action, resource, context in _asks(plan, owner="999999999999"):
        if not context.get("s3:ResourceAccount"):
            continue
        request = Request(action, resource, Principal(ACCOUNT, None), context)
        a = evaluate(synthesized, request, resource_policy=False)
        b = evaluate(planned, request, resource_policy=False)
        assert not a.allow_direct and not b.allow_direct, (stack, action, resource)
    for action, resource, context in _asks(plan):
        request = Request(action, resource, Principal(ACCOUNT, None), context)
        a = evaluate(synthesized, request, resource_policy=False)
        b = evaluate(planned, request, resource_policy=False)
        assert (a.allow_direct, a.deny) == (b.allow_direct, b.deny) == (True, False), (
            stack,
            action,
            resource,
        )


@pytest.mark.parametrize("stack", ["PeagleEndpoint-dev", "PeagleEndpoint-staging"])
def test_planned_role_decides_like_the_synthesized_role(
    stage_synth: Synthesized, stack: str
) -> None:
    _check(stage_synth, stack)


def test_planned_role_decides_like_the_synthesized_role_edge(edge_synth: Synthesized) -> None:
    """Own ECR repository, an archive, a drafter prefix and SSE-KMS weights."""
    (stack,) = edge_synth.stacks
    assert edge_synth.stacks[stack].plan.spec.model_data_kms_key_arns
    _check(edge_synth, stack)
