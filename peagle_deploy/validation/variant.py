"""Production-variant fields botocore does not check against the instance."""

from __future__ import annotations

from peagle_deploy.deployment import Deployment
from peagle_deploy.errors import InputError
from peagle_deploy.findings import PlanWarning
from peagle_deploy.validation.aws_shapes import INFERENCE_AMI_VERSIONS
from peagle_deploy.validation.fit import known_instance


def check_variant(dep: Deployment) -> list[PlanWarning]:
    """VolumeSizeInGB, KmsKeyId, InferenceAmiVersion and scaling bounds.

    VolumeSizeInGB is refused where the family attaches no EBS volume (the sagemaker SDK's
    `volume_size_supported`, catalog.instances.attaches_ebs); KmsKeyId is accepted there
    but, per botocore's CreateEndpointConfig documentation, does not encrypt the
    instance's local storage (the SDK itself leaves it out for those families).
    """
    spec, instance = dep.spec, known_instance(dep)
    warnings: list[PlanWarning] = []
    if spec.volume_size_gb is not None and not instance.ebs_volume.value:
        raise InputError(
            "volume_size_gb",
            f"{instance.family} instances have local NVMe storage only and reject VolumeSizeInGB",
            "leave volume_size_gb unset for this instance type",
        )
    if spec.inference_ami_version is not None and (
        spec.inference_ami_version not in INFERENCE_AMI_VERSIONS
    ):
        raise InputError(
            "inference_ami_version",
            f"{spec.inference_ami_version!r} is not a GPU inference AMI",
            INFERENCE_AMI_VERSIONS,
        )
    if spec.kms_key_id is not None and not instance.ebs_volume.value:
        warnings.append(
            PlanWarning(
                "kms_key_id",
                f"kms_key_id does not encrypt {instance.family}'s local NVMe storage "
                "(it is encrypted by the instance's hardware module)",
            )
        )
    if spec.scaling is not None:
        sc = spec.scaling
        if sc.min_instances > sc.max_instances:
            raise InputError(
                "scaling.max_instances",
                f"{sc.max_instances} is below min_instances={sc.min_instances}",
                f">= {sc.min_instances}",
            )
        if not sc.min_instances <= spec.initial_instance_count <= sc.max_instances:
            raise InputError(
                "initial_instance_count",
                f"{spec.initial_instance_count} is outside the scaling bounds",
                f"{sc.min_instances}-{sc.max_instances}",
            )
    return warnings
