"""The plan follows the engine of the image it will run (catalog/data/*.json).

One test per defect found against the real platform (issue 10): each failed before the
engine model existed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from peagle_deploy.catalog import MODELS
from peagle_deploy.catalog.engines import CUDA13_AMI, capability_table, identify
from peagle_deploy.catalog.images import images, registries
from peagle_deploy.catalog.models import TIKTOKEN_ENV
from peagle_deploy.errors import InputError
from peagle_deploy.plan import build_plan
from peagle_deploy.spec import load_spec

TAG_018 = "0.18.0-gpu-py312-cu129-ubuntu22.04-sagemaker"
TAG_030 = "0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker"
SCHEDULE = [[1, 4, 7], [5, 64, 3]]


def _variant(plan: Any) -> dict[str, Any]:
    (variant,) = plan.create_endpoint_config["ProductionVariants"]
    return dict(variant)


@pytest.mark.parametrize("image", [None, TAG_018, TAG_030, "server-sagemaker-cuda-v2.4"])
def test_p_eagle_with_a_k_schedule_is_refused_on_every_engine_without_the_fix(
    image: str | None,
) -> None:
    """vLLM sizes parallel-drafting slots from the largest K (vllm-project/vllm#45695)."""
    assert not any(c.k_schedule_with_parallel_drafting for c in capability_table().values())
    extra = {"image_uri": images()[image].uri("us-east-1")} if image else {}
    spec = load_spec(
        model="gpt-oss-20b",
        speculative={
            "num_speculative_tokens": 7,
            "num_speculative_tokens_per_batch_size": SCHEDULE,
        },
        **extra,
    )
    with pytest.raises(InputError) as info:
        build_plan(spec)
    assert info.value.field == "speculative.num_speculative_tokens_per_batch_size"
    if image == TAG_018:  # 0.18.0 has no such field at all
        assert "no field" in str(info.value)
    else:  # the default choice reports what stops the engines that have the field
        assert "45695" in str(info.value)


def test_p_eagle_with_a_k_schedule_is_refused_on_an_unknown_engine() -> None:
    with pytest.raises(InputError) as info:
        build_plan(
            load_spec(
                model="gpt-oss-20b",
                image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/team/vllm-custom:1",
                speculative={"num_speculative_tokens_per_batch_size": [[1, 8, 3]]},
            )
        )
    assert info.value.field == "speculative.num_speculative_tokens_per_batch_size"


def test_a_k_schedule_without_parallel_drafting_picks_an_engine_that_has_it() -> None:
    plan = build_plan(
        load_spec(
            model="gpt-oss-20b",
            speculative={
                "mode": "eagle3",
                "num_speculative_tokens": 7,
                "num_speculative_tokens_per_batch_size": SCHEDULE,
            },
        )
    )
    assert plan.vllm_version == "0.30.0"
    with pytest.raises(InputError) as info:  # 0.18.0 has no such field (unknown fields refused)
        build_plan(
            load_spec(
                model="gpt-oss-20b",
                image_uri=images()[TAG_018].uri("us-east-1"),
                speculative={
                    "mode": "eagle3",
                    "num_speculative_tokens": 7,
                    "num_speculative_tokens_per_batch_size": SCHEDULE,
                },
            )
        )
    assert info.value.field == "speculative.num_speculative_tokens_per_batch_size"


def test_gemma_4_never_runs_on_the_0_18_image() -> None:
    assert "Gemma4ForConditionalGeneration" not in capability_table()["0.18.0"].architectures
    for region in registries():
        try:
            plan = build_plan(load_spec(model="gemma-4-31b-it", region=region))
        except InputError as e:
            assert e.field == "region", (region, e)
            continue
        assert plan.vllm_version not in (None, "0.18.0"), region
    with pytest.raises(InputError) as info:
        build_plan(load_spec(model="gemma-4-31b-it", image_uri=images()[TAG_018].uri("us-east-1")))
    assert info.value.field == "image_uri" and "Gemma4ForConditionalGeneration" in str(info.value)


@pytest.mark.parametrize("key", ["gpt-oss-20b", "gpt-oss-120b"])
def test_gpt_oss_under_network_isolation_reads_tiktoken_from_the_model(key: str) -> None:
    env = build_plan(load_spec(model=key)).create_model["PrimaryContainer"]["Environment"]
    assert env[TIKTOKEN_ENV] == "/opt/ml/model"
    open_env = build_plan(load_spec(model=key, network_isolation=False)).create_model[
        "PrimaryContainer"
    ]["Environment"]
    assert TIKTOKEN_ENV not in open_env
    mine = build_plan(load_spec(model=key, env={TIKTOKEN_ENV: "/opt/ml/model/enc"}))
    assert mine.create_model["PrimaryContainer"]["Environment"][TIKTOKEN_ENV] == "/opt/ml/model/enc"


def test_registry_account_and_domain_follow_the_region() -> None:
    cases = {
        "us-east-1": "763104351884.dkr.ecr.us-east-1.amazonaws.com/",
        "af-south-1": "626614931356.dkr.ecr.af-south-1.amazonaws.com/",
        "eu-south-1": "692866216735.dkr.ecr.eu-south-1.amazonaws.com/",
        "ap-east-1": "871362719292.dkr.ecr.ap-east-1.amazonaws.com/",
        "cn-north-1": "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/",
    }
    for region, prefix in cases.items():
        plan = build_plan(load_spec(model="gpt-oss-20b", region=region))
        assert plan.image_uri.startswith(prefix), (region, plan.image_uri)
    non_default = [r for r, reg in registries().items() if reg.account != "763104351884"]
    assert len(non_default) >= 20


def test_a_region_without_the_images_is_refused() -> None:
    with pytest.raises(InputError) as info:
        build_plan(load_spec(model="gpt-oss-20b", region="xx-nowhere-1"))
    assert info.value.field == "region"
    image = images()[TAG_030]
    missing = sorted(set(registries()) - image.regions)
    assert missing, "0.30.0 is published in fewer regions than the 0.27.1 tag"
    region = next(r for r in missing if registries()[r].domain == "amazonaws.com")
    account = registries()[region].account
    uri = f"{account}.dkr.ecr.{region}.amazonaws.com/vllm:{TAG_030}"
    with pytest.raises(InputError) as info:
        build_plan(load_spec(model="gpt-oss-20b", region=region, image_uri=uri))
    assert info.value.field == "image_uri" and "not published" in str(info.value)


def test_a_dlc_image_from_another_regions_registry_is_refused() -> None:
    wrong = f"763104351884.dkr.ecr.af-south-1.amazonaws.com/vllm:{TAG_018}"
    with pytest.raises(InputError) as info:
        build_plan(load_spec(model="gpt-oss-20b", region="af-south-1", image_uri=wrong))
    assert info.value.field == "image_uri" and "626614931356" in str(info.value)


def test_cuda_13_images_get_the_driver_580_ami_unless_the_spec_says_otherwise() -> None:
    cuda13 = build_plan(load_spec(model="gemma-4-31b-it"))
    assert identify(cuda13.image_uri).cuda13
    assert _variant(cuda13)["InferenceAmiVersion"] == CUDA13_AMI
    cuda12 = build_plan(load_spec(model="gpt-oss-20b"))
    assert "InferenceAmiVersion" not in _variant(cuda12)
    own = build_plan(
        load_spec(
            model="gpt-oss-20b",
            image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:0.1.0",
        )
    )
    assert own.vllm_version == "0.30.0" and _variant(own)["InferenceAmiVersion"] == CUDA13_AMI
    override = build_plan(
        load_spec(
            model="gemma-4-31b-it", inference_ami_version="al2-ami-sagemaker-inference-gpu-3-1"
        )
    )
    assert _variant(override)["InferenceAmiVersion"] == "al2-ami-sagemaker-inference-gpu-3-1"
    assert any(w.field == "inference_ami_version" for w in override.warnings)


def test_catalog_and_jumpstart_timeouts_follow_the_ranked_config() -> None:
    for key in MODELS:
        variant = _variant(build_plan(load_spec(model=key)))
        assert variant["ModelDataDownloadTimeoutInSeconds"] == 3600, key
        assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 3600, key
    assert MODELS["gpt-oss-20b"].model_data_download_timeout_s.verified
    short = _variant(build_plan(load_spec(model="gpt-oss-20b", model_data_download_timeout_s=600)))
    assert short["ModelDataDownloadTimeoutInSeconds"] == 600


def test_catalog_values_match_their_sources() -> None:
    m = MODELS["gpt-oss-20b"]
    assert m.drafter_weights_gb.value == pytest.approx(3.6) and m.drafter_weights_gb.verified
    assert MODELS["gpt-oss-120b"].drafter_weights_gb.value == pytest.approx(3.4)
    for model in MODELS.values():
        assert model.drafter_weights_gb.value >= 3.4, model.key  # ~1.7-1.8B params, bf16
    gemma = MODELS["gemma-4-31b-it"]
    assert gemma.gated.value is False and gemma.gated.verified
    assert build_plan(load_spec(model="gemma-4-31b-it")).model_source == "catalog"


@pytest.mark.parametrize("instance", ["ml.g7e.2xlarge", "ml.p6-b200.48xlarge"])
def test_volume_size_is_refused_and_kms_warned_where_no_ebs_attaches(instance: str) -> None:
    """sagemaker SDK's volume_size_supported (instances.json): no EBS on g7e and p6-b200."""
    with pytest.raises(InputError) as info:
        build_plan(load_spec(model="gpt-oss-20b", instance_type=instance, volume_size_gb=100))
    assert info.value.field == "volume_size_gb"
    plan = build_plan(load_spec(model="gpt-oss-20b", instance_type=instance, kms_key_id="alias/k"))
    assert any(w.field == "kms_key_id" for w in plan.warnings)


def test_an_unknown_engine_warns_and_a_stated_version_is_checked() -> None:
    custom = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/vllm-custom:1"
    plan = build_plan(load_spec(model="gpt-oss-20b", image_uri=custom))
    assert plan.vllm_version is None and any(w.field == "vllm_version" for w in plan.warnings)
    stated = build_plan(load_spec(model="gpt-oss-20b", image_uri=custom, vllm_version="0.30.0"))
    assert stated.vllm_version == "0.30.0"
    assert not any(w.field == "vllm_version" for w in stated.warnings)
    with pytest.raises(InputError) as info:
        build_plan(load_spec(model="gemma-4-31b-it", image_uri=custom, vllm_version="0.18.0"))
    assert info.value.field == "image_uri"


def test_plan_json_shows_the_engine() -> None:
    plan = build_plan(load_spec(model="gpt-oss-20b"))
    assert plan.vllm_version == "0.18.0" and "AWS image tag" in plan.engine_known_by
    json.dumps(plan.to_json())
