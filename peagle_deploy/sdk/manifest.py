"""The deployment manifest: what is serving on an endpoint, recorded in SSM Parameter Store.

Written by `deploy_peagle()` once the endpoint is InService, at
`/peagle-deploy/<stage>/<endpoint_name>/manifest` (one JSON document, a String
parameter). `peagle promote` reads the source stage's manifest to know exactly which
spec to roll forward, and records its gate results in the target's manifest.

Small on purpose: `manifest_parameter_name`, `write_manifest`, `read_manifest`,
`delete_manifest` (with the endpoint, by `peagle delete`), and the pydantic model
`DeploymentManifest`.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from peagle_deploy.errors import PeagleError
from peagle_deploy.spec.models import DeploymentSpec

if TYPE_CHECKING:
    from peagle_deploy.plan import Plan

PARAMETER_ROOT = "/peagle-deploy"
MANIFEST_SCHEMA_VERSION = 1
# SSM Standard parameters hold 4 KB; larger manifests need the Advanced tier.
_STANDARD_LIMIT = 4096


class ManifestError(PeagleError):
    """A manifest that exists but cannot be read (bad JSON, unknown schema)."""


class DeploymentManifest(BaseModel):
    """What one endpoint serves, and where it came from."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = MANIFEST_SCHEMA_VERSION
    endpoint_name: str
    stage: str
    region: str
    content_hash: str
    """The plan's content hash (also the endpoint's `peagle:spec-hash` tag)."""
    spec: DeploymentSpec
    model_name: str
    endpoint_config_name: str
    image_uri: str
    model_data_uri: str
    drafter_uri: str | None = None
    instance_type: str
    num_speculative_tokens: int | None = None
    git_commit: str | None = None
    """HEAD of the git repository the deploy ran in, if any (`-dirty` if uncommitted changes)."""
    deployed_at: datetime
    deployed_by: str | None = None
    """Free text: who or what deployed (CI job, `peagle promote dev->staging`, ...)."""
    promoted_from: str | None = None
    """`<stage>/<endpoint>` of the source when this deployment is a promotion."""
    gate_results: list[dict[str, Any]] = Field(default_factory=list)
    """Gate verdicts recorded by `peagle promote` (empty for a direct deploy)."""
    experiment: dict[str, Any] | None = None
    """The last experiment concluded or aborted on this deployment (`peagle experiment`):
    its decision, and whether the candidate was promoted or the incumbent kept."""

    @classmethod
    def from_plan(
        cls,
        plan: Plan,
        *,
        deployed_by: str | None = None,
        promoted_from: str | None = None,
        gate_results: list[dict[str, Any]] | None = None,
        git_commit: str | None = None,
    ) -> DeploymentManifest:
        """The manifest of a plan that is now serving."""
        return cls(
            endpoint_name=plan.endpoint_name,
            stage=plan.spec.stage,
            region=plan.region,
            content_hash=plan.content_hash,
            spec=plan.spec,
            model_name=plan.model_name,
            endpoint_config_name=plan.endpoint_config_name,
            image_uri=plan.image_uri,
            model_data_uri=plan.model_data_uri,
            drafter_uri=plan.drafter_uri,
            instance_type=plan.instance_type,
            num_speculative_tokens=plan.num_speculative_tokens,
            git_commit=git_commit if git_commit is not None else current_git_commit(),
            deployed_at=datetime.now(UTC),
            deployed_by=deployed_by,
            promoted_from=promoted_from,
            gate_results=list(gate_results or []),
        )

    @property
    def parameter_name(self) -> str:
        return manifest_parameter_name(self.stage, self.endpoint_name)


def manifest_parameter_name(stage: str, endpoint_name: str) -> str:
    """`/peagle-deploy/<stage>/<endpoint_name>/manifest`."""
    return f"{PARAMETER_ROOT}/{stage}/{endpoint_name}/manifest"


