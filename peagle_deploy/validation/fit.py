"""Instance type, tensor parallelism and GPU memory: will the model fit?"""

from __future__ import annotations

from peagle_deploy.catalog.instances import INSTANCE_TYPES, InstanceType, is_gpu_less
from peagle_deploy.deployment import Deployment
from peagle_deploy.errors import InputError
from peagle_deploy.findings import PlanWarning

GPU_MEMORY_UTILIZATION = 0.9
"""vLLM's default share of each GPU it may use."""
OVERHEAD_GB_PER_GPU = 1.5
"""CUDA context, activations and graphs per GPU (estimate; keeps the fit check honest)."""


def check_instance(dep: Deployment) -> list[PlanWarning]:
    """The instance must be one the catalog knows, with NVIDIA GPUs; tensor parallelism
    must fit it."""
    return check_tensor_parallel(dep.tensor_parallel_size, known_instance(dep))


def known_instance(dep: Deployment) -> InstanceType:
    """The deployment's instance record; InputError for a type the catalog does not know."""
    if dep.instance is not None:
        return dep.instance
    instance_type = dep.instance_type
    if is_gpu_less(instance_type):
        problem = f"{instance_type!r} has no NVIDIA GPU; vLLM needs one"
    else:
        problem = f"unknown instance type {instance_type!r}"
    raise InputError("instance_type", problem, list(INSTANCE_TYPES))


def check_tensor_parallel(tp: int, instance: InstanceType) -> list[PlanWarning]:
    """TP must not exceed the GPUs and must divide them (one replica per instance)."""
    gpus = instance.gpu_count.value
    divisors = [str(d) for d in range(1, gpus + 1) if gpus % d == 0]
    if tp > gpus or gpus % tp:
        raise InputError(
            "tensor_parallel_size",
            f"{tp} does not fit {instance.name} ({gpus} GPU{'s' if gpus > 1 else ''})",
            divisors,
        )
    if tp < gpus:
        return [
            PlanWarning(
                "tensor_parallel_size",
                f"tensor_parallel_size={tp} uses {tp} of {instance.name}'s {gpus} GPUs; "
                "the rest stay idle",
            )
        ]
    return []


def required_memory_gb(
    weights_gb: float,
    drafter_gb: float,
    kv_gb_per_1k: float | None,
    max_model_len: int | None,
    tp: int,
) -> float:
    """Weights + drafter + KV cache for one full-length sequence + per-GPU overhead."""
    kv_floor = (kv_gb_per_1k or 0.0) * (max_model_len or 0) / 1000.0
    return weights_gb + drafter_gb + kv_floor + OVERHEAD_GB_PER_GPU * tp


def check_fit(dep: Deployment) -> list[PlanWarning]:
    """Refuse a model whose weights plus a KV-cache floor exceed the GPUs it spans."""
    weights_gb = dep.weights_gb
    drafter = dep.speculative.drafter
    drafter_gb = drafter.weights_gb if drafter is not None else 0.0
    kv_gb_per_1k, max_model_len = dep.kv_cache_gb_per_1k_tokens, dep.max_model_len
    tp, instance = dep.tensor_parallel_size, known_instance(dep)
    if weights_gb is None:
        return [
            PlanWarning(
                "custom.weights_gb",
                "fit check skipped: weight size unknown (set custom.weights_gb)",
            )
        ]
    need = required_memory_gb(weights_gb, drafter_gb, kv_gb_per_1k, max_model_len, tp)
    have = instance.gpu_memory_gb.value * tp * GPU_MEMORY_UTILIZATION
    if need <= have:
        return []
    fits = [
        i.name
        for i in INSTANCE_TYPES.values()
        if need - OVERHEAD_GB_PER_GPU * tp + OVERHEAD_GB_PER_GPU * i.gpu_count.value
        <= i.total_gpu_memory_gb * GPU_MEMORY_UTILIZATION
    ]
    parts = _need_parts(weights_gb, drafter_gb, kv_gb_per_1k, max_model_len, tp)
    raise InputError(
        "instance_type",
        f"model needs about {need:.0f} GB ({parts}) but {instance.name} with "
        f"tensor_parallel_size={tp} offers {have:.0f} GB",
        fits or ["none of the known instance types"],
    )


def _need_parts(
    weights_gb: float,
    drafter_gb: float,
    kv_gb_per_1k: float | None,
    max_model_len: int | None,
    tp: int,
) -> str:
    """What `required_memory_gb` added up, naming only the parts that count."""
    parts = [f"weights {weights_gb:g} GB"]
    if drafter_gb:
        parts.append(f"drafter {drafter_gb:g} GB")
    if kv_gb_per_1k and max_model_len:
        kv_gb = kv_gb_per_1k * max_model_len / 1000.0
        parts.append(f"KV cache {kv_gb:.3g} GB for {max_model_len} tokens")
    parts.append(f"overhead {OVERHEAD_GB_PER_GPU * tp:g} GB")
    return " + ".join(parts)
