"""Emulated variants: how fast each one serves, and what its container reports.

The truth an experiment is meant to find: per variant, an acceptance rate and K (so a
mean acceptance length, 1 + rate x K, as vLLM defines it), the time of one engine step,
a time to first token and an error rate. `serve` draws one request from it; a
`ContainerWindow` collects the requests one instance served over an interval and writes
the metric line `peagle-serve` would write (`peagle_serve.contract`, with vLLM 0.30.0's
histogram buckets). `simulate` runs a whole experiment's traffic in memory, minute by
minute, for the decision-rule simulation; the moto extensions use the same pieces for
live invocations.

Noise model (stated, because the simulation's figures depend on it): each request has
a difficulty shared by both variants (the same prompt; it moves the acceptance rate on
the logit scale with sd 0.5), its own acceptance noise per variant (sd 0.2), a step-time
factor per variant (log-normal, sd `spread`), an output length (log-normal around
`mean_output_tokens`), and every minute a load factor common to both variants (a slow
wave plus noise) scales step times and time to first token.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from peagle_serve.contract import format_metric_line

from peagle_deploy.experiment.histogram import Histogram
from peagle_local.emulator.vllm_buckets import BY_LINE_KEY


@dataclass(frozen=True)
class VariantBehaviour:
    """How one emulated variant serves."""

    acceptance_rate: float = 0.6
    """Accepted / drafted tokens (vLLM's acceptance rate), 0-1."""
    num_speculative_tokens: int = 3
    step_s: float = 0.02
    """One engine step (draft + verify) at the reference load."""
    ttft_s: float = 0.1
    error_rate: float = 0.0
    """Share of requests answered with a 5xx."""
    spread: float = 0.15
    """Log-normal sd of a request's step time around `step_s`."""
    stream_error_rate: float = 0.0
    """Share of requests the engine fails after their first token (vLLM's
    `finished_reason="error"`)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.acceptance_rate <= 1.0:
            raise ValueError("acceptance_rate must be within [0, 1]")
        if self.num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be >= 1")
        if self.step_s <= 0 or self.ttft_s < 0:
            raise ValueError("step_s must be > 0 and ttft_s >= 0")
        if not 0.0 <= self.error_rate <= 1.0 or not 0.0 <= self.stream_error_rate <= 1.0:
            raise ValueError("error_rate and stream_error_rate must be within [0, 1]")

    @property
    def tokens_per_step(self) -> float:
        return 1.0 + self.acceptance_rate * self.num_speculative_tokens

    @property
    def decode_tokens_per_s(self) -> float:
        """The true speed of one stream while it decodes (at the reference load)."""
        return self.tokens_per_step / self.step_s

    def expected_speed(self, *, mean_output_tokens: float = 200.0, draws: int = 20000) -> float:
        """Decode tokens/s per stream as the metric lines measure it (token-weighted over
        requests that draw their own acceptance and step time): `decode_tokens_per_s`
        moved by the spread of the requests. A fixed seed: the same figure every time."""
        rng = random.Random(0)
        sigma = 0.6
        mu = math.log(mean_output_tokens) - sigma * sigma / 2
        tokens = seconds = 0.0
        for _ in range(draws):
            n = max(1, round(math.exp(rng.gauss(mu, sigma))))
            served = serve(self, rng, output_tokens=n, difficulty=rng.gauss(0, 1))
            tokens += max(0, n - 1)
            seconds += served.decode_s
        return tokens / seconds if seconds else 0.0

    def faster(self, ratio: float) -> VariantBehaviour:
        """The same variant with decode speed times `ratio` (a shorter step)."""
        return VariantBehaviour(
            self.acceptance_rate,
            self.num_speculative_tokens,
            self.step_s / ratio,
            self.ttft_s,
            self.error_rate,
            self.spread,
            self.stream_error_rate,
        )


@dataclass(frozen=True)
class ServedRequest:
    ok: bool
    output_tokens: int
    ttft_s: float
    decode_s: float
    step_s: float
    steps: int
    drafted: int
    accepted: int
    broken: bool = False
    """The engine failed it after its first token."""

    @property
    def e2e_s(self) -> float:
        return self.ttft_s + self.decode_s


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def serve(
    behaviour: VariantBehaviour,
    rng: random.Random,
    *,
    output_tokens: int,
    difficulty: float = 0.0,
    load: float = 1.0,
) -> ServedRequest:
    """One request as `behaviour` serves it (`difficulty`: the prompt's, shared by variants)."""
    if rng.random() < behaviour.error_rate:
        return ServedRequest(False, 0, 0.0, 0.0, 0.0, 0, 0, 0)
    k = behaviour.num_speculative_tokens
    z = _logit(behaviour.acceptance_rate) + 0.5 * difficulty + 0.2 * rng.gauss(0, 1)
    rate = 1 / (1 + math.exp(-z))
    per_step = 1.0 + rate * k
    step = behaviour.step_s * load * math.exp(rng.gauss(0, behaviour.spread))
    later = max(0, output_tokens - 1)
    steps = math.ceil(later / per_step) if later else 0
    accepted = min(later, round(steps * rate * k))
    broken = behaviour.stream_error_rate > 0 and rng.random() < behaviour.stream_error_rate
    return ServedRequest(
        ok=True,
        output_tokens=output_tokens,
        ttft_s=behaviour.ttft_s * load * math.exp(rng.gauss(0, behaviour.spread)),
        decode_s=later / per_step * step,
        step_s=step,
        steps=steps,
        drafted=max(steps, 1) * k,
        accepted=accepted,
        broken=broken,
    )


@dataclass
class ContainerWindow:
    """What one instance of one variant served in one metric interval."""

    requests: list[ServedRequest] = field(default_factory=list)
    errors: int = 0
    """Requests the engine failed after their first token."""

    def add(self, request: ServedRequest) -> None:
        if request.broken:
            self.errors += 1
        elif request.ok:
            self.requests.append(request)

    def line(self, *, endpoint: str, variant: str, interval_s: float, timestamp_ms: int) -> str:
        """The metric line peagle-serve writes for this interval (empty windows excepted)."""
        served = [r for r in self.requests if r.output_tokens > 0]
        drafts = sum(max(r.steps, 1) for r in served)
        drafted = sum(r.drafted for r in served)
        accepted = sum(r.accepted for r in served)
        seconds = max(interval_s, 1e-3)
        values = {
            "acceptance_rate": accepted / drafted if drafted else 0.0,
            "mean_acceptance_length": 1.0 + accepted / drafts if drafts else 1.0,
            "draft_tokens_per_s": drafted / seconds,
            "accepted_tokens_per_s": accepted / seconds,
        }
        histograms = {
            "ttft_s": Histogram.from_samples(BY_LINE_KEY["ttft_s"], (r.ttft_s for r in served)),
            "itl_s": Histogram.from_weighted(
                BY_LINE_KEY["itl_s"], ((r.step_s, r.steps) for r in served)
            ),
            "e2e_s": Histogram.from_samples(BY_LINE_KEY["e2e_s"], (r.e2e_s for r in served)),
        }
        serving: dict[str, Any] = {
            "interval_s": round(interval_s, 3),
            "requests": len(served),
            "output_tokens": sum(r.output_tokens for r in served),
            "decode_tokens": sum(max(0, r.output_tokens - 1) for r in served),
            "decode_s": round(sum(r.decode_s for r in served), 6),
            "errors": self.errors,
        }
        for key, h in histograms.items():
            serving[key] = {
                "le": list(h.bounds),
                "counts": [int(c) for c in h.counts],
                "sum": round(h.total, 6),
            }
        return format_metric_line(
            values,
            timestamp_ms=timestamp_ms,
            dimensions={"EndpointName": endpoint, "VariantName": variant},
            serving=serving,
        )


@dataclass(frozen=True)
class EmittedLine:
    """A metric line as CloudWatch Logs would hold it."""

    stream: str
    timestamp_ms: int
    message: str


@dataclass(frozen=True)
class MinuteCounts:
    """SageMaker's per-variant invocation metrics for one minute."""

    variant: str
    minute: int
    invocations: int
    errors_5xx: int


@dataclass(frozen=True)
class TrafficPlan:
    """The shape of an emulated experiment's traffic."""

    mode: Literal["shadow", "split"] = "shadow"
    share: float = 1.0
    """Shadow: the share mirrored to the candidate; split: the share it answers."""
    requests_per_minute: float = 20.0
    minutes: int = 120
    instances: tuple[int, int] = (1, 1)
    """(incumbent, candidate) instances."""
    mean_output_tokens: float = 200.0
    start_ms: int = 1_700_000_000_000


def _load_factors(rng: random.Random, minutes: int) -> Iterator[float]:
    """The common load of each minute: a slow wave plus AR(1) noise."""
    noise = 0.0
    for t in range(minutes):
        noise = 0.8 * noise + rng.gauss(0, 0.03)
        yield (1 + 0.1 * math.sin(2 * math.pi * t / 90)) * math.exp(noise)


def simulate(
    endpoint: str,
    variants: dict[str, VariantBehaviour],
    plan: TrafficPlan,
    *,
    seed: int,
) -> tuple[list[EmittedLine], list[MinuteCounts]]:
    """A whole experiment's metric lines and invocation counts, minute by minute.

    `variants` is {incumbent variant: behaviour, candidate variant: behaviour}, incumbent
    first. Each instance writes one line per minute, as peagle-serve does with the
    default 60 s interval.
    """
    rng = random.Random(seed)
    (inc_name, inc), (cand_name, cand) = list(variants.items())
    lines: list[EmittedLine] = []
    counts: list[MinuteCounts] = []
    sigma = 0.6
    mu = math.log(plan.mean_output_tokens) - sigma * sigma / 2
    for minute, load in enumerate(_load_factors(rng, plan.minutes)):
        arrivals = _poisson(rng, plan.requests_per_minute)
        windows = {
            (name, i): ContainerWindow()
            for name, n in ((inc_name, plan.instances[0]), (cand_name, plan.instances[1]))
            for i in range(n)
        }
        invocations = {inc_name: 0, cand_name: 0}
        errors = {inc_name: 0, cand_name: 0}
        for _ in range(arrivals):
            tokens = max(1, round(math.exp(rng.gauss(mu, sigma))))
            difficulty = rng.gauss(0, 1)
            targets: list[tuple[str, VariantBehaviour, int]] = []
            to_candidate = rng.random() < plan.share
            if plan.mode == "shadow" or not to_candidate:
                targets.append((inc_name, inc, rng.randrange(plan.instances[0])))
            if to_candidate:
                targets.append((cand_name, cand, rng.randrange(plan.instances[1])))
            for name, behaviour, instance in targets:
                served = serve(
                    behaviour, rng, output_tokens=tokens, difficulty=difficulty, load=load
                )
                invocations[name] += 1
                errors[name] += 0 if served.ok else 1
                windows[(name, instance)].add(served)
        stamp = plan.start_ms + (minute + 1) * 60_000
        for (name, instance), window in windows.items():
            if window.requests:
                lines.append(
                    EmittedLine(
                        f"{name}/i-{instance:017d}",
                        stamp,
                        window.line(
                            endpoint=endpoint, variant=name, interval_s=60.0, timestamp_ms=stamp
                        ),
                    )
                )
        for name in (inc_name, cand_name):
            counts.append(MinuteCounts(name, minute, invocations[name], errors[name]))
    return lines, counts


def _poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw (Knuth for small means, a rounded normal above 50)."""
    if mean > 50:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1
