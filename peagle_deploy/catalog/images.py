"""The default serving image: AWS's vLLM SageMaker image for the region (FACTS.md 2)."""

from __future__ import annotations

from peagle_deploy.catalog.sourced import Sourced, verified

VLLM_IMAGE_ACCOUNT = "763104351884"
"""AWS Deep Learning Containers registry account."""

VLLM_IMAGE_TAG: Sourced[str] = verified(
    "0.18.0-gpu-py312-cu129-ubuntu22.04-sagemaker",
    "FACTS.md 2: the tag JumpStart's gpt-oss-20b spec uses (vLLM 0.18, parallel drafting)",
)


def vllm_image_uri(region: str, tag: str | None = None) -> str:
    """`763104351884.dkr.ecr.<region>.amazonaws.com/vllm:<tag>`."""
    suffix = ".amazonaws.com.cn" if region.startswith("cn-") else ".amazonaws.com"
    return f"{VLLM_IMAGE_ACCOUNT}.dkr.ecr.{region}{suffix}/vllm:{tag or VLLM_IMAGE_TAG.value}"
