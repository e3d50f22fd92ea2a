"""SageMaker GPU instance types that can host the launch models (docs/platform-facts.md).

Whether a family attaches an EBS volume (and so takes VolumeSizeInGB) follows the
sagemaker SDK's own rule, recorded in catalog/data/instances.json.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from peagle_deploy.catalog.facts import cite, load
from peagle_deploy.catalog.sourced import Sourced, unverified, verified

_G7E = (
    "AWS News Blog, 'Announcing Amazon EC2 G7e instances' (2026-01-20); per-size GPUs, "
    "96 GB GDDR7 each and host memory: tsaol/aws-gpu data/g7e_instances.js "
    "(instances.vantage.sh data, 2026-01-21)"
)
_GPU_TABLE = "EC2 instance type specifications (GPU count, GPU model and memory per GPU)"


def attaches_ebs(family: str) -> Sourced[bool]:
    """Whether SageMaker attaches an EBS volume to this family (VolumeSizeInGB allowed).

    The sagemaker SDK's `volume_size_supported`: no family with a `d` in its name, and
    none of the listed family prefixes (g5, g6, g7e, p5, p6-b200, trn1, trn2).
    """
    facts = load("instances.json")
    no_ebs = ("d" in family and facts["families_with_d_have_no_ebs"]) or any(
        family.startswith(prefix) for prefix in facts["families_without_ebs"]
    )
    return verified(not no_ebs, cite(facts["source"]))


@dataclass(frozen=True)
class InstanceType:
    """One SageMaker hosting instance type.

    `ebs_volume` says whether the family accepts `VolumeSizeInGB`: families with local
    NVMe storage only (g6e, g7e, p5, p6-b200, ...) reject the field.
    """

    name: str
    gpu_count: Sourced[int]
    gpu_memory_gb: Sourced[float]
    gpu_model: str
    ebs_volume: Sourced[bool]
    host_memory_gib: Sourced[int | None]

    @property
    def family(self) -> str:
        """`ml.g7e.2xlarge` -> `g7e`."""
        return self.name.split(".")[1]

    @property
    def total_gpu_memory_gb(self) -> float:
        """Memory of all GPUs together, in GB."""
        return self.gpu_count.value * self.gpu_memory_gb.value

    def unverified_fields(self) -> list[str]:
        """Names of the values no recorded source confirms."""
        fields = ("gpu_count", "gpu_memory_gb", "ebs_volume", "host_memory_gib")
        return [f for f in fields if not getattr(self, f).verified]


def _g7e(size: str, gpus: int, host_gib: int) -> InstanceType:
    return InstanceType(
        name=f"ml.g7e.{size}",
        gpu_count=verified(gpus, _G7E),
        gpu_memory_gb=verified(96.0, _G7E),
        gpu_model="RTX PRO 6000 Blackwell",
        ebs_volume=attaches_ebs("g7e"),
        host_memory_gib=verified(host_gib, _G7E),
    )


def _g6e(size: str, gpus: int) -> InstanceType:
    return InstanceType(
        name=f"ml.g6e.{size}",
        gpu_count=unverified(gpus, _GPU_TABLE + "; not re-read for this release"),
        gpu_memory_gb=unverified(48.0, "L40S: 48 GB; not re-read for this release"),
        gpu_model="L40S",
        ebs_volume=attaches_ebs("g6e"),
        host_memory_gib=unverified(None, "not recorded"),
    )


def _p(name: str, gpu_mem: Sourced[float], model: str) -> InstanceType:
    return InstanceType(
        name=name,
        gpu_count=unverified(8, _GPU_TABLE + "; not re-read for this release"),
        gpu_memory_gb=gpu_mem,
        gpu_model=model,
        ebs_volume=attaches_ebs(name.split(".")[1]),
        host_memory_gib=unverified(None, "not recorded"),
    )


_ALL: tuple[InstanceType, ...] = (
    _g7e("2xlarge", 1, 64),
    _g7e("4xlarge", 1, 128),
    _g7e("8xlarge", 1, 256),
    _g7e("12xlarge", 2, 512),
    _g7e("24xlarge", 4, 1024),
    _g7e("48xlarge", 8, 2048),
    _p(
        "ml.p6-b200.48xlarge",
        unverified(
            180.0,
            "public readings differ (179 GiB, 183 GB in nvidia-smi, 192 GB nominal); "
            "the lowest is kept for the fit check",
        ),
        "B200",
    ),
    _p("ml.p5.48xlarge", unverified(80.0, "H100 SXM: 80 GB"), "H100"),
    _p("ml.p5e.48xlarge", unverified(141.0, "H200: 141 GB"), "H200"),
    _p("ml.p5en.48xlarge", unverified(141.0, "H200: 141 GB"), "H200"),
    _g6e("xlarge", 1),
    _g6e("2xlarge", 1),
    _g6e("4xlarge", 1),
    _g6e("8xlarge", 1),
    _g6e("16xlarge", 1),
    _g6e("12xlarge", 4),
    _g6e("24xlarge", 4),
    _g6e("48xlarge", 8),
)

INSTANCE_TYPES: dict[str, InstanceType] = {i.name: i for i in _ALL}
"""Every instance type the catalog knows, by SageMaker name."""

# Families that have no NVIDIA GPU at all: named so the error can say so.
_GPU_LESS_FAMILY = re.compile(r"^ml\.(?:[mcrtz]\d|inf\d|trn\d|x\d)")


def get_instance(name: str) -> InstanceType | None:
    """The catalog entry for `name`, or None when peagle-deploy does not know it."""
    return INSTANCE_TYPES.get(name)


def is_gpu_less(name: str) -> bool:
    """True for instance families known to have no NVIDIA GPU (CPU, Inferentia, Trainium)."""
    return bool(_GPU_LESS_FAMILY.match(name))
