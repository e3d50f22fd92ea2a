"""A completed job's drafter, read back from the metadata file the driver wrote beside it.

The driver writes `peagle_train.contract.METADATA_FILE` into the drafter folder
(`contract.drafter_uri`: `<S3OutputPath>/<job>/output/model/drafter/`, the job's output
being uncompressed). Its content is parsed by the contract's own strict parser, so the
SDK and the driver share one definition; a missing or malformed file means the job did
not leave a drafter `peagle deploy` can use, which is said, never papered over.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from peagle_deploy.train.job import TrainingJobError
from peagle_deploy.train.result import TrainedDrafter

MAX_METADATA_BYTES: Final = 1 << 20
"""The metadata file is a few hundred bytes; more is not ours to read."""


def split_s3(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise TrainingJobError(f"{uri!r} is not an s3:// location")
    bucket, _, key = uri[len("s3://") :].partition("/")
    return bucket, key


def drafter_location(described: Mapping[str, Any]) -> str:
    """Where a job's drafter lands (`contract.drafter_uri` of its S3OutputPath)."""
    from peagle_train.contract import drafter_uri

    output = (described.get("OutputDataConfig") or {}).get("S3OutputPath")
    if not output:
        raise TrainingJobError(f"training job {described.get('TrainingJobName')} has no output")
    return drafter_uri(str(output), str(described["TrainingJobName"]))


def read_metadata_text(s3: Any, drafter_uri: str, *, expected_owner: str | None = None) -> str:
    from peagle_train.contract import METADATA_FILE

    bucket, prefix = split_s3(drafter_uri)
    key = f"{prefix.rstrip('/')}/{METADATA_FILE}"
    extra = {"ExpectedBucketOwner": expected_owner} if expected_owner else {}
    try:
        body = s3.get_object(
            Bucket=bucket, Key=key, Range=f"bytes=0-{MAX_METADATA_BYTES - 1}", **extra
        )["Body"]
        data: bytes = body.read(MAX_METADATA_BYTES)
    except Exception as exc:
        from peagle_deploy.aws import error_code

        raise TrainingJobError(
            f"the job completed but its drafter metadata s3://{bucket}/{key} could not be "
            f"read ({error_code(exc) or type(exc).__name__}): no usable drafter"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise TrainingJobError(f"s3://{bucket}/{key} is not UTF-8 text") from None


def trained_drafter(
    described: Mapping[str, Any], text: str, *, drafter_uri: str | None = None
) -> TrainedDrafter:
    """The TrainedDrafter of a completed job from its metadata file's text."""
    from peagle_train.contract import parse_metadata

    name = str(described.get("TrainingJobName"))
    try:
        metadata = parse_metadata(text)
    except ValueError as exc:
        raise TrainingJobError(
            f"training job {name}'s drafter metadata is not valid: {exc}"
        ) from None
    fields = dataclasses.asdict(metadata)
    return TrainedDrafter(
        job_name=name,
        status=str(described.get("TrainingJobStatus")),
        drafter_uri=drafter_uri or drafter_location(described),
        num_speculative_tokens=int(metadata.num_depths),
        acceptance_per_position=tuple(float(a) for a in metadata.acceptance_per_position),
        mean_accepted_per_step=float(metadata.mean_accepted_per_step),
        metadata=fields,
    )


def job_account(described: Mapping[str, Any]) -> str | None:
    """The account the job ran in (its role's): the owner its output bucket must have,
    as every read of the project pins it (`access.bucket_owner`)."""
    parts = str(described.get("RoleArn", "")).split(":")
    return parts[4] if len(parts) > 5 and parts[4].isdigit() else None


def read_drafter(s3: Any, described: Mapping[str, Any]) -> TrainedDrafter:
    uri = drafter_location(described)
    text = read_metadata_text(s3, uri, expected_owner=job_account(described))
    return trained_drafter(described, text, drafter_uri=uri)
