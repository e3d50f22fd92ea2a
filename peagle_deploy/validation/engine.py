"""The serving image's engine against what the plan renders, the region and the host AMI.

The image is the spec's (or JumpStart's), else the first default image published in the
region whose engine accepts the deployment (catalog.engines.choose_default_image). What
the engine accepts comes from the capability table of the vLLM it carries; an engine the
plan cannot identify gets warnings instead of refusals, except where no recorded vLLM
accepts the request at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from peagle_serve.contract import K_SCHEDULE_FIELD, ONE_K_ALLOWED, one_k_reason

from peagle_deploy.catalog.engines import (
    CUDA13_AMI,
    DEFAULT_IMAGE_TAGS,
    Engine,
    EngineNeeds,
    capability_table,
    choose_default_image,
    default_images,
    engine_problems,
    identify,
)
from peagle_deploy.catalog.images import parse_image_uri, regions_with, registries
from peagle_deploy.errors import InputError
from peagle_deploy.findings import PlanWarning
from peagle_deploy.spec.models import DeploymentSpec


@dataclass(frozen=True)
class EngineChoice:
    """The image a plan runs and what it knows of the image's engine."""

    image_uri: str
    engine: Engine
    warnings: list[PlanWarning]


def choose_engine(
    spec: DeploymentSpec,
    *,
    image_uri: str | None,
    image_field: str,
    region: str,
    needs: EngineNeeds,
) -> EngineChoice:
    """The image to run (given or default) and its engine; InputError when it cannot work."""
    if image_uri is None:
        return _default(spec, region, needs)
    engine = identify(image_uri, spec.vllm_version)
    _check_published(engine, image_field, region)
    return EngineChoice(image_uri, engine, _check_engine(engine, needs, image_field))


def _default(spec: DeploymentSpec, region: str, needs: EngineNeeds) -> EngineChoice:
    if not default_images(region):
        raise InputError(
            "region",
            f"none of AWS's vLLM images peagle-deploy defaults to is published in {region}",
            regions_with(list(DEFAULT_IMAGE_TAGS)),
        )
    record, problems = choose_default_image(region, needs)
    if record is None:
        first = problems[0]
        raise InputError(
            first.field,
            f"no default image in {region} can serve this: {first.problem}",
            first.allowed,
        )
    image_uri = record.uri(region)
    engine = identify(image_uri, spec.vllm_version)
    return EngineChoice(image_uri, engine, _check_engine(engine, needs, "image_uri"))


def _check_published(engine: Engine, image_field: str, region: str) -> None:
    """An AWS image must exist in the region, in that region's registry."""
    record = engine.record
    parsed = parse_image_uri(engine.image_uri)
    if record is None or parsed is None:
        return
    if region not in record.regions:
        raise InputError(
            image_field,
            f"vllm:{record.tag} is not published in {region}",
            f"a region where it is: {', '.join(sorted(record.regions))}",
        )
    registry = registries().get(region)
    dlc_accounts = {r.account for r in registries().values()}
    if (
        registry is not None
        and parsed.account in dlc_accounts
        and parsed.account != registry.account
    ):
        raise InputError(
            image_field,
            f"{region}'s Deep Learning Containers registry is {registry.account}, "
            f"not {parsed.account}",
            record.uri(region),
        )


def _check_engine(engine: Engine, needs: EngineNeeds, image_field: str) -> list[PlanWarning]:
    caps = engine.capabilities
    config = needs.speculative_config or {}
    if caps is None:
        if config.get("parallel_drafting") and config.get(K_SCHEDULE_FIELD):
            raise InputError(
                f"speculative.{K_SCHEDULE_FIELD}",
                one_k_reason(engine.describe(), known=False),
                ONE_K_ALLOWED,
            )
        recorded = ", ".join(sorted(capability_table()))
        what = (
            f"vLLM {engine.vllm} is not in the capability table (recorded: {recorded})"
            if engine.vllm
            else f"the vLLM inside {engine.image_uri} is unknown; set vllm_version "
            f"(recorded: {recorded})"
        )
        return [
            PlanWarning(
                "vllm_version",
                f"{image_field}: {what}, so the engine checks (parallel drafting, speculative "
                "config fields, model architecture) are skipped",
            )
        ]
    problems = engine_problems(caps, needs)
    if problems:
        first = problems[0]
        field = image_field if first.field == "image_uri" else first.field
        raise InputError(field, f"{first.problem} ({engine.describe()})", first.allowed)
    return []


def choose_ami(spec: DeploymentSpec, engine: Engine) -> tuple[str | None, list[PlanWarning]]:
    """InferenceAmiVersion: the spec's, else the CUDA 13 AMI for a CUDA 13 image.

    CUDA 13 images need NVIDIA driver 580+; botocore's InferenceAmiVersion documentation
    gives `al2023-ami-sagemaker-inference-gpu-4-1` as driver 580 / CUDA 13.0.
    """
    if spec.inference_ami_version is not None:
        if engine.cuda13 and spec.inference_ami_version != CUDA13_AMI:
            return spec.inference_ami_version, [
                PlanWarning(
                    "inference_ami_version",
                    f"inference_ami_version={spec.inference_ami_version} with a CUDA "
                    f"{engine.cuda} image ({engine.describe()}): CUDA 13 needs NVIDIA driver "
                    f"580+ ({CUDA13_AMI})",
                )
            ]
        return spec.inference_ami_version, []
    return (CUDA13_AMI if engine.cuda13 else None), []
