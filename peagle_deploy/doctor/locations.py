"""The S3 data a plan's model loads, as the CreateModel request says it (S3DataSource)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from peagle_serve import contract

from peagle_deploy.plan import Plan


@dataclass(frozen=True)
class DataLocation:
    """One S3 data source of the model: an object, or every object under a prefix."""

    label: str
    """`model data` or `drafter`: what the location holds, for messages."""
    uri: str
    bucket: str
    key: str
    is_prefix: bool
    """S3DataType S3Prefix (else S3Object)."""
    compressed: bool
    """CompressionType Gzip (or a ModelDataUrl archive): its files cannot be read in place."""
    mount: str
    """Where SageMaker mounts it in the container."""

    @property
    def dir_key(self) -> str:
        """The prefix as a directory (`a/b/`; '' for a whole bucket)."""
        return self.key if not self.key or self.key.endswith("/") else self.key + "/"

    def object_uri(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.dir_key}{name}"

    def object_arn(self, partition: str, name: str = "config.json") -> str:
        """The ARN of one object SageMaker reads from here (for IAM simulation)."""
        key = f"{self.dir_key}{name}" if self.is_prefix else self.key
        return f"arn:{partition}:s3:::{self.bucket}/{key}"

    def bucket_arn(self, partition: str) -> str:
        return f"arn:{partition}:s3:::{self.bucket}"


def _location(label: str, source: dict[str, Any], mount: str) -> DataLocation:
    uri = str(source["S3Uri"])
    bucket, _, key = uri.split("://", 1)[1].partition("/")
    return DataLocation(
        label=label,
        uri=uri,
        bucket=bucket,
        key=key,
        is_prefix=source.get("S3DataType", "S3Prefix") == "S3Prefix",
        compressed=source.get("CompressionType", "None") == "Gzip",
        mount=mount,
    )


def model_data(plan: Plan) -> DataLocation:
    """The target weights (ModelDataSource, or a ModelDataUrl archive)."""
    container = plan.create_model["PrimaryContainer"]
    source = (container.get("ModelDataSource") or {}).get("S3DataSource")
    if source:
        return _location("model data", source, contract.MODEL_DIR)
    url = container["ModelDataUrl"]
    return _location(
        "model data",
        {"S3Uri": url, "S3DataType": "S3Object", "CompressionType": "Gzip"},
        contract.MODEL_DIR,
    )


def drafter(plan: Plan) -> DataLocation | None:
    """The drafter channel's data source, when the plan speculates with one."""
    if plan.speculative_config is None:
        return None
    channel = plan.spec.speculative.drafter_channel
    container = plan.create_model["PrimaryContainer"]
    for extra in container.get("AdditionalModelDataSources") or []:
        if extra.get("ChannelName") == channel:
            return _location("drafter", extra["S3DataSource"], contract.drafter_mount_path(channel))
    return None


def all_locations(plan: Plan) -> list[DataLocation]:
    found = [model_data(plan)]
    d = drafter(plan)
    if d is not None:
        found.append(d)
    return found
