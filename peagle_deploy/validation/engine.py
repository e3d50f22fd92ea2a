"""The serving image's engine against what the plan renders, the region and the host AMI.

The image is the spec's (or JumpStart's), else the first default image published in the
region whose engine accepts the deployment (chosen by resolve, catalog.engines.default_image).
What the engine accepts comes from the capability table of the vLLM it carries; an
engine the plan cannot identify gets warnings instead of refusals, except where no
recorded vLLM accepts the request at all.
"""

from __future__ import annotations

from peagle_serve.contract import K_SCHEDULE_FIELD, ONE_K_ALLOWED, one_k_reason

from peagle_deploy.catalog.engines import (
    CUDA13_AMI,
    Engine,
    EngineNeeds,
    capability_table,
    engine_problems,
)
from peagle_deploy.catalog.images import parse_image_uri, registries
from peagle_deploy.deployment import Deployment, engine_needs
from peagle_deploy.errors import InputError
from peagle_deploy.findings import PlanWarning


def check_engine(dep: Deployment) -> list[PlanWarning]:
    """A given image must be published in the region (in that region's registry); the
    engine must accept what the deployment renders (for a default image, resolve chose
    one that does, but a stated `vllm_version` names another engine)."""
    if dep.unserved is not None:
        raise dep.unserved
    if dep.origin("image_uri") != "default":
        _check_published(dep.engine, dep.image_field, dep.region)
    return _check_engine(dep.engine, engine_needs(dep.speculative, dep.source), dep.image_field)


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


def check_ami(dep: Deployment) -> list[PlanWarning]:
    """A CUDA 13 image needs NVIDIA driver 580+: botocore's InferenceAmiVersion
    documentation gives `al2023-ami-sagemaker-inference-gpu-4-1` as driver 580 / CUDA
    13.0 (resolve picks it when the spec names no AMI)."""
    engine, ami = dep.engine, dep.inference_ami_version
    if dep.origins.get("inference_ami_version") != "spec" or not engine.cuda13:
        return []
    if ami == CUDA13_AMI:
        return []
    return [
        PlanWarning(
            "inference_ami_version",
            f"inference_ami_version={ami} with a CUDA {engine.cuda} image "
            f"({engine.describe()}): CUDA 13 needs NVIDIA driver 580+ ({CUDA13_AMI})",
        )
    ]
