"""AWS's vLLM SageMaker images: which tags exist, in which regions, with which vLLM and CUDA.

All from catalog/data/images.json (docs/platform-facts.md, "Images and regions"). An
image is pulled from the region's Deep Learning Containers registry, whose account and
domain differ by region (e.g. af-south-1 626614931356, China `amazonaws.com.cn`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from peagle_deploy.catalog.facts import load

VLLM_REPOSITORY = "vllm"
OWN_IMAGE_REPOSITORY = "peagle-vllm"
"""Repository name docs/container.md builds the project's own image (Dockerfile) into."""

ECR_IMAGE_RE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.(?P<domain>[a-z0-9.-]+)/"
    r"(?P<repository>[a-z0-9][a-z0-9._/\-]*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127})|@(?P<digest>sha256:[0-9a-f]{64}))$"
)


@dataclass(frozen=True)
class Registry:
    """The Deep Learning Containers registry of one region."""

    region: str
    account: str
    domain: str


@dataclass(frozen=True)
class ImageRecord:
    """One tag of AWS's `vllm` repository."""

    tag: str
    vllm: str | None
    """The vLLM version it carries (a release, or `X+amzn2023.<commit>` for source builds)."""
    cuda: str | None
    regions: frozenset[str]
    source: str

    def uri(self, region: str) -> str:
        """The image's URI in `region` (KeyError when it is not published there)."""
        registry = registries()[region]
        return f"{registry.account}.dkr.ecr.{region}.{registry.domain}/{VLLM_REPOSITORY}:{self.tag}"


@dataclass(frozen=True)
class ParsedImage:
    """The parts of an ECR image URI."""

    account: str
    region: str
    domain: str
    repository: str
    tag: str | None
    digest: str | None = None


@cache
def registries() -> dict[str, Registry]:
    """Every region any vLLM image is published in, with its registry."""
    return {
        region: Registry(region, entry["account"], entry["domain"])
        for region, entry in load("images.json")["regions"].items()
    }


@cache
def images() -> dict[str, ImageRecord]:
    """Every known tag of the `vllm` repository, by tag."""
    from peagle_deploy.catalog.facts import cite

    out = {}
    for entry in load("images.json")["images"]:
        source = cite(entry["source"])
        if entry.get("vllm_source"):
            source += f"; vLLM: {cite(entry['vllm_source'])}"
        out[entry["tag"]] = ImageRecord(
            tag=entry["tag"],
            vllm=entry["vllm"],
            cuda=entry["cuda"],
            regions=frozenset(entry["regions"]),
            source=source,
        )
    return out


def own_image() -> dict[str, str]:
    """The image the repository's Dockerfile builds: base tag and the vLLM it declares."""
    entry: dict[str, str] = load("images.json")["own_image"]
    return entry


def own_base_uri(region: str, field: str = "region") -> str:
    """The base of the project's image (the Dockerfile's `ai.peagle.base-tag`) in the Deep
    Learning Containers registry of `region`: its account and domain differ by region (29
    of the 45 registries are not 763104351884, China's domain is amazonaws.com.cn).
    InputError naming `field` where the tag is not published."""
    from peagle_deploy.errors import InputError

    tag = own_image()["base_tag"]
    record = images().get(tag)
    if record is None or region not in record.regions:
        published = sorted(record.regions) if record else []
        raise InputError(field, f"vllm:{tag} is not published in {region}", published)
    return record.uri(region)


def domains() -> frozenset[str]:
    """Every registry domain (amazonaws.com, amazonaws.com.cn, ...)."""
    return frozenset(r.domain for r in registries().values())


def parse_image_uri(image: str) -> ParsedImage | None:
    """The parts of an ECR image URI, or None when it is not one."""
    match = ECR_IMAGE_RE.fullmatch(image)  # `$` alone would let a trailing newline in
    if not match:
        return None
    return ParsedImage(
        account=match["account"],
        region=match["region"],
        domain=match["domain"],
        repository=match["repository"],
        tag=match["tag"],
        digest=match["digest"],
    )


def runs_peagle_serve(image: str) -> bool:
    """Whether the image is the project's own (repository `peagle-vllm`), whose
    `peagle-serve` entrypoint writes the metric lines experiments read."""
    parsed = parse_image_uri(image)
    return parsed is not None and parsed.repository.split("/")[-1] == OWN_IMAGE_REPOSITORY


def regions_with(tags: list[str]) -> list[str]:
    """Regions in which at least one of `tags` is published, sorted."""
    known = images()
    return sorted({r for t in tags if t in known for r in known[t].regions})
