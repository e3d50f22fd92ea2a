"""Per-request records and the per-level metrics computed from them.

The definitions follow `vllm bench serve` (vLLM 0.30.0, `vllm/benchmarks/serve.py`
`calculate_metrics` and `lib/endpoint_request_func.py`) so that our numbers can be put
next to the published ones:

- TTFT: request start to the first stream event that carries `choices` (vLLM's first
  chunk is the role chunk, sent with the first generated token).
- ITL: the gap between two consecutive `choices` events. An event that carries several
  tokens (speculative decoding emits up to K+1 per step) gives ONE ITL value, as in vLLM.
- E2EL ("latency"): request start to the last `choices` event. The trailing usage-only
  event carries no token and does not extend it.
- TPOT: (latency - ttft) / (output_tokens - 1), only for requests with > 1 output token.
- output_throughput: total output tokens of completed requests / benchmark duration,
  where the duration runs from the first request start to the last request end.
- Percentiles: linear interpolation between closest ranks (numpy's default).

One deliberate difference: output tokens come only from the server's `usage`
(`completion_tokens`). vLLM falls back to re-tokenising the text or to 1; a request
without usage here is counted as failed with the reason "no usage", so the published
metric is never estimated.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from peagle_serve.metrics import DraftCounters

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")
PERCENTILES = (90, 99)


@dataclass
class RequestOutput:
    """What one benchmark request produced. Times are `time.perf_counter()` seconds."""

    success: bool = False
    error: str | None = None
    start_time: float = 0.0
    ttft: float = 0.0
    latency: float = 0.0
    itl: list[float] = field(default_factory=list)
    output_tokens: int | None = None
    prompt_tokens: int | None = None

    @property
    def end_time(self) -> float:
        return self.start_time + self.latency


@dataclass(frozen=True)
class AcceptanceStats:
    """Speculative-decoding counters over one level (deltas, not totals).

    `acceptance_rate` is in percent, as `vllm bench serve` reports
    `spec_decode_acceptance_rate`; `acceptance_length` = 1 + accepted / drafts.
    """

    acceptance_rate: float
    acceptance_length: float
    num_drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    source: str = "prometheus"
    per_position: tuple[float, ...] = ()
    """Acceptance rate (0-1) at draft position 1, 2, ... (vLLM's per-position rates)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "spec_decode_acceptance_rate": round(self.acceptance_rate, 4),
            "spec_decode_acceptance_length": round(self.acceptance_length, 4),
            "spec_decode_source": self.source,
        }
        if self.num_drafts is not None:
            out["spec_decode_num_drafts"] = self.num_drafts
        if self.draft_tokens is not None:
            out["spec_decode_draft_tokens"] = self.draft_tokens
        if self.accepted_tokens is not None:
            out["spec_decode_accepted_tokens"] = self.accepted_tokens
        if self.per_position:
            out["spec_decode_per_position_acceptance_rates"] = [
                round(r, 4) for r in self.per_position
            ]
        return out


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile with linear interpolation (numpy.percentile's default)."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * (p / 100.0)
    lo = math.floor(rank)
    hi = math.ceil(rank)
    if lo == hi:
        return ordered[lo]
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


def _summary(name: str, values_s: Sequence[float]) -> dict[str, float | None]:
    """mean/median/p90/p99 of one latency metric, in milliseconds (None without data)."""
    out: dict[str, float | None] = {}
    if not values_s:
        out[f"mean_{name}_ms"] = None
        out[f"median_{name}_ms"] = None
        for p in PERCENTILES:
            out[f"p{p}_{name}_ms"] = None
        return out
    ordered = sorted(values_s)
    out[f"mean_{name}_ms"] = _ms(sum(ordered) / len(ordered))
    out[f"median_{name}_ms"] = _ms(percentile(ordered, 50))
    for p in PERCENTILES:
        out[f"p{p}_{name}_ms"] = _ms(percentile(ordered, p))
    return out


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 4)


