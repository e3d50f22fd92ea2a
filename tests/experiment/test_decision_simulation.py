"""The decision rule and the guardrails on simulated live traffic (issue 30).

A smaller, seeded run of `benchmarks/experiment_decision.py` (which prints the full
table, 200 runs per row): each simulated experiment (`decision_sim`: request by request,
with drift, per-instance offsets, load-dependent speed and effects, daily cycles, lost
metric lines) is read through the product's `analysis.analyse` with the spec's defaults.

Bounds, with room for simulation noise at 40 runs: a false winner (the candidate
promoted with no true difference) in at most alpha + 2 standard errors of the runs, the
right winner at +10 % in at least 80 % - 2 standard errors. The rule before issue 30
declared false winners in 34-100 % of such runs (the issue's table; the benchmark shows
the same on this simulator), so these tests fail on it.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from decision_sim import (
    BEYOND_THE_MARGIN,
    REALISTIC,
    SCENARIOS,
    Traffic,
    minutes_to_stop,
    run_rows,
    simulate,
    spec_for,
)

from peagle_deploy.errors import InputError
from peagle_deploy.experiment.plan import experiment_plan
from peagle_deploy.spec import spec_from_dict

RUNS = 40
ALPHA = 0.05
NOISE = 2 * math.sqrt(ALPHA * (1 - ALPHA) / RUNS)
POWER = 0.80 - 2 * math.sqrt(0.8 * 0.2 / RUNS)
ACCEPTED = {s.label: s for s in SCENARIOS if s.refused is None}
REFUSED = {s.label: s for s in SCENARIOS if s.refused is not None}
HARD = [
    label
    for label in ACCEPTED
    if label.startswith(("shadow 100%, slow", "an effect", "shadow 100%, one", "all at once"))
]


@pytest.mark.slow
@pytest.mark.parametrize("label", HARD)
def test_no_true_difference_rarely_promotes(label: str) -> None:
    traffic = ACCEPTED[label].traffic
    result = run_rows(traffic, spec_for(traffic), runs=RUNS, seed=100 * HARD.index(label))
    print(f"\n{label}: false winners {result.share('candidate'):.1%} {dict(result.verdicts)}")
    assert result.runs == RUNS
    assert result.share("candidate") <= ALPHA + NOISE


@pytest.mark.slow
@pytest.mark.parametrize("label", HARD)
def test_a_true_ten_percent_gain_is_promoted(label: str) -> None:
    traffic = ACCEPTED[label].traffic.with_truth(0.10)
    result = run_rows(traffic, spec_for(traffic), runs=RUNS, seed=5_000 + 100 * HARD.index(label))
    print(f"\n{label} +10%: right winners {result.share('candidate'):.1%}")
    assert result.share("candidate") >= POWER
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


@pytest.mark.parametrize("label", sorted(REFUSED))
def test_the_plan_refuses_the_set_ups_that_are_biased_in_the_simulation(label: str) -> None:
    """Each refused set-up is refused by the plan with one line naming the field; those
    with an unequal load per instance are biased in the simulation: with no true
    difference, the pooled speeds differ, in every run the same way."""
    scenario = REFUSED[label]
    with pytest.raises(InputError) as caught:
        experiment_plan(_spec(scenario.refused or {}))  # type: ignore[arg-type]
    assert caught.value.field.startswith("experiment.")
    assert "\n" not in str(caught.value)
    if "equal load" in label:
        return  # its bias is the offsets of one instance against five or nine (below)
    sim = simulate(scenario.traffic, runs=4, minutes=600, seed=1)
    speed = sim.decode_tokens.sum(axis=2) / sim.decode_s.sum(axis=2)
    gaps = [math.log(speed[r, 1] / speed[r, 0]) for r in range(4)]
    assert min(gaps) > 0.01 or max(gaps) < -0.01, gaps


def test_the_accepted_set_ups_plan() -> None:
    for label, scenario in ACCEPTED.items():
        t = scenario.traffic
        block: dict[str, object] = {"initial_instance_count": t.instances[0], "mode": t.mode}
        assert experiment_plan(_spec(block)).candidate_instances == t.instances[1], label  # type: ignore[arg-type]


@pytest.mark.slow
def test_calibration_reports_fleets_within_the_margin_and_flags_those_beyond() -> None:
    calm = run_rows(REALISTIC, spec_for(REALISTIC, calibration=True), runs=RUNS, seed=31)
    assert calm.share("miscalibrated") <= ALPHA + NOISE
    assert calm.share("calibrated") >= 0.5
    assert calm.share("candidate", "incumbent") == 0.0  # a calibration never picks a winner
    wide = BEYOND_THE_MARGIN.traffic
    flagged = run_rows(wide, spec_for(wide, calibration=True), runs=RUNS, seed=32)
    print(f"\nA/A: {dict(calm.verdicts)}; beyond the margin: {dict(flagged.verdicts)}")
    assert flagged.share("miscalibrated") >= 0.25


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
