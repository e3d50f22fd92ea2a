"""Pick K (num_speculative_tokens) per concurrency from a sweep over K.

How vLLM applies a schedule (read in vLLM 0.30.0,
`vllm/v1/spec_decode/dynamic/utils.py` and `v1/core/sched/scheduler.py`):
`num_speculative_tokens_per_batch_size` is a list of inclusive `[start, end, K]`
ranges over the BATCH SIZE, i.e. the number of requests the scheduler runs in a step
(`len(num_scheduled_tokens)`). The first range must start at 1; ranges must not
overlap; a gap carries the previous K forward, and so does the tail past the last
range. Every K is capped at `num_speculative_tokens`, so that must be the largest K of
the schedule. vLLM drops the schedule (static K) when data parallelism is > 1.

Mapping concurrency to batch size: in a closed loop at concurrency C against one
instance, the engine's batch is C requests in steady state (a little less while new
requests are in prefill). An endpoint with N instances spreads C over them, so each
engine sees about C / N: pass `instances=N`. Between two measured levels whose best K
differs, the switch is put at the geometric mean of the two batch sizes (the levels
are spaced geometrically, and the measurement says nothing finer).

P-EAGLE gets ONE K, never a schedule: the rule, its reason and the fix it waits for
live in `peagle_serve.contract` (`one_k_reason`), shared with the plan, which refuses a
schedule with mode p-eagle on every engine without the fix. This command does not know
the engine the endpoint will run, so it names the recorded releases without the fix.
The one K is the one that keeps the most of each level's best throughput on average.
EAGLE-3 (sequential drafting) may get a schedule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from peagle_serve.contract import K_SCHEDULE_FIELD, one_k_reason

from peagle_deploy.bench.compare import EAGLE3, PEAGLE, Comparison
from peagle_deploy.bench.runner import SweepResult
from peagle_deploy.errors import InputError


@dataclass(frozen=True)
class LevelChoice:
    concurrency: int
    batch_size: int
    k: int
    output_throughput: float
    label: str
    candidates: dict[int, float]
    """K -> output tokens/s measured at this concurrency."""


def peagle_one_k_note() -> str:
    """Why a P-EAGLE recommendation is one K, in the plan's words (the shared rule)."""
    from peagle_deploy.catalog.engines import capability_table

    without_fix = sorted(
        (
            version
            for version, caps in capability_table().items()
            if caps.k_schedule and not caps.k_schedule_with_parallel_drafting
        ),
        key=lambda v: tuple(int(p) for p in v.split(".") if p.isdigit()),
    )
    engines = f"every recorded vLLM release ({', '.join(without_fix)})" if without_fix else "vLLM"
    return f"P-EAGLE runs one K for every batch size: {one_k_reason(engines)}"


@dataclass(frozen=True)
class KRecommendation:
    kind: str
    """`p-eagle` or `eagle3`: also the spec's `speculative.mode`."""
    choices: tuple[LevelChoice, ...]
    """The best K at each measured concurrency."""
    num_speculative_tokens: int
    schedule: tuple[tuple[int, int, int], ...] | None
    """None when one K is best everywhere, and always for P-EAGLE."""
    notes: tuple[str, ...] = ()
    """What the user should know about this recommendation (one sentence each)."""

    @property
    def measured_ks(self) -> list[int]:
        return sorted({k for ch in self.choices for k in ch.candidates})

    def speculative(self) -> dict[str, Any]:
        """The `speculative:` fields of a deployment spec."""
        out: dict[str, Any] = {
            "mode": self.kind,
            "num_speculative_tokens": self.num_speculative_tokens,
        }
        if self.schedule:
            out[K_SCHEDULE_FIELD] = [list(r) for r in self.schedule]
        return out

    def to_yaml(self) -> str:
        lines = [
            "speculative:",
            f"  mode: {self.kind}",
            f"  num_speculative_tokens: {self.num_speculative_tokens}",
        ]
        if self.schedule:
            ranges = ", ".join(f"[{a}, {b}, {k}]" for a, b, k in self.schedule)
            lines.append(f"  {K_SCHEDULE_FIELD}: [{ranges}]")
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "per_concurrency": [
                {
                    "concurrency": c.concurrency,
                    "batch_size": c.batch_size,
                    "k": c.k,
                    "label": c.label,
                    "output_throughput": c.output_throughput,
                    "output_throughput_by_k": {str(k): v for k, v in sorted(c.candidates.items())},
                }
                for c in self.choices
            ],
            "speculative": self.speculative(),
            "notes": list(self.notes),
        }


