"""Pure gate evaluation: measurements + thresholds + baseline -> one result per gate.

No I/O here, so every pass/fail rule is unit-tested without an endpoint. The promotion
runner (`peagle_deploy.promote.runner`) gathers the measurements (smoke chat, bench
sweep) and calls `evaluate_gates`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from peagle_deploy.promote.gates import StageGates

GateStatus = Literal["pass", "fail", "skip"]


class LevelMeasurement(BaseModel):
    """What one benchmark concurrency level measured, as far as the gates care.

    Field names follow `vllm bench serve` (and `peagle bench`), so a recorded manifest
    reads like a bench result.
    """

    model_config = ConfigDict(frozen=True)

    concurrency: int
    output_throughput: float
    """Output tokens/s over the level."""
    p99_ttft_ms: float | None = None
    completed: int
    failed: int
    spec_decode_acceptance_length: float | None = None
    """Mean acceptance length, when the target exposes speculative-decoding metrics."""

    @property
    def error_rate(self) -> float:
        total = self.completed + self.failed
        # A level where nothing completed and nothing failed measured nothing: treat it
        # as all-failed rather than as a perfect 0% error rate.
        return 1.0 if total == 0 else self.failed / total


class SmokeOutcome(BaseModel):
    """The smoke chat request's result."""

    model_config = ConfigDict(frozen=True)

    text: str
    """Answer text (possibly empty)."""
    error: str | None = None
    """Why the request failed, if it did."""
    latency_ms: float | None = None


class GateResult(BaseModel):
    """One gate's verdict: what was measured against what was required."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Stable id, e.g. `output_throughput@c4`; used in reports and the manifest."""
    kind: str
    """smoke | bench (skipped) | output_throughput | throughput_ratio | p99_ttft_ms |
    error_rate | acceptance_length"""
    concurrency: int | None = None
    measured: float | str | None
    """The measured value (None when nothing could be measured)."""
    required: str
    """The condition, human-readable (`>= 1200`, `<= 900 ms`, `non-empty text`)."""
    status: GateStatus
    detail: str = ""

    @property
    def passed(self) -> bool:
        """A skipped gate does not block; only `fail` does."""
        return self.status != "fail"


class GateReport(BaseModel):
    """All gate results of one promotion attempt plus the measurements behind them.

    Stored in the target's manifest when the promotion goes through, so the next
    promotion into that stage has a baseline for `min_throughput_ratio`.
    """

    source_stage: str
    target_stage: str
    source_endpoint: str
    results: list[GateResult] = Field(default_factory=list)
    measurements: list[LevelMeasurement] = Field(default_factory=list)
    baseline_from: str | None = None
    """Where the throughput baseline came from (`stage/endpoint`), if any."""

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failures(self) -> list[GateResult]:
        return [r for r in self.results if r.status == "fail"]


def _fmt(value: float) -> str:
    return f"{value:,.1f}" if abs(value) < 100 else f"{value:,.0f}"


def evaluate_smoke(outcome: SmokeOutcome | None, gates: StageGates) -> list[GateResult]:
    if not gates.smoke.enabled:
        return [
            GateResult(
                name="smoke",
                kind="smoke",
                measured=None,
                required="non-empty text",
                status="skip",
                detail="disabled in the gates file",
            )
        ]
    if outcome is None:
        return [
            GateResult(
                name="smoke",
                kind="smoke",
                measured=None,
                required="non-empty text",
                status="fail",
                detail="the smoke request was not run",
            )
        ]
    text = outcome.text.strip()
    if outcome.error:
        status: GateStatus = "fail"
        detail = outcome.error
    elif not text:
        status, detail = "fail", "the endpoint answered with empty text"
    else:
        status = "pass"
        preview = text.replace("\n", " ")
        detail = preview[:32] + ("..." if len(preview) > 32 else "")
    return [
        GateResult(
            name="smoke",
            kind="smoke",
            measured=f"{len(text)} chars",
            required="non-empty text",
            status=status,
            detail=detail,
        )
    ]


