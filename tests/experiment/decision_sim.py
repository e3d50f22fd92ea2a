"""A request-level simulator of live experiments, for the decision rule and the guardrails.

Shared by `tests/experiment/test_decision_simulation.py` (a small seeded run with bounds)
and `benchmarks/experiment_decision.py` (the full table). Every simulated experiment
goes through the product's own pure function, `experiment.analysis.analyse`, fed the
samples the platform would provide: per variant and minute, the requests that finished,
their generated tokens and decode seconds (the container's metric lines, after lost
lines), and SageMaker's invocations and 5xx errors.

The traffic model (`Traffic`; the truth the rule must find), request by request:
- arrivals: Poisson per minute around `requests_per_minute`, times a daily swing
  (1 + `daily_swing` sin(2 pi t / day + phase), the phase random per run: the
  experiment starts at a random time of day), times `burst_factor` in random minutes;
- each request: an output length (log-normal, median `median_tokens`), a difficulty
  shared by both variants when both serve it (shadow), its own noise per variant, a
  stall (a pause of seconds inside decoding) with a small probability;
- routing: shadow copies every request (`share` of them) to a random candidate instance
  beside a random incumbent instance; split sends each to one variant (`share` to the
  candidate), then a random instance: the load per instance differs minute by minute;
- decode speed = base x exp(per-instance fixed offset + per-instance slow drift (AR(1)
  per minute) + per-instance fast jitter (AR(1)) + a minute effect shared by every
  instance + request noise) / (1 + `load_slowdown` x the instance's requests that
  minute), times the candidate's true effect, which may depend on the time of day:
  (1 + effect) x (1 - `effect_swing` x the daily wave): + swing at the trough, - at
  the peak;
- reporting: each instance's minute of serving figures is lost with `lost_lines`;
  SageMaker's invocation counts are complete; errored requests report no serving
  figures.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from peagle_deploy.experiment.analysis import analyse
from peagle_deploy.experiment.guardrails import error_breach, latency_breaches
from peagle_deploy.experiment.histogram import Histogram
from peagle_deploy.experiment.observations import VariantSample
from peagle_deploy.experiment.stats import rate_evidence
from peagle_deploy.spec.models import ExperimentSpec

INCUMBENT = "AllTraffic"
CANDIDATE = "Candidate"
DAY_MINUTES = 1440
START_MS = 1_700_000_000_000


@dataclass(frozen=True)
class Traffic:
    """The traffic, the fleets and the truth of one scenario."""

    mode: Literal["shadow", "split"] = "shadow"
    share: float = 1.0
    """Shadow: the share copied to the candidate; split: the share it answers."""
    instances: tuple[int, int] = (1, 1)
    """(incumbent, candidate) instances."""
    requests_per_minute: float = 20.0
    daily_swing: float = 0.5
    burst_chance: float = 0.01
    burst_factor: float = 3.0
    median_tokens: float = 150.0
    tokens_sigma: float = 1.0
    base_speed: float = 60.0
    """Decode tokens/s of one stream on an idle instance."""
    request_sd: float = 0.15
    """Log-sd of a request's own speed (shared by both variants when both serve it)."""
    own_sd: float = 0.05
    """Log-sd of each variant's noise on the same request."""
    stall_chance: float = 0.005
    stall_median_s: float = 2.0
    load_slowdown: float = 0.01
    """Speed / (1 + this x requests on the instance in that minute)."""
    offset_sd: float = 0.0
    """Log-sd of each instance's fixed speed offset."""
    offsets: tuple[float, ...] = ()
    """Fixed log offsets of the first instances (incumbent's, then candidate's)."""
    drift_sd: float = 0.0
    drift_lag1: float = 0.95
    jitter_sd: float = 0.01
    jitter_lag1: float = 0.5
    common_sd: float = 0.03
    common_lag1: float = 0.8
    effect: float = 0.0
    """The candidate's true gain (0.10: 10 % faster)."""
    effect_swing: float = 0.0
    """How the gain moves with the daily wave: + at the trough, - at the peak."""
    lost_lines: float = 0.01
    error_rates: tuple[float, float] = (0.0, 0.0)
    """(incumbent, candidate) share of requests answered with a 5xx."""

    def with_truth(self, effect: float) -> Traffic:
        return replace(self, effect=effect)


