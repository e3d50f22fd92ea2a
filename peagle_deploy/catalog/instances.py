"""SageMaker GPU instance types that can host the launch models (FACTS.md 4)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from peagle_deploy.catalog.sourced import Sourced, unverified, verified

_GPU_TABLE = "FACTS.md 4 (instance table)"
_NO_EBS = "FACTS.md 4 (VolumeSizeInGB not allowed on g5/g6/g6e/g7e/p5/p6-b200)"


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
        """Names of the values not confirmed by FACTS.md."""
        fields = ("gpu_count", "gpu_memory_gb", "ebs_volume", "host_memory_gib")
        return [f for f in fields if not getattr(self, f).verified]


def _g7e(size: str, gpus: int, host_gib: int) -> InstanceType:
    return InstanceType(
        name=f"ml.g7e.{size}",
        gpu_count=verified(gpus, _GPU_TABLE),
        gpu_memory_gb=verified(96.0, _GPU_TABLE),
        gpu_model="RTX PRO 6000 Blackwell",
        ebs_volume=verified(False, _NO_EBS),
        host_memory_gib=verified(host_gib, "FACTS.md 4 (g7e host memory)"),
    )


def _g6e(size: str, gpus: int) -> InstanceType:
    return InstanceType(
        name=f"ml.g6e.{size}",
        gpu_count=verified(gpus, _GPU_TABLE),
        gpu_memory_gb=verified(48.0, _GPU_TABLE),
        gpu_model="L40S",
        ebs_volume=verified(False, _NO_EBS),
        host_memory_gib=unverified(None, "not recorded"),
    )


def _p(name: str, gpu_mem: Sourced[float], model: str, ebs: Sourced[bool]) -> InstanceType:
    return InstanceType(
        name=name,
        gpu_count=verified(8, _GPU_TABLE),
        gpu_memory_gb=gpu_mem,
        gpu_model=model,
        ebs_volume=ebs,
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
        unverified(180.0, "FACTS.md 4 says 'about 180 GB' (B200)"),
        "B200",
        verified(False, _NO_EBS),
    ),
    _p("ml.p5.48xlarge", verified(80.0, _GPU_TABLE), "H100", verified(False, _NO_EBS)),
    _p(
        "ml.p5e.48xlarge",
        verified(141.0, _GPU_TABLE),
        "H200",
        unverified(False, "assumed like p5 (local NVMe only); not in FACTS.md"),
    ),
    _p(
        "ml.p5en.48xlarge",
        verified(141.0, _GPU_TABLE),
        "H200",
        unverified(False, "assumed like p5 (local NVMe only); not in FACTS.md"),
    ),
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
