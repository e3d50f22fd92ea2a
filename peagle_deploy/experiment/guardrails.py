"""The guardrails: sequential tests over everything since the start of an experiment.

A guardrail reads all the evidence since the start (not a recent window), so a failing
candidate is stopped at low traffic too, and fires only once a test of `stats` crosses
1/alpha (`guardrails.alpha`, for each guardrail): a candidate within its limits is
stopped at most alpha of the time over the whole experiment.

- Errors: the candidate's 5xx rate is above `max_error_rate_percent` AND above the
  incumbent's. Both tests must reject (an intersection-union test, level alpha), so a
  candidate as good as the incumbent is not stopped for errors both share (a bad client,
  an overloaded endpoint), and one a little worse than a clean incumbent is not stopped
  for a rate within the limit.
- Latency (p99 time to first token, p99 request latency): a lower confidence bound of the
  candidate's p99 is above (1 + `max_p99_latency_increase_percent`/100) times an upper
  confidence bound of the incumbent's. Each bound comes from the histograms' bucket
  counts: "more than 1 % of requests are slower than bound b" is a rate test, so the
  bounds are bucket bounds and need no assumption about the distribution (alpha/2
  each). They need a few hundred requests per variant (about 500 for the incumbent's
  upper bound at the default alpha).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from peagle_deploy.experiment import stats
from peagle_deploy.experiment.histogram import Histogram
from peagle_deploy.experiment.observations import VariantSample
from peagle_deploy.spec.models import GuardrailSpec

P99_TAIL = 0.01

LATENCIES = (("ttft_s", "p99 time to first token"), ("e2e_s", "p99 request latency"))


@dataclass(frozen=True)
class Breach:
    """A guardrail the candidate crossed."""

    guardrail: str
    detail: str
    at_ms: int | None = None
    """When the evidence first crossed, where the guardrail knows it."""

    def to_json(self) -> dict[str, Any]:
        return {"guardrail": self.guardrail, "detail": self.detail, "at_ms": self.at_ms}


def _per_minute(
    samples: Sequence[VariantSample], incumbent: str, candidate: str
) -> list[tuple[int, tuple[float, float, float, float]]]:
    """(time, (candidate invocations, errors, incumbent invocations, errors)) per sample
    time, in time order."""
    table: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for o in samples:
        if o.invocations <= 0 or o.variant not in (incumbent, candidate):
            continue
        row = table[o.timestamp_ms]
        at = 0 if o.variant == candidate else 2
        row[at] += o.invocations
        row[at + 1] += o.errors
    return [(t, (r[0], r[1], r[2], r[3])) for t, r in sorted(table.items())]


def error_breach(
    samples: Sequence[VariantSample], *, incumbent: str, candidate: str, rules: GuardrailSpec
) -> Breach | None:
    """The error guardrail over `samples` (their invocations and errors): the first
    minute at which both tests had crossed, as a reading every minute would see it.

    Both tests' evidence grows only in minutes with a candidate error, so only those
    minutes are read."""
    minutes = _per_minute(samples, incumbent, candidate)
    excess = stats.excess_evidence(m for _, m in minutes)
    limit = rules.max_error_rate_percent / 100
    bar = math.log(1 / rules.alpha)
    calls = errors = theirs_calls = theirs = 0.0
    for (at, (n_c, e_c, n_i, e_i)), above_theirs in zip(minutes, excess, strict=True):
        calls, errors = calls + n_c, errors + e_c
        theirs_calls, theirs = theirs_calls + n_i, theirs + e_i
        if e_c <= 0 or above_theirs < bar or stats.rate_evidence(errors, calls, limit) < bar:
            continue
        return Breach(
            "max_error_rate_percent",
            f"candidate error rate {errors / calls:.2%} over {calls:.0f} invocations is "
            f"above {rules.max_error_rate_percent:g}% and above the incumbent's "
            f"{theirs / max(1.0, theirs_calls):.2%} (sequential tests, alpha {rules.alpha:g})",
            at,
        )
    return None


def _tail_count(n: float, alpha: float, *, above: bool) -> float | None:
    """The tail count (observations beyond a value) at which the rate test first shows
    that more than 1 % lie beyond (`above`: the smallest such count) or fewer than 1 %
    (not `above`: the largest); None when no count out of `n` shows it."""
    bar = math.log(1 / alpha)

    def shown(tail: float) -> bool:
        return stats.rate_evidence(tail, n, P99_TAIL, above=above) >= bar

    if not shown(n if above else 0.0):
        return None
    low, high = 0.0, n  # the evidence is monotone in the tail count: bisect
    for _ in range(60):
        mid = (low + high) / 2
        if shown(mid) == above:
            high = mid
        else:
            low = mid
    return high if above else low


def p99_lower_bound(h: Histogram | None, alpha: float) -> float | None:
    """A value the p99 is shown to exceed (more than 1 % of requests beyond it), read
    inside its bucket as a tail (`Histogram.tail_value`)."""
    if h is None or h.count <= 0:
        return None
    tail = _tail_count(h.count, alpha, above=True)
    return None if tail is None else h.tail_value(tail, high=False)


def p99_upper_bound(h: Histogram | None, alpha: float) -> float | None:
    """A value the p99 is shown to be within (fewer than 1 % beyond it), read inside its
    bucket as a tail; None when nothing bounds it (beyond the largest bound)."""
    if h is None or h.count <= 0:
        return None
    tail = _tail_count(h.count, alpha, above=False)
    return None if tail is None else h.tail_value(max(tail, 1e-9), high=True)


def latency_breaches(
    incumbent: Mapping[str, Histogram | None],
    candidate: Mapping[str, Histogram | None],
    rules: GuardrailSpec,
) -> list[Breach]:
    """The latency guardrails over the variants' merged histograms since the start."""
    factor = 1 + rules.max_p99_latency_increase_percent / 100
    breaches = []
    for key, label in LATENCIES:
        theirs = p99_upper_bound(incumbent.get(key), rules.alpha / 2)
        ours = p99_lower_bound(candidate.get(key), rules.alpha / 2)
        if theirs is not None and ours is not None and ours > theirs * factor:
            breaches.append(
                Breach(
                    "max_p99_latency_increase_percent",
                    f"candidate {label} above {ours * 1000:.0f} ms, incumbent's at most "
                    f"{theirs * 1000:.0f} ms: more than "
                    f"+{rules.max_p99_latency_increase_percent:g}% (sequential tests, "
                    f"alpha {rules.alpha:g})",
                )
            )
    return breaches