@dataclass
class Simulated:
    """Per run, instance (the incumbent's first, then the candidate's) and minute: what was
    reported."""

    requests: Any
    decode_tokens: Any
    decode_s: Any
    invocations: Any
    errors: Any
    instances: tuple[int, int] = (1, 1)

    @property
    def runs(self) -> int:
        return int(self.requests.shape[0])

    def arm(self, figures: Any, arm: int) -> Any:
        """`figures` summed over one arm's instances: (runs, minutes)."""
        n_inc, _ = self.instances
        part = figures[:, :n_inc] if arm == 0 else figures[:, n_inc:]
        return part.sum(axis=1)


def _ar1(rng: Any, shape: tuple[int, ...], minutes: int, sd: float, lag1: float) -> Any:
    """Stationary AR(1) paths along the last axis, sd `sd`."""
    out = np.zeros((*shape, minutes))
    if sd <= 0:
        return out
    x = rng.normal(0.0, sd, shape)
    kick = sd * math.sqrt(1 - lag1 * lag1)
    for t in range(minutes):
        out[..., t] = x
        x = lag1 * x + rng.normal(0.0, kick, shape)
    return out


def _arrivals(traffic: Traffic, rng: Any, runs: int, minutes: int) -> tuple[Any, Any]:
    """Requests per run and minute, and the daily wave (sin) per run and minute."""
    phase = rng.uniform(0, 2 * math.pi, (runs, 1))
    wave = np.sin(2 * math.pi * np.arange(minutes)[None, :] / DAY_MINUTES + phase)
    rate = traffic.requests_per_minute * (1 + traffic.daily_swing * wave)
    burst = rng.random((runs, minutes)) < traffic.burst_chance
    rate = rate * np.where(burst, traffic.burst_factor, 1.0)
    return rng.poisson(rate), wave


def _routes(traffic: Traffic, rng: Any, n: int) -> tuple[Any, Any, Any]:
    """Rows (request index, arm, instance) for `n` requests: who serves each."""
    n_inc, n_cand = traffic.instances
    request = np.arange(n)
    chosen = rng.random(n) < traffic.share
    if traffic.mode == "shadow":
        copies = request[chosen]
        rows = np.concatenate([request, copies])
        arm = np.concatenate([np.zeros(n, dtype=np.int64), np.ones(len(copies), dtype=np.int64)])
    else:
        rows, arm = request, chosen.astype(np.int64)
    inst = np.where(
        arm == 0,
        rng.integers(0, n_inc, len(rows)),
        n_inc + rng.integers(0, n_cand, len(rows)),
    )
    return rows, arm, inst


def _instance_state(traffic: Traffic, rng: Any, runs: int, minutes: int) -> Any:
    """Log speed of each run, instance and minute: fixed offsets, drift and jitter."""
    count = sum(traffic.instances)
    offset = rng.normal(0.0, traffic.offset_sd, (runs, count)) if traffic.offset_sd else 0.0
    offset = np.zeros((runs, count)) + offset
    for i, value in enumerate(traffic.offsets[:count]):
        offset[:, i] += value
    state = offset[:, :, None] + _ar1(
        rng, (runs, count), minutes, traffic.drift_sd, traffic.drift_lag1
    )
    state += _ar1(rng, (runs, count), minutes, traffic.jitter_sd, traffic.jitter_lag1)
    return state


