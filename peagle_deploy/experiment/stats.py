"""The statistics of an experiment: the decision rule and the guardrails' tests.

Pure functions of numbers, standard library only.

**Decode speed.** The evidence is a series of blocks (`block_minutes`, an hour by
default). In each block each variant's decode speed is pooled over all its requests
(generated tokens after the first / decode seconds), and the block gives one log ratio
d = log(candidate speed / incumbent speed), weighted by the block's traffic. Pooling over
an hour takes most of the per-minute autocorrelation (shared load, per-instance drift)
out, and makes the bias of a ratio of small sums (the variant with fewer requests in a
minute looks faster) negligible.

The test is a confidence sequence for the mean of d: Lai's mixture for a normal mean with
unknown variance (T. L. Lai, "On confidence sequences", Annals of Statistics 1976; H.
Wang and A. Ramdas, "Anytime-valid t-tests and confidence sequences for Gaussian means
with unknown variance", 2023). For a candidate mean mu, the likelihood ratio of the
scale-invariant statistics of x_i = d_i - mu, with the effect mixed over N(0, (c sigma)^2),
is

    L_n(mu) = (1 + n c^2)^(-1/2) (1 - c^2 / (1 + n c^2) * S^2 / Q)^(-n/2),
    S = sum(x_i), Q = sum(x_i^2),

a nonnegative martingale under mean mu whatever sigma is, so {mu : L_n(mu) < 1/alpha}
holds the true mean at every n at once with probability >= 1 - alpha (Ville's
inequality): no plug-in variance, valid from the first blocks on. Solved for mu it is
the interval mean +/- sqrt(r V / (n (n - r))), V the sum of squared deviations, r a
function of n, c and alpha only (infinite while n <= r). With traffic weights w, the
mean is the weighted one and n is Kish's effective number of blocks (sum w)^2 / sum w^2,
with the weighted variance: the gain callers get, a peak hour weighing more than a
trough; equal weights give the unweighted sequence exactly.

**Instance spread.** What the blocks measure is the candidate's gain plus what its
instances' fixed offsets differ from the incumbent's: a difference of sd tau x sqrt(1/M_i
+ 1/M_c) (`spread.Spread.fleet_sd`) that no number of blocks averages away. The
interval is widened by its one-sided 1 - alpha normal bound, the two half widths added
in quadrature (the offsets are independent of the blocks' noise). tau is the larger of
the stated prior and what the instances show (`experiment.spread`).

**The rule** (`decide`): it looks only at the end of whole traffic cycles
(`cycle_minutes`, a day), reading the blocks of the whole cycles seen, so the start time
cannot pick the winner of an effect that depends on the time of day. It promotes the
candidate when the lower bound of the gain is above the margin (`margin_percent`), keeps
the incumbent when the upper bound is below it, and otherwise waits for the next cycle,
up to `max_duration_minutes`. A calibration (A/A) run measures tau instead: calibrated
when its upper bound is within the prior, miscalibrated when its lower bound is beyond.

**Guardrails** (`rate_evidence`, `excess_evidence`): mixtures of likelihood ratios for
a rate (an error rate, or the share of requests beyond a latency bound), again
nonnegative supermartingales under the null, so they may be read at any time and fire on
the first crossing of 1/alpha. `tests/experiment/test_decision_simulation.py` and
`benchmarks/experiment_decision.py` measure all of it on simulated traffic.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal, NamedTuple

from peagle_deploy.experiment.spread import Spread, interval

MIXTURE_SCALE = 1.0
"""c: the spread of the effects the mixture expects, in units of the block-to-block sd.
It sets where the confidence sequence is tightest (a few tens of blocks); any fixed
value keeps it valid."""

MIN_BLOCK_REQUESTS = 10
"""Finished requests each variant needs in a block for the block to count."""

Verdict = Literal[
    "running", "candidate", "incumbent", "inconclusive", "calibrated", "miscalibrated"
]


def _radius_factor(n: float, alpha: float, scale: float) -> float:
    """r of the confidence sequence after n blocks (a function of n, c and alpha only;
    n may be an effective, fractional number of blocks)."""
    c2 = scale * scale
    spread = 1 + n * c2
    g = math.exp(-(2 / n) * (0.5 * math.log(spread) + math.log(1 / alpha)))
    return (1 - g) * spread / c2


def blocks_needed(alpha: float, scale: float = MIXTURE_SCALE) -> int:
    """The fewest blocks at which the confidence sequence can be finite."""
    n = 2
    while n <= _radius_factor(n, alpha, scale):
        n += 1
    return n


class Block(NamedTuple):
    """One block both variants finished enough requests in."""

    number: int
    """Blocks since the start (0 first)."""
    log_ratio: float
    """log(candidate decode speed / incumbent decode speed) over the block."""
    weight: float = 1.0
    """The block's traffic (requests both variants finished in it): a block of the daily
    peak weighs more than one of the trough, as it does for callers."""


def _weighted(values: Sequence[float], weights: Sequence[float]) -> tuple[float, float, float]:
    """(weighted mean, sum of weighted squared deviations scaled to `n_eff` - 1 degrees,
    effective number of blocks (sum w)^2 / sum w^2, Kish's)."""
    total = math.fsum(weights)
    mean = math.fsum(w * x for w, x in zip(weights, values, strict=True)) / total
    n = len(values)
    n_eff = total * total / math.fsum(w * w for w in weights)
    # the weighted variance, unbiased for equal weights, on n_eff - 1 degrees of freedom
    var = math.fsum(w * (x - mean) ** 2 for w, x in zip(weights, values, strict=True)) / total
    var *= n / (n - 1)
    return mean, var * (n_eff - 1), n_eff


@dataclass(frozen=True)
class SequentialResult:
    """The confidence sequence after `blocks` blocks, widened by the instance spread."""

    blocks: int
    mean_log_ratio: float
    """Traffic-weighted: the gain callers get."""
    sd_log_ratio: float
    alpha: float
    ci_log_ratio: tuple[float, float]
    """At level 1 - alpha for the blocks' noise (valid at every block at once), widened by
    what the fleets' instances may differ by; (-inf, inf) while too few blocks."""
    lag1: float | None
    """Lag-1 autocorrelation of the block ratios: the test assumes independent blocks."""
    noise_half_width: float = math.inf
    """The confidence sequence's own half width (the blocks' noise)."""
    spread_half_width: float = 0.0
    """What the instance spread adds: z(1 - alpha) x the fleets' difference sd."""
    effective_blocks: float = 0.0
    """Kish's effective number of blocks under the traffic weights."""

    @property
    def relative_difference(self) -> float:
        """Candidate over incumbent, minus one (+0.10 = the candidate is 10 % faster)."""
        return math.expm1(self.mean_log_ratio)

    @property
    def ci(self) -> tuple[float, float]:
        """The confidence interval of `relative_difference`."""
        low, high = self.ci_log_ratio
        return math.expm1(low), math.expm1(high)

    @property
    def finite(self) -> bool:
        return math.isfinite(self.ci_log_ratio[0]) and math.isfinite(self.ci_log_ratio[1])


def spread_half_width(alpha: float, fleet_sd: float) -> float:
    """The one-sided (1 - alpha) bound of a fleet difference of sd `fleet_sd`."""
    return NormalDist().inv_cdf(1 - alpha) * fleet_sd if fleet_sd > 0 else 0.0


def confidence_sequence(
    diffs: Sequence[float],
    *,
    alpha: float,
    scale: float = MIXTURE_SCALE,
    weights: Sequence[float] | None = None,
    fleet_sd: float = 0.0,
) -> SequentialResult | None:
    """The confidence sequence of the (weighted) mean of `diffs` (block log ratios in
    time order), widened by a fleet difference of sd `fleet_sd`; None before two blocks.

    With `weights`, the mean is traffic-weighted and the sequence is the unweighted one
    on Kish's effective number of blocks with the weighted variance (equal weights give
    the unweighted sequence exactly). The fleet difference is fixed for the whole
    experiment, independent of the blocks' noise: the two half widths add in quadrature,
    the instance part at its one-sided 1 - alpha normal bound.
    """
    if not 0 < alpha < 1:
        raise ValueError("alpha must be within (0, 1)")
    n = len(diffs)
    if n < 2:
        return None
    w = list(weights) if weights is not None else [1.0] * n
    if len(w) != n or any(not x > 0 for x in w):
        raise ValueError("weights must be positive, one per block")
    mean, v, n_eff = _weighted(diffs, w)
    r = _radius_factor(n_eff, alpha, scale) if n_eff > 1 else math.inf
    noise = math.sqrt(r * v / (n_eff * (n_eff - r))) if n_eff > r else math.inf
    spread = spread_half_width(alpha, fleet_sd)
    half = math.hypot(noise, spread) if math.isfinite(noise) else math.inf
    deviations = [d - math.fsum(diffs) / n for d in diffs]
    squares = math.fsum(x * x for x in deviations)
    lag1 = None
    if n >= 3 and squares > 0:
        lag1 = math.fsum(a * b for a, b in itertools.pairwise(deviations)) / squares
    return SequentialResult(
        blocks=n,
        mean_log_ratio=mean,
        sd_log_ratio=math.sqrt(v / max(n_eff - 1, 1e-9)),
        alpha=alpha,
        ci_log_ratio=(mean - half, mean + half),
        lag1=lag1,
        noise_half_width=noise,
        spread_half_width=spread,
        effective_blocks=n_eff,
    )


@dataclass(frozen=True)
class Schedule:
    """When the rule may look: at the end of each whole cycle, until the maximum."""

    block_s: float
    cycle_s: float
    max_duration_s: float

    @property
    def blocks_per_cycle(self) -> int:
        return max(1, round(self.cycle_s / self.block_s))

    def cycles_seen(self, elapsed_s: float) -> int:
        """Whole cycles over by `elapsed_s` (counted up to the maximum duration)."""
        span = min(elapsed_s, self.max_duration_s)
        return math.floor(span / self.cycle_s + 1e-9)

    def complete_blocks(self, elapsed_s: float) -> int:
        """Blocks over by `elapsed_s` (up to the maximum duration)."""
        return math.floor(min(elapsed_s, self.max_duration_s) / self.block_s + 1e-9)

    def looked_blocks(self, elapsed_s: float) -> int:
        """The blocks a look reads: those of the whole cycles over by `elapsed_s`."""
        return self.cycles_seen(elapsed_s) * self.blocks_per_cycle

    def ended(self, elapsed_s: float) -> bool:
        return elapsed_s >= self.max_duration_s


@dataclass(frozen=True)
class Decision:
    """What the rule says now, and what it read."""

    verdict: Verdict
    reason: str
    result: SequentialResult | None
    """The confidence sequence the verdict read: the blocks of the whole cycles seen."""
    current: SequentialResult | None = None
    """Over every complete block so far: shown while a cycle runs, never acted on."""
    missing: tuple[str, ...] = ()
    """What the rule still needs before a look can decide ("5.0 hours to the end of the
    first cycle"); empty once it could (`conclude` then ends an undecided rule as no
    winner)."""
    cycles: int = 0
    next_look_s: float | None = None
    """Seconds to the next look (the end of the next cycle); None once it has ended."""
    margin: float = 0.0
    calibration: bool = False
    spread: Spread | None = None
    """The instance spread the interval allows for (a calibration: what it measured)."""

    @property
    def winner(self) -> Literal["candidate", "incumbent"] | None:
        """Who serves after: never the candidate of a calibration (A/A) run."""
        if self.verdict == "candidate" and not self.calibration:
            return "candidate"
        if self.verdict == "incumbent":
            return "incumbent"
        return None


def _pct(log_ratio: float) -> str:
    return f"{100 * math.expm1(log_ratio):+.1f}%" if math.isfinite(log_ratio) else "unbounded"


def _interval(result: SequentialResult) -> str:
    low, high = result.ci_log_ratio
    return f"{_pct(result.mean_log_ratio)} ({_pct(low)} to {_pct(high)}, {result.blocks} blocks)"


def duration_text(seconds: float) -> str:
    """A duration for people: minutes below an hour and a half, hours above."""
    return f"{seconds / 3600:.1f} hours" if seconds >= 5400 else f"{seconds / 60:.1f} minutes"


def _allowing(result: SequentialResult) -> str:
    if result.spread_half_width <= 0:
        return ""
    return f", of which +/-{100 * result.spread_half_width:.1f}% for instance spread"


def _ab_verdict(result: SequentialResult, margin: float) -> tuple[Verdict, str] | None:
    """Promote, keep, or None (the interval still spans the margin)."""
    low, high = result.ci_log_ratio
    bar = math.log1p(margin)
    if low > bar:
        return "candidate", (
            f"the candidate decodes faster: {_interval(result)}{_allowing(result)}; the "
            f"lower bound clears the +{100 * margin:g}% margin"
        )
    if high < bar:
        return "incumbent", (
            f"the candidate is not {100 * margin:g}% faster: {_interval(result)}"
            f"{_allowing(result)}; the incumbent stays"
        )
    return None


def _spread_text(tau: float | None, bounds: tuple[float, float] | None, df: int) -> str:
    if tau is None or bounds is None:
        return "no fleet has two instances to compare"
    low, high = bounds
    return (
        f"instances differ by sd {100 * tau:.2f}% ({100 * low:.2f}% to {100 * high:.2f}%, "
        f"{df} degrees of freedom)"
    )


def _aa_verdict(
    result: SequentialResult, spread: Spread, alpha: float
) -> tuple[Verdict, str] | None:
    """Calibration: is the instance spread the rule assumes (`instance_spread_percent`)
    at least what this endpoint's instances show?

    Every instance of an A/A run is a copy of the incumbent, so all of them (both fleets,
    the difference between the fleets included) measure the same spread; `spread`
    carries that estimate. Its one-sided (1 - alpha) bounds decide."""
    measured = spread.measured
    bounds = interval(measured, alpha)
    text = f"{_spread_text(measured.tau, bounds, measured.df)}; the fleets: {_interval(result)}"
    lag = result.lag1
    if lag is not None and result.blocks >= 8 and lag > 2 / math.sqrt(result.blocks):
        text += f"; the blocks are correlated (lag-1 {lag:.2f}): lengthen block_minutes"
    prior = spread.prior
    if bounds is None:
        return None
    if bounds[0] > prior:
        return "miscalibrated", (
            f"{text}: more than instance_spread_percent ({100 * prior:g}%) allows for, so "
            f"the rule could declare a false winner here; set instance_spread_percent to "
            f"{100 * bounds[1]:.1f} or compare more instances"
        )
    if bounds[1] <= prior:
        return "calibrated", (
            f"{text}: within instance_spread_percent ({100 * prior:g}%), so the rule "
            "allows for what these instances differ by"
        )
    return None


def _waiting(
    result: SequentialResult | None, schedule: Schedule, elapsed_s: float, alpha: float
) -> tuple[str, ...]:
    """What the rule still needs before a look can decide; empty when it could."""
    done = schedule.cycles_seen(elapsed_s)
    if done == 0:
        return (f"{duration_text(schedule.cycle_s - elapsed_s)} to the end of the first cycle",)
    if result is None or not result.finite:
        have = 0 if result is None else result.blocks
        more = blocks_needed(alpha) - have
        return (f"{max(1, more)} more blocks with {MIN_BLOCK_REQUESTS}+ requests per variant",)
    return ()


def _judge(
    result: SequentialResult,
    margin: float,
    spread: Spread | None,
    alpha: float,
    calibration: bool,
) -> tuple[Verdict, str] | None:
    if not calibration:
        return _ab_verdict(result, margin)
    return _aa_verdict(result, spread, alpha) if spread is not None else None


def _undecided(
    result: SequentialResult,
    margin: float,
    spread: Spread | None,
    alpha: float,
    calibration: bool,
) -> str:
    """Why a look with enough blocks did not decide."""
    if calibration and spread is not None:
        bounds = interval(spread.measured, alpha)
        text = _spread_text(spread.measured.tau, bounds, spread.measured.df)
        return f"{text}: not yet clear of instance_spread_percent ({100 * spread.prior:g}%)"
    return f"{_interval(result)}{_allowing(result)} still spans the {100 * margin:g}% margin"


def _sequence(
    blocks: Sequence[Block], below: int, alpha: float, fleet_sd: float
) -> SequentialResult | None:
    kept = [b for b in blocks if b.number < below]
    return confidence_sequence(
        [b.log_ratio for b in kept],
        alpha=alpha,
        weights=[b.weight for b in kept],
        fleet_sd=fleet_sd,
    )


def decide(
    blocks: Sequence[Block],
    *,
    alpha: float,
    margin: float,
    schedule: Schedule,
    elapsed_s: float,
    spread: Spread | None = None,
    calibration: bool = False,
    final: bool = False,
) -> Decision:
    """The rule over `blocks` (in time order) at `elapsed_s`, allowing for `spread`.

    It reads only whole cycles: before the first ends it runs; at the end of each it
    promotes (lower bound above `margin`), keeps the incumbent (upper bound below it), or
    waits for the next, until `max_duration_s` (or `final`): then no winner, the
    incumbent stays. The interval is the blocks' confidence sequence widened by what the
    fleets' instances may differ by (`spread.fleet_sd`). `calibration` (A/A):
    `calibrated` or `miscalibrated` from the spread the instances show, never a winner.
    """
    done = schedule.cycles_seen(elapsed_s)
    fleet_sd = 0.0 if calibration or spread is None else spread.fleet_sd
    looked = schedule.looked_blocks(elapsed_s)
    result = _sequence(blocks, looked, alpha, fleet_sd) if done else None
    current = _sequence(blocks, schedule.complete_blocks(elapsed_s), alpha, fleet_sd)

    def answer(
        verdict: Verdict, why: str, missing: tuple[str, ...] = (), look: float | None = None
    ) -> Decision:
        return Decision(
            verdict, why, result, current, missing, done, look, margin, calibration, spread
        )

    if result is not None and result.finite:
        judged = _judge(result, margin, spread, alpha, calibration)
        if judged is not None:
            return answer(*judged)
    missing = _waiting(result, schedule, elapsed_s, alpha)
    if final or schedule.ended(elapsed_s):
        why = "ended before a decision" + (f" ({missing[0]})" if missing else "")
        if not missing and result is not None:
            why = (
                f"no decision by the end: {_undecided(result, margin, spread, alpha, calibration)}"
            )
        return answer("inconclusive", why + "; no winner, the incumbent stays", missing)
    if missing:
        why = "needs " + ", ".join(missing)
    else:
        assert result is not None
        why = _undecided(result, margin, spread, alpha, calibration)
    look = min((done + 1) * schedule.cycle_s, schedule.max_duration_s) - elapsed_s
    if done:
        why += f"; next look in {duration_text(look)}"
    return answer("running", why, missing, look)


# --- guardrails ---------------------------------------------------------------------------
_STEPS = tuple(2.0 ** (k / 4) for k in range(1, 65))
"""The mixtures' alternatives: odds (or rate ratios) 1.19x, 1.41x, 1.68x, 2x, ... 65536x
the null's (four per doubling), equally weighted: the fine steps near 1 let a test see
a modest excess (a p99 60 % above its limit), the coarse ones a gross one quickly."""


def _logmeanexp(terms: Sequence[float]) -> float:
    top = max(terms)
    if math.isinf(top):
        return top
    return top + math.log(math.fsum(math.exp(t - top) for t in terms) / len(terms))


def rate_evidence(events: float, trials: float, p0: float, *, above: bool = True) -> float:
    """log of a mixture likelihood ratio against "the rate is at most p0" (`above`), or
    "at least p0" (not `above`), after `events` in `trials` Bernoulli trials.

    Each alternative p' (odds 2x ... 65536x p0's, or as many times smaller) gives a
    likelihood ratio whose expectation under any rate on the null's side is at most one;
    their average is a nonnegative supermartingale, so P(ever >= 1/alpha) <= alpha.
    """
    events = min(max(events, 0.0), trials)
    if trials <= 0:
        return 0.0
    if p0 <= 0:  # one event is proof of a rate above 0; nothing is below 0
        return math.inf if above and events > 0 else 0.0
    if p0 >= 1:  # one non-event is proof of a rate below 1; nothing is above 1
        return math.inf if not above and events < trials else 0.0
    odds0 = p0 / (1 - p0)
    terms = []
    for step in _STEPS:
        odds = odds0 * step if above else odds0 / step
        p = odds / (1 + odds)
        terms.append(events * math.log(p / p0) + (trials - events) * math.log((1 - p) / (1 - p0)))
    return _logmeanexp(terms)


def excess_evidence(minutes: Iterable[tuple[float, float, float, float]]) -> list[float]:
    """log of a mixture likelihood ratio against "the candidate's error rate is at most
    the incumbent's" after each minute, from each minute's (candidate invocations,
    candidate errors, incumbent invocations, incumbent errors).

    Given a minute's errors, each is the candidate's with probability q = n_c / (n_c +
    n_i) when the rates are equal, less when the candidate's is lower (exactly for
    Poisson counts; for binomial ones the split is hypergeometric, which is more
    concentrated, so the ratio stays a supermartingale, Hoeffding 1963). The
    alternatives are the candidate's rate 2x ... 65536x the incumbent's.
    """
    totals = [0.0] * len(_STEPS)
    path: list[float] = []
    for n_c, errors_c, n_i, errors_i in minutes:
        e_c, e_i = min(max(errors_c, 0.0), n_c), min(max(errors_i, 0.0), n_i)
        if n_c > 0 and n_i > 0 and e_c + e_i > 0:
            q = n_c / (n_c + n_i)
            for j, ratio in enumerate(_STEPS):
                q1 = ratio * n_c / (ratio * n_c + n_i)
                totals[j] += e_c * math.log(q1 / q) + e_i * math.log((1 - q1) / (1 - q))
            path.append(_logmeanexp(totals))
        else:
            path.append(path[-1] if path else 0.0)
    return path
