"""The IAM identity-policy evaluator behind the emulator's SimulatePrincipalPolicy."""

from __future__ import annotations

from typing import Any

import pytest
from peagle_local.emulator.iam_policy import NamedPolicy, UnsupportedPolicyError, evaluate

BUCKET = "arn:aws:s3:::weights"


def policy(*statements: dict[str, Any], policy_id: str = "p") -> NamedPolicy:
    return NamedPolicy(policy_id, "role", {"Version": "2012-10-17", "Statement": list(statements)})


def allow(action: Any, resource: Any, **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def test_nothing_matching_is_an_implicit_deny() -> None:
    assert evaluate([], "s3:GetObject", f"{BUCKET}/k").decision == "implicitDeny"


@pytest.mark.parametrize(
    ("action", "resource", "decision"),
    [
        ("s3:GetObject", f"{BUCKET}/qwen/config.json", "allowed"),
        ("S3:getobject", f"{BUCKET}/qwen/config.json", "allowed"),  # actions ignore case
        ("s3:GetObject", "arn:aws:s3:::WEIGHTS/qwen/x", "implicitDeny"),  # resources do not
        ("s3:GetObject", f"{BUCKET}/other/x", "implicitDeny"),
        ("s3:PutObject", f"{BUCKET}/qwen/x", "implicitDeny"),
    ],
)
def test_action_and_resource_wildcards(action: str, resource: str, decision: str) -> None:
    p = policy(allow("s3:Get*", f"{BUCKET}/qwen/*"))
    assert evaluate([p], action, resource).decision == decision


def test_question_mark_matches_one_character() -> None:
    p = policy(allow("s3:GetObject", f"{BUCKET}/v?/*"))
    assert evaluate([p], "s3:GetObject", f"{BUCKET}/v1/x").decision == "allowed"
    assert evaluate([p], "s3:GetObject", f"{BUCKET}/v10/x").decision == "implicitDeny"


def test_explicit_deny_wins_over_allow() -> None:
    policies = [
        policy(allow("*", "*"), policy_id="admin"),
        policy({"Effect": "Deny", "Action": "s3:*", "Resource": BUCKET + "/*"}, policy_id="guard"),
    ]
    result = evaluate(policies, "s3:GetObject", f"{BUCKET}/x")
    assert result.decision == "explicitDeny" and [p.policy_id for p in result.matched] == ["guard"]


def test_not_action_and_not_resource() -> None:
    p = policy({"Effect": "Allow", "NotAction": "iam:*", "NotResource": f"{BUCKET}/secret/*"})
    assert evaluate([p], "s3:GetObject", f"{BUCKET}/x").decision == "allowed"
    assert evaluate([p], "iam:GetRole", "*").decision == "implicitDeny"
    assert evaluate([p], "s3:GetObject", f"{BUCKET}/secret/k").decision == "implicitDeny"


def test_conditions_against_the_context() -> None:
    p = policy(allow("s3:ListBucket", BUCKET, Condition={"StringLike": {"s3:prefix": ["qwen/*"]}}))
    assert evaluate([p], "s3:ListBucket", BUCKET, {"s3:prefix": ["qwen/"]}).decision == "allowed"
    assert evaluate([p], "s3:ListBucket", BUCKET, {"s3:prefix": ["x/"]}).decision == "implicitDeny"
    missing = evaluate([p], "s3:ListBucket", BUCKET)
    assert missing.decision == "implicitDeny" and missing.missing_context == ["s3:prefix"]


def test_negated_and_if_exists_conditions_without_the_key() -> None:
    negated = policy(
        allow("kms:Decrypt", "*", Condition={"StringNotEquals": {"kms:ViaService": "x"}})
    )
    assert evaluate([negated], "kms:Decrypt", "k").decision == "allowed"
    if_exists = policy(
        allow("kms:Decrypt", "*", Condition={"StringEqualsIfExists": {"aws:x": "y"}})
    )
    assert evaluate([if_exists], "kms:Decrypt", "k").decision == "allowed"


def test_permissions_boundary_limits_the_allow() -> None:
    p = policy(allow("*", "*"))
    boundary = [policy(allow("s3:*", "*"), policy_id="boundary")]
    assert evaluate([p], "s3:GetObject", "x", boundary=boundary).decision == "allowed"
    assert evaluate([p], "ecr:BatchGetImage", "x", boundary=boundary).decision == "implicitDeny"


def test_unsupported_constructs_are_refused() -> None:
    p = policy(allow("s3:*", "*", Condition={"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}))
    with pytest.raises(UnsupportedPolicyError, match="IpAddress"):
        evaluate([p], "s3:GetObject", "x", {"aws:SourceIp": ["10.1.1.1"]})
    q = policy(allow("s3:*", "*", Condition={"ForAllValues:StringLike": {"k": "v"}}))
    with pytest.raises(UnsupportedPolicyError, match="ForAllValues"):
        evaluate([q], "s3:GetObject", "x")