def level_metrics(outputs: Iterable[RequestOutput], duration_s: float) -> dict[str, Any]:
    """The `vllm bench serve` metric set for one level.

    `duration_s` is the benchmark duration (first start to last end). Failed requests
    count in `failed` and in `errors` (reason -> count), not in any other metric.
    """
    outputs = list(outputs)
    completed = [o for o in outputs if o.success]
    failed = [o for o in outputs if not o.success]
    ttfts: list[float] = []
    tpots: list[float] = []
    itls: list[float] = []
    e2els: list[float] = []
    total_output = 0
    total_input = 0
    input_known = bool(completed)
    for o in completed:
        n = o.output_tokens or 0
        total_output += n
        if o.prompt_tokens is None:
            input_known = False
        else:
            total_input += o.prompt_tokens
        ttfts.append(o.ttft)
        e2els.append(o.latency)
        itls.extend(o.itl)
        if n > 1:
            tpots.append((o.latency - o.ttft) / (n - 1))
    dur = duration_s if duration_s > 0 else float("nan")
    result: dict[str, Any] = {
        "completed": len(completed),
        "failed": len(failed),
        "duration_s": round(duration_s, 6),
        "total_input_tokens": total_input if input_known else None,
        "total_output_tokens": total_output,
        "request_throughput": _rate(len(completed), dur),
        "output_throughput": _rate(total_output, dur),
        "total_token_throughput": _rate(total_input + total_output, dur) if input_known else None,
    }
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        result.update(_summary(name, values))
    reasons = Counter(_reason(o.error) for o in failed)
    result["errors"] = dict(reasons.most_common())
    return result


def _rate(count: float, duration_s: float) -> float:
    if math.isnan(duration_s):
        return 0.0
    return round(count / duration_s, 4)


def _reason(error: str | None) -> str:
    """Group failures by their first line so the report stays readable."""
    if not error:
        return "unknown error"
    return error.strip().splitlines()[0][:200]


# --- Acceptance from vLLM's counters (parsed by peagle_serve.metrics) ---------------


def acceptance_delta(
    before: DraftCounters | None, after: DraftCounters | None
) -> AcceptanceStats | None:
    """Acceptance over the interval between two /metrics snapshots (vLLM's formulas:
    rate = accepted / draft tokens in percent, length = 1 + accepted / drafts)."""
    if before is None or after is None:
        return None
    drafts = after.drafts - before.drafts
    draft_tokens = after.draft_tokens - before.draft_tokens
    accepted = after.accepted_tokens - before.accepted_tokens
    if draft_tokens <= 0:
        return None
    per_position: tuple[float, ...] = ()
    if drafts > 0:
        width = max(len(before.accepted_per_position), len(after.accepted_per_position))
        per_position = tuple(
            (_at(after.accepted_per_position, i) - _at(before.accepted_per_position, i)) / drafts
            for i in range(width)
        )
    return AcceptanceStats(
        acceptance_rate=accepted / draft_tokens * 100.0,
        acceptance_length=1.0 + accepted / drafts if drafts > 0 else 0.0,
        num_drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        source="prometheus",
        per_position=per_position,
    )


def _at(values: Sequence[float], i: int) -> float:
    return values[i] if i < len(values) else 0.0


def acceptance_from_metric_lines(docs: Sequence[dict[str, Any]]) -> AcceptanceStats | None:
    """Combine the container's per-interval metric lines over one level.

    Each line (peagle_serve.contract) holds one interval's acceptance_rate (a fraction),
    mean_acceptance_length and draft/accepted tokens per second. Over a level the rate
    is sum(accepted/s) / sum(draft/s). The length needs the number of drafts per
    interval, which is accepted / (length - 1); intervals where nothing was accepted
    give no count, so the length falls back to a draft-token-weighted mean then.
    Intervals without draft tokens (idle) carry no weight.
    """
    draft = accepted = drafts = 0.0
    drafts_known = True
    weighted_len = 0.0
    positions: list[tuple[float, list[float]]] = []  # (weight, rates) per interval
    for doc in docs:
        try:
            d = float(doc["draft_tokens_per_s"])
            a = float(doc["accepted_tokens_per_s"])
            length = float(doc["mean_acceptance_length"])
        except (KeyError, TypeError, ValueError):
            continue
        if d <= 0:
            continue
        draft += d
        accepted += a
        weighted_len += length * d
        weight = d
        if length > 1.0 and a > 0:
            weight = a / (length - 1.0)  # the interval's drafts
            drafts += weight
        else:
            drafts_known = False
        rates = doc.get("acceptance_rate_per_position")
        if isinstance(rates, list) and rates:
            positions.append((weight, [float(r) for r in rates]))
    if draft <= 0:
        return None
    length_all = 1.0 + accepted / drafts if drafts_known and drafts > 0 else weighted_len / draft
    return AcceptanceStats(
        acceptance_rate=accepted / draft * 100.0,
        acceptance_length=length_all,
        source="cloudwatch-logs",
        per_position=_weighted_positions(positions),
    )


def _weighted_positions(items: Sequence[tuple[float, list[float]]]) -> tuple[float, ...]:
    """Per-position rates averaged over intervals, weighted by each interval's drafts."""
    width = max((len(rates) for _, rates in items), default=0)
    out: list[float] = []
    for i in range(width):
        pairs = [(w, rates[i]) for w, rates in items if i < len(rates)]
        total = sum(w for w, _ in pairs)
        out.append(sum(w * r for w, r in pairs) / total if total > 0 else 0.0)
    return tuple(out)