def evaluate_bench(
    levels: Sequence[LevelMeasurement],
    gates: StageGates,
    baseline: Mapping[int, float] | None = None,
    baseline_from: str | None = None,
) -> list[GateResult]:
    """Threshold gates per concurrency level.

    `baseline` maps concurrency -> output tokens/s recorded for the baseline stage.
    A level the gates need but the bench did not produce fails (never silently passes).
    """
    bench = gates.bench
    if bench is None:
        return []
    t = gates.thresholds
    by_level = {m.concurrency: m for m in levels}
    results: list[GateResult] = []
    for c in bench.concurrency:
        m = by_level.get(c)
        if m is None:
            results.append(
                GateResult(
                    name=f"measured@c{c}",
                    kind="error_rate",
                    concurrency=c,
                    measured=None,
                    required="a measurement",
                    status="fail",
                    detail=f"the benchmark produced no result at concurrency {c}",
                )
            )
            continue
        rate = m.error_rate
        results.append(
            GateResult(
                name=f"error_rate@c{c}",
                kind="error_rate",
                concurrency=c,
                measured=round(rate, 4),
                required=f"<= {t.max_error_rate:.2%}",
                status="pass" if rate <= t.max_error_rate else "fail",
                detail=f"{m.failed} failed of {m.completed + m.failed}",
            )
        )
        floor = t.level_value("min_output_throughput", c)
        if floor is not None:
            results.append(
                GateResult(
                    name=f"output_throughput@c{c}",
                    kind="output_throughput",
                    concurrency=c,
                    measured=round(m.output_throughput, 2),
                    required=f">= {_fmt(floor)} tok/s",
                    status="pass" if m.output_throughput >= floor else "fail",
                )
            )
        if t.min_throughput_ratio is not None:
            results.append(_ratio_gate(m, t.min_throughput_ratio, baseline, baseline_from))
        ceiling = t.level_value("max_p99_ttft_ms", c)
        if ceiling is not None:
            p99 = m.p99_ttft_ms
            results.append(
                GateResult(
                    name=f"p99_ttft_ms@c{c}",
                    kind="p99_ttft_ms",
                    concurrency=c,
                    measured=None if p99 is None else round(p99, 2),
                    required=f"<= {_fmt(ceiling)} ms",
                    status="fail" if p99 is None or p99 > ceiling else "pass",
                    detail="no TTFT measured (no request completed)" if p99 is None else "",
                )
            )
        if t.min_acceptance_length is not None:
            results.append(
                _acceptance_gate(m, t.min_acceptance_length, t.require_acceptance_length)
            )
    return results


def _ratio_gate(
    m: LevelMeasurement,
    ratio: float,
    baseline: Mapping[int, float] | None,
    baseline_from: str | None,
) -> GateResult:
    c = m.concurrency
    base = (baseline or {}).get(c)
    name = f"throughput_ratio@c{c}"
    if base is None or base <= 0:
        return GateResult(
            name=name,
            kind="throughput_ratio",
            concurrency=c,
            measured=round(m.output_throughput, 2),
            required=f">= {ratio:g} x baseline",
            status="skip",
            detail=f"no baseline recorded at concurrency {c}"
            + (f" in {baseline_from}" if baseline_from else ""),
        )
    need = ratio * base
    return GateResult(
        name=name,
        kind="throughput_ratio",
        concurrency=c,
        measured=round(m.output_throughput, 2),
        required=f">= {_fmt(need)} tok/s ({ratio:g} x {_fmt(base)})",
        status="pass" if m.output_throughput >= need else "fail",
        detail=f"{m.output_throughput / base:.2f} x baseline"
        + (f" from {baseline_from}" if baseline_from else ""),
    )


def _acceptance_gate(m: LevelMeasurement, floor: float, required: bool) -> GateResult:
    c = m.concurrency
    value = m.spec_decode_acceptance_length
    if value is None:
        return GateResult(
            name=f"acceptance_length@c{c}",
            kind="acceptance_length",
            concurrency=c,
            measured=None,
            required=f">= {floor:g}",
            status="fail" if required else "skip",
            # The gates measure the SOURCE endpoint; "target" would point at the stage
            # being promoted into.
            detail="the measured endpoint reported no speculative-decoding metrics",
        )
    return GateResult(
        name=f"acceptance_length@c{c}",
        kind="acceptance_length",
        concurrency=c,
        measured=round(value, 3),
        required=f">= {floor:g}",
        status="pass" if value >= floor else "fail",
    )


def evaluate_gates(
    gates: StageGates,
    smoke: SmokeOutcome | None,
    levels: Sequence[LevelMeasurement],
    baseline: Mapping[int, float] | None = None,
    baseline_from: str | None = None,
) -> list[GateResult]:
    """Every gate of a stage, smoke first, then per level in concurrency order."""
    return [
        *evaluate_smoke(smoke, gates),
        *evaluate_bench(levels, gates, baseline, baseline_from),
    ]


def baseline_from_measurements(levels: Iterable[LevelMeasurement]) -> dict[int, float]:
    """Concurrency -> output tokens/s, from a previously recorded report."""
    return {m.concurrency: m.output_throughput for m in levels if m.output_throughput > 0}
