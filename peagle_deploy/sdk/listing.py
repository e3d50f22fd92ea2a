"""Finding the project's own endpoints (tag `peagle:managed=true`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from peagle_deploy.plan import MANAGED_TAG, MODEL_TAG, SPEC_HASH_TAG, STAGE_TAG


@dataclass(frozen=True)
class EndpointSummary:
    name: str
    status: str
    stage: str | None
    model: str | None
    spec_hash: str | None
    created: str
    arn: str

    def to_json(self) -> dict[str, Any]:
        return {
            "endpoint_name": self.name,
            "status": self.status,
            "stage": self.stage,
            "model": self.model,
            "spec_hash": self.spec_hash,
            "created": self.created,
            "arn": self.arn,
        }


def list_endpoints(
    *, region: str | None = None, boto_session: Any = None, stage: str | None = None
) -> list[EndpointSummary]:
    """Endpoints tagged `peagle:managed=true` (optionally of one stage), by name.

    One ListEndpoints page walk plus one ListTags per endpoint: SageMaker cannot filter
    endpoints by tag server-side.
    """
    from peagle_deploy.aws import is_not_found, make_client

    sm = make_client("sagemaker", region=region, boto_session=boto_session)
    found: list[EndpointSummary] = []
    for page in sm.get_paginator("list_endpoints").paginate():
        for item in page.get("Endpoints", []):
            try:
                tag_list = sm.list_tags(ResourceArn=item["EndpointArn"]).get("Tags", [])
            except Exception as exc:
                if is_not_found(exc):
                    continue  # deleted between the two calls
                raise
            tags = {t["Key"]: t["Value"] for t in tag_list}
            if tags.get(MANAGED_TAG) != "true":
                continue
            if stage is not None and tags.get(STAGE_TAG) != stage:
                continue
            found.append(
                EndpointSummary(
                    name=item["EndpointName"],
                    status=item["EndpointStatus"],
                    stage=tags.get(STAGE_TAG),
                    model=tags.get(MODEL_TAG),
                    spec_hash=tags.get(SPEC_HASH_TAG),
                    created=str(item.get("CreationTime", "")),
                    arn=item["EndpointArn"],
                )
            )
    return sorted(found, key=lambda e: e.name)