def simulate(traffic: Traffic, *, runs: int, minutes: int, seed: int) -> Simulated:
    """`runs` experiments of `minutes`, request by request (see the module's docstring)."""
    rng = np.random.default_rng(seed)
    counts, wave = _arrivals(traffic, rng, runs, minutes)
    cell = np.repeat(np.arange(runs * minutes), counts.ravel())  # run * minutes + minute
    n = len(cell)
    tokens = np.maximum(
        2.0, np.round(rng.lognormal(math.log(traffic.median_tokens), traffic.tokens_sigma, n))
    )
    shared = traffic.request_sd * rng.normal(size=n)
    rows, arm, inst = _routes(traffic, rng, n)
    cell, tokens, shared = cell[rows], tokens[rows], shared[rows]
    run, minute = np.divmod(cell, minutes)
    count = sum(traffic.instances)
    key = (run * count + inst) * minutes + minute
    load = np.bincount(key, minlength=runs * count * minutes)[key]
    common = _ar1(rng, (runs,), minutes, traffic.common_sd, traffic.common_lag1)
    gain = np.log1p(traffic.effect) + np.log1p(-traffic.effect_swing * wave)
    log_speed = (
        math.log(traffic.base_speed)
        + _instance_state(traffic, rng, runs, minutes).ravel()[key]
        + common.ravel()[cell]
        + shared
        + traffic.own_sd * rng.normal(size=len(rows))
        - np.log1p(traffic.load_slowdown * load)
        + np.where(arm == 1, gain.ravel()[cell], 0.0)
    )
    decode_tokens = tokens - 1
    decode_s = decode_tokens / np.exp(log_speed)
    stalled = np.flatnonzero(rng.random(len(rows)) < traffic.stall_chance)
    decode_s[stalled] += rng.lognormal(math.log(traffic.stall_median_s), 1.0, len(stalled))
    failed = np.zeros(len(rows), dtype=bool)
    if any(traffic.error_rates):
        failed = rng.random(len(rows)) < np.asarray(traffic.error_rates)[arm]
    lost = (rng.random(runs * count * minutes) < traffic.lost_lines)[key]
    reported = ~failed & ~lost
    size = runs * count * minutes

    def total(weights: Any) -> Any:
        return np.bincount(key, weights=weights, minlength=size).reshape(runs, count, minutes)

    return Simulated(
        requests=total(reported.astype(float)),
        decode_tokens=total(np.where(reported, decode_tokens, 0.0)),
        decode_s=total(np.where(reported, decode_s, 0.0)),
        invocations=total(np.ones(len(rows))),
        errors=total(failed.astype(float)),
        instances=traffic.instances,
    )


def samples_of(sim: Simulated, run: int, *, start_ms: int = START_MS) -> list[VariantSample]:
    """The samples the platform would provide for one run: per instance and minute, the
    container's serving figures (its metric lines, log stream `<variant>/i-<n>`); per
    variant and minute, SageMaker's invocations and 5xx errors."""
    minutes = sim.requests.shape[2]
    stamps = [start_ms + (t + 1) * 60_000 for t in range(minutes)]
    n_inc, n_cand = sim.instances
    out: list[VariantSample] = []
    for index in range(n_inc + n_cand):
        name = INCUMBENT if index < n_inc else CANDIDATE
        stream = f"{name}/i-{index}"
        columns = [f[run, index].tolist() for f in (sim.requests, sim.decode_tokens, sim.decode_s)]
        out.extend(
            VariantSample(name, at, 60.0, stream, req, 0.0, tok, sec)
            for at, req, tok, sec in zip(stamps, *columns, strict=True)
            if req
        )
    for arm, name in enumerate((INCUMBENT, CANDIDATE)):
        calls, errors = (sim.arm(f, arm)[run].tolist() for f in (sim.invocations, sim.errors))
        out.extend(
            VariantSample(name, at, 60.0, "", invocations=inv, errors=err)
            for at, inv, err in zip(stamps, calls, errors, strict=True)
            if inv
        )
    return sorted(out, key=lambda o: o.timestamp_ms)


