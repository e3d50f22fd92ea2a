"""The doctor reads model data only from buckets of the expected owner (issue 19): every
S3 read carries `ExpectedBucketOwner` (the spec's `expected_bucket_owner`, default the
deploying account; JumpStart's own buckets apart), and a bucket of that name in another
account fails the check instead of being read.

moto 5.2.5 ignores ExpectedBucketOwner, so `owned_by` answers as S3 does: botocore's s3
model documents the parameter as "If the account ID that you provide does not match the
actual owner of the bucket, the request fails with the HTTP status code 403 Forbidden
(access denied)" (test double, named as such)."""

from __future__ import annotations

from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from doctor_testkit import ACCOUNT, Account, by_check, make_plan
from peagle_local.emulator.world import split_s3_uri

SQUATTER = "999999999999"
OWN = {
    "custom.model_data_uri": "s3://acme-peagle-weights/qwen3/",
    "custom.drafter_uri": "s3://acme-peagle-drafters/qwen3-p-eagle/",
}
READS = ("HeadBucket", "ListObjectsV2", "HeadObject", "GetObject")


def owned_by(account: Account, owners: dict[str, str]) -> None:
    """S3's answer to an ExpectedBucketOwner that is not the bucket's owner: 403."""

    def note(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["test_owner"] = (params.get("Bucket"), params.get("ExpectedBucketOwner"))

    def answer(context: dict[str, Any], **_: Any) -> Any:
        bucket, expected = context.get("test_owner", (None, None))
        if expected is None or bucket not in owners or owners[bucket] == expected:
            return None
        response = AWSResponse(None, 403, HTTPHeaders(), None)
        error = {"Error": {"Code": "403", "Message": "Forbidden"}, "ResponseMetadata": {}}
        return response, error

    for operation in READS:
        account.session.events.register(f"before-parameter-build.s3.{operation}", note)
        account.session.events.register(f"before-call.s3.{operation}", answer)


def test_every_read_names_the_deploying_account_as_the_owner(inprocess: Account) -> None:
    plan = make_plan(**OWN)
    inprocess.stage(plan)
    inprocess.record()
    assert inprocess.doctor(plan).ok
    reads = [(name, p) for name, p in inprocess.calls if name in READS]
    assert {name for name, _ in reads} >= {"HeadBucket", "ListObjectsV2", "GetObject"}
    for name, params in reads:
        assert params.get("ExpectedBucketOwner") == ACCOUNT, (name, params.get("Bucket"))


def test_a_bucket_of_another_account_fails_and_is_not_read(inprocess: Account) -> None:
    plan = make_plan(**OWN)
    inprocess.stage(plan)
    bucket, _ = split_s3_uri(plan.model_data_uri)
    owned_by(inprocess, {bucket: SQUATTER})
    line = by_check(inprocess.doctor(plan))["model-data.location"]
    assert line.status == "fail", line.line()
    assert f"not owned by {ACCOUNT}" in line.detail
    assert "expected_bucket_owner" in (line.fix or "")


def test_the_spec_names_the_owner_it_trusts(inprocess: Account) -> None:
    plan = make_plan(expected_bucket_owner=SQUATTER, **OWN)
    inprocess.stage(plan)
    bucket, _ = split_s3_uri(plan.model_data_uri)
    owned_by(inprocess, {bucket: SQUATTER})
    inprocess.record()
    line = by_check(inprocess.doctor(plan))["model-data.location"]
    assert line.status == "pass", line.line()
    owners = {p.get("ExpectedBucketOwner") for n, p in inprocess.calls if n in READS}
    assert owners == {SQUATTER}


def test_jumpstarts_own_buckets_are_read_without_an_owner() -> None:
    """AWS owns them; the SDK recognises them by name (catalog.buckets)."""
    from peagle_deploy.access import bucket_owner

    assert bucket_owner("jumpstart-cache-prod-us-east-1", ACCOUNT) is None
    assert bucket_owner("jumpstart-private-cache-prod-us-east-1", ACCOUNT) is None
    assert bucket_owner("acme-models", ACCOUNT) == ACCOUNT


def test_a_role_pinned_to_the_owner_is_judged_with_the_owner_in_context(
    inprocess: Account,
) -> None:
    """The CDK role pins its reads with `s3:ResourceAccount` (so does the staged role
    here); the doctor's SimulatePrincipalPolicy passes the expected owner as that context
    key, so such a role is not failed for want of it (no false alarm)."""
    import json

    plan = make_plan(**OWN)
    world = inprocess.stage(plan)
    policy = inprocess.client("iam").get_role_policy(
        RoleName=world.role_name, PolicyName="peagle-execution"
    )["PolicyDocument"]
    text = json.dumps(policy)
    assert '"s3:ResourceAccount": "123456789012"' in text
    results = by_check(inprocess.doctor(plan))
    for check in ("role.s3-model-data", "role.s3-drafter"):
        assert results[check].status == "pass", results[check].line()
