"""A record <-> the one JSON document stored in its parameter, and what a reader refuses.

The document is an envelope: `kind`, `schema_version`, `stage`, `endpoint_name`,
`region`, and `body` (the kind's fields). Reading trusts nothing by the parameter's
name: the document must be strict JSON (`peagle_deploy.documents`), of a schema version
and kind this peagle-deploy knows, and about the very stage, endpoint, kind and region
it was read from. Every refusal is one `RecordError` line that starts with the
parameter's name.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from peagle_deploy.errors import PeagleError
from peagle_deploy.records.paths import KINDS, RecordPath
from peagle_deploy.records.schema import IDENTITY, RECORD_TYPES, StoredRecord
from peagle_deploy.redaction import safe_message

SCHEMA_VERSION = 2
LEGACY_VERSION = 1
"""The flat documents written before the envelope (peagle-deploy 0.1.0): read, and
migrated in memory (see `peagle_deploy.records`); the next write rewrites them."""


M = TypeVar("M", bound=BaseModel)


class RecordError(PeagleError):
    """A record that exists but cannot be trusted; one line naming the parameter."""


class Envelope(BaseModel):
    """The stored document: who the record is about, then the kind's body."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    schema_version: int
    stage: str
    endpoint_name: str
    region: str
    body: dict[str, Any]


def encode(record: StoredRecord) -> str:
    """The document stored for `record` (compact JSON)."""
    return Envelope(
        kind=record.KIND,
        schema_version=SCHEMA_VERSION,
        stage=record.stage,
        endpoint_name=record.endpoint_name,
        region=record.region,
        body=record.model_dump(mode="json", exclude=set(IDENTITY)),
    ).model_dump_json()


def encoded_size(record: StoredRecord) -> int:
    """Bytes of the stored document (what SSM's parameter size limits count)."""
    return len(encode(record).encode())


def refusal(path: RecordPath, problem: str) -> RecordError:
    """The one-line error for a record at `path` that cannot be trusted."""
    hint = RECORD_TYPES[path.kind].REFUSAL_HINT.format(stage=path.stage, name=path.name)
    return RecordError(f"{path.name} {problem}; {hint}")


def decode(value: str, path: RecordPath, region: str | None = None) -> StoredRecord:
    """The record stored at `path` (read from SSM in `region`, when known); RecordError
    when the document is not one this peagle-deploy can trust there."""
    doc = _document(value, path)
    legacy = doc.get("schema_version") == LEGACY_VERSION
    envelope = _envelope(_from_legacy(doc, path) if legacy else doc, path)
    _check_identity(envelope, path, region)
    repeated = sorted(set(IDENTITY) & envelope.body.keys())
    if repeated:
        raise refusal(path, f"repeats {', '.join(repeated)} in its body")
    identity = {key: getattr(envelope, key) for key in IDENTITY}
    return _validated(
        RECORD_TYPES[path.kind], {**envelope.body, **identity}, path, "" if legacy else "body."
    )


def _document(value: str, path: RecordPath) -> dict[str, Any]:
    from peagle_deploy.documents import DocumentError, parse_document

    try:  # the strict reader: a tampered parameter gets no deeper than a spec file does
        doc = parse_document(value, path.name, "its value", "json")
    except DocumentError as exc:
        problem = safe_message(exc.problem)
        raise refusal(path, f"is not JSON peagle-deploy reads: {problem}") from None
    if not isinstance(doc, dict):
        raise refusal(path, "is not a JSON object")
    version = doc.get("schema_version")
    if type(version) is not int or version not in (LEGACY_VERSION, SCHEMA_VERSION):
        raise refusal(
            path,
            f"has schema_version {safe_message(repr(version), 40)}; this peagle-deploy reads "
            f"{LEGACY_VERSION} and {SCHEMA_VERSION} (written by a newer one? upgrade)",
        )
    return doc


def _from_legacy(doc: dict[str, Any], path: RecordPath) -> dict[str, Any]:
    """A version-1 document (flat, no kind) as an envelope. Its kind is the path's; the
    body is then validated as that kind, so a document of another kind fails there."""
    return {
        "kind": path.kind,
        "schema_version": SCHEMA_VERSION,
        **{key: doc[key] for key in IDENTITY if key in doc},
        "body": {k: v for k, v in doc.items() if k != "schema_version" and k not in IDENTITY},
    }


def _envelope(doc: dict[str, Any], path: RecordPath) -> Envelope:
    kind = doc.get("kind")
    if kind not in KINDS:
        shown = safe_message(repr(kind), 40)
        raise refusal(path, f"holds a record of unknown kind {shown} (known: {', '.join(KINDS)})")
    envelope = _validated(Envelope, doc, path, "")
    if envelope.kind != path.kind:
        raise refusal(path, f"holds a record of kind {envelope.kind!r}, not {path.kind!r}")
    return envelope


def _check_identity(envelope: Envelope, path: RecordPath, region: str | None) -> None:
    """The record must be about where it was read from: a copy is not the original."""
    about = f"{envelope.stage}/{envelope.endpoint_name}"
    if (envelope.stage, envelope.endpoint_name) != (path.stage, path.endpoint_name):
        raise refusal(
            path,
            f"holds the {path.kind} of {safe_message(about, 120)}, not of {path.where} "
            "(copied from another path?): refused",
        )
    if region is not None and envelope.region != region:
        raise refusal(
            path,
            f"was written for region {safe_message(envelope.region, 40)}, not {region} "
            "where it is stored: refused",
        )


def _validated(model: type[M], doc: dict[str, Any], path: RecordPath, at: str) -> M:
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        problem = safe_message(str(first["msg"]))
        raise refusal(path, f"is invalid at {at}{where or '(root)'}: {problem}") from None
