"""One reading of a running experiment: per-variant figures, the decision, the guardrails.

`analyse` is a pure function of the observations (container metric lines and SageMaker's
invocation counts per variant) and the experiment's settings; the emulated experiments
of the simulation test and `peagle experiment status` both go through it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from peagle_deploy.experiment.observations import (
    InvocationCounts,
    LineObservation,
    VariantSummary,
    paired_log_ratios,
    summarize,
    windows,
)
from peagle_deploy.experiment.stats import Decision, Minimums, decide
from peagle_deploy.spec.models import ExperimentSpec, GuardrailSpec


@dataclass(frozen=True)
class Breach:
    """A guardrail the candidate crossed."""

    guardrail: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"guardrail": self.guardrail, "detail": self.detail}


def check_guardrails(
    incumbent: VariantSummary, candidate: VariantSummary, rules: GuardrailSpec
) -> list[Breach]:
    """The guardrails the candidate crossed over the recent window (figures of that window).

    Nothing fires before each variant has `rules.min_requests` requests in the window:
    a p99 from a handful of requests is noise, and a false alarm ends a good experiment.
    """
    breaches: list[Breach] = []
    if candidate.invocations >= rules.min_requests and candidate.error_rate is not None:
        limit = rules.max_error_rate_percent / 100
        if candidate.error_rate > limit:
            breaches.append(
                Breach(
                    "max_error_rate_percent",
                    f"candidate error rate {candidate.error_rate:.2%} > "
                    f"{rules.max_error_rate_percent:g}% over {candidate.invocations:.0f} "
                    "invocations",
                )
            )
    if min(incumbent.requests, candidate.requests) < rules.min_requests:
        return breaches
    factor = 1 + rules.max_p99_latency_increase_percent / 100
    for label, inc, cand in (
        ("p99 time to first token", incumbent.ttft_ms.get("p99"), candidate.ttft_ms.get("p99")),
        ("p99 request latency", incumbent.e2e_ms.get("p99"), candidate.e2e_ms.get("p99")),
    ):
        if inc and cand and cand > inc * factor:
            breaches.append(
                Breach(
                    "max_p99_latency_increase_percent",
                    f"candidate {label} {cand:.0f} ms > incumbent {inc:.0f} ms "
                    f"+ {rules.max_p99_latency_increase_percent:g}%",
                )
            )
    return breaches


@dataclass(frozen=True)
class Analysis:
    """What `peagle experiment status` shows, and what `conclude` acts on."""

    incumbent: VariantSummary
    candidate: VariantSummary
    pairs: list[tuple[int, float]]
    decision: Decision
    breaches: list[Breach]
    elapsed_s: float

    def to_json(self) -> dict[str, Any]:
        result = self.decision.result
        return {
            "elapsed_s": round(self.elapsed_s, 1),
            "variants": {
                "incumbent": self.incumbent.to_json(),
                "candidate": self.candidate.to_json(),
            },
            "difference": (
                {
                    "metric": "decode_tokens_per_s",
                    "relative": result.relative_difference,
                    "ci": list(result.ci),
                    "confidence": 1 - result.alpha,
                    "p_value": result.p_value,
                    "windows": result.windows,
                    "test": "mSPRT (always-valid)",
                }
                if result is not None
                else None
            ),
            "decision": {
                "verdict": self.decision.verdict,
                "winner": self.decision.winner,
                "reason": self.decision.reason,
            },
            "guardrails": [b.to_json() for b in self.breaches],
        }


def analyse(
    lines: Sequence[LineObservation],
    counts: Mapping[str, InvocationCounts],
    recent_counts: Mapping[str, InvocationCounts],
    *,
    experiment: ExperimentSpec,
    incumbent: str,
    candidate: str,
    started_ms: int,
    now_ms: int,
    final: bool = False,
) -> Analysis:
    """Read the experiment at `now_ms`; `final` when it must end now (conclude)."""
    elapsed_s = max(0.0, (now_ms - started_ms) / 1000)
    in_span = [o for o in lines if started_ms <= o.timestamp_ms <= now_ms]
    by_variant = {
        name: [o for o in in_span if o.variant == name] for name in (incumbent, candidate)
    }
    summaries = {
        name: summarize(
            name, by_variant[name], counts.get(name, InvocationCounts()), duration_s=elapsed_s
        )
        for name in (incumbent, candidate)
    }
    pairs = paired_log_ratios(
        windows(in_span, start_ms=started_ms, window_s=experiment.window_seconds),
        incumbent=incumbent,
        candidate=candidate,
    )
    decision = decide(
        [d for _, d in pairs],
        alpha=experiment.alpha,
        elapsed_s=elapsed_s,
        requests=(
            round(summaries[incumbent].requests),
            round(summaries[candidate].requests),
        ),
        minimums=Minimums(experiment.min_duration_minutes * 60, experiment.min_requests),
        max_duration_s=experiment.max_duration_minutes * 60,
        final=final,
    )
    rules = experiment.guardrails
    recent_from = now_ms - int(rules.window_minutes * 60_000)
    recent = [o for o in in_span if o.timestamp_ms >= recent_from]
    span = min(elapsed_s, rules.window_minutes * 60)
    breaches = check_guardrails(
        summarize(
            incumbent,
            [o for o in recent if o.variant == incumbent],
            recent_counts.get(incumbent, InvocationCounts()),
            duration_s=span,
        ),
        summarize(
            candidate,
            [o for o in recent if o.variant == candidate],
            recent_counts.get(candidate, InvocationCounts()),
            duration_s=span,
        ),
        rules,
    )
    return Analysis(
        summaries[incumbent], summaries[candidate], pairs, decision, breaches, elapsed_s
    )
