"""Which experiments can decide: the set-ups the rule is valid for, refused before any AWS call.

Comparable arms. Decode speed depends on the load an instance carries (how many requests
share its batches), and the arms differ by their instances too (fixed offsets, drift),
so the rule compares only arms that carry the same load per instance on the same kind of
fleet:
- shadow, `sampling_percent` 100, as many candidate instances as incumbent ones: both
  fleets serve the same requests;
- split, `weight_percent` 50, equal fleets: each serves half of them.
Every other share or count is refused: an unequal load per instance moves the speeds
apart by the load's own effect, which no test on the two speeds can tell from a gain
(the rule before issue 30 declared 35-100 % false winners on the default fleets of
other shares), and an equal load on unequal fleets (shadow 20 % on 5 + 1 instances)
still compares one instance with five, whose offsets do not cancel. Nothing here
measures load and adjusts for it.

Decidable. The blocks must be at least the container's metric interval (a block between
two metric lines is empty), the reporter must be on, and the test must see enough
blocks before the maximum duration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from peagle_serve.contract import METRICS_INTERVAL_ENV
from peagle_serve.numeric_env import NumericEnvError, numeric_value

from peagle_deploy.errors import InputError
from peagle_deploy.experiment.stats import blocks_needed
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
    name = "sampling_percent" if settings.mode == "shadow" else "weight_percent"
    fleets = f"{incumbent_instances} incumbent and {count} candidate instances"
    raise InputError(
        f"experiment.{name}",
        f"{given}: the decision compares decode speed, which depends on load, so each "
        f"candidate instance must carry an incumbent instance's load; with {fleets} that "
        f"is {allowed[0]}",
        " or ".join(str(p) for p in allowed)
        + " (or candidate_instance_count to match the share)",
    )


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
