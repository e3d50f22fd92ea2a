"""Emulated experiments in bulk: how often the decision rule picks the right variant.

Each run emulates a whole experiment's traffic (`traffic.simulate`: both variants'
container metric lines and SageMaker's invocation counts, minute by minute), reads it
back through the same parser and analysis as `peagle experiment status`, and asks the
rule for its final decision. A winner at the end means the test crossed alpha at some
minute after the minimums: what `peagle experiment watch` would have acted on.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from peagle_deploy.experiment.analysis import Analysis, analyse
from peagle_deploy.experiment.observations import InvocationCounts, observation_from_line
from peagle_deploy.spec.models import ExperimentSpec
from peagle_local.emulator.traffic import TrafficPlan, VariantBehaviour, simulate

INCUMBENT = "AllTraffic"
CANDIDATE = "Candidate"


def run_experiment(
    experiment: ExperimentSpec,
    incumbent: VariantBehaviour,
    candidate: VariantBehaviour,
    traffic: TrafficPlan,
    *,
    seed: int,
) -> Analysis:
    """One emulated experiment, read at its end (`traffic.minutes`)."""
    lines, minutes = simulate(
        "emulated", {INCUMBENT: incumbent, CANDIDATE: candidate}, traffic, seed=seed
    )
    observations = [
        o
        for o in (
            observation_from_line(e.message, stream=e.stream, timestamp_ms=e.timestamp_ms)
            for e in lines
        )
        if o is not None
    ]
    totals: dict[str, list[float]] = {INCUMBENT: [0.0, 0.0], CANDIDATE: [0.0, 0.0]}
    for m in minutes:
        totals[m.variant][0] += m.invocations
        totals[m.variant][1] += m.errors_5xx
    counts = {name: InvocationCounts(*t) for name, t in totals.items()}
    return analyse(
        observations,
        counts,
        counts,
        experiment=experiment,
        incumbent=INCUMBENT,
        candidate=CANDIDATE,
        started_ms=traffic.start_ms,
        now_ms=traffic.start_ms + traffic.minutes * 60_000,
        final=True,
    )


@dataclass(frozen=True)
class SimulationResult:
    runs: int
    true_ratio: float
    verdicts: dict[str, int]
    covered: int
    """Runs whose final confidence interval holds the true difference."""

    def share(self, verdict: str) -> float:
        return self.verdicts.get(verdict, 0) / self.runs

    @property
    def winner_declared(self) -> float:
        return self.share("candidate") + self.share("incumbent")

    @property
    def coverage(self) -> float:
        return self.covered / self.runs


def simulate_decisions(
    experiment: ExperimentSpec,
    incumbent: VariantBehaviour,
    *,
    true_ratio: float,
    traffic: TrafficPlan,
    runs: int,
    first_seed: int = 0,
) -> SimulationResult:
    """`runs` emulated experiments whose candidate decodes `true_ratio` x as fast."""
    candidate = incumbent.faster(true_ratio)
    verdicts: Counter[str] = Counter()
    covered = 0
    truth = math.log(true_ratio)
    for seed in range(first_seed, first_seed + runs):
        analysis = run_experiment(experiment, incumbent, candidate, traffic, seed=seed)
        verdicts[analysis.decision.verdict] += 1
        result = analysis.decision.result
        if result is not None and result.ci_log_ratio[0] <= truth <= result.ci_log_ratio[1]:
            covered += 1
    return SimulationResult(runs, true_ratio, dict(verdicts), covered)
