"""Which experiments can decide: the set-ups the rule is valid for, refused before any AWS call.

Comparable arms. Decode speed depends on the load an instance carries (how many requests
share its batches), so the rule compares only arms in which every candidate instance
carries an incumbent instance's load: shadow with `sampling_percent` 100 x M_c / M_i
(100 on equal fleets, 1/N of the requests on one extra instance), split with
`weight_percent` 100 x M_c / (M_i + M_c) (50/50 on equal fleets, 1/(N+1) on one). Every
other share or count is refused: an unequal load per instance moves the speeds apart by
the load's own effect, which no test on the two speeds can tell from a gain (the rule
before issue 30 declared 35-100 % false winners on such set-ups). Fleets of different
sizes are accepted since issue 35: the instances' own offsets, which one candidate
instance cannot average away, are allowed for by the rule (`experiment.spread`), at the
cost of sensitivity, which `set_up_costs` tells the plan.

Decidable. The blocks must be at least the container's metric interval (a block between
two metric lines is empty), the reporter must be on, and the test must see enough
blocks before the maximum duration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from peagle_serve.contract import METRICS_INTERVAL_ENV
from peagle_serve.numeric_env import NumericEnvError, numeric_value

from peagle_deploy.errors import InputError
from peagle_deploy.experiment.stats import MIN_BLOCK_REQUESTS, blocks_needed, spread_half_width
from peagle_deploy.spec.models import ExperimentSpec

DEFAULT_METRICS_INTERVAL_S = 60.0
"""peagle-serve's metric interval when PEAGLE_METRICS_INTERVAL_SECONDS is unset."""


def equal_load_percents(mode: str, incumbent: int, candidate: int) -> tuple[int, ...]:
    """The whole percentages (the API's SamplingPercentage is an integer) that give each
    candidate instance the load of an incumbent instance, nearest first.

    Shadow: every incumbent instance carries 1/M_i of the requests, every candidate
    instance share/M_c, so share = M_c/M_i. Split: (1 - w)/M_i = w/M_c, so w = M_c/(M_i +
    M_c)."""
    exact = 100 * candidate / (incumbent if mode == "shadow" else incumbent + candidate)
    top = 100 if mode == "shadow" else 99
    found = sorted({min(top, max(1, math.floor(exact))), min(top, max(1, math.ceil(exact)))})
    return tuple(sorted(found, key=lambda p: abs(p - exact)))


def check_comparable(settings: ExperimentSpec, incumbent_instances: int) -> None:
    """Refuse a set-up whose arms do not carry the same load per instance."""
    count = settings.candidate_instances(incumbent_instances)
    if settings.mode == "shadow" and count > incumbent_instances:
        raise InputError(
            "experiment.candidate_instance_count",
            f"{count}: more candidate instances than the incumbent's ({incumbent_instances}) "
            "cannot carry an incumbent instance's load from a copy of its requests",
            f"1 to {incumbent_instances}",
        )
    allowed = equal_load_percents(settings.mode, incumbent_instances, count)
    given = round(settings.share * 100)
    if given in allowed:
        return
    percent = "sampling_percent" if settings.mode == "shadow" else "weight_percent"
    why = (
        f"the decision compares decode speed, which depends on load, so each candidate "
        f"instance must carry an incumbent instance's load (with {incumbent_instances} "
        f"incumbent instances)"
    )
    stated = settings.sampling_percent if settings.mode == "shadow" else settings.weight_percent
    counts = _matching_counts(settings.mode, incumbent_instances, given)
    if stated is None and settings.candidate_instance_count is not None and counts:
        raise InputError(
            "experiment.candidate_instance_count",
            f"{count} at {percent} {given}: {why}",
            " or ".join(str(c) for c in counts) + f", or a {percent} matching {count}",
        )
    raise InputError(
        f"experiment.{percent}",
        f"{given} on {count} candidate instance{'s' if count != 1 else ''}: {why}",
        " or ".join(str(p) for p in allowed) + ", or a candidate_instance_count matching the share",
    )


def _matching_counts(mode: str, incumbent: int, percent: int) -> list[int]:
    """Candidate instance counts that give `percent` an incumbent instance's load."""
    top = incumbent if mode == "shadow" else 4 * incumbent
    return [c for c in range(1, top + 1) if percent in equal_load_percents(mode, incumbent, c)]


def metric_interval_s(environment: Mapping[str, str]) -> float:
    """The container's metric interval from its environment (60 s when unset)."""
    try:
        value = numeric_value(environment, METRICS_INTERVAL_ENV)
    except NumericEnvError as exc:
        raise InputError(f"env.{METRICS_INTERVAL_ENV}", str(exc)) from None
    return DEFAULT_METRICS_INTERVAL_S if value is None else float(value)