def current_git_commit(cwd: str | Path | None = None) -> str | None:
    """HEAD of the repository around `cwd` (suffix `-dirty` when the tree has changes)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}-dirty" if dirty else head or None


def _ssm(ssm_client: Any, region: str | None, boto_session: Any) -> Any:
    if ssm_client is not None:
        return ssm_client
    from peagle_deploy.aws import make_client

    return make_client("ssm", region=region, boto_session=boto_session)


def write_manifest(
    manifest: DeploymentManifest,
    *,
    ssm_client: Any = None,
    region: str | None = None,
    boto_session: Any = None,
    tags: list[dict[str, str]] | None = None,
) -> str:
    """Store (overwrite) the manifest; returns the parameter name.

    `tags` (e.g. `plan.tags`) are put on the parameter so the project finds its own.
    """
    from botocore.exceptions import ClientError

    name = manifest.parameter_name
    value = manifest.model_dump_json()
    ssm = _ssm(ssm_client, region or manifest.region, boto_session)
    request: dict[str, Any] = {
        "Name": name,
        "Value": value,
        # The spec may carry secrets in its env (HF tokens, API keys): encrypted at rest
        # with the account's aws/ssm key, decrypted only by readers allowed to.
        "Type": "SecureString",
        "Overwrite": True,
        "Tier": "Standard" if len(value.encode()) <= _STANDARD_LIMIT else "Advanced",
        "Description": f"peagle-deploy manifest of {manifest.endpoint_name} ({manifest.stage})",
    }
    try:
        ssm.put_parameter(**request)
    except ClientError as exc:
        # A parameter that once held a larger manifest (a promotion's gate report) is
        # Advanced, and SSM never reverts Advanced to Standard: a smaller manifest must be
        # written as Advanced too.
        code = exc.response.get("Error", {}).get("Code")
        if request["Tier"] != "Standard" or code != "ValidationException":
            raise
        ssm.put_parameter(**{**request, "Tier": "Advanced"})
    if tags:
        ssm.add_tags_to_resource(ResourceType="Parameter", ResourceId=name, Tags=tags)
    return name


def read_manifest(
    stage: str,
    endpoint_name: str,
    *,
    ssm_client: Any = None,
    region: str | None = None,
    boto_session: Any = None,
) -> DeploymentManifest | None:
    """The stored manifest, or None when there is none. ManifestError when unreadable."""
    from botocore.exceptions import ClientError

    name = manifest_parameter_name(stage, endpoint_name)
    ssm = _ssm(ssm_client, region, boto_session)
    try:
        value = ssm.get_parameter(Name=name, WithDecryption=True)["Parameter"]["Value"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ParameterNotFound":
            return None
        raise
    return parse_manifest(value, source=name)


def delete_manifest(parameter_name: str, *, ssm_client: Any) -> bool:
    """Delete one manifest parameter; False when it did not exist."""
    from botocore.exceptions import ClientError

    try:
        ssm_client.delete_parameter(Name=parameter_name)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ParameterNotFound":
            return False
        raise
    return True


def find_manifest_parameters(endpoint_name: str, *, ssm_client: Any) -> list[str]:
    """The manifest parameters of `endpoint_name` in any stage (normally zero or one)."""
    names: list[str] = []
    kwargs: dict[str, Any] = {"Path": PARAMETER_ROOT, "Recursive": True}
    while True:
        page = ssm_client.get_parameters_by_path(**kwargs)
        for parameter in page.get("Parameters", []):
            name = str(parameter["Name"])
            stage, _, rest = name.removeprefix(PARAMETER_ROOT + "/").partition("/")
            if stage and rest == f"{endpoint_name}/manifest":
                names.append(name)
        token = page.get("NextToken")
        if not token:
            return sorted(names)
        kwargs["NextToken"] = token


def parse_manifest(value: str, *, source: str = "manifest") -> DeploymentManifest:
    """Validate a manifest document; ManifestError names what is wrong."""
    from peagle_deploy.documents import DocumentError, parse_document

    try:  # the strict reader: a tampered parameter gets no deeper than a spec file does
        doc = parse_document(value, source, "its value", "json")
    except DocumentError as exc:
        raise ManifestError(f"{source} is not JSON peagle-deploy reads: {exc.problem}") from None
    if not isinstance(doc, dict):
        raise ManifestError(f"{source} is not a JSON object")
    version = doc.get("schema_version")
    if version != MANIFEST_SCHEMA_VERSION:
        raise ManifestError(
            f"{source} has schema_version {version!r}; this peagle-deploy reads "
            f"{MANIFEST_SCHEMA_VERSION}"
        )
    try:
        return DeploymentManifest.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise ManifestError(f"{source} is invalid at {where or '(root)'}: {first['msg']}") from None
