"""The engine model: which vLLM an image carries and what that vLLM accepts.

Capabilities come from catalog/data/engines.json (read from the vLLM wheels on PyPI by
scripts/platform_facts.py). A plan knows its engine from the image tag (AWS's `vllm`
images), from the project's own image (repository `peagle-vllm`, the Dockerfile's
declared vLLM), or from the spec's `vllm_version`; otherwise the engine is unknown and
the engine checks become warnings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from peagle_serve.contract import K_SCHEDULE_FIELD, ONE_K_ALLOWED, one_k_reason

from peagle_deploy.catalog.facts import cite, load
from peagle_deploy.catalog.images import (
    OWN_IMAGE_REPOSITORY,
    VLLM_REPOSITORY,
    ImageRecord,
    images,
    own_image,
    parse_image_uri,
    regions_with,
)
from peagle_deploy.errors import InputError

CUDA13_AMI = "al2023-ami-sagemaker-inference-gpu-4-1"
"""botocore's ProductionVariantInferenceAmiVersion for NVIDIA driver 580 / CUDA 13.0."""

DEFAULT_IMAGE_TAGS = (
    "0.18.0-gpu-py312-cu129-ubuntu22.04-sagemaker",
    "0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker",
    "0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker",
)
"""Default images in order of preference: the tag JumpStart's gpt-oss-20b P-EAGLE config
runs, then the vLLM the project's contract tests run, then the widest-published one."""


@dataclass(frozen=True)
class Capabilities:
    """What one vLLM release accepts (engines.json)."""

    vllm: str
    speculative_fields: frozenset[str]
    speculative_methods: frozenset[str]
    parallel_drafting: bool
    k_schedule: bool
    k_schedule_with_parallel_drafting: bool
    mask_token_keys: tuple[str, ...]
    architectures: frozenset[str]
    source: str
    logged_args_redacted: frozenset[str] = frozenset()
    """Arguments `vllm serve` masks in its start-up `non-default args` log line."""


@cache
def capability_table() -> dict[str, Capabilities]:
    """Every recorded vLLM release, by version."""
    return {
        version: Capabilities(
            vllm=version,
            speculative_fields=frozenset(e["speculative_fields"]),
            speculative_methods=frozenset(e["speculative_methods"]),
            parallel_drafting=e["parallel_drafting"],
            k_schedule=e["k_schedule"],
            k_schedule_with_parallel_drafting=e["k_schedule_with_parallel_drafting"],
            mask_token_keys=tuple(e["mask_token_keys"]),
            architectures=frozenset(e["architectures"]),
            source=cite(e["source"]),
            logged_args_redacted=frozenset(e["logged_args_redacted"]),
        )
        for version, e in load("engines.json")["engines"].items()
    }


def sensitive_logged_args() -> frozenset[str]:
    """The arguments some recorded vLLM masks in its start-up log: what vLLM itself
    treats as secret (api_key, hf_token, ...)."""
    return frozenset().union(*(c.logged_args_redacted for c in capability_table().values()))


def capabilities_for(vllm: str | None) -> Capabilities | None:
    """The capabilities of a vLLM version; a source build (`X+amzn2023.<commit>`) uses
    release X's. None when the release is not recorded."""
    if not vllm:
        return None
    return capability_table().get(vllm.split("+", 1)[0])


@dataclass(frozen=True)
class Engine:
    """The engine a plan's image runs, as far as the plan can know it."""

    image_uri: str
    vllm: str | None
    cuda: str | None
    known_by: str
    """How the plan knows (the AWS tag, the project's image, the spec, or `unknown`)."""
    record: ImageRecord | None = None

    @property
    def capabilities(self) -> Capabilities | None:
        return capabilities_for(self.vllm)

    @property
    def cuda13(self) -> bool:
        return self.cuda is not None and int(self.cuda.split(".")[0]) >= 13

    def describe(self) -> str:
        what = f"vLLM {self.vllm}" if self.vllm else "an unknown vLLM"
        return f"{what} ({self.known_by})"


def identify(image_uri: str, stated_vllm: str | None = None) -> Engine:
    """The engine of `image_uri`; `stated_vllm` (the spec's vllm_version) wins."""
    parsed = parse_image_uri(image_uri)
    record = None
    if parsed is not None and parsed.repository == VLLM_REPOSITORY and parsed.tag:
        record = images().get(parsed.tag)
    if stated_vllm:
        return Engine(
            image_uri, stated_vllm, record.cuda if record else None, "vllm_version in the spec"
        )
    if record is not None:
        how = f"AWS image tag {record.tag}"
        return Engine(image_uri, record.vllm, record.cuda, how, record)
    if parsed is not None and parsed.repository.split("/")[-1] == OWN_IMAGE_REPOSITORY:
        own = own_image()
        base = images().get(own["base_tag"])
        how = f"the project's image, FROM vllm:{own['base_tag']} (Dockerfile)"
        return Engine(image_uri, own["vllm"], base.cuda if base else None, how)
    return Engine(image_uri, None, None, "unknown")