def looks_of(spec: ExperimentSpec) -> list[float]:
    """Minutes at which the rule can change its answer: ends of cycles, and the end."""
    cycles = math.floor(spec.max_duration_minutes / spec.cycle_minutes + 1e-9)
    looks = [k * spec.cycle_minutes for k in range(1, cycles + 1)]
    if looks[-1] < spec.max_duration_minutes:
        looks.append(spec.max_duration_minutes)
    return looks


def decision_of(
    samples: Sequence[VariantSample], spec: ExperimentSpec, *, start_ms: int = START_MS
) -> tuple[str, float]:
    """(verdict, minutes to it): the rule read at every look, as `watch` would act on it."""
    verdict, at = "running", 0.0
    for at in looks_of(spec):
        analysis = analyse(
            samples,
            experiment=spec,
            incumbent=INCUMBENT,
            candidate=CANDIDATE,
            started_ms=start_ms,
            now_ms=start_ms + round(at * 60_000),
        )
        verdict = analysis.decision.verdict
        if verdict != "running":
            break
    return verdict, at


@dataclass
class RowResult:
    """The verdicts of many simulated experiments, and when each was reached."""

    verdicts: Counter[str] = field(default_factory=Counter)
    minutes: list[float] = field(default_factory=list)
    decided: list[tuple[str, float]] = field(default_factory=list)
    """(verdict, minutes to it) per run."""

    @property
    def runs(self) -> int:
        return sum(self.verdicts.values())

    def share(self, *verdicts: str) -> float:
        return sum(self.verdicts[v] for v in verdicts) / max(1, self.runs)

    def share_by(self, verdict: str, minutes: float) -> float:
        """Runs that reached `verdict` within `minutes`."""
        hits = sum(v == verdict and at <= minutes for v, at in self.decided)
        return hits / max(1, self.runs)

    def hours(self, q: float) -> float:
        """The q-quantile of the time to a decision, in hours (undecided runs: the end)."""
        return float(np.quantile(np.asarray(self.minutes), q)) / 60

    def add(self, verdict: str, at: float) -> None:
        self.verdicts[verdict] += 1
        self.minutes.append(at)
        self.decided.append((verdict, at))


def spec_for(traffic: Traffic, **changes: Any) -> ExperimentSpec:
    """The default experiment settings for `traffic`'s set-up (with `changes`)."""
    given: dict[str, Any] = {"mode": traffic.mode, "candidate": {"num_speculative_tokens": 5}}
    if traffic.mode == "shadow":
        given["sampling_percent"] = round(100 * traffic.share)
    else:
        given["weight_percent"] = round(100 * traffic.share)
    given["candidate_instance_count"] = traffic.instances[1]
    if changes.get("calibration"):
        given["candidate"] = {}
    return ExperimentSpec.model_validate({**given, **changes})


def run_rows(
    traffic: Traffic, spec: ExperimentSpec, *, runs: int, seed: int, chunk: int = 10
) -> RowResult:
    """`runs` experiments of `traffic` under `spec`: the rule's verdicts and times."""
    result = RowResult()
    minutes = math.ceil(spec.max_duration_minutes)
    for first in range(0, runs, chunk):
        size = min(chunk, runs - first)
        sim = simulate(traffic, runs=size, minutes=minutes, seed=seed + first)
        for r in range(size):
            result.add(*decision_of(samples_of(sim, r), spec))
    return result


def minutes_to_stop(
    traffic: Traffic, spec: ExperimentSpec, *, runs: int, minutes: int, seed: int
) -> list[float | None]:
    """Per run, the minute the error guardrail first fires (None: never within `minutes`)."""
    sim = simulate(traffic, runs=runs, minutes=minutes, seed=seed)
    stops: list[float | None] = []
    for r in range(runs):
        breach = error_breach(
            samples_of(sim, r), incumbent=INCUMBENT, candidate=CANDIDATE, rules=spec.guardrails
        )
        at = None if breach is None or breach.at_ms is None else breach.at_ms
        stops.append(None if at is None else (at - START_MS) / 60_000)
    return stops


