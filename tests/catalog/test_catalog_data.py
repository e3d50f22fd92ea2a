"""The catalog is self-consistent, known to botocore, and marks what is unverified."""

from __future__ import annotations

import botocore.session

from peagle_deploy.catalog import INSTANCE_TYPES, MODELS, get_instance, get_model
from peagle_deploy.catalog.images import images
from peagle_deploy.validation.fit import GPU_MEMORY_UTILIZATION, required_memory_gb


def test_launch_model_keys() -> None:
    assert set(MODELS) == {
        "gpt-oss-120b",
        "gpt-oss-20b",
        "qwen3-coder-30b-a3b-instruct",
        "gemma-4-31b-it",
    }
    assert get_model("gpt-oss-20b") is MODELS["gpt-oss-20b"]
    assert get_model("nope") is None


def test_facts_values_are_verified_and_guesses_are_not() -> None:
    m = MODELS["gpt-oss-20b"]
    assert m.jumpstart_id.verified and m.jumpstart_id.value == "openai-reasoning-gpt-oss-20b"
    assert m.drafter_parallel_tokens.verified and m.drafter_parallel_tokens.value == 10
    assert m.default_num_speculative_tokens.value == 3
    assert m.default_instance_type.value == "ml.g7e.2xlarge" and m.default_instance_type.verified
    assert MODELS["gpt-oss-120b"].drafter_parallel_tokens.value == 8
    qwen = MODELS["qwen3-coder-30b-a3b-instruct"]
    assert not qwen.jumpstart_id.verified  # no JumpStart spec for Qwen was read
    assert "jumpstart_id" in qwen.unverified_fields()
    # its model card: 18 parallel-token predictions; the default K weighs the card's
    # example (K=10, concurrency 1) against the launch benchmark (K=7 best at 128)
    assert qwen.drafter_parallel_tokens.verified and qwen.drafter_parallel_tokens.value == 18
    assert qwen.drafter_hf_id.verified and "model card" in qwen.drafter_hf_id.source
    k = qwen.default_num_speculative_tokens
    assert k.value == 7 and not k.verified and "K=10" in k.source and "128" in k.source
    assert not MODELS["gemma-4-31b-it"].drafter_hf_id.verified
    for model in MODELS.values():
        for name, value in model.sourced_fields().items():
            assert value.source, f"{model.key}.{name} has no source"
            assert value.marker() == ("" if value.verified else "*")


def test_default_instances_exist_and_fit() -> None:
    for model in MODELS.values():
        instance = get_instance(model.default_instance_type.value)
        assert instance is not None and instance.name.startswith("ml.g7e.")
        tp = model.default_tensor_parallel_size.value
        need = required_memory_gb(
            model.weights_gb.value,
            model.drafter_weights_gb.value,
            model.kv_cache_gb_per_1k_tokens.value,
            model.default_max_model_len.value,
            tp,
        )
        assert need <= instance.gpu_memory_gb.value * tp * GPU_MEMORY_UTILIZATION


def test_instances_are_sagemaker_hosting_types() -> None:
    model = botocore.session.get_session().get_service_model("sagemaker")
    known = set(model.shape_for("ProductionVariantInstanceType").enum)  # type: ignore[attr-defined]
    assert set(INSTANCE_TYPES) <= known
    assert INSTANCE_TYPES["ml.g7e.48xlarge"].gpu_count.value == 8
    assert INSTANCE_TYPES["ml.p5.48xlarge"].total_gpu_memory_gb == 640
    assert not INSTANCE_TYPES["ml.p6-b200.48xlarge"].gpu_memory_gb.verified


def test_drafter_locations_follow_the_jumpstart_bucket() -> None:
    m = MODELS["gpt-oss-20b"]
    assert m.drafter_uri_for("eu-west-1") == (
        "s3://jumpstart-cache-prod-eu-west-1/lmi-eagle-heads/models/gpt-oss-20b-p-eagle/"
    )
    tag = "0.18.0-gpu-py312-cu129-ubuntu22.04-sagemaker"
    assert (
        images()[tag].uri("us-west-2") == f"763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:{tag}"
    )
    # DLC registries differ by region; China has its own domain
    assert images()[tag].uri("af-south-1").startswith("626614931356.dkr.ecr.af-south-1.")
    assert images()[tag].uri("cn-north-1") == (
        f"727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/vllm:{tag}"
    )
