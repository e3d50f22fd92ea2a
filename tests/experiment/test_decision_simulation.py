"""The decision rule and the guardrails on simulated live traffic (issues 30 and 35).

A smaller, seeded run of `benchmarks/experiment_decision.py` (which prints the full
tables, 200 runs per row): each simulated experiment (`decision_sim`: request by
request and instance by instance, with per-instance offsets and drift, load-dependent
speed and effects, daily cycles, lost metric lines) is read through the product's
`analysis.analyse` with the spec's defaults.

Bounds, with room for simulation noise at 40 runs: a false promotion (the candidate
promoted with no true difference) in at most alpha + 2 standard errors of the runs, the
right winner at +10 % within 24 hours in at least 80 % - 2 standard errors. Before
issue 35 the rule gave 24 % false promotions with offsets of sd 2 % on 1+1 (the issue's
figure), and refused one extra instance (shadow 1/N on N+1) outright.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from decision_sim import (
    CALIBRATIONS,
    REFUSED,
    TROUBLE_SCENARIOS,
    Traffic,
    latency_fire_share,
    minutes_to_stop,
    run_rows,
    simulate,
    spec_for,
    spread_scenarios,
)

from peagle_deploy.errors import InputError
from peagle_deploy.experiment.plan import experiment_plan
from peagle_deploy.spec import spec_from_dict

RUNS = 40
ALPHA = 0.05
NOISE = 2 * math.sqrt(ALPHA * (1 - ALPHA) / RUNS)
POWER = 0.80 - 2 * math.sqrt(0.8 * 0.2 / RUNS)
DAY = 1440
SPREAD = {s.label: s for s in spread_scenarios()}
TROUBLES = {s.label: s for s in TROUBLE_SCENARIOS}
HARD = {
    **{k: v for k, v in SPREAD.items() if k.endswith("sd 2%") and not k.startswith("4+1")},
    **{k: v for k, v in TROUBLES.items() if k.startswith(("drift lasting hours, 8", "all at"))},
}
"""Offsets of sd 2 % on 1+1, 2+2 and 8+1 (the issue's worst), drift lasting hours on
8+1, and everything at once."""


@pytest.mark.slow
@pytest.mark.parametrize("label", sorted(HARD))
def test_no_true_difference_rarely_promotes(label: str) -> None:
    traffic = HARD[label].traffic
    result = run_rows(traffic, spec_for(traffic), runs=RUNS, seed=100 * sorted(HARD).index(label))
    print(f"\n{label}: false winners {result.share('candidate'):.1%} {dict(result.verdicts)}")
    assert result.runs == RUNS
    assert result.share("candidate") <= ALPHA + NOISE


@pytest.mark.slow
@pytest.mark.parametrize("label", sorted(HARD))
def test_a_true_ten_percent_gain_is_promoted_within_a_day(label: str) -> None:
    traffic = HARD[label].traffic.with_truth(0.10)
    seed = 5_000 + 100 * sorted(HARD).index(label)
    result = run_rows(traffic, spec_for(traffic), runs=RUNS, seed=seed)
    print(f"\n{label} +10%: promoted within 24 h {result.share_by('candidate', DAY):.1%}")
    assert result.share_by("candidate", DAY) >= POWER
    assert result.share("incumbent") == 0.0


def _spec(block: dict[str, object]) -> object:
    given = dict(block)
    count = given.pop("initial_instance_count")
    return spec_from_dict(
        {
            "model": "gpt-oss-20b",
            "region": "us-east-1",
            "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:0.1.0",
            "instance_type": "ml.g7e.2xlarge",
            "initial_instance_count": count,
            "speculative": {"mode": "p-eagle", "num_speculative_tokens": 3},
            "experiment": {"candidate": {"num_speculative_tokens": 5}, **given},
        }
    )


@pytest.mark.parametrize("scenario", REFUSED, ids=lambda s: s.label)
def test_the_plan_refuses_the_set_ups_that_are_biased_in_the_simulation(scenario: object) -> None:
    """Each refused set-up is refused by the plan with one line naming the field, and is
    biased in the simulation: with no true difference, the pooled speeds differ, in every
    run the same way (the candidate's instances carry another load)."""
    refused = scenario.refused or {}  # type: ignore[attr-defined]
    with pytest.raises(InputError) as caught:
        experiment_plan(_spec(refused))  # type: ignore[arg-type]
    assert caught.value.field.startswith("experiment.")
    assert "\n" not in str(caught.value)
    sim = simulate(scenario.traffic, runs=4, minutes=600, seed=1)  # type: ignore[attr-defined]
    speed = [
        sim.arm(sim.decode_tokens, a).sum(axis=1) / sim.arm(sim.decode_s, a).sum(axis=1)
        for a in (0, 1)
    ]
    gaps = [math.log(speed[1][r] / speed[0][r]) for r in range(4)]
    assert min(gaps) > 0.01 or max(gaps) < -0.01, gaps


def test_the_accepted_set_ups_plan() -> None:
    for scenario in [*SPREAD.values(), *TROUBLES.values()]:
        t = scenario.traffic
        share = "sampling_percent" if t.mode == "shadow" else "weight_percent"
        block: dict[str, object] = {
            "initial_instance_count": t.instances[0],
            "mode": t.mode,
            share: round(100 * t.share),
        }
        planned = experiment_plan(_spec(block))  # type: ignore[arg-type]
        assert planned.candidate_instances == t.instances[1], scenario.label


@pytest.mark.slow
def test_calibration_flags_a_spread_beyond_the_prior_and_not_one_within() -> None:
    """A/A on eight instances against eight: no spread is not flagged (at most alpha of
    the runs), offsets of sd 3 % (twice the default instance_spread_percent) are."""
    runs = {s.label: s.traffic for s in CALIBRATIONS}
    calm_traffic, wide_traffic = (
        runs["8+8, shadow 100%, offsets sd 0%"],
        runs["8+8, shadow 100%, offsets sd 3%"],
    )
    calm = run_rows(calm_traffic, spec_for(calm_traffic, calibration=True), runs=RUNS, seed=31)
    wide = run_rows(wide_traffic, spec_for(wide_traffic, calibration=True), runs=RUNS, seed=32)
    print(f"\nA/A: {dict(calm.verdicts)}; sd 3%: {dict(wide.verdicts)}")
    assert calm.share("miscalibrated") <= ALPHA + NOISE
    assert calm.share("calibrated") >= 0.8
    assert wide.share("miscalibrated") >= POWER
    assert calm.share("candidate", "incumbent") == wide.share("candidate", "incumbent") == 0.0


@pytest.mark.slow
def test_the_latency_guardrail_fires_near_the_ratio_it_states() -> None:
    """vLLM's TTFT buckets, the incumbent's p99 at 400 ms: at 1.3 and 1.5 times it never
    fires; at twice it does (before issue 35 it read bucket bounds and fired only
    beyond 2.2 times there)."""
    assert latency_fire_share(0.4, 1.5, requests=28_800, runs=10, seed=1, looks=6) == 0.0
    assert latency_fire_share(0.4, 1.3, requests=28_800, runs=10, seed=2, looks=6) == 0.0
    assert latency_fire_share(0.4, 2.0, requests=28_800, runs=10, seed=3, looks=6) >= 0.8


@pytest.mark.slow
def test_the_error_guardrail_stops_a_failing_candidate_within_minutes_at_low_traffic() -> None:
    split = Traffic(mode="split", share=0.5, requests_per_minute=5.0)
    stops = minutes_to_stop(
        replace(split, error_rates=(0.001, 1.0)), spec_for(split), runs=RUNS, minutes=60, seed=5
    )
    caught = sorted(s for s in stops if s is not None)
    assert len(caught) == RUNS
    assert caught[int(0.9 * RUNS) - 1] <= 15  # 90 % within 15 minutes


@pytest.mark.slow
def test_the_error_guardrail_rarely_stops_a_candidate_with_the_incumbents_error_rate() -> None:
    """Even when both variants' rate is above the limit (2 % > 1 %): the guardrail
    compares the candidate with the incumbent too."""
    split = Traffic(mode="split", share=0.5, requests_per_minute=5.0, error_rates=(0.02, 0.02))
    spec = spec_for(split)
    stops = minutes_to_stop(split, spec, runs=RUNS, minutes=4320, seed=6)
    alpha = spec.guardrails.alpha
    assert sum(s is not None for s in stops) / RUNS <= alpha + 2 * math.sqrt(alpha / RUNS)
