"""The stacks' own roles, decided by an outside IAM evaluator (@cloud-copilot/iam-simulate):
the execution role's trust and key use, and the model provider's model grant (issue 19,
the Low findings)."""

from __future__ import annotations

import pytest
from cdk_helpers import EDGE_ACCOUNT, Synthesized
from iam_oracle import Ask, TemplateRoles, run

pytestmark = pytest.mark.xdist_group(name="cdk")

STACK = "PeagleEndpoint-edge"
REGION = "eu-west-1"


@pytest.fixture(scope="module")
def roles(edge_synth: Synthesized) -> TemplateRoles:
    return TemplateRoles(edge_synth.templates[STACK], REGION, account=EDGE_ACCOUNT)


def _assume(roles: TemplateRoles, source_arn: str | None, source_account: str | None) -> str:
    role = roles.role_id("ExecutionRole")
    context = {}
    if source_arn is not None:
        context["aws:SourceArn"] = source_arn
    if source_account is not None:
        context["aws:SourceAccount"] = source_account
    (result,) = run(
        [
            {
                "request": {
                    "principal": "sagemaker.amazonaws.com",
                    "action": "sts:AssumeRole",
                    "resource": {"resource": roles.role_arn(role), "accountId": EDGE_ACCOUNT},
                    "contextVariables": context,
                },
                "identityPolicies": [],
                "resourcePolicy": roles.trust(role),
            }
        ]
    )
    assert result["decision"] != "Error", result["errors"]
    return str(result["decision"])


def test_sagemaker_assumes_the_execution_role_only_for_this_account_and_region(
    roles: TemplateRoles,
) -> None:
    own = f"arn:aws:sagemaker:{REGION}:{EDGE_ACCOUNT}:model/peagle-custom-edge-m0123abcd"
    assert _assume(roles, own, EDGE_ACCOUNT) == "Allowed"
    other = own.replace(EDGE_ACCOUNT, "999999999999")
    assert _assume(roles, other, "999999999999") == "ImplicitlyDenied"  # confused deputy
    assert _assume(roles, own.replace(REGION, "us-east-1"), EDGE_ACCOUNT) == "ImplicitlyDenied"
    assert _assume(roles, None, None) == "ImplicitlyDenied"


def test_the_volume_key_decrypts_only_through_sagemaker_or_ebs(roles: TemplateRoles) -> None:
    role = roles.role_id("ExecutionRole")
    key_id = roles.logical_id("AWS::KMS::Key", "Key")
    key = roles.key_arn(key_id)
    cases = [
        (
            Ask("kms:Decrypt", key, {"kms:ViaService": f"sagemaker.{REGION}.amazonaws.com"}),
            "Allowed",
        ),
        (Ask("kms:Decrypt", key, {"kms:ViaService": f"ec2.{REGION}.amazonaws.com"}), "Allowed"),
        # the container holds the role's credentials; a direct call is refused
        (Ask("kms:Decrypt", key), "ImplicitlyDenied"),
        (
            Ask("kms:Decrypt", key, {"kms:ViaService": f"lambda.{REGION}.amazonaws.com"}),
            "ImplicitlyDenied",
        ),
    ]
    # the key policy delegates to IAM (the account root statement CDK adds)
    decisions = roles.decide(role, [a for a, _ in cases], roles.key_policy(key_id))
    assert decisions == [d for _, d in cases]


def test_the_provider_manages_only_this_endpoints_derived_models(roles: TemplateRoles) -> None:
    """`<endpoint>-m` + exactly 8 characters: the old grant `<endpoint>-m*` also matched
    `<endpoint>-mirror` (another endpoint's model name)."""
    role = roles.role_id("ModelProviderRole")
    base = f"arn:aws:sagemaker:{REGION}:{EDGE_ACCOUNT}:model/peagle-custom-edge"
    cases = [
        (f"{base}-m0123abcd", "Allowed"),
        (f"{base}-mirror", "ImplicitlyDenied"),
        (f"{base}-mirror-m0123abcd", "ImplicitlyDenied"),
        (f"{base}-m0123abcde", "ImplicitlyDenied"),
    ]
    asks = [Ask("sagemaker:DeleteModel", arn) for arn, _ in cases]
    assert roles.decide(role, asks) == [d for _, d in cases]


def test_model_data_is_read_only_from_the_expected_owners_buckets(roles: TemplateRoles) -> None:
    """`s3:ResourceAccount`: a bucket of the same name in another account (squatted, or
    deleted and recreated) is never read; the default owner is the stack's account."""
    role = roles.role_id("ExecutionRole")
    model = "arn:aws:s3:::acme-models/qwen3/model.tar.gz"
    drafter = "arn:aws:s3:::acme-drafters/qwen3-p-eagle/config.json"

    def ask(action: str, resource: str, owner: str, **extra: str) -> Ask:
        return Ask(action, resource, {"s3:ResourceAccount": owner, **extra})

    cases = [
        (ask("s3:GetObject", model, EDGE_ACCOUNT), "Allowed"),
        (ask("s3:GetObject", drafter, EDGE_ACCOUNT), "Allowed"),
        (ask("s3:GetObject", model, "999999999999"), "ImplicitlyDenied"),
        (
            ask(
                "s3:ListBucket",
                "arn:aws:s3:::acme-drafters",
                EDGE_ACCOUNT,
                **{"s3:prefix": "qwen3-p-eagle/x"},
            ),
            "Allowed",
        ),
        (
            ask(
                "s3:ListBucket",
                "arn:aws:s3:::acme-drafters",
                "999999999999",
                **{"s3:prefix": "qwen3-p-eagle/x"},
            ),
            "ImplicitlyDenied",
        ),
    ]
    assert roles.decide(role, [a for a, _ in cases]) == [d for _, d in cases]


def test_jumpstarts_own_buckets_are_read_whoever_owns_them(stage_synth: Synthesized) -> None:
    """AWS owns JumpStart's buckets: no owner condition there (catalog.buckets)."""
    roles = TemplateRoles(stage_synth.templates["PeagleEndpoint-dev"], "us-east-1")
    role = roles.role_id("ExecutionRole")
    plan = stage_synth.stacks["PeagleEndpoint-dev"].plan
    bucket, _, key = plan.model_data_uri.removeprefix("s3://").partition("/")
    assert bucket.startswith("jumpstart-")
    obj = f"arn:aws:s3:::{bucket}/{key}"
    if key.endswith("/"):
        obj += "config.json"
    decision = roles.decide(
        role, [Ask("s3:GetObject", obj, {"s3:ResourceAccount": "111111111111"})]
    )
    assert decision == ["Allowed"]