def recommend_k(
    runs: Sequence[SweepResult] | Comparison,
    *,
    kind: str | None = None,
    tolerance: float = 0.0,
    instances: int = 1,
) -> KRecommendation:
    """The best K per concurrency and the spec snippet that applies it.

    `tolerance` (e.g. 0.02 = 2 %): a K within that fraction of the best keeps the K
    chosen at the previous (lower) concurrency, so noise does not create switches.
    """
    comparison = runs if isinstance(runs, Comparison) else Comparison(list(runs))
    if not 0.0 <= tolerance < 1.0:
        raise InputError("--tolerance", f"{tolerance} is out of range", "0 <= tolerance < 1")
    if instances < 1:
        raise InputError("--instances", f"{instances} is below 1", ">= 1")
    kind, pool = _runs_of_kind(comparison, kind)
    choices = _level_choices(comparison, pool, tolerance, instances)
    notes: list[str] = []
    ks = sorted({run.k for run in pool if run.k is not None})
    if len(ks) == 1:
        notes.append(
            f"only K={ks[0]} was measured ({kind}): there is nothing to choose between; "
            f"sweep several K (e.g. {kind.replace('-', '')}-k3, -k5, -k7) to get a "
            "recommendation"
        )
    if kind == PEAGLE:
        k = one_k(choices)
        schedule = None
        if len({ch.k for ch in choices}) > 1:
            notes.append(f"{peagle_one_k_note()}; K={k} keeps the most of each level's best")
    else:
        k = max(ch.k for ch in choices)
        schedule = build_schedule(choices)
    return KRecommendation(
        kind=kind,
        choices=tuple(choices),
        num_speculative_tokens=k,
        schedule=schedule,
        notes=tuple(notes),
    )


def _runs_of_kind(comparison: Comparison, kind: str | None) -> tuple[str, list[SweepResult]]:
    """The kind to recommend for (P-EAGLE before EAGLE-3 when not given) and its runs."""
    with_k = [r for r in comparison.runs if r.k is not None]
    if kind is None:
        kinds = {r.kind for r in with_k}
        kind = PEAGLE if PEAGLE in kinds else EAGLE3 if EAGLE3 in kinds else None
    pool = [r for r in with_k if r.kind == kind]
    if not pool:
        raise InputError(
            "--results",
            "no P-EAGLE or EAGLE-3 runs with a K (label them like peagle-k7, or give k)",
            "runs labelled <kind>-k<N>",
        )
    return kind or PEAGLE, pool


def _level_choices(
    comparison: Comparison, pool: Sequence[SweepResult], tolerance: float, instances: int
) -> list[LevelChoice]:
    """Per concurrency, the K of the highest throughput (ties: the smaller K), kept from
    the level below while it stays within `tolerance` of the best."""
    choices: list[LevelChoice] = []
    previous: int | None = None
    for c in comparison.concurrencies:
        candidates: dict[int, tuple[float, str]] = {}
        for run in pool:
            value = comparison.throughput(run, c)
            assert run.k is not None
            if value is not None and (run.k not in candidates or value > candidates[run.k][0]):
                candidates[run.k] = (value, run.label)
        if not candidates:
            continue
        best_k = max(candidates, key=lambda k: (candidates[k][0], -k))
        best_value = candidates[best_k][0]
        if (
            previous is not None
            and previous in candidates
            and candidates[previous][0] >= best_value * (1.0 - tolerance)
        ):
            best_k = previous
        previous = best_k
        choices.append(
            LevelChoice(
                concurrency=c,
                batch_size=max(1, math.ceil(c / instances)),
                k=best_k,
                output_throughput=candidates[best_k][0],
                label=candidates[best_k][1],
                candidates={k: v for k, (v, _) in candidates.items()},
            )
        )
    return choices


def one_k(choices: Sequence[LevelChoice]) -> int:
    """The single K that keeps the largest mean share of each level's best throughput.

    Only K measured at every level compete (a K missing somewhere cannot be judged
    there); ties go to the better worst level, then to the smaller K.
    """
    everywhere = set.intersection(*(set(ch.candidates) for ch in choices))
    pool = everywhere or {k for ch in choices for k in ch.candidates}

    def score(k: int) -> tuple[float, float, int]:
        shares = [ch.candidates.get(k, 0.0) / max(ch.candidates.values()) for ch in choices]
        return (sum(shares) / len(shares), min(shares), -k)

    return max(pool, key=score)


def build_schedule(choices: Sequence[LevelChoice]) -> tuple[tuple[int, int, int], ...] | None:
    """Inclusive `[start, end, K]` batch-size ranges, or None when K never changes."""
    if len({ch.k for ch in choices}) <= 1:
        return None
    ranges: list[list[int]] = []
    start = 1
    for i, ch in enumerate(choices):
        nxt = choices[i + 1] if i + 1 < len(choices) else None
        if nxt is not None and nxt.k == ch.k:
            continue
        if nxt is None:
            end = max(ch.batch_size, start)
        else:
            end = max(start, math.floor(math.sqrt(ch.batch_size * nxt.batch_size)))
            end = min(end, max(start, nxt.batch_size - 1))
        if ranges and ranges[-1][2] == ch.k:
            ranges[-1][1] = end
        else:
            ranges.append([start, end, ch.k])
        start = end + 1
    return tuple((a, b, k) for a, b, k in ranges)
