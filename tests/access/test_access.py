"""IAM resources derived from CreateModel requests (pure functions, no synth)."""

from __future__ import annotations

import pytest

from peagle_deploy.access import (
    EcrRepository,
    ecr_repositories,
    parse_s3_uri,
    s3_reads,
)
from peagle_deploy.errors import InputError

IMAGE = (
    "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.18.0-gpu-py312-cu129-ubuntu22.04-sagemaker"
)


def _request(**container: object) -> dict[str, object]:
    return {"ModelName": "m", "PrimaryContainer": {"Image": IMAGE, **container}}


def test_prefix_source_reads_the_prefix_and_lists_it() -> None:
    read = parse_s3_uri("s3://bucket/a/b/", data_type="S3Prefix", source="x")
    assert (read.bucket, read.key, read.is_prefix) == ("bucket", "a/b/", True)
    assert read.object_pattern == "bucket/a/b/*"
    assert read.list_prefix == "a/b/*"


def test_object_source_reads_one_object_without_listing() -> None:
    read = parse_s3_uri("s3://bucket/a/model.tar.gz", data_type="S3Object", source="x")
    assert read.object_pattern == "bucket/a/model.tar.gz"
    assert read.list_prefix is None


@pytest.mark.parametrize(
    ("uri", "data_type", "field"),
    [
        ("bucket/a/", "S3Prefix", "x"),
        ("s3://bucket", "S3Object", "x"),
        ("s3://bucket/a/", "S3Manifest", "x.S3DataType"),
    ],
)
def test_bad_locations_are_refused_with_the_field(uri: str, data_type: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        parse_s3_uri(uri, data_type=data_type, source="x")
    assert err.value.field == field


def test_s3_reads_cover_model_drafter_and_legacy_model_data_url() -> None:
    request = _request(
        ModelDataSource={"S3DataSource": {"S3Uri": "s3://m/w/", "S3DataType": "S3Prefix"}},
        AdditionalModelDataSources=[
            {
                "ChannelName": "eagle",
                "S3DataSource": {"S3Uri": "s3://d/head/", "S3DataType": "S3Prefix"},
            }
        ],
    )
    reads = s3_reads(request)
    assert [(r.bucket, r.key) for r in reads] == [("d", "head/"), ("m", "w/")]
    assert [r.source for r in reads] == [
        "PrimaryContainer.AdditionalModelDataSources[0]",
        "PrimaryContainer.ModelDataSource",
    ]
    legacy = s3_reads(_request(ModelDataUrl="s3://m/model.tar.gz"))
    assert [(r.key, r.is_prefix) for r in legacy] == [("model.tar.gz", False)]


def test_duplicate_locations_are_granted_once() -> None:
    source = {"S3Uri": "s3://m/w/", "S3DataType": "S3Prefix"}
    request = _request(
        ModelDataSource={"S3DataSource": source},
        AdditionalModelDataSources=[{"ChannelName": "eagle", "S3DataSource": source}],
    )
    assert len(s3_reads(request)) == 1


def test_ecr_repository_of_tagged_and_digest_images() -> None:
    assert ecr_repositories(_request()) == [EcrRepository("763104351884", "us-east-1", "vllm")]
    digest = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/img@sha256:" + "a" * 64
    (repo,) = ecr_repositories({"PrimaryContainer": {"Image": digest}})
    assert repo.arn() == "arn:aws:ecr:eu-west-1:123456789012:repository/team/img"


@pytest.mark.parametrize(
    "image", ["vllm/vllm-openai:latest", "public.ecr.aws/deep-learning-containers/vllm:x"]
)
def test_non_ecr_images_are_refused(image: str) -> None:
    with pytest.raises(InputError) as err:
        ecr_repositories({"PrimaryContainer": {"Image": image}})
    assert err.value.field == "image_uri"
