"""Tables and JSON for `peagle models`: catalog values with their unverified markers."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from peagle_deploy.catalog import INSTANCE_TYPES, MODELS, Sourced


def _cell(value: Sourced[Any], fmt: str = "{}") -> str:
    shown = "-" if value.value is None else fmt.format(value.value)
    return shown + value.marker()


def models_table() -> Table:
    """One row per launch model; `*` marks unverified values."""
    table = Table(title="P-EAGLE launch models")
    for column in (
        "key",
        "JumpStart id",
        "drafter",
        "trained K",
        "default K",
        "instance",
        "TP",
        "max len",
        "weights",
    ):
        table.add_column(column, overflow="fold")
    for m in MODELS.values():
        table.add_row(
            m.key,
            _cell(m.jumpstart_id),
            _cell(m.drafter_hf_id),
            _cell(m.drafter_parallel_tokens),
            _cell(m.default_num_speculative_tokens),
            _cell(m.default_instance_type),
            _cell(m.default_tensor_parallel_size),
            _cell(m.default_max_model_len),
            f"{m.weights_gb.value:g} GB {m.dtype.value}{m.weights_gb.marker() or m.dtype.marker()}",
        )
    return table


def instances_table() -> Table:
    """One row per instance type; `*` marks unverified values."""
    table = Table(title="GPU instance types")
    for column in ("instance type", "GPUs", "GPU memory", "GPU", "EBS volume", "host memory"):
        table.add_column(column)
    for i in INSTANCE_TYPES.values():
        table.add_row(
            i.name,
            _cell(i.gpu_count),
            _cell(i.gpu_memory_gb, "{:g} GB"),
            i.gpu_model,
            ("yes" if i.ebs_volume.value else "no") + i.ebs_volume.marker(),
            _cell(i.host_memory_gib, "{} GiB"),
        )
    return table


def _sourced(value: Sourced[Any]) -> dict[str, Any]:
    return {"value": value.value, "verified": value.verified, "source": value.source}


def models_json() -> list[dict[str, Any]]:
    """Every model with every value as {value, verified, source}."""
    return [
        {
            "key": m.key,
            "display_name": m.display_name,
            "drafter_kind": m.drafter_kind,
            **{name: _sourced(v) for name, v in m.sourced_fields().items()},
            "unverified": m.unverified_fields(),
        }
        for m in MODELS.values()
    ]


def instances_json() -> list[dict[str, Any]]:
    """Every instance type with every value as {value, verified, source}."""
    return [
        {
            "name": i.name,
            "family": i.family,
            "gpu_model": i.gpu_model,
            "gpu_count": _sourced(i.gpu_count),
            "gpu_memory_gb": _sourced(i.gpu_memory_gb),
            "ebs_volume": _sourced(i.ebs_volume),
            "host_memory_gib": _sourced(i.host_memory_gib),
            "unverified": i.unverified_fields(),
        }
        for i in INSTANCE_TYPES.values()
    ]