@dataclass(frozen=True)
class EngineNeeds:
    """What the rendered deployment asks of its engine."""

    speculative_config: Mapping[str, Any] | None
    architecture: str | None = None
    mask_token_key: str | None = None


@dataclass(frozen=True)
class EngineProblem:
    """One thing the engine would refuse: the spec field to blame, why, what is allowed."""

    field: str
    problem: str
    allowed: str
    rule: str = ""
    """Which rule (the same for every engine): lets a caller compare refusals."""


def _tags_where(predicate: Any) -> str:
    tags = [
        t
        for t, r in sorted(images().items())
        if (caps := capabilities_for(r.vllm)) is not None and predicate(caps)
    ]
    return "images " + ", ".join(tags) if tags else "no recorded image"


def engine_problems(caps: Capabilities, needs: EngineNeeds) -> list[EngineProblem]:
    """Everything in `needs` the engine `caps` does not accept, most specific first."""
    out: list[EngineProblem] = []
    config = dict(needs.speculative_config or {})
    where = f"vLLM {caps.vllm}"
    if needs.architecture and needs.architecture not in caps.architectures:
        arch = needs.architecture
        out.append(
            EngineProblem(
                "image_uri",
                f"{where} does not register the model's architecture {arch}",
                _tags_where(lambda c: arch in c.architectures),
                "architecture",
            )
        )
    if config.get("parallel_drafting") and not caps.parallel_drafting:
        out.append(
            EngineProblem(
                "speculative.mode",
                f"p-eagle needs parallel drafting, which {where} does not have",
                "eagle3 or none on this image, or " + _tags_where(lambda c: c.parallel_drafting),
                "parallel_drafting",
            )
        )
    method = config.get("method")
    if method and method not in caps.speculative_methods:
        out.append(
            EngineProblem(
                "speculative.mode",
                f"{where} has no speculative method {method!r}",
                "none",
                "method",
            )
        )
    for key in sorted(set(config) - caps.speculative_fields):
        name = f"speculative.{key}" if key == K_SCHEDULE_FIELD else "speculative"
        out.append(
            EngineProblem(
                name,
                f"{where}'s SpeculativeConfig has no field {key!r} and refuses unknown fields",
                f"leave {key} unset on this image, or "
                + _tags_where(lambda c, k=key: k in c.speculative_fields),
                f"field:{key}",
            )
        )
    if (
        config.get("parallel_drafting")
        and config.get(K_SCHEDULE_FIELD)
        and caps.k_schedule
        and not caps.k_schedule_with_parallel_drafting
    ):
        out.append(
            EngineProblem(
                f"speculative.{K_SCHEDULE_FIELD}",
                one_k_reason(where),
                ONE_K_ALLOWED,
                "k_schedule_with_parallel_drafting",
            )
        )
    mask_key = needs.mask_token_key
    if config.get("parallel_drafting") and mask_key and mask_key not in caps.mask_token_keys:
        out.append(
            EngineProblem(
                "image_uri",
                f"the drafter keeps its mask token in {mask_key!r}, which {where} does not read "
                f"(it reads {', '.join(caps.mask_token_keys)})",
                _tags_where(lambda c: mask_key in c.mask_token_keys),
                "mask_token_key",
            )
        )
    return out


def default_images(region: str) -> list[ImageRecord]:
    """The default images published in `region`, in order of preference."""
    known = images()
    return [known[t] for t in DEFAULT_IMAGE_TAGS if t in known and region in known[t].regions]


def choose_default_image(
    region: str, needs: EngineNeeds
) -> tuple[ImageRecord | None, list[EngineProblem]]:
    """The first default image in `region` whose engine accepts `needs`.

    Returns (image, []) on success, (None, problems of the first candidate) when no
    candidate accepts, (None, []) when no default image is published in the region.
    """
    candidates = default_images(region)
    refusals: list[EngineProblem] = []
    for record in candidates:
        caps = capabilities_for(record.vllm)
        if caps is None:
            continue
        problems = engine_problems(caps, needs)
        if not problems:
            return record, []
        refusals.append(problems[0])
    # the reason most candidates give is the one that matters (an older image may also
    # lack a field, but that is not what stops the newer ones)
    ranked = sorted(refusals, key=lambda p: -sum(r.rule == p.rule for r in refusals))
    return None, ranked[:1]


def default_image(region: str, needs: EngineNeeds) -> tuple[ImageRecord, InputError | None]:
    """The default image a deployment runs in `region`, and None; or, when no default
    image can serve it, the most preferred one and the refusal that says why.

    InputError when no default image is published in `region` at all.
    """
    candidates = default_images(region)
    if not candidates:
        raise InputError(
            "region",
            f"none of AWS's vLLM images peagle-deploy defaults to is published in {region}",
            regions_with(list(DEFAULT_IMAGE_TAGS)),
        )
    record, problems = choose_default_image(region, needs)
    if record is not None:
        return record, None
    first = problems[0]
    refusal = InputError(
        first.field, f"no default image in {region} can serve this: {first.problem}", first.allowed
    )
    return candidates[0], refusal