@dataclass(frozen=True)
class Scenario:
    """One row of a table: a set-up, its traffic."""

    label: str
    traffic: Traffic
    refused: dict[str, Any] | None = None
    """For a set-up the plan refuses: the spec's instance count and experiment block."""


TROUBLES = {"drift_sd": 0.02, "drift_lag1": 0.95, "lost_lines": 0.03}
"""Realistic traffic's troubles on top of the daily swing and bursts every run has:
slow per-instance drift (2 %, lag-1 0.95 a minute) and 3 % of metric lines lost."""
HOURS_DRIFT = {"drift_sd": 0.02, "drift_lag1": 0.999}
"""Per-instance drift that lasts hours (lag-1 0.999 a minute: about 17 hours)."""
LOAD_EFFECT = {"effect_swing": 0.06}

SET_UPS: tuple[tuple[str, Traffic], ...] = (
    ("1+1, shadow 100%", Traffic(**TROUBLES)),
    ("2+2, split 50/50", Traffic(mode="split", share=0.5, instances=(2, 2), **TROUBLES)),
    ("4+1, shadow 25%", Traffic(share=0.25, instances=(4, 1), **TROUBLES)),
    ("8+1, shadow 12%", Traffic(share=0.12, instances=(8, 1), **TROUBLES)),
)
"""The set-ups of issue 35's table: one instance against one (the default for a
1-instance endpoint), two against two, and one extra instance carrying an incumbent
instance's load (shadow 1/N on N+1)."""
OFFSET_SDS = (0.0, 0.01, 0.02)
"""Per-instance fixed speed offsets (log-sd): GPUs of one type differ by a percent or two."""


def spread_scenarios() -> list[Scenario]:
    """Every set-up with every offset spread."""
    return [
        Scenario(f"{label}, offsets sd {100 * sd:g}%", replace(traffic, offset_sd=sd))
        for label, traffic in SET_UPS
        for sd in OFFSET_SDS
    ]


REALISTIC = Traffic(mode="split", share=0.5, instances=(2, 2), offset_sd=0.01, **TROUBLES)
"""Split 50/50 on 2+2 instances with drift, fixed offsets (sd 1 %) and 3 % lost lines:
the traffic of the times to a decision."""

TROUBLE_SCENARIOS: tuple[Scenario, ...] = (
    Scenario("drift lasting hours (2%, lag-1 0.999/min), 1+1", Traffic(**HOURS_DRIFT)),
    Scenario(
        "drift lasting hours, 8+1 shadow 12%",
        Traffic(share=0.12, instances=(8, 1), **HOURS_DRIFT),
    ),
    Scenario(
        "an effect that depends on load (+6% at the trough, -6% at the peak), 1+1",
        Traffic(**LOAD_EFFECT),
    ),
    Scenario(
        "all at once: 2+2 split, drift, offsets sd 2%, load effect, 3% lost lines",
        replace(REALISTIC, offset_sd=0.02, **LOAD_EFFECT),
    ),
    Scenario("shadow 20% on 5+1 (equal load)", Traffic(share=0.2, instances=(5, 1), **TROUBLES)),
    Scenario(
        "split 10% on 9+1 (equal load)",
        Traffic(mode="split", share=0.1, instances=(9, 1), **TROUBLES),
    ),
)
"""Real traffic's other troubles, each on its own."""

REFUSED: tuple[Scenario, ...] = (
    Scenario(
        "shadow 20%, one candidate on 2 (0.4x the load per instance)",
        Traffic(share=0.2, instances=(2, 1)),
        {"initial_instance_count": 2, "mode": "shadow", "sampling_percent": 20},
    ),
    Scenario(
        "split 10%, one candidate on 2 (0.22x the load)",
        Traffic(mode="split", share=0.1, instances=(2, 1)),
        {"initial_instance_count": 2, "mode": "split", "weight_percent": 10},
    ),
    Scenario(
        "split 40%, one candidate on 2 (1.33x the load)",
        Traffic(mode="split", share=0.4, instances=(2, 1)),
        {"initial_instance_count": 2, "mode": "split", "weight_percent": 40},
    ),
)
"""Set-ups whose candidate instances carry another load than the incumbent's: refused
by the plan, and biased in the simulation."""

