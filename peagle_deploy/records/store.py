"""The one writer and the one reader of records in SSM Parameter Store.

A record is a SecureString (a spec's env may carry secrets: encrypted at rest with the
account's `aws/ssm` key, decrypted only by readers allowed to). Standard tier up to
4 KB, Advanced up to 8 KB; a parameter once Advanced stays Advanced. botocore is
imported inside the functions: the CLI starts without it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from peagle_deploy.records.codec import RecordError, decode, encode
from peagle_deploy.records.paths import PARAMETER_ROOT, Kind, RecordPath
from peagle_deploy.records.schema import DeploymentManifest, StoredRecord

R = TypeVar("R", bound=StoredRecord)

STANDARD_LIMIT = 4096
"""Bytes an SSM Standard-tier parameter holds."""
MAX_PARAMETER_BYTES = 8192
"""Bytes an SSM Advanced-tier parameter holds: the largest record there can be."""


def write_record(
    ssm: Any, record: StoredRecord, *, tags: list[dict[str, str]] | None = None
) -> str:
    """Store (overwrite) `record` at its path; returns the parameter name.

    `tags` (e.g. `plan.tags`) are put on the parameter so the project finds its own.
    """
    from botocore.exceptions import ClientError

    name = record.parameter_name
    value = encode(record)
    size = len(value.encode())
    if size > MAX_PARAMETER_BYTES:
        raise RecordError(
            f"{name} would be {size} bytes, over SSM's {MAX_PARAMETER_BYTES}-byte parameter "
            "limit; nothing was written"
        )
    request: dict[str, Any] = {
        "Name": name,
        "Value": value,
        "Type": "SecureString",
        "Overwrite": True,
        "Tier": "Standard" if size <= STANDARD_LIMIT else "Advanced",
        "Description": f"peagle-deploy {record.KIND} of {record.endpoint_name} ({record.stage})",
    }
    try:
        ssm.put_parameter(**request)
    except ClientError as exc:
        # A parameter that once held a larger record (a promotion's gate report) is
        # Advanced, and SSM never reverts Advanced to Standard: a smaller record must be
        # written as Advanced too.
        code = exc.response.get("Error", {}).get("Code")
        if request["Tier"] != "Standard" or code != "ValidationException":
            raise
        ssm.put_parameter(**{**request, "Tier": "Advanced"})
    if tags:
        ssm.add_tags_to_resource(ResourceType="Parameter", ResourceId=name, Tags=tags)
    return name


def read_record(ssm: Any, kind: type[R], stage: str, endpoint_name: str) -> R | None:
    """The `kind` record of `stage`/`endpoint_name`; None when there is none.

    RecordError (one line naming the parameter) when it cannot be trusted: not strict
    JSON, an unknown schema version or kind, or about another stage, endpoint, kind or
    region than where it was read.
    """
    from botocore.exceptions import ClientError

    path = RecordPath(stage, endpoint_name, kind.KIND)
    try:
        value = ssm.get_parameter(Name=path.name, WithDecryption=True)["Parameter"]["Value"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ParameterNotFound":
            return None
        raise
    region = getattr(getattr(ssm, "meta", None), "region_name", None)
    record = decode(str(value), path, region if isinstance(region, str) else None)
    assert isinstance(record, kind)  # decode validates with the path kind's model
    return record


def delete_record(ssm: Any, path: RecordPath) -> bool:
    """Delete one record; False when it did not exist."""
    from botocore.exceptions import ClientError

    try:
        ssm.delete_parameter(Name=path.name)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ParameterNotFound":
            return False
        raise
    return True


def find_records(
    ssm: Any, kind: Kind | None, *, stage: str | None = None, endpoint_name: str | None = None
) -> list[RecordPath]:
    """The paths of the `kind` records (every kind when None) in `stage` (all stages when
    None), optionally of one endpoint, sorted. Only names: what they hold is read (and
    checked) by `read_record`."""
    root = PARAMETER_ROOT if stage is None else f"{PARAMETER_ROOT}/{stage}/"
    found: list[RecordPath] = []
    kwargs: dict[str, Any] = {"Path": root, "Recursive": True}
    while True:
        page = ssm.get_parameters_by_path(**kwargs)
        for parameter in page.get("Parameters", []):
            path = RecordPath.parse(str(parameter["Name"]))
            if (
                path is not None
                and kind in (None, path.kind)
                and stage in (None, path.stage)
                and endpoint_name in (None, path.endpoint_name)
            ):
                found.append(path)
        token = page.get("NextToken")
        if not token:
            return sorted(set(found), key=lambda p: p.name)
        kwargs["NextToken"] = token


# --- the deployment manifest, as the SDK offers it ------------------------------------
def manifest_parameter_name(stage: str, endpoint_name: str) -> str:
    """`/peagle-deploy/<stage>/<endpoint_name>/manifest`."""
    return RecordPath(stage, endpoint_name, DeploymentManifest.KIND).name


def read_manifest(
    stage: str,
    endpoint_name: str,
    *,
    ssm_client: Any = None,
    region: str | None = None,
    boto_session: Any = None,
) -> DeploymentManifest | None:
    """The stored manifest, or None when there is none; ManifestError when it cannot be
    trusted (see `read_record`)."""
    ssm = _ssm(ssm_client, region, boto_session)
    return read_record(ssm, DeploymentManifest, stage, endpoint_name)


def write_manifest(
    manifest: DeploymentManifest,
    *,
    ssm_client: Any = None,
    region: str | None = None,
    boto_session: Any = None,
    tags: list[dict[str, str]] | None = None,
) -> str:
    """Store (overwrite) the manifest; returns the parameter name."""
    ssm = _ssm(ssm_client, region or manifest.region, boto_session)
    return write_record(ssm, manifest, tags=tags)


def _ssm(ssm_client: Any, region: str | None, boto_session: Any) -> Any:
    if ssm_client is not None:
        return ssm_client
    from peagle_deploy.aws import make_client

    return make_client("ssm", region=region, boto_session=boto_session)
