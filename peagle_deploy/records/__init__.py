"""The records peagle-deploy keeps in SSM Parameter Store: one path rule, one versioned
schema, one writer, one reader.

- **Path** (`paths`): `/peagle-deploy/<stage>/<endpoint>/<kind>`, kind `manifest` (what an
  endpoint serves; it also holds the promotion record, the gate results that let that
  configuration in, so the next promotion's baseline always describes what serves) or
  `experiment` (an experiment running or ended on the endpoint).
- **Schema** (`schema`, `codec`): one JSON document per parameter, an envelope
  `{kind, schema_version, stage, endpoint_name, region, body}` whose body is the kind's
  pydantic model (`DeploymentManifest`, `ExperimentRecord`), unknown fields refused.
- **Writer** (`store.write_record`): SecureString, Standard tier up to 4 KB, Advanced up to
  8 KB (a parameter once Advanced stays Advanced), tags.
- **Reader** (`store.read_record`): a typed record, None when absent, or one `RecordError`
  line naming the parameter. It trusts nothing by the parameter's name: strict JSON
  (`peagle_deploy.documents`), a known schema version and kind, and the record's own
  stage, endpoint, kind and region must be those of where it was read (a record copied to
  another stage's path is refused).

Records written before the envelope (schema_version 1: flat documents, no `kind`, by
peagle-deploy 0.1.0) are read and migrated in memory; the next write stores version 2.
Refusing them would strand users: a prod endpoint deployed months ago could not be
promoted from until redeployed, and a running experiment could be neither concluded nor
aborted (both read its record first). Reading them gives up no check: a version-1
document carries `stage`, `endpoint_name` and `region` too, the same identity checks
apply, and its body is validated as the kind its path names, so a version-1 manifest
copied to an experiment path fails validation there.

`serving.running_experiment` reads the endpoint's own description (the other half of the
truth a record is checked against); it is here so that `sdk`, `experiment` and `promote`
share it without importing each other.
"""

from __future__ import annotations

from peagle_deploy.records.codec import (
    LEGACY_VERSION,
    SCHEMA_VERSION,
    RecordError,
    decode,
    encode,
    encoded_size,
)
from peagle_deploy.records.paths import KINDS, PARAMETER_ROOT, Kind, RecordPath
from peagle_deploy.records.schema import (
    OPEN_STATES,
    DeploymentManifest,
    ExperimentRecord,
    State,
    StoredRecord,
    current_git_commit,
)
from peagle_deploy.records.serving import current_instances, running_experiment
from peagle_deploy.records.store import (
    MAX_PARAMETER_BYTES,
    STANDARD_LIMIT,
    delete_record,
    find_records,
    manifest_parameter_name,
    read_manifest,
    read_record,
    write_manifest,
    write_record,
)

ManifestError = RecordError
"""The SDK's name for a manifest that cannot be trusted (any record's error is one)."""

__all__ = [
    "KINDS",
    "LEGACY_VERSION",
    "MAX_PARAMETER_BYTES",
    "OPEN_STATES",
    "PARAMETER_ROOT",
    "SCHEMA_VERSION",
    "STANDARD_LIMIT",
    "DeploymentManifest",
    "ExperimentRecord",
    "Kind",
    "ManifestError",
    "RecordError",
    "RecordPath",
    "State",
    "StoredRecord",
    "current_git_commit",
    "current_instances",
    "decode",
    "delete_record",
    "encode",
    "encoded_size",
    "find_records",
    "manifest_parameter_name",
    "read_manifest",
    "read_record",
    "running_experiment",
    "write_manifest",
    "write_record",
]