CALIBRATIONS: tuple[Scenario, ...] = tuple(
    Scenario(f"{label}, offsets sd {100 * sd:g}%", replace(traffic, offset_sd=sd))
    for label, traffic in (
        *SET_UPS,
        ("8+8, shadow 100%", Traffic(instances=(8, 8), **TROUBLES)),
    )
    for sd in (0.0, 0.01, 0.03)
)
"""A/A runs: no spread, a spread the default prior (1.5 %) covers, one twice beyond it."""


# --- the latency guardrail on vLLM's own buckets -----------------------------------------

TTFT_BOUNDS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
"""vLLM 0.30.0's time-to-first-token buckets (local/peagle_local/emulator/vllm_buckets.py,
which tests/container/test_container_contract.py compares with the installed vLLM)."""


def _histograms(values: Any, looks: int) -> list[Histogram]:
    """The cumulative histogram of `values` (in arrival order) at `looks` even steps."""
    index = np.searchsorted(np.asarray(TTFT_BOUNDS), values, side="left")
    out = []
    for k in range(1, looks + 1):
        counts = np.bincount(index[: len(values) * k // looks], minlength=len(TTFT_BOUNDS) + 1)
        out.append(Histogram(TTFT_BOUNDS, tuple(float(c) for c in counts)))
    return out


def _at_bounds_fires(incumbent: Histogram, candidate: Histogram, spec: ExperimentSpec) -> bool:
    """The latency guardrail as it read p99 bounds before issue 35: only at bucket bounds
    (the largest bound the candidate's p99 is shown to exceed, the smallest the
    incumbent's is shown to be within)."""
    rules = spec.guardrails
    bar = math.log(2 / rules.alpha)  # each bound at alpha / 2

    def tail(h: Histogram, i: int) -> float:
        return math.fsum(h.counts[i + 1 :])

    above = [
        b
        for i, b in enumerate(candidate.bounds)
        if rate_evidence(tail(candidate, i), candidate.count, 0.01) >= bar
    ]
    within = next(
        (
            b
            for i, b in enumerate(incumbent.bounds)
            if rate_evidence(tail(incumbent, i), incumbent.count, 0.01, above=False) >= bar
        ),
        None,
    )
    factor = 1 + rules.max_p99_latency_increase_percent / 100
    return bool(above) and within is not None and max(above) > within * factor


def latency_fire_share(
    p99_s: float,
    factor: float,
    *,
    requests: int,
    runs: int,
    seed: int,
    sigma: float = 0.6,
    looks: int = 24,
    at_bounds: bool = False,
) -> float:
    """Share of runs in which the TTFT guardrail fires at any of `looks` reads: each
    variant's time to first token log-normal (log-sd `sigma`), the incumbent's p99 at
    `p99_s`, the candidate's every request `factor` times slower; `requests` per variant.
    `at_bounds`: the reading before issue 35 (bucket bounds only)."""
    spec = ExperimentSpec()
    rng = np.random.default_rng(seed)
    median = p99_s / math.exp(2.3263 * sigma)
    fired = 0
    for _ in range(runs):
        mine = rng.lognormal(math.log(median), sigma, requests)
        theirs = rng.lognormal(math.log(median), sigma, requests) * factor
        pairs = zip(_histograms(mine, looks), _histograms(theirs, looks), strict=True)
        fired += any(
            _at_bounds_fires(a, b, spec)
            if at_bounds
            else bool(latency_breaches({"ttft_s": a}, {"ttft_s": b}, spec.guardrails))
            for a, b in pairs
        )
    return fired / runs
