"""The pieces of the decision on their own: histogram quantiles, the confidence sequence,
the rule's schedule and margin, calibration, the guardrails' tests, and how an endpoint
in an experiment is seen."""

from __future__ import annotations

import math
import random

import pytest

from peagle_deploy.errors import PeagleError
from peagle_deploy.experiment.guardrails import (
    latency_breaches,
    p99_lower_bound,
    p99_upper_bound,
)
from peagle_deploy.experiment.histogram import Histogram
from peagle_deploy.experiment.spread import (
    Spread,
    SpreadEstimate,
    chi2_quantile,
    estimate,
    interval,
)
from peagle_deploy.experiment.stats import (
    Block,
    Schedule,
    blocks_needed,
    confidence_sequence,
    decide,
    excess_evidence,
    rate_evidence,
)
from peagle_deploy.promote.runner import _refuse_experiment
from peagle_deploy.records import running_experiment
from peagle_deploy.spec.models import GuardrailSpec


def test_histogram_quantiles_are_read_inside_the_bucket() -> None:
    rng = random.Random(3)
    values = [rng.uniform(0.0, 1.0) for _ in range(20000)]
    h = Histogram.from_samples([0.1 * i for i in range(1, 11)], values)
    for q in (0.5, 0.9, 0.99):
        assert h.quantile(q) == pytest.approx(sorted(values)[int(q * len(values))], abs=0.01)
    assert Histogram((1.0,), (0.0, 0.0)).quantile(0.5) is None
    assert Histogram((1.0, 2.0), (0.0, 0.0, 5.0)).quantile(0.99) == 2.0  # overflow bucket
    with pytest.raises(ValueError):
        h.merge(Histogram((1.0,), (1.0, 0.0)))


def test_the_confidence_sequence_is_symmetric_and_holds_the_mean() -> None:
    rng = random.Random(1)
    diffs = [rng.gauss(0.05, 0.02) for _ in range(24)]
    up = confidence_sequence(diffs, alpha=0.05)
    down = confidence_sequence([-d for d in diffs], alpha=0.05)
    assert up is not None and down is not None and up.finite
    assert up.ci_log_ratio[0] == pytest.approx(-down.ci_log_ratio[1])
    assert up.ci_log_ratio[0] < up.mean_log_ratio < up.ci_log_ratio[1]
    assert up.relative_difference == pytest.approx(math.expm1(up.mean_log_ratio))
    short = confidence_sequence(diffs[: blocks_needed(0.05) - 1], alpha=0.05)
    assert short is not None and not short.finite  # too few blocks: unbounded
    assert confidence_sequence(diffs[:1], alpha=0.05) is None


def test_the_confidence_sequence_holds_the_mean_at_every_block_at_once() -> None:
    """Ville's inequality, checked: over 2,000 series of 72 normal blocks, the share of
    series whose sequence ever misses the true mean stays below alpha."""
    rng = random.Random(7)
    missed = 0
    for _ in range(2000):
        diffs = [rng.gauss(0.0, 1.0) for _ in range(72)]
        for n in range(2, 73):
            result = confidence_sequence(diffs[:n], alpha=0.05)
            assert result is not None
            if not result.ci_log_ratio[0] <= 0.0 <= result.ci_log_ratio[1]:
                missed += 1
                break
    assert missed / 2000 <= 0.05


SCHEDULE = Schedule(block_s=3600, cycle_s=86400, max_duration_s=3 * 86400)


def _blocks(values: list[float]) -> list[Block]:
    return [Block(i, v) for i, v in enumerate(values)]


def test_no_decision_before_a_whole_cycle_even_with_strong_evidence() -> None:
    strong = _blocks([0.2 + 0.01 * (i % 3) for i in range(30)])
    early = decide(strong, alpha=0.05, margin=0.02, schedule=SCHEDULE, elapsed_s=23 * 3600)
    assert early.verdict == "running" and early.missing and early.result is None
    assert early.current is not None and early.current.finite  # shown, not acted on
    assert early.next_look_s == pytest.approx(3600)
    later = decide(strong, alpha=0.05, margin=0.02, schedule=SCHEDULE, elapsed_s=25 * 3600)
    assert later.verdict == "candidate" and later.winner == "candidate"
    assert later.result is not None and later.result.blocks == 24  # whole cycles only
    forced = decide(strong, alpha=0.05, margin=0.02, schedule=SCHEDULE, elapsed_s=3600, final=True)
    assert forced.verdict == "inconclusive" and forced.winner is None and forced.missing


