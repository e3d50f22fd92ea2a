"""JumpStart's own S3 buckets (catalog/data/jumpstart.json `buckets`).

Model data in them belongs to AWS, not to the deploying account, so the bucket-owner
rule (`expected_bucket_owner`, default the deploying account) does not apply to them:
they are recognised by name, exactly as the SageMaker SDK does (sagemaker-core 2.27.0,
`is_jumpstart_model_uri` over `region_config.json`'s content and gated buckets).
"""

from __future__ import annotations

from functools import cache

from peagle_deploy.catalog.facts import cite, load


@cache
def jumpstart_buckets() -> frozenset[str]:
    """Every region's JumpStart content and gated-content bucket."""
    regions = load("jumpstart.json")["buckets"]["regions"]
    return frozenset(b for names in regions.values() for b in names)


def is_jumpstart_bucket(bucket: str) -> bool:
    return bucket in jumpstart_buckets()


def jumpstart_buckets_source() -> str:
    return cite(load("jumpstart.json")["buckets"]["source"])
