"""What the target of a promotion becomes: its name and the settings that stay the stage's.

A promotion carries the measured configuration from the source; the target keeps what
belongs to its stage (STAGE_OWNED_FIELDS), read from the first place that has them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from peagle_deploy.errors import InputError
from peagle_deploy.secret_refs import SECRETS_FIELD

if TYPE_CHECKING:
    from peagle_deploy.records import DeploymentManifest
    from peagle_deploy.spec.models import DeploymentSpec

STAGE_OWNED_FIELDS: tuple[str, ...] = (
    "initial_instance_count",
    "scaling",
    "rollout",
    "execution_role_arn",
    "vpc",
    "kms_key_id",
    "tags",
    "secrets",
)
"""Spec fields that belong to a stage, not to the configuration being promoted.

A promotion carries what was measured - model, image, drafter, speculative settings, K,
instance type, tensor parallelism, limits, container env - and keeps the target's own
capacity, rollout policy, identity, network, encryption and secrets: promoting dev's
one-instance, all-at-once spec must not shrink prod to one instance or drop its canary
and alarms, nor point prod's model at dev's secrets (`target_secrets`).
"""


@dataclass(frozen=True)
class StageSettings:
    """The target stage's own settings (STAGE_OWNED_FIELDS) and where they came from."""

    values: dict[str, Any]
    origin: str | None
    """Where they were read, for the change list; None: nowhere (copied from the source)."""


def _stage_owned(spec: DeploymentSpec, *, keep_unset_role: bool) -> dict[str, Any]:
    doc = spec.model_dump(mode="json")
    values = {k: doc[k] for k in STAGE_OWNED_FIELDS if k in doc}
    if keep_unset_role and values.get("execution_role_arn") is None:
        values.pop("execution_role_arn", None)  # a stage file without a role: the source's
    return values


def _load_stage_file(path: Path, flag: str) -> DeploymentSpec:
    """The stage file as a spec; every error names `flag`."""
    from peagle_deploy.documents import DocumentError
    from peagle_deploy.spec import load_spec

    try:
        return load_spec(path, file_field=flag)
    except DocumentError:
        raise  # already names the flag
    except InputError as exc:
        raise InputError(
            flag, f"the stage settings in {path} cannot be read ({exc})", "a stage spec file"
        ) from None


STAGES_DIR = Path("stages")
"""Where a repository keeps its stage files (`stages/<stage>.yaml`, as cdk.json names them)."""


def stage_file_for(stage: str, given: Path | None = None) -> Path | None:
    """The target stage's spec file: `given`, else `stages/<stage>.yaml` when it exists.

    The one rule `peagle promote` and `peagle demo` both use, so that the two read the
    same file and report the same stage settings.
    """
    if given is not None:
        return given
    candidate = STAGES_DIR / f"{stage}.yaml"
    return candidate if candidate.is_file() else None


def check_stage_files(*, write_spec: Path | None, stage_file: Path | None) -> None:
    """Read the stage files `target_stage_settings` may read, before any AWS call: a
    broken file must stop the promotion in a second, not after the source checks."""
    if write_spec is not None and Path(write_spec).is_file():
        _load_stage_file(Path(write_spec), "--write-spec")
    if stage_file is not None:
        _load_stage_file(Path(stage_file), "--stage-file")


def target_stage_settings(
    *, write_spec: Path | None, manifest: DeploymentManifest | None, stage_file: Path | None
) -> StageSettings:
    """The target stage's own settings, from the first place that has them.

    1. `--write-spec` (CDK users): the stage file about to be overwritten, which is what
       `cdk deploy` applies.
    2. The target's manifest: what the target serves now.
    3. The target stage's spec file (`stage_file`; the CLI's default is
       `stages/<target>.yaml`): what the stage is declared to be, before anything was
       deployed to it. A file without `execution_role_arn` keeps the source's role.
    Otherwise nothing: the source's settings are copied, and the change list says so.
    """
    if write_spec is not None and Path(write_spec).is_file():
        spec = _load_stage_file(Path(write_spec), "--write-spec")
        return StageSettings(_stage_owned(spec, keep_unset_role=False), str(write_spec))
    if manifest is not None:
        origin = f"{manifest.stage}/{manifest.endpoint_name} (its manifest)"
        return StageSettings(_stage_owned(manifest.spec, keep_unset_role=False), origin)
    if stage_file is not None:
        spec = _load_stage_file(Path(stage_file), "--stage-file")
        return StageSettings(_stage_owned(spec, keep_unset_role=True), str(stage_file))
    return StageSettings({}, None)


def target_secrets(
    source: DeploymentSpec,
    settings: StageSettings,
    rebound: Mapping[str, str],
    stages: tuple[str, str],
) -> dict[str, str]:
    """The target's `secrets`: its own, never the source stage's.

    The target stage's settings bind them (its stage file or manifest, as every
    stage-owned field); `rebound` (`peagle promote --secret NAME=ARN`) binds some
    explicitly and wins. Every variable the promoted configuration reads by reference
    must be bound so; a promotion that would carry the source's binding is refused.
    """
    source_stage, target_stage = stages
    own = dict(settings.values.get("secrets") or {}) if settings.origin else {}
    own.update(rebound)
    unbound = sorted(set(source.secrets) - set(own))
    if unbound:
        name = unbound[0]
        where = settings.origin or (
            f"no {target_stage} configuration: no manifest, no --stage-file, no "
            f"{STAGES_DIR / (target_stage + '.yaml')}"
        )
        raise InputError(
            f"{SECRETS_FIELD}.{name}",
            f"{source_stage} binds {name} to its secret {source.secrets[name]}, which a "
            f"promotion does not carry into {target_stage}; {target_stage} binds none ({where})",
            f"{target_stage}'s own: --secret {name}=<ARN>, or {SECRETS_FIELD}: {{{name}: <ARN>}} "
            f"in {target_stage}'s stage file",
        )
    return own


def derive_target_endpoint_name(
    source_endpoint: str, source_spec_endpoint: str | None, source_stage: str, target_stage: str
) -> str | None:
    """The target's endpoint name, or None to let the plan use its default.

    The default (`peagle-<model>-<stage>`) already contains the stage; an explicit name
    is carried over by swapping a trailing `-<source stage>`. Anything else is ambiguous
    and must be given with `--target-name`, because guessing could point the promotion
    at an unrelated endpoint.
    """
    if source_spec_endpoint is None:
        return None
    suffix = f"-{source_stage}"
    if source_spec_endpoint.endswith(suffix):
        return source_spec_endpoint[: -len(suffix)] + f"-{target_stage}"
    raise InputError(
        "--target-name",
        f"cannot derive the {target_stage} endpoint name from {source_endpoint!r} "
        f"(it does not end with {suffix!r})",
        "an explicit --target-name",
    )


def target_endpoint_name(spec: DeploymentSpec) -> str:
    """The endpoint `build_plan(spec)` will name, without building the plan.

    Needed before the plan: the target's manifest, found by this name, supplies the
    stage settings the plan is built with.
    """
    from peagle_deploy.plan.resolve import endpoint_name_for

    return endpoint_name_for(spec)
