"""Image: registry, region and tag of the serving image."""

from __future__ import annotations

import pytest
from doctor_testkit import ACCOUNT, Account, by_check, make_plan, only_failure

from peagle_deploy.doctor.image import expected_dlc, parse_image

TAG = "0.18.0-gpu-py312-cu129-ubuntu22.04-sagemaker"


def test_dlc_image_in_the_regions_registry_passes(account: Account) -> None:
    plan = make_plan()
    account.stage(plan)
    line = by_check(account.doctor(plan))["image.exists"]
    assert line.status == "pass" and "image in registry 763104351884" in line.detail


def test_image_tag_that_does_not_exist_fails(account: Account) -> None:
    plan = make_plan()
    account.stage(plan)
    missing = make_plan(image_uri=plan.image_uri.replace(TAG, "0.99.0-does-not-exist"))
    failure = only_failure(account.doctor(missing))
    assert (failure.check, failure.resource) == ("image.exists", missing.image_uri)
    assert (
        failure.detail == "0.99.0-does-not-exist does not resolve in vllm (registry 763104351884)"
    )


def test_private_image_is_looked_up_with_describe_images(inprocess: Account) -> None:
    repo = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/peagle-serve"
    plan = make_plan(image_uri=f"{repo}:v1")
    inprocess.stage(plan)  # pushes peagle-serve:v1 to the caller's own registry
    inprocess.record()
    assert by_check(inprocess.doctor(plan))["image.exists"].status == "pass"
    assert "DescribeImages" in [name for name, _ in inprocess.calls]
    missing = only_failure(inprocess.doctor(make_plan(image_uri=f"{repo}:v2")))
    assert missing.detail == f"v2 does not resolve in peagle-serve (registry {ACCOUNT})"


def test_missing_repository_fails(inprocess: Account) -> None:
    inprocess.stage(make_plan())
    plan = make_plan(image_uri=f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/nothing:v1")
    line = by_check(inprocess.doctor(plan))["image.exists"]
    assert line.status == "fail" and "repository nothing does not exist" in line.detail


def test_vllm_image_from_another_registry_account_fails(inprocess: Account) -> None:
    inprocess.stage(make_plan())
    plan = make_plan(image_uri=f"111122223333.dkr.ecr.us-east-1.amazonaws.com/vllm:{TAG}")
    line = by_check(inprocess.doctor(plan))["image.exists"]
    assert line.status == "fail"
    assert "the vLLM DLC image of us-east-1 is in account 763104351884" in line.detail
    assert line.fix == f"use 763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:{TAG}"


def test_image_in_another_region_fails(inprocess: Account) -> None:
    inprocess.stage(make_plan())
    plan = make_plan(image_uri=f"763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:{TAG}")
    line = by_check(inprocess.doctor(plan))["image.exists"]
    assert (
        line.status == "fail"
        and line.detail == "the image is in us-west-2, the endpoint in us-east-1"
    )


def test_lookup_denied_is_a_warning(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    inprocess.deny("BatchGetImage", "ecr")
    line = by_check(inprocess.doctor(plan))["image.exists"]
    assert line.status == "warn" and "ecr:BatchGetImage" in line.detail


@pytest.mark.parametrize(
    ("uri", "parts"),
    [
        (
            f"763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:{TAG}",
            ("763104351884", "us-east-1", "amazonaws.com", "vllm", TAG, None),
        ),
        (
            "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/team/vllm@sha256:" + "a" * 64,
            (
                "727897471807",
                "cn-north-1",
                "amazonaws.com.cn",
                "team/vllm",
                None,
                "sha256:" + "a" * 64,
            ),
        ),
        (
            f"{ACCOUNT}.dkr.ecr-fips.us-east-1.amazonaws.com/img:1",
            (ACCOUNT, "us-east-1", "amazonaws.com", "img", "1", None),
        ),
    ],
)
def test_parse_image(uri: str, parts: tuple[object, ...]) -> None:
    ref = parse_image(uri)
    assert ref is not None
    assert (ref.account, ref.region, ref.domain, ref.repository, ref.tag, ref.digest) == parts


def test_non_ecr_images_are_not_parsed() -> None:
    assert parse_image("docker.io/vllm/vllm-openai:latest") is None
    # no tag and no digest: the plan refuses it before doctor runs (validation.aws_shapes)
    assert parse_image(f"{ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/img") is None


@pytest.mark.parametrize(
    ("region", "account", "domain"),
    [
        ("us-east-1", "763104351884", "amazonaws.com"),
        ("af-south-1", "626614931356", "amazonaws.com"),
        ("cn-north-1", "727897471807", "amazonaws.com.cn"),
    ],
)
def test_expected_dlc_follows_the_region_table(region: str, account: str, domain: str) -> None:
    dlc = expected_dlc(region)
    assert dlc is not None
    assert (dlc.account, dlc.domain) == (account, domain)
