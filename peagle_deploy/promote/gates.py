"""The gates file: what a configuration must prove before it may enter a stage.

Gates live in a YAML file checked into the user's repository (see `gates.example.yaml`),
one block per *target* stage: promoting dev -> staging runs the `staging` block against
the dev endpoint. Every field is validated by pydantic before any AWS call, and a bad
value is reported as one `SpecError` naming the dotted field path and what is allowed,
so a typo in CI fails in a second instead of after a 10-minute benchmark.

Thresholds that depend on load (output tokens/s, p99 TTFT) can be one number for every
concurrency level or a mapping `{concurrency: value}`: P-EAGLE's throughput at
concurrency 1 and 32 differs by an order of magnitude (docs/platform-facts.md,
"Published results"), so one floor for all levels would be either useless or unreachable.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from peagle_deploy.errors import SpecError

STAGE_NAME_PATTERN = r"^[a-z][a-z0-9-]{0,31}$"
"""Stage names appear in SSM parameter paths and resource names: keep them simple."""

PerLevel = float | dict[int, float]
"""One value for every concurrency level, or one per level (`{1: 500, 8: 3000}`)."""


class _Strict(BaseModel):
    """Unknown keys are errors: a misspelt threshold must not silently disable a gate."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SmokeGate(_Strict):
    """One chat request that must come back with non-empty text.

    Runs first because it is cheap: an endpoint that cannot answer at all should not
    cost a benchmark run.
    """

    enabled: bool = True
    """Set false only for stages where a chat request is not allowed (rare)."""
    prompt: str = Field(
        default="Write a Python function that returns the n-th Fibonacci number.",
        min_length=1,
    )
    """User message sent to the source endpoint; the answer must be non-empty."""
    max_tokens: int = Field(default=64, ge=1, le=32768)
    """Upper bound on the answer's length, to keep the smoke test quick."""


class BenchSettings(_Strict):
    """How the benchmark that feeds the thresholds is run (closed loop per level)."""

    concurrency: list[int] = Field(default_factory=lambda: [1, 4], min_length=1)
    """Concurrency levels to measure; thresholds are checked at each of them."""
    num_prompts: int = Field(default=16, ge=1, le=100000)
    """Requests per concurrency level (after warm-up)."""
    max_tokens: int = Field(default=256, ge=1, le=32768)
    """max_tokens of every benchmark request."""
    dataset: str = Field(default="humaneval", min_length=1)
    """`humaneval` (the published P-EAGLE benchmark) or a path to a JSONL file of chats."""
    warmup: int = Field(default=1, ge=0, le=1000)
    """Warm-up requests per level, not counted."""
    seed: int = 0
    """Prompt sampling seed, so two runs measure the same prompts."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature; 0 makes acceptance comparable between runs."""

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, value: list[int]) -> list[int]:
        bad = [c for c in value if c < 1 or c > 4096]
        if bad:
            raise ValueError(f"concurrency levels must be between 1 and 4096, got {bad}")
        if len(set(value)) != len(value):
            raise ValueError(f"concurrency levels must be unique, got {value}")
        return sorted(value)


class Thresholds(_Strict):
    """Pass conditions on the benchmark, checked at every concurrency level.

    Leave a threshold out (null) to not gate on it. All configured thresholds must pass.
    """

    min_output_throughput: PerLevel | None = None
    """Absolute floor on output tokens/s (the published P-EAGLE metric)."""
    min_throughput_ratio: float | None = Field(default=None, gt=0.0, le=100.0)
    """Floor as a fraction of the recorded baseline's output tokens/s at the same level
    (0.95 = at most 5% slower than what the target stage recorded when it last took a
    promotion). Skipped, and said so, when no baseline has been recorded yet."""
    max_p99_ttft_ms: PerLevel | None = None
    """Ceiling on the 99th percentile time to first token, in milliseconds."""
    max_error_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    """Ceiling on failed / (completed + failed) requests per level; 0 = no failures."""
    min_acceptance_length: float | None = Field(default=None, ge=1.0)
    """Floor on mean acceptance length (1 + accepted / drafts) when the target reports
    it. Below ~1.5 the drafter is costing more than it saves."""
    require_acceptance_length: bool = False
    """If true, a missing acceptance measurement fails the gate instead of skipping it
    (use where the container's metric lines are known to reach CloudWatch)."""

    @field_validator("min_output_throughput", "max_p99_ttft_ms")
    @classmethod
    def _positive(cls, value: PerLevel | None) -> PerLevel | None:
        if value is None:
            return None
        values = value.values() if isinstance(value, dict) else [value]
        if any(v <= 0 for v in values):
            raise ValueError("must be a positive number (or a mapping concurrency -> number)")
        return value

    def level_value(
        self, name: Literal["min_output_throughput", "max_p99_ttft_ms"], c: int
    ) -> float | None:
        """The threshold that applies at concurrency `c` (None: not gated there)."""
        value: PerLevel | None = getattr(self, name)
        if isinstance(value, dict):
            return value.get(c)
        return value