def test_a_gain_below_the_margin_is_never_a_win() -> None:
    rng = random.Random(3)
    small = _blocks([rng.gauss(0.01, 0.002) for _ in range(72)])  # +1 %, very precise
    kept = decide(small, alpha=0.05, margin=0.02, schedule=SCHEDULE, elapsed_s=86400)
    assert kept.verdict == "incumbent" and kept.winner == "incumbent"
    assert "not 2% faster" in kept.reason
    wide = _blocks([rng.gauss(0.02, 0.05) for _ in range(72)])  # spans the margin
    waiting = decide(wide, alpha=0.05, margin=0.02, schedule=SCHEDULE, elapsed_s=86400)
    assert waiting.verdict == "running" and not waiting.missing  # conclude may end it
    ended = decide(wide, alpha=0.05, margin=0.02, schedule=SCHEDULE, elapsed_s=3 * 86400)
    assert ended.verdict == "inconclusive"


def _measured(offsets: list[float], blocks: int = 48, noise: float = 0.002) -> SpreadEstimate:
    """The spread of instances with these fixed log offsets, each measured over
    `blocks` blocks with its own noise and a load swing every instance shares."""
    rng = random.Random(11)
    swing = [0.05 * math.sin(i / 4) for i in range(blocks)]
    fleet = {
        f"i-{k}": {i: o + swing[i] + rng.gauss(0, noise) for i in range(blocks)}
        for k, o in enumerate(offsets)
    }
    return estimate([fleet])


def test_the_spread_of_fixed_offsets_is_recovered_and_the_load_swing_drops_out() -> None:
    rng = random.Random(8)
    offsets = [rng.gauss(0, 0.02) for _ in range(40)]
    measured = _measured(offsets)
    true_sd = math.sqrt(sum((o - sum(offsets) / 40) ** 2 for o in offsets) / 39)
    assert measured.df == 39
    assert measured.tau == pytest.approx(true_sd, rel=0.05)
    same = _measured([0.0] * 8, noise=0.01)  # noise alone: taken out
    assert same.tau is not None and same.tau < 0.003
    assert estimate([{"i-0": {0: 0.1, 1: 0.2}}]).tau is None  # one instance: nothing to compare


def test_chi_square_quantiles_and_the_spread_interval() -> None:
    assert chi2_quantile(0.95, 1) == pytest.approx(3.8415, abs=1e-3)
    assert chi2_quantile(0.05, 10) == pytest.approx(3.9403, abs=1e-3)
    assert chi2_quantile(0.5, 30) == pytest.approx(29.336, abs=1e-2)
    covered, rng = 0, random.Random(9)
    for _ in range(300):  # the upper bound holds the true spread >= 95 % of the time
        measured = _measured([rng.gauss(0, 0.02) for _ in range(5)], blocks=12)
        bounds = interval(measured, 0.05)
        assert bounds is not None and bounds[0] <= bounds[1]
        covered += bounds[1] >= 0.02
    assert covered / 300 >= 0.93


