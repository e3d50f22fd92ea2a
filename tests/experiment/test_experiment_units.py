"""The pieces of the decision on their own: histogram quantiles, the sequential test,
the decision's minimums, the guardrails, and how an endpoint in an experiment is seen."""

from __future__ import annotations

import math
import random

import pytest

from peagle_deploy.errors import PeagleError
from peagle_deploy.experiment.histogram import Histogram
from peagle_deploy.experiment.stats import Minimums, decide, sequential_test
from peagle_deploy.promote.runner import _refuse_experiment
from peagle_deploy.records import running_experiment


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


def test_sequential_test_is_symmetric_and_its_interval_holds_the_mean() -> None:
    rng = random.Random(1)
    diffs = [rng.gauss(0.05, 0.1) for _ in range(100)]
    up = sequential_test(diffs, alpha=0.05)
    down = sequential_test([-d for d in diffs], alpha=0.05)
    assert up is not None and down is not None
    assert up.p_value == pytest.approx(down.p_value)
    assert up.ci_log_ratio[0] < up.mean_log_ratio < up.ci_log_ratio[1]
    assert up.relative_difference == pytest.approx(math.expm1(up.mean_log_ratio))
    assert sequential_test(diffs[:10], alpha=0.05) is None  # fewer than 30 windows


def test_no_winner_before_the_minimums_even_when_significant() -> None:
    diffs = [0.2 + 0.01 * (i % 3) for i in range(40)]
    minimums = Minimums(duration_s=3600, requests=100)
    early = decide(diffs, alpha=0.05, elapsed_s=600, requests=(500, 500), minimums=minimums,
                   max_duration_s=7200)  # fmt: skip
    assert early.verdict == "running" and early.missing
    later = decide(diffs, alpha=0.05, elapsed_s=3700, requests=(500, 500), minimums=minimums,
                   max_duration_s=7200)  # fmt: skip
    assert later.verdict == "candidate" and later.winner == "candidate"
    forced = decide(diffs, alpha=0.05, elapsed_s=600, requests=(500, 500), minimums=minimums,
                    max_duration_s=7200, final=True)  # fmt: skip
    assert forced.verdict == "inconclusive" and forced.winner is None


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
