"""One reading of a running experiment: per-variant figures, the decision, the guardrails.

`analyse` is the experiment's decision: one pure function from the samples the platform
provides (`observations.VariantSample`: per variant and period, finished requests,
generated tokens, decode seconds, latency histograms, invocations and 5xx errors) and
the experiment's settings to what `peagle experiment status` shows and `conclude` and
`watch` act on. The simulation (`tests/experiment/decision_sim.py`) and the lifecycle
both go through it.

1. Blocks: each variant's decode speed pooled over each `block_minutes` from the start
   (`observations.windows`); a block counts when both variants finished at least
   `stats.MIN_BLOCK_REQUESTS` requests in it; each gives d = log(candidate / incumbent),
   weighted by the requests both finished in it.
2. The instance spread (`spread_of`): the stated prior, and what each fleet's instances
   show, compared within their fleet (`observations.instance_windows`).
3. The rule (`stats.decide`): a confidence sequence for the traffic-weighted mean of d,
   widened by the fleets' difference the spread allows, read at the end of whole
   cycles; promote when its lower bound clears the margin.
4. The guardrails (`guardrails`): sequential tests over everything since the start.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from peagle_deploy.experiment.guardrails import Breach, error_breach, latency_breaches
from peagle_deploy.experiment.observations import (
    VariantSample,
    VariantSummary,
    fleet_speeds,
    instance_windows,
    merged_histograms,
    paired_log_ratios,
    summarize,
    windows,
)
from peagle_deploy.experiment.spread import Spread, estimate
from peagle_deploy.experiment.stats import (
    MIN_BLOCK_REQUESTS,
    Block,
    Decision,
    Schedule,
    SequentialResult,
    decide,
)
from peagle_deploy.spec.models import ExperimentSpec

__all__ = ["Analysis", "Breach", "analyse", "schedule_of"]


def schedule_of(experiment: ExperimentSpec) -> Schedule:
    """When the rule of `experiment` may look."""
    return Schedule(
        block_s=experiment.block_minutes * 60,
        cycle_s=experiment.cycle_minutes * 60,
        max_duration_s=experiment.max_duration_minutes * 60,
    )


def _bound(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _spread_json(spread: Spread | None) -> dict[str, Any] | None:
    if spread is None:
        return None
    return {
        "prior": spread.prior,
        "measured": spread.measured.tau,
        "degrees_of_freedom": spread.measured.df,
        "per_instance": spread.per_instance,
        "instances": list(spread.instances),
        "fleet_difference_sd": spread.fleet_sd,
        "source": spread.source,
    }


def _difference(result: SequentialResult, decision: Decision, *, acted: bool) -> dict[str, Any]:
    low, high = result.ci
    return {
        "metric": "decode_tokens_per_s",
        "relative": result.relative_difference,
        "weighting": "traffic (requests per block)",
        "ci": [_bound(low), _bound(high)],
        "confidence": 1 - result.alpha,
        "blocks": result.blocks,
        "effective_blocks": round(result.effective_blocks, 2),
        "noise_half_width": _bound(result.noise_half_width),
        "spread_half_width": result.spread_half_width,
        "instance_spread": _spread_json(decision.spread),
        "lag1_autocorrelation": result.lag1,
        "margin": decision.margin,
        "whole_cycles": acted,
        "test": (
            "confidence sequence over traffic-weighted block means (Lai's t-mixture), "
            "widened by the instance spread"
        ),
    }


@dataclass(frozen=True)
class Analysis:
    """What `peagle experiment status` shows, and what `conclude` acts on."""

    incumbent: VariantSummary
    candidate: VariantSummary
    pairs: list[Block]
    """Every block that counts (index, log ratio, traffic), in time order."""
    decision: Decision
    breaches: list[Breach]
    elapsed_s: float
    block_s: float = 3600.0
    cycle_s: float = 86400.0

    def to_json(self) -> dict[str, Any]:
        d = self.decision
        shown = d.result if d.result is not None else d.current
        return {
            "elapsed_s": round(self.elapsed_s, 1),
            "variants": {
                "incumbent": self.incumbent.to_json(),
                "candidate": self.candidate.to_json(),
            },
            "blocks": {
                "counted": len(self.pairs),
                "block_s": self.block_s,
                "cycle_s": self.cycle_s,
                "cycles_seen": d.cycles,
                "next_look_s": d.next_look_s,
            },
            "difference": (
                _difference(shown, d, acted=d.result is not None) if shown is not None else None
            ),
            "decision": {
                "verdict": d.verdict,
                "winner": d.winner,
                "reason": d.reason,
                "calibration": d.calibration,
                "missing": list(d.missing),
            },
            "guardrails": [b.to_json() for b in self.breaches],
        }


def spread_of(
    samples: Sequence[VariantSample],
    *,
    experiment: ExperimentSpec,
    fleets: tuple[str, str],
    started_ms: int,
    below: int,
) -> Spread:
    """The instance spread over the blocks before `below`: the stated prior, and what
    the instances show (compared within their fleet; a calibration's all together, as
    every instance runs the incumbent's model)."""
    by = instance_windows(samples, start_ms=started_ms, window_s=experiment.block_minutes * 60)
    speeds = [
        fleet_speeds(by.get(v, {}), below=below, min_requests=MIN_BLOCK_REQUESTS) for v in fleets
    ]
    counts = (max(1, len(speeds[0])), max(1, len(speeds[1])))
    if experiment.calibration:
        together = {
            f"{v}/{i}": s for v, f in zip(fleets, speeds, strict=True) for i, s in f.items()
        }
        groups = [together]
    else:
        groups = speeds
    return Spread(experiment.instance_spread_percent / 100, estimate(groups), counts)


def analyse(
    samples: Sequence[VariantSample],
    *,
    experiment: ExperimentSpec,
    incumbent: str,
    candidate: str,
    started_ms: int,
    now_ms: int,
    final: bool = False,
) -> Analysis:
    """Read the experiment at `now_ms` from every sample since `started_ms`; `final` when
    it must end now (conclude)."""
    elapsed_s = max(0.0, (now_ms - started_ms) / 1000)
    # a sample counts when its period overlaps [start, now] (the minute under way too)
    in_span = [
        o
        for o in samples
        if o.timestamp_ms > started_ms and o.timestamp_ms - o.interval_s * 1000 < now_ms
    ]
    by_variant = {
        name: [o for o in in_span if o.variant == name] for name in (incumbent, candidate)
    }
    schedule = schedule_of(experiment)
    pairs = paired_log_ratios(
        windows(in_span, start_ms=started_ms, window_s=schedule.block_s),
        incumbent=incumbent,
        candidate=candidate,
        min_requests=MIN_BLOCK_REQUESTS,
    )
    below = schedule.looked_blocks(elapsed_s) or schedule.complete_blocks(elapsed_s)
    spread = spread_of(
        in_span,
        experiment=experiment,
        fleets=(incumbent, candidate),
        started_ms=started_ms,
        below=below,
    )
    decision = decide(
        pairs,
        alpha=experiment.alpha,
        margin=experiment.margin_percent / 100,
        schedule=schedule,
        elapsed_s=elapsed_s,
        spread=spread,
        calibration=experiment.calibration,
        final=final,
    )
    rules = experiment.guardrails
    breach = error_breach(in_span, incumbent=incumbent, candidate=candidate, rules=rules)
    breaches = [breach] if breach is not None else []
    breaches += latency_breaches(
        merged_histograms(by_variant[incumbent]), merged_histograms(by_variant[candidate]), rules
    )
    return Analysis(
        summarize(incumbent, by_variant[incumbent], duration_s=elapsed_s),
        summarize(candidate, by_variant[candidate], duration_s=elapsed_s),
        pairs,
        decision,
        breaches,
        elapsed_s,
        schedule.block_s,
        schedule.cycle_s,
    )
