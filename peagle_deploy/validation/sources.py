"""Where the weights come from: unverified catalog locations, licenses, S3 locations."""

from __future__ import annotations

from peagle_deploy.deployment import Deployment
from peagle_deploy.errors import InputError
from peagle_deploy.findings import PlanWarning
from peagle_deploy.validation.aws_shapes import check_drafter_uri, check_model_data_uri


def check_unverified(dep: Deployment) -> list[PlanWarning]:
    """Warn about catalog locations no source confirms, where the spec kept them."""
    entry = dep.source.catalog
    if dep.source.kind != "catalog" or entry is None:
        return []
    notes = []
    if not entry.model_data_uri.verified and dep.origin("custom.model_data_uri") == "catalog":
        notes.append(
            PlanWarning(
                "custom.model_data_uri",
                f"model data for {entry.key} is an unverified default "
                f"({dep.model_data.uri}); set custom.model_data_uri to your copy "
                f"of {entry.hf_model_id.value}",
            )
        )
    drafter = dep.speculative.drafter
    if (
        drafter is not None
        and not entry.drafter_uri.verified
        and dep.origins.get(drafter.data.field) == "catalog"
    ):
        notes.append(
            PlanWarning(
                "custom.drafter_uri",
                f"drafter location for {entry.key} is an unverified default "
                f"({drafter.data.uri}); set custom.drafter_uri to be sure",
            )
        )
    return notes


def check_model_data(dep: Deployment) -> list[PlanWarning]:
    """A gated model needs its license accepted; the target weights need an S3 location
    (JumpStart's are taken as JumpStart gives them)."""
    if dep.gated and not dep.spec.accept_eula:
        raise InputError(
            "accept_eula",
            f"{dep.spec.model} is a gated model: its license must be accepted explicitly",
            "true (after reading the model's license)",
        )
    data = dep.model_data
    if dep.origin(data.field) != "jumpstart":
        check_model_data_uri(data.field, data.uri)
    return []


def check_drafter(dep: Deployment) -> list[PlanWarning]:
    """Speculative decoding needs a drafter, at an S3 prefix."""
    drafter = dep.speculative.drafter
    if drafter is not None and dep.origins.get(drafter.data.field) != "jumpstart":
        check_drafter_uri(drafter.data.field, drafter.data.uri)
    return []