def check_decidable(settings: ExperimentSpec, environment: Mapping[str, str]) -> None:
    """Refuse settings under which the rule could never decide."""
    interval = metric_interval_s(environment)
    if interval <= 0:
        raise InputError(
            f"env.{METRICS_INTERVAL_ENV}",
            "0 turns the container's metric lines off: an experiment could never decide",
            "a number of seconds, at most block_minutes x 60",
        )
    if settings.block_minutes * 60 < interval:
        raise InputError(
            "experiment.block_minutes",
            f"{settings.block_minutes:g} is shorter than the container's metric interval "
            f"({interval:g} s, {METRICS_INTERVAL_ENV}): most blocks would hold no line",
            f">= {interval / 60:g}",
        )
    per_cycle = round(settings.cycle_minutes / settings.block_minutes)
    looks = math.floor(settings.max_duration_minutes / settings.cycle_minutes + 1e-9)
    need = blocks_needed(settings.alpha)
    if per_cycle * looks < need:
        raise InputError(
            "experiment.block_minutes",
            f"{settings.block_minutes:g} gives {per_cycle * looks} blocks by "
            f"max_duration_minutes; the test needs at least {need} at alpha "
            f"{settings.alpha:g}",
            f"<= {settings.cycle_minutes * looks / need:g}",
        )


# --- what each set-up costs, for the plan -------------------------------------------------


@dataclass(frozen=True)
class SetUp:
    """One set-up the rule accepts on an incumbent of `incumbent` instances."""

    mode: str
    percent: int
    """Shadow: sampling_percent; split: weight_percent."""
    incumbent: int
    candidate: int
    """The candidate's instances: what the experiment adds to the endpoint."""

    def spec_fields(self) -> dict[str, Any]:
        share = "sampling_percent" if self.mode == "shadow" else "weight_percent"
        return {"mode": self.mode, share: self.percent, "candidate_instance_count": self.candidate}

    def fleet_sd(self, spread: float) -> float:
        """The sd of the fleets' difference for a per-instance spread `spread` (log)."""
        return spread * math.sqrt(1 / self.incumbent + 1 / self.candidate)

    def candidate_requests_per_block(self, per_minute: float, block_minutes: float) -> float:
        """Requests the candidate finishes per block at `per_minute` for the endpoint."""
        return per_minute * self.percent / 100 * block_minutes


def set_ups(incumbent: int) -> list[SetUp]:
    """The set-ups that carry an incumbent instance's load on each candidate instance:
    a second fleet of the incumbent's size (shadow 100 %, split 50/50), and one extra
    instance (shadow 1/N, split 1/(N+1)) where the incumbent has two or more."""
    out = [SetUp("shadow", 100, incumbent, incumbent), SetUp("split", 50, incumbent, incumbent)]
    if incumbent > 1:
        for mode in ("shadow", "split"):
            out.append(SetUp(mode, equal_load_percents(mode, incumbent, 1)[0], incumbent, 1))
    return out


def set_up_costs(settings: ExperimentSpec, incumbent: int) -> list[dict[str, Any]]:
    """Each accepted set-up for this endpoint: what it adds, the smallest true gain it
    can promote, and its extra instance-hours to a decision.

    The smallest gain is the margin plus the one-sided bound of the fleets' difference
    (instance_spread_percent, sqrt(1/M_i + 1/M_c)); the blocks' own noise adds a little
    more. A decision comes at the end of a whole cycle at the earliest and by
    max_duration_minutes at the latest (the simulation in docs/experiments.md: at 20
    requests a minute, a +10 % gain is promoted at the first look in every set-up). With
    `expected_requests_per_minute`, whether each block would hold enough of the
    candidate's requests to count."""
    spread = settings.instance_spread_percent / 100
    chosen = (settings.mode, round(100 * settings.share), settings.candidate_instances(incumbent))
    rows = []
    for s in set_ups(incumbent):
        row: dict[str, Any] = {
            **s.spec_fields(),
            "chosen": (s.mode, s.percent, s.candidate) == chosen,
            "extra_instances": s.candidate,
            "callers_answered_by_candidate_percent": s.percent if s.mode == "split" else 0,
            "smallest_gain_promoted_percent": round(
                100
                * math.expm1(
                    math.log1p(settings.margin_percent / 100)
                    + spread_half_width(settings.alpha, s.fleet_sd(spread))
                ),
                2,
            ),
            "extra_instance_hours": {
                "first_look": round(s.candidate * settings.cycle_minutes / 60, 1),
                "at_most": round(s.candidate * settings.max_duration_minutes / 60, 1),
            },
        }
        rate = settings.expected_requests_per_minute
        if rate is not None:
            per_block = s.candidate_requests_per_block(rate, settings.block_minutes)
            row["candidate_requests_per_block"] = round(per_block, 1)
            row["blocks_count"] = per_block >= MIN_BLOCK_REQUESTS
        rows.append(row)
    return rows
