"""Tables and JSON for `peagle models`: catalog values with their unverified markers."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from peagle_deploy.catalog import INSTANCE_TYPES, MODELS, Sourced


def _cell(value: Sourced[Any], fmt: str = "{}") -> str:
    shown = "-" if value.value is None else fmt.format(value.value)
    return shown + value.marker()


_DTYPE_SHORT = {"bfloat16": "bf16", "float16": "fp16"}


def models_table() -> Table:
    """One row per launch model; `*` marks unverified values (`--json` has every value)."""
    table = Table(title="P-EAGLE launch models", box=None, padding=(0, 1, 0, 0))
    table.add_column("key", no_wrap=True, style="bold")
    table.add_column("K/trained", justify="right", no_wrap=True)
    table.add_column("instance", no_wrap=True)
    table.add_column("TP", justify="right", no_wrap=True)
    table.add_column("len", justify="right", no_wrap=True)
    table.add_column("weights", no_wrap=True)
    for m in MODELS.values():
        dtype = _DTYPE_SHORT.get(m.dtype.value, m.dtype.value)
        table.add_row(
            m.key,
            f"{_cell(m.default_num_speculative_tokens)}/{_cell(m.drafter_parallel_tokens)}",
            _cell(m.default_instance_type),
            _cell(m.default_tensor_parallel_size),
            _cell(m.default_max_model_len),
            f"{m.weights_gb.value:g}G {dtype}{m.weights_gb.marker() or m.dtype.marker()}",
        )
    return table


def jumpstart_ids() -> list[str]:
    """`key: JumpStart id` lines (too wide for the table)."""
    return [f"{m.key}: {_cell(m.jumpstart_id)}" for m in MODELS.values()]


def instances_table() -> Table:
    """One row per instance type; `*` marks unverified values."""
    table = Table(title="GPU instance types", box=None, padding=(0, 1, 0, 0))
    table.add_column("instance type", no_wrap=True, style="bold")
    table.add_column("GPUs", justify="right", no_wrap=True)
    table.add_column("GPU mem", justify="right", no_wrap=True)
    table.add_column("GPU", no_wrap=True)
    table.add_column("EBS", no_wrap=True)
    table.add_column("host mem", justify="right", no_wrap=True)
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
