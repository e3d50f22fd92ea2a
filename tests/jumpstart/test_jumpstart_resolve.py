"""JumpStart ids resolve offline from a spec folder this test writes itself.

The folder mimics the JumpStart bucket layout the sagemaker SDK reads
(`models_manifest.json` + per-model spec JSON, docs/platform-facts.md "JumpStart"): a
P-EAGLE model with two inference configs (`lmi-optimized` ranked first, as the
gpt-oss-20b spec does) whose drafter source carries a HostingEulaKey, and a gated model in
the private bucket.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.validate import validate_parameters

from peagle_deploy.errors import InputError
from peagle_deploy.plan import build_plan
from peagle_deploy.spec import load_spec

VLLM_IMAGE = (
    "763104351884.dkr.ecr.{region}.amazonaws.com/vllm:0.18.0-gpu-py312-cu129-ubuntu22.04-sagemaker"
)
VLLM_030_IMAGE = (
    "763104351884.dkr.ecr.{region}.amazonaws.com/vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker"
)
P_EAGLE_CONFIG = (
    '{"model": "/opt/ml/additional-model-data-sources/eagle", "method": "eagle3", '
    '"num_speculative_tokens": 4, "parallel_drafting": true}'
)


def _env(name: str, value: str) -> dict[str, Any]:
    return {
        "name": name,
        "type": "text",
        "default": value,
        "scope": "container",
        "required_for_model_class": True,
    }


def _variants(regions: list[str], image: str = VLLM_IMAGE) -> dict[str, Any]:
    return {
        "regional_aliases": {r: {"vllm_image": image.format(region=r)} for r in regions},
        "variants": {
            "g7e": {"regional_properties": {"image_uri": "$vllm_image"}},
            "g6e": {"regional_properties": {"image_uri": "$vllm_image"}},
        },
    }


def _p_eagle_model_specs() -> dict[str, Any]:
    drafter = {
        "channel_name": "eagle",
        "artifact_version": "1.0.0",
        "hosting_eula_key": "fmhMetadata/eula/gpt-oss-drafter.txt",
        "provider": {"name": "JumpStart", "classification": "ungated"},
        "s3_data_source": {
            "compression_type": "None",
            "s3_data_type": "S3Prefix",
            "s3_uri": "lmi-eagle-heads/models/gpt-oss-20b-p-eagle/",
        },
    }
    return {
        "model_id": "openai-reasoning-gpt-oss-20b",
        "version": "3.38.0",
        "min_sdk_version": "2.0.0",
        "hosting_prepacked_artifact_key": (
            "openai-reasoning/openai-reasoning-gpt-oss-20b/artifacts/inference-prepack/v1.0.0/"
        ),
        "hosting_artifact_key": "openai-reasoning/openai-reasoning-gpt-oss-20b/artifacts/v1/",
        "hosting_script_key": "source-directory-tarballs/none.tar.gz",
        "hosting_use_script_uri": False,
        "inference_enable_network_isolation": True,
        "default_inference_instance_type": "ml.g7e.2xlarge",
        "supported_inference_instance_types": ["ml.g7e.2xlarge", "ml.g7e.12xlarge"],
        "inference_environment_variables": [
            _env("SM_VLLM_MAX_MODEL_LEN", "8192"),
            _env("SM_VLLM_TENSOR_PARALLEL_SIZE", "1"),
        ],
        "hosting_instance_type_variants": _variants(["us-east-1", "us-west-2"]),
        "inference_configs": {
            "lmi": {"component_names": ["lmi"]},
            "lmi-optimized": {"component_names": ["lmi-optimized"]},
        },
        "inference_config_components": {
            "lmi": {"inference_environment_variables": [_env("SM_VLLM_MAX_MODEL_LEN", "8192")]},
            "lmi-optimized": {
                "inference_environment_variables": [
                    _env("SM_VLLM_MAX_MODEL_LEN", "8192"),
                    _env("SM_VLLM_TENSOR_PARALLEL_SIZE", "1"),
                    _env("SM_VLLM_SPECULATIVE_CONFIG", P_EAGLE_CONFIG),
                ],
                "hosting_additional_data_sources": {"speculative_decoding": [drafter]},
                # as in the real gpt-oss-20b spec's top-ranked config (jumpstart.json)
                "deploy_kwargs": {
                    "model_data_download_timeout": 3600,
                    "container_startup_health_check_timeout": 3600,
                },
            },
        },
        "inference_config_rankings": {
            "overall": {"description": "best first", "rankings": ["lmi-optimized", "lmi"]}
        },
    }


def _gated_spec(image: str = VLLM_030_IMAGE) -> dict[str, Any]:
    return {
        "model_id": "huggingface-vlm-gemma-4-31b-it",
        "version": "1.0.0",
        "min_sdk_version": "2.0.0",
        "hosting_prepacked_artifact_key": "huggingface-vlm/gemma-4-31b-it/prepack/v1/",
        "hosting_artifact_key": "huggingface-vlm/gemma-4-31b-it/v1/",
        "hosting_script_key": "source-directory-tarballs/none.tar.gz",
        "hosting_use_script_uri": False,
        "gated_bucket": True,
        "hosting_eula_key": "fmhMetadata/eula/gemmaTerms.txt",
        "default_inference_instance_type": "ml.g7e.2xlarge",
        "supported_inference_instance_types": ["ml.g7e.2xlarge"],
        "inference_environment_variables": [_env("SM_VLLM_MAX_MODEL_LEN", "4096")],
        "hosting_instance_type_variants": _variants(["us-east-1"], image),
    }


@pytest.fixture
def jumpstart_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    specs = {
        "community_models/openai-reasoning-gpt-oss-20b/specs_v3.38.0.json": _p_eagle_model_specs(),
        "community_models/huggingface-vlm-gemma-4-31b-it/specs_v1.0.0.json": _gated_spec(),
    }
    manifest = []
    for key, spec in specs.items():
        path = tmp_path / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(spec))
        manifest.append(
            {
                "model_id": spec["model_id"],
                "version": spec["version"],
                "min_version": "2.0.0",
                "spec_key": key,
            }
        )
    (tmp_path / "models_manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setenv("AWS_JUMPSTART_MANIFEST_LOCAL_ROOT_DIR_OVERRIDE", str(tmp_path))
    monkeypatch.setenv("AWS_JUMPSTART_SPECS_LOCAL_ROOT_DIR_OVERRIDE", str(tmp_path))
    return tmp_path


def _validate(plan: Any) -> None:
    model: Any = botocore.session.get_session().get_service_model("sagemaker")
    validate_parameters(plan.create_model, model.operation_model("CreateModel").input_shape)
    validate_parameters(
        plan.create_endpoint_config, model.operation_model("CreateEndpointConfig").input_shape
    )


def test_p_eagle_model_resolves_offline(jumpstart_folder: Path) -> None:
    plan = build_plan(load_spec(model="openai-reasoning-gpt-oss-20b", accept_eula=True))
    _validate(plan)
    assert plan.model_source == "jumpstart"
    assert plan.image_uri == VLLM_IMAGE.format(region="us-east-1")
    assert plan.instance_type == "ml.g7e.2xlarge"
    assert plan.model_data_uri == (
        "s3://jumpstart-cache-prod-us-east-1/openai-reasoning/openai-reasoning-gpt-oss-20b/"
        "artifacts/inference-prepack/v1.0.0/"
    )
    container = plan.create_model["PrimaryContainer"]
    (drafter,) = container["AdditionalModelDataSources"]
    assert drafter == {
        "ChannelName": "eagle",
        "S3DataSource": {
            "S3Uri": "s3://jumpstart-cache-prod-us-east-1/lmi-eagle-heads/models/gpt-oss-20b-p-eagle/",
            "S3DataType": "S3Prefix",
            "CompressionType": "None",
            "ModelAccessConfig": {"AcceptEula": True},
        },
    }
    assert "HostingEulaKey" not in json.dumps(plan.to_json())
    # the top-ranked config (lmi-optimized) supplied K=4 and parallel drafting
    config = json.loads(container["Environment"]["SM_VLLM_SPECULATIVE_CONFIG"])
    assert config == {
        "method": "eagle3",
        "model": "/opt/ml/additional-model-data-sources/eagle",
        "num_speculative_tokens": 4,
        "parallel_drafting": True,
    }
    assert container["Environment"]["SM_VLLM_MAX_MODEL_LEN"] == "8192"
    assert plan.create_model["EnableNetworkIsolation"] is True
    # the top-ranked config's deploy_kwargs, not a flat 1800
    (variant,) = plan.create_endpoint_config["ProductionVariants"]
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 3600
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 3600
    # the 0.18.0 image is CUDA 12.9: SageMaker's default AMI serves it
    assert plan.vllm_version == "0.18.0" and "InferenceAmiVersion" not in variant


def test_spec_timeouts_win_over_the_jumpstart_config(jumpstart_folder: Path) -> None:
    plan = build_plan(
        load_spec(
            model="openai-reasoning-gpt-oss-20b",
            accept_eula=True,
            model_data_download_timeout_s=900,
        )
    )
    (variant,) = plan.create_endpoint_config["ProductionVariants"]
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 900
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 3600


def test_gemma_4_on_a_0_18_image_is_refused(jumpstart_folder: Path) -> None:
    """vLLM 0.18.0 registers no Gemma4ForConditionalGeneration (engines.json)."""
    spec = {
        "model": "huggingface-vlm-gemma-4-31b-it",
        "accept_eula": True,
        "speculative": {"mode": "none"},
    }
    assert build_plan(load_spec(**spec)).vllm_version == "0.30.0"
    with pytest.raises(InputError) as info:
        build_plan(load_spec(**spec, image_uri=VLLM_IMAGE.format(region="us-east-1")))
    assert info.value.field == "image_uri"
    assert "Gemma4ForConditionalGeneration" in str(info.value)


def test_spec_overrides_win_over_jumpstart(jumpstart_folder: Path) -> None:
    plan = build_plan(
        load_spec(
            model="openai-reasoning-gpt-oss-20b",
            accept_eula=True,
            region="us-west-2",
            instance_type="ml.g7e.12xlarge",
            tensor_parallel_size=2,
            speculative={"num_speculative_tokens": 7},
        )
    )
    env = plan.create_model["PrimaryContainer"]["Environment"]
    assert json.loads(env["SM_VLLM_SPECULATIVE_CONFIG"])["num_speculative_tokens"] == 7
    assert env["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "2"
    assert plan.image_uri == VLLM_IMAGE.format(region="us-west-2")
    assert "jumpstart-cache-prod-us-west-2" in plan.drafter_uri  # type: ignore[operator]


def test_drafter_eula_needs_acceptance(jumpstart_folder: Path) -> None:
    with pytest.raises(InputError) as info:
        build_plan(load_spec(model="openai-reasoning-gpt-oss-20b"))
    assert info.value.field == "accept_eula"
    assert "gpt-oss-drafter.txt" in str(info.value)


def test_gated_model_uses_private_bucket_and_needs_eula(jumpstart_folder: Path) -> None:
    with pytest.raises(InputError) as info:
        build_plan(load_spec(model="huggingface-vlm-gemma-4-31b-it"))
    assert info.value.field == "accept_eula"
    plan = build_plan(
        load_spec(
            model="huggingface-vlm-gemma-4-31b-it",
            accept_eula=True,
            custom={"drafter_uri": "s3://my-bucket/gemma-p-eagle/"},
        )
    )
    _validate(plan)
    source = plan.create_model["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]
    assert source["S3Uri"].startswith("s3://jumpstart-private-cache-prod-us-east-1/")
    assert source["ModelAccessConfig"] == {"AcceptEula": True}


def test_jumpstart_model_without_drafter_needs_one_for_p_eagle(jumpstart_folder: Path) -> None:
    with pytest.raises(InputError) as info:
        build_plan(load_spec(model="huggingface-vlm-gemma-4-31b-it", accept_eula=True))
    assert info.value.field == "custom.drafter_uri"
    plain = build_plan(
        load_spec(
            model="huggingface-vlm-gemma-4-31b-it", accept_eula=True, speculative={"mode": "none"}
        )
    )
    assert "AdditionalModelDataSources" not in plain.create_model["PrimaryContainer"]


def test_unknown_id_and_unsupported_instance(jumpstart_folder: Path) -> None:
    with pytest.raises(InputError) as info:
        build_plan(load_spec(model="meta-textgeneration-llama-9000"))
    assert info.value.field == "model"
    with pytest.raises(InputError) as info:
        build_plan(
            load_spec(
                model="openai-reasoning-gpt-oss-20b",
                accept_eula=True,
                instance_type="ml.p5.48xlarge",
            )
        )
    assert info.value.field == "instance_type"
    assert "ml.g7e.2xlarge" in str(info.value)


def test_near_miss_of_a_catalog_key_is_not_sent_to_jumpstart() -> None:
    with pytest.raises(InputError, match="did you mean gpt-oss-20b"):
        build_plan(load_spec(model="gpt-oss-20"))
    with pytest.raises(InputError, match=r"^model: unknown model 'Not A Model'"):
        build_plan(load_spec(model="Not A Model"))
