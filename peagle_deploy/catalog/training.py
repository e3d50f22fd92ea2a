"""GPU instance types a P-EAGLE training job may run on (docs/platform-facts.md,
"Training jobs: the request").

A training job's instance type must be one of botocore's `TrainingInstanceType` values
(a different list from hosting's); the planner takes only those with NVIDIA GPUs of the
Ampere generation or later (bfloat16, which speculators' trainer and vLLM use) and with a
recorded GPU count and memory. The counts and memory come from sagemaker-core's own table
(`instance_gpu_info.json`) where it has the type, else from the hosting catalog
(`catalog.instances`), whose markers say what is unverified.

No price is recorded: no public source of SageMaker training prices is read by this
project, so a training plan's cost stays in instance-hours (`usd` None).
"""

from __future__ import annotations

from dataclasses import dataclass

from peagle_deploy.catalog.instances import INSTANCE_TYPES, attaches_ebs
from peagle_deploy.catalog.sourced import Sourced, verified

BOTOCORE_TRAINING_TYPES = (
    "botocore 1.44.8 data/sagemaker/2017-07-24/service-2.json TrainingInstanceType"
)
SAGEMAKER_GPU_TABLE = (
    "PyPI sagemaker-core==2.27.0 (sagemaker_core-2.27.0-py3-none-any.whl) "
    "sagemaker/core/image_uri_config/instance_gpu_info.json (sha256 "
    "ddb738d2fc3bf9eabf3c1e511ba85796b67055e30e3cec544eb6d439a7530736; the same in every region)"
)

GPU_TABLE: dict[str, tuple[int, int, str]] = {
    "ml.g5.2xlarge": (1, 24576, "A10G"),
    "ml.g5.4xlarge": (1, 24576, "A10G"),
    "ml.g5.8xlarge": (1, 24576, "A10G"),
    "ml.g5.16xlarge": (1, 24576, "A10G"),
    "ml.g5.12xlarge": (4, 98304, "A10G"),
    "ml.g5.24xlarge": (4, 98304, "A10G"),
    "ml.g5.48xlarge": (8, 183104, "A10G"),
    "ml.p4d.24xlarge": (8, 327680, "A100 40GB"),
    "ml.p4de.24xlarge": (8, 655360, "A100 80GB"),
    "ml.p5.48xlarge": (8, 655360, "H100"),
}
"""Name -> (GPU count, total GPU memory in MiB, GPU model) as sagemaker-core's table has
them (`Count`, `TotalGpuMemoryInMiB`); the GPU model is the family's (not in the table)."""

FROM_HOSTING_CATALOG = (
    *(f"ml.g7e.{s}" for s in ("2xlarge", "4xlarge", "8xlarge", "12xlarge", "24xlarge", "48xlarge")),
    *(f"ml.g6e.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")),
    *(f"ml.g6e.{s}" for s in ("12xlarge", "24xlarge", "48xlarge")),
    "ml.p5e.48xlarge",
    "ml.p5en.48xlarge",
    "ml.p6-b200.48xlarge",
)
"""Training types sagemaker-core's table lacks, whose GPUs the hosting catalog records
(each also in botocore's TrainingInstanceType)."""


@dataclass(frozen=True)
class TrainingInstance:
    """One GPU type a training job can use."""

    name: str
    gpu_count: Sourced[int]
    gpu_memory_gb: Sourced[float]
    gpu_model: str
    ebs_volume: Sourced[bool]
    """Whether SageMaker attaches an EBS volume (VolumeSizeInGB, VolumeKmsKeyId apply);
    families with local NVMe storage get fixed, hardware-encrypted instance storage and
    refuse VolumeKmsKeyId (botocore, ResourceConfig.VolumeKmsKeyId)."""

    @property
    def family(self) -> str:
        return self.name.split(".")[1]

    def unverified_fields(self) -> list[str]:
        fields = ("gpu_count", "gpu_memory_gb", "ebs_volume")
        return [f for f in fields if not getattr(self, f).verified]


def _from_table(name: str) -> TrainingInstance:
    count, mib, model = GPU_TABLE[name]
    return TrainingInstance(
        name=name,
        gpu_count=verified(count, SAGEMAKER_GPU_TABLE),
        gpu_memory_gb=verified(round(mib / count / 1024, 1), SAGEMAKER_GPU_TABLE),
        gpu_model=model,
        ebs_volume=attaches_ebs(name.split(".")[1]),
    )


def _from_hosting(name: str) -> TrainingInstance:
    host = INSTANCE_TYPES[name]
    return TrainingInstance(
        name=name,
        gpu_count=host.gpu_count,
        gpu_memory_gb=host.gpu_memory_gb,
        gpu_model=host.gpu_model,
        ebs_volume=host.ebs_volume,
    )


TRAINING_INSTANCE_TYPES: dict[str, TrainingInstance] = {
    **{name: _from_table(name) for name in GPU_TABLE},
    **{name: _from_hosting(name) for name in FROM_HOSTING_CATALOG},
}
"""Every GPU type the training planner accepts, by SageMaker name."""


def training_instance(name: str) -> TrainingInstance | None:
    """The catalog entry for a training job's instance type, or None when unknown."""
    return TRAINING_INSTANCE_TYPES.get(name)