class StageGates(_Strict):
    """Everything a promotion INTO one stage must pass."""

    smoke: SmokeGate = Field(default_factory=SmokeGate)
    """The smoke chat request."""
    bench: BenchSettings | None = Field(default_factory=BenchSettings)
    """Benchmark settings; null = smoke test only (no thresholds allowed then)."""
    thresholds: Thresholds = Field(default_factory=Thresholds)
    """Pass conditions on the benchmark."""
    baseline_stage: str | None = Field(default=None, pattern=STAGE_NAME_PATTERN)
    """Stage whose recorded measurements are the baseline for `min_throughput_ratio`;
    default: the target stage itself (the configuration it serves now)."""

    @model_validator(mode="after")
    def _consistent(self) -> StageGates:
        t = self.thresholds
        gated = [
            name
            for name in ("min_output_throughput", "min_throughput_ratio", "max_p99_ttft_ms")
            if getattr(t, name) is not None
        ]
        if t.min_acceptance_length is not None:
            gated.append("min_acceptance_length")
        if self.bench is None:
            if gated:
                raise ValueError(f"thresholds {gated} need a `bench` block (bench is null)")
            return self
        levels = set(self.bench.concurrency)
        for name in ("min_output_throughput", "max_p99_ttft_ms"):
            value = getattr(t, name)
            if isinstance(value, dict):
                extra = sorted(set(value) - levels)
                if extra:
                    raise ValueError(
                        f"thresholds.{name} names concurrency {extra}, which bench.concurrency "
                        f"{sorted(levels)} does not measure"
                    )
        return self


class GatesFile(_Strict):
    """The whole gates file: `version: 1` and a `stages:` mapping."""

    version: Literal[1] = 1
    """File format version; only 1 exists."""
    stages: dict[str, StageGates] = Field(min_length=1)
    """Target stage name -> its gates."""

    @field_validator("stages")
    @classmethod
    def _stage_names(cls, value: dict[str, StageGates]) -> dict[str, StageGates]:
        for name in value:
            if not re.match(STAGE_NAME_PATTERN, name):
                raise ValueError(
                    f"stage name {name!r} must be lowercase letters, digits and '-', "
                    "starting with a letter (max 32)"
                )
        return value

    def for_stage(self, stage: str) -> StageGates:
        """The gates of `stage`; a stage without gates is an error, never 'no gates'."""
        try:
            return self.stages[stage]
        except KeyError:
            raise SpecError(
                f"gates.stages.{stage}",
                f"the gates file defines no gates for target stage {stage!r}",
                sorted(self.stages),
            ) from None


def _field_path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        # pydantic adds the union member's type name to the location; it means nothing
        # to someone editing YAML.
        if isinstance(item, str) and (item in {"float", "dict[int,float]"} or "[" in item):
            continue
        parts.append(str(item))
    return ".".join(["gates", *parts])


def _spec_error(exc: ValidationError) -> SpecError:
    first = exc.errors()[0]
    field = _field_path(tuple(first["loc"]))
    message = first["msg"].removeprefix("Value error, ")
    allowed: str | None = None
    if first["type"] == "extra_forbidden":
        message = "unknown field (misspelt?)"
        allowed = _allowed_keys(tuple(first["loc"]))
    elif first["type"] == "literal_error":
        allowed = str(first.get("ctx", {}).get("expected", "")) or None
    # A union (number | mapping) reports one error per member for the same field.
    more = len({_field_path(tuple(e["loc"])) for e in exc.errors()} - {field})
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return SpecError(field, message, allowed)


def _allowed_keys(loc: tuple[int | str, ...]) -> str | None:
    """The field names valid at the parent of an unknown key, for the error message."""
    model: type[BaseModel] = GatesFile
    path = list(loc[:-1])
    while path:
        key = path.pop(0)
        if model is GatesFile and key == "stages":
            model = StageGates
            if path:
                path.pop(0)  # the stage name
            continue
        info = model.model_fields.get(str(key))
        annotation = getattr(info, "annotation", None) if info else None
        candidates = [a for a in getattr(annotation, "__args__", (annotation,)) if a]
        sub = next(
            (c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None
        )
        if sub is None:
            return None
        model = sub
    return ", ".join(model.model_fields)


def parse_gates(data: Any) -> GatesFile:
    """Validate an already-parsed gates document; errors become one SpecError."""
    if not isinstance(data, dict):
        raise SpecError("gates", "the gates file must be a mapping with a `stages:` key")
    try:
        return GatesFile.model_validate(data)
    except ValidationError as exc:
        raise _spec_error(exc) from None


def load_gates(path: str | Path) -> GatesFile:
    """Read and validate a gates YAML (or JSON) file."""
    p = Path(path)
    if not p.is_file():
        raise SpecError("--gates", f"gates file {str(p)!r} does not exist", "a YAML file path")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SpecError("gates", f"{p} is not valid YAML{where}") from None
    return parse_gates(data)
