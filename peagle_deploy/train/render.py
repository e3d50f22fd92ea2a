"""ResolvedTraining -> the exact `CreateTrainingJob` request, named by its content.

Pure functions of a checked job (nothing here fills a default or validates). The job is
named `<job prefix><name>-t<8 hex>`: the prefix is the stage's (`peagle-train-<stage>--`
unless the spec names the stage's own), which its roles are granted on; the digest is of
the request without its name, tags and checkpoint location (which contains the name).
SageMaker never reuses a training job name, so an unchanged spec names the job that
already ran (or runs) instead of a second one; a changed spec is a new job.

The channels, the checkpoint path and the hyperparameter names are the training image's
contract (peagle_train.contract), so what is sent is what the driver reads.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from peagle_train import contract

from peagle_deploy.naming import (
    DIGEST_LEN,
    MANAGED_TAG,
    MODEL_TAG,
    SPEC_HASH_TAG,
    STAGE_TAG,
)
from peagle_deploy.stage_training import default_job_prefix
from peagle_deploy.train.resolve import ResolvedTraining

MAX_JOB_NAME = 63
"""TrainingJobName: 1-63 characters (botocore 1.44.8)."""
RESUME_ROOM = len("-r99")
"""A resumed job is named `<job>-rN` (peagle_deploy.train.job): the digest survives it."""
TRAINING_INPUT_MODE = "File"
"""Channels are downloaded before the driver starts: vLLM loads the target from a local
folder and the data is read more than once (regeneration, then training)."""
JOB_KIND = "t"


def job_name(job: ResolvedTraining, body: dict[str, Any]) -> str:
    """`<stage's job prefix><name>-t<digest of the request body>` (at most 63 characters,
    with room for a resume's `-rNN`): the stage's roles are granted on its job prefix
    (peagle_deploy.stage_training), so the name starts with it whole."""
    prefix = job.spec.job_prefix or default_job_prefix(job.spec.stage)
    room = MAX_JOB_NAME - len(prefix) - len(f"-{JOB_KIND}") - DIGEST_LEN - RESUME_ROOM
    own = job.spec.name[: max(room, 1)].rstrip("-")
    return f"{prefix}{own}-{JOB_KIND}{_digest([prefix, job.spec.name, body])}"


def hyperparameters(job: ResolvedTraining) -> dict[str, str]:
    """HyperParameters: the contract's names, every value a string (SageMaker's type)."""
    spec = job.spec
    values: dict[str, object] = {
        contract.HP_NUM_DEPTHS: spec.num_depths,
        contract.HP_NUM_LAYERS: spec.num_layers,
        contract.HP_DRAFT_VOCAB: spec.draft_vocab_size,
        contract.HP_MAX_SEQ_LEN: spec.max_seq_len,
        contract.HP_EPOCHS: spec.epochs,
        contract.HP_LEARNING_RATE: spec.learning_rate,
        contract.HP_MAX_SAMPLES: spec.max_samples,
        contract.HP_REGENERATE: spec.regenerate,
        contract.HP_SERVING_FORMAT: job.serving_format,
        contract.HP_ACCEPTANCE_FLOOR: spec.acceptance_floor,
        contract.HP_HELD_OUT: spec.held_out_prompts,
        contract.HP_SEED: spec.seed,
        contract.HP_DATA_FORMAT: spec.data.format,
        contract.HP_MASK_TOKEN_ID: spec.target.mask_token_id,
    }
    return {key: _text(value) for key, value in values.items() if value is not None}


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)  # exact: 0.0001, 3e-05 (float() reads both)
    return str(value)


def channel(name: str, uri: str) -> dict[str, Any]:
    """One S3 prefix channel, every instance a full copy."""
    return {
        "ChannelName": name,
        "DataSource": {
            "S3DataSource": {
                "S3DataType": "S3Prefix",
                "S3Uri": uri,
                "S3DataDistributionType": "FullyReplicated",
            }
        },
        "InputMode": TRAINING_INPUT_MODE,
    }


def request_body(job: ResolvedTraining) -> dict[str, Any]:
    """CreateTrainingJob without its name, tags and checkpoint location."""
    spec = job.spec
    output: dict[str, Any] = {"S3OutputPath": output_path(job), "CompressionType": "NONE"}
    if spec.kms_key_arn is not None:
        output["KmsKeyId"] = spec.kms_key_arn
    resources: dict[str, Any] = {
        "InstanceType": spec.instance_type,
        "InstanceCount": spec.instance_count,
    }
    if job.volume_size_gb is not None:
        resources["VolumeSizeInGB"] = job.volume_size_gb
    if job.volume_kms_key is not None:
        resources["VolumeKmsKeyId"] = job.volume_kms_key
    stopping: dict[str, Any] = {"MaxRuntimeInSeconds": job.max_runtime_s}
    if job.max_wait_s is not None:
        stopping["MaxWaitTimeInSeconds"] = job.max_wait_s
    body: dict[str, Any] = {
        "RoleArn": spec.role_arn,
        "AlgorithmSpecification": {
            "TrainingImage": spec.image_uri,
            "TrainingInputMode": TRAINING_INPUT_MODE,
        },
        "HyperParameters": hyperparameters(job),
        "InputDataConfig": [
            channel(contract.TARGET_CHANNEL, spec.target.model_data_uri),
            channel(contract.DATA_CHANNEL, spec.data.data_uri),
        ],
        "OutputDataConfig": output,
        "ResourceConfig": resources,
        "StoppingCondition": stopping,
        "EnableManagedSpotTraining": spec.spot.enabled,
        "EnableNetworkIsolation": True,
        "EnableInterContainerTrafficEncryption": True,
    }
    if spec.vpc is not None:
        body["VpcConfig"] = {
            "SecurityGroupIds": list(spec.vpc.security_groups),
            "Subnets": list(spec.vpc.subnets),
        }
    return body


def output_path(job: ResolvedTraining) -> str:
    """S3OutputPath: the output prefix without its trailing `/` (SageMaker adds
    `/<job>/output/model/`)."""
    return job.spec.output_uri.rstrip("/")


def checkpoint_uri(job: ResolvedTraining, name: str) -> str:
    """Checkpoints beside the job's output, so one prefix (and one grant) holds a job."""
    return f"{output_path(job)}/{name}/checkpoints/"


def render_training(job: ResolvedTraining) -> tuple[str, dict[str, Any], str]:
    """The job name, the CreateTrainingJob request and its content hash."""
    body = request_body(job)
    name = job_name(job, body)
    content_hash = _digest([name, body], 12)
    tags = [
        {"Key": MANAGED_TAG, "Value": "true"},
        {"Key": STAGE_TAG, "Value": job.spec.stage},
        {"Key": SPEC_HASH_TAG, "Value": content_hash},
        {"Key": MODEL_TAG, "Value": job.spec.name},
        *({"Key": k, "Value": v} for k, v in sorted(job.spec.tags.items())),
    ]
    request = {
        "TrainingJobName": name,
        **body,
        "CheckpointConfig": {
            "S3Uri": checkpoint_uri(job, name),
            "LocalPath": contract.CHECKPOINT_DIR,
        },
        "Tags": tags,
    }
    return name, request, content_hash


def _digest(obj: Any, length: int = DIGEST_LEN) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]
