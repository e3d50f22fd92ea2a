"""The gates file: what a configuration must prove before it may enter a stage.

Gates live in a YAML file checked into the user's repository (see `gates.example.yaml`),
one block per *target* stage: promoting dev -> staging runs the `staging` block against
the dev endpoint. Every field is validated by pydantic before any AWS call, and a bad
value is reported as one `InputError` naming the dotted field path and what is allowed,
so a typo in CI fails in a second instead of after a 10-minute benchmark.

Thresholds that depend on load (output tokens/s, p99 TTFT) can be one number for every
concurrency level or a mapping `{concurrency: value}`: P-EAGLE's throughput at
concurrency 1 and 32 differs by an order of magnitude (docs/platform-facts.md,
"Published results"), so one floor for all levels would be either useless or unreachable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from peagle_deploy.bench.settings import BenchSettings
from peagle_deploy.errors import InputError
from peagle_deploy.spec.stage import StageName

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


GATE_BENCH_DEFAULTS: dict[str, Any] = {"concurrency": [1, 4], "num_prompts": 16, "warmup": 1}
"""What a gates file's `bench:` block leaves out, where the gates differ from `peagle bench`:
fewer levels and requests, so a promotion's benchmark takes minutes, not an hour."""


def _gate_bench(value: Any) -> Any:
    """A `bench:` block with the gates' defaults under what the file sets."""
    if isinstance(value, dict):
        return {**GATE_BENCH_DEFAULTS, **value}
    return value


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
    bench: Annotated[BenchSettings | None, BeforeValidator(_gate_bench)] = Field(
        default_factory=lambda: BenchSettings(**GATE_BENCH_DEFAULTS)
    )
    """Benchmark settings (`peagle bench`'s, with GATE_BENCH_DEFAULTS); null = smoke test
    only (no thresholds allowed then)."""
    thresholds: Thresholds = Field(default_factory=Thresholds)
    """Pass conditions on the benchmark."""
    baseline_stage: StageName | None = None
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
    stages: dict[StageName, StageGates] = Field(min_length=1)
    """Target stage name -> its gates."""

    def for_stage(self, stage: str) -> StageGates:
        """The gates of `stage`; a stage without gates is an error, never 'no gates'."""
        try:
            return self.stages[stage]
        except KeyError:
            raise InputError(
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


def _input_error(exc: ValidationError) -> InputError:
    first = exc.errors()[0]
    field = _field_path(tuple(first["loc"]))
    message = first["msg"].removeprefix("Value error, ")
    allowed: str | None = None
    if first["type"] == "extra_forbidden":
        message = "unknown field (misspelt?)"
        allowed = _allowed_keys(tuple(first["loc"]))
    elif first["type"] == "literal_error":
        allowed = str(first.get("ctx", {}).get("expected", "")) or None
    elif "allowed" in first.get("ctx", {}):
        allowed = str(first["ctx"]["allowed"])
    # A union (number | mapping) reports one error per member for the same field.
    more = len({_field_path(tuple(e["loc"])) for e in exc.errors()} - {field})
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return InputError(field, message, allowed)


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
    """Validate an already-parsed gates document; errors become one InputError."""
    if not isinstance(data, dict):
        raise InputError("gates", "the gates file must be a mapping with a `stages:` key")
    try:
        return GatesFile.model_validate(data)
    except ValidationError as exc:
        raise _input_error(exc) from None


def load_gates(path: str | Path, field: str = "--gates") -> GatesFile:
    """Read and validate a gates YAML (or JSON) file; file problems name `field`.

    Read through the one loading path (peagle_deploy.documents): a stage given twice
    under `stages:` is a duplicate key and refused here, before any AWS call.
    """
    from peagle_deploy.documents import load_document

    p = Path(path)
    if not p.exists():
        raise InputError(field, f"gates file {str(p)!r} does not exist", "a YAML file path")
    return parse_gates(load_document(p, field))