def test_a_calibration_measures_the_spread_and_never_names_a_winner() -> None:
    rng = random.Random(4)
    same = _blocks([rng.gauss(0.0, 0.005) for _ in range(24)])
    tight = Spread(0.015, _measured([rng.gauss(0, 0.002) for _ in range(12)]), (6, 6))
    calm = decide(
        same,
        alpha=0.05,
        margin=0.02,
        schedule=SCHEDULE,
        elapsed_s=86400,
        spread=tight,
        calibration=True,
    )
    assert calm.verdict == "calibrated" and calm.winner is None
    wide = Spread(0.015, _measured([rng.gauss(0, 0.05) for _ in range(12)]), (6, 6))
    off = decide(
        same,
        alpha=0.05,
        margin=0.02,
        schedule=SCHEDULE,
        elapsed_s=86400,
        spread=wide,
        calibration=True,
    )
    assert off.verdict == "miscalibrated" and off.winner is None
    assert "false winner" in off.reason and "instance_spread_percent" in off.reason
    few = Spread(0.015, _measured([0.01, -0.01]), (1, 1))  # one degree of freedom
    unsure = decide(
        same,
        alpha=0.05,
        margin=0.02,
        schedule=SCHEDULE,
        elapsed_s=3 * 86400,
        spread=few,
        calibration=True,
    )
    assert unsure.verdict == "inconclusive"


def test_the_instance_spread_widens_the_interval_and_holds_back_a_promotion() -> None:
    gain = _blocks([0.05 + 0.002 * (i % 3) for i in range(24)])  # +5 %, very precise
    plain = decide(gain, alpha=0.05, margin=0.02, schedule=SCHEDULE, elapsed_s=86400)
    assert plain.verdict == "candidate"
    one_each = Spread(0.02, SpreadEstimate(None, 0), (1, 1))  # fleet sd 2.8 %
    held = decide(
        gain, alpha=0.05, margin=0.02, schedule=SCHEDULE, elapsed_s=86400, spread=one_each
    )
    assert held.verdict == "running" and "instance spread" in held.reason
    assert held.result is not None
    assert held.result.spread_half_width == pytest.approx(1.6449 * 0.02 * math.sqrt(2), rel=1e-3)
    many = Spread(0.02, SpreadEstimate(None, 0), (32, 32))  # their offsets average out
    assert (
        decide(gain, alpha=0.05, margin=0.02, schedule=SCHEDULE, elapsed_s=86400, spread=many)
    ).verdict == "candidate"
    measured = Spread(0.0, SpreadEstimate(0.03, 7), (8, 1))  # the data widen a small prior
    assert measured.per_instance == 0.03 and "measured" in measured.source


def test_the_gain_is_weighted_by_traffic() -> None:
    """A candidate +6 % at the trough and -6 % at the peak: equal hours say 0, callers
    (three times as many at the peak) get about -3 %."""
    blocks = [Block(i, 0.06 if i % 2 else -0.06, 1.0 if i % 2 else 3.0) for i in range(24)]
    result = confidence_sequence(
        [b.log_ratio for b in blocks], alpha=0.05, weights=[b.weight for b in blocks]
    )
    assert result is not None
    assert result.mean_log_ratio == pytest.approx(-0.03)
    assert result.effective_blocks < 24
    equal = confidence_sequence([b.log_ratio for b in blocks], alpha=0.05, weights=[1.0] * 24)
    plain = confidence_sequence([b.log_ratio for b in blocks], alpha=0.05)
    assert equal == plain


def test_rate_evidence_is_one_sided_and_grows_with_the_events() -> None:
    assert rate_evidence(0, 100, 0.01) < 0 < rate_evidence(5, 100, 0.01)
    assert rate_evidence(10, 100, 0.01) > rate_evidence(5, 100, 0.01)
    assert rate_evidence(0, 1000, 0.01, above=False) > math.log(100)
    assert rate_evidence(1, 1, 0.0) == math.inf and rate_evidence(0, 50, 0.0) == 0.0
    assert rate_evidence(3, 3, 1.0) == 0.0 and rate_evidence(0, 0, 0.5) == 0.0


def test_excess_evidence_compares_the_candidate_with_the_incumbent() -> None:
    worse = excess_evidence([(10, 5, 10, 0)] * 3)
    assert worse[-1] > math.log(100) and worse == sorted(worse)
    same = excess_evidence([(10, 1, 10, 1)] * 50)
    assert same[-1] < 0
    assert excess_evidence([(0, 0, 10, 3)]) == [0.0]  # no candidate traffic: no evidence


def test_the_latency_guardrail_compares_confidence_bounds_of_the_p99s() -> None:
    bounds = [0.05, 0.1, 0.2, 0.4, 0.8, 1.6]
    rng = random.Random(5)
    fast = Histogram.from_samples(bounds, (rng.lognormvariate(-3.2, 0.6) for _ in range(5000)))
    slow = Histogram.from_samples(bounds, (rng.lognormvariate(-2.1, 0.6) for _ in range(5000)))
    rules = GuardrailSpec()
    fast_p99, slow_p99 = (math.exp(m + 2.3263 * 0.6) for m in (-3.2, -2.1))
    high = p99_upper_bound(fast, 0.005)
    low = p99_lower_bound(slow, 0.005)
    assert high is not None and low is not None
    assert fast_p99 < high < 0.2  # inside its bucket (0.1 to 0.2), not at its top
    assert 0.4 < low < slow_p99  # inside its bucket (0.4 to 0.8), not at its bottom
    (breach,) = latency_breaches({"ttft_s": fast}, {"ttft_s": slow}, rules)
    assert breach.guardrail == "max_p99_latency_increase_percent"
    assert latency_breaches({"ttft_s": fast}, {"ttft_s": fast}, rules) == []
    few = Histogram.from_samples(bounds, (rng.uniform(0.0, 0.09) for _ in range(50)))
    assert p99_upper_bound(few, 0.005) is None  # 50 requests bound no p99
    assert latency_breaches({"ttft_s": few}, {"ttft_s": slow}, rules) == []


def test_a_tail_is_read_inside_its_bucket_as_a_local_log_normal() -> None:
    """vLLM's 0.1-0.25 s bucket: a linear reading puts a log-normal's p99 (0.135 s) near
    0.2 s; the tail reading finds it within a few percent, and falls back to the
    bucket's bound on the safe side where nothing lies beyond the bucket."""
    bounds = (0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0)
    rng = random.Random(6)
    values = [rng.lognormvariate(math.log(0.03), 0.6) for _ in range(200_000)]
    h = Histogram.from_samples(bounds, values)
    true = sorted(values)[int(0.99 * len(values))]
    linear = h.quantile(0.99)
    assert linear is not None and linear > 1.3 * true
    for high in (True, False):
        read = h.tail_value(0.01 * h.count, high=high)
        assert read == pytest.approx(true, rel=0.04)
    edge = Histogram((0.1, 0.25), (90.0, 10.0, 0.0))  # nothing beyond 0.25
    assert edge.tail_value(1.0, high=True) == 0.25
    assert Histogram((1.0,), (1.0, 9.0)).tail_value(1.0, high=True) is None  # overflow


def test_an_endpoint_in_an_experiment_is_seen_and_promote_refuses_it() -> None:
    one = {"ProductionVariants": [{"VariantName": "AllTraffic"}]}
    assert running_experiment(one) is None
    shadow = {**one, "ShadowProductionVariants": [{"VariantName": "Candidate"}]}
    split = {"ProductionVariants": [{"VariantName": "AllTraffic"}, {"VariantName": "Candidate"}]}
    assert "shadow" in (running_experiment(shadow) or "")
    assert "splits" in (running_experiment(split) or "")
    _refuse_experiment(one, "source endpoint e (dev)")
    with pytest.raises(PeagleError, match="runs an experiment"):
        _refuse_experiment(shadow, "source endpoint e (dev)")


DECISION_FILES = (
    "peagle_deploy/experiment/stats.py",
    "peagle_deploy/experiment/analysis.py",
    "peagle_deploy/experiment/observations.py",
    "peagle_deploy/experiment/guardrails.py",
    "peagle_deploy/experiment/design.py",
    "tests/experiment/decision_sim.py",
    "benchmarks/experiment_decision.py",
)


def test_no_function_of_the_decision_is_longer_than_80_lines() -> None:
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    long = []
    for name in DECISION_FILES:
        for node in ast.walk(ast.parse((root / name).read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 80:
                    long.append(f"{name}:{node.name} ({lines} lines)")
    assert long == []
