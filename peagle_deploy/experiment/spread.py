"""How much instances of one type differ: the spread the decision rule must allow for.

GPUs of one type differ a little (clocks, thermals, placement), so each instance decodes
at its own fixed offset from its fleet's speed. An experiment compares fleets, so the
difference it measures is the candidate's gain *plus* the mean offset of the candidate's
instances minus that of the incumbent's: with a per-instance spread tau (the sd of the
log offsets), that fleet difference has sd tau x sqrt(1/M_i + 1/M_c) (M_i, M_c the
instances of each fleet), whatever the experiment's length. No number of blocks makes it
smaller; only more instances do. So the rule widens its interval by it (`stats`).

tau is estimated from the instances themselves where a fleet has two or more (`estimate`:
a one-way analysis of each instance's mean offset from its fleet's block means, with
the instances' own sampling noise taken out), and otherwise comes from a stated prior
(`experiment.instance_spread_percent`). The rule uses the larger of the two, so a prior
bounds the spread from below and the data can only widen it.

A calibration (A/A) run measures tau over *all* its instances (both fleets run the same
model, so every instance is a draw of the same spread): `interval` gives the estimate
with chi-square confidence bounds on its degrees of freedom.

Pure functions, standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Series = Mapping[int, float]
"""One instance's log decode speed per block index."""
Fleet = Mapping[str, Series]
"""The instances of one fleet (instance id -> its series)."""

MIN_INSTANCE_BLOCKS = 2
"""Blocks an instance needs (shared with another instance of its fleet) to count."""


@dataclass(frozen=True)
class SpreadEstimate:
    """The per-instance spread the instances show (log sd), and on how many degrees of
    freedom; `tau` None when no fleet had two instances to compare."""

    tau: float | None
    df: int
    sum_squares: float = 0.0
    """Of the instances' offsets from their fleet's mean (noise included)."""
    noise: float = 0.0
    """The share of sum_squares / df that is the instances' own sampling noise."""


def _fleet_offsets(fleet: Fleet) -> tuple[list[float], list[float]]:
    """Each instance's mean offset from its fleet's block means, and the variance of that
    mean from the instance's own block-to-block noise."""
    blocks: dict[int, list[float]] = {}
    for series in fleet.values():
        for index, value in series.items():
            blocks.setdefault(index, []).append(value)
    means = {i: math.fsum(v) / len(v) for i, v in blocks.items() if len(v) >= 2}
    offsets, noise = [], []
    for series in fleet.values():
        shared = [series[i] - means[i] for i in series if i in means]
        if len(shared) < MIN_INSTANCE_BLOCKS:
            continue
        mean = math.fsum(shared) / len(shared)
        offsets.append(mean)
        var = math.fsum((x - mean) ** 2 for x in shared) / (len(shared) - 1)
        noise.append(var / len(shared))
    return offsets, noise


def estimate(fleets: Sequence[Fleet]) -> SpreadEstimate:
    """tau from the instances of each fleet, compared within their fleet.

    Each fleet's instances are compared with each other only (an A/B candidate's gain is
    shared by its instances and drops out), block by block, so load and drift that every
    instance of a fleet sees drop out too. The offsets' spread holds the instances' own
    sampling noise as well; its expected share (the mean noise variance of an offset,
    times M/(M-1) for the fleet mean each offset is taken from) is subtracted.
    """
    squares, df, noise_total, counted = 0.0, 0, 0.0, 0
    for fleet in fleets:
        offsets, noise = _fleet_offsets(fleet)
        m = len(offsets)
        if m < 2:
            continue
        centre = math.fsum(offsets) / m
        squares += math.fsum((o - centre) ** 2 for o in offsets)
        df += m - 1
        noise_total += math.fsum(noise) * m / (m - 1)
        counted += m
    if df == 0:
        return SpreadEstimate(None, 0)
    noise_share = noise_total / counted
    tau = math.sqrt(max(0.0, squares / df - noise_share))
    return SpreadEstimate(tau, df, squares, noise_share)


@dataclass(frozen=True)
class Spread:
    """The spread the rule allows for in one comparison of two fleets."""

    prior: float
    """The stated per-instance spread (log sd): `instance_spread_percent`."""
    measured: SpreadEstimate
    instances: tuple[int, int]
    """(incumbent, candidate) instances whose means the comparison pools."""

    @property
    def per_instance(self) -> float:
        """The larger of the prior and what the instances show."""
        return max(self.prior, self.measured.tau or 0.0)

    @property
    def fleet_sd(self) -> float:
        """The sd of the two fleets' mean offsets' difference."""
        a, b = (max(1, n) for n in self.instances)
        return self.per_instance * math.sqrt(1 / a + 1 / b)

    @property
    def source(self) -> str:
        """Where `per_instance` comes from, for people."""
        tau = self.measured.tau
        if tau is not None and tau > self.prior:
            return f"measured on the instances ({self.measured.df} degrees of freedom)"
        return "the stated instance_spread_percent"


# --- chi-square bounds for a calibration's estimate ---------------------------------------


def _lower_gamma_ratio(a: float, x: float) -> float:
    """The regularized lower incomplete gamma function P(a, x)."""
    if x <= 0:
        return 0.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:  # the series converges fast here
        term = total = 1 / a
        k = a
        while abs(term) > abs(total) * 1e-15:
            k += 1
            term *= x / k
            total += term
        return min(1.0, total * math.exp(log_front))
    # a continued fraction for the upper part (modified Lentz)
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 500):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return max(0.0, 1 - math.exp(log_front) * h)


def chi2_quantile(p: float, df: int) -> float:
    """The p-quantile of the chi-square distribution with `df` degrees of freedom."""
    if not 0 < p < 1 or df < 1:
        raise ValueError("p must be within (0, 1) and df at least 1")
    low, high = 0.0, max(1.0, df + 20 * math.sqrt(2 * df) + 50)
    for _ in range(200):
        mid = (low + high) / 2
        if _lower_gamma_ratio(df / 2, mid / 2) < p:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def interval(measured: SpreadEstimate, alpha: float) -> tuple[float, float] | None:
    """One-sided (1 - alpha) lower and upper bounds of tau from `measured`, or None.

    sum_squares / (tau^2 + noise) is chi-square on df degrees of freedom when the offsets
    are normal; each bound solves it at the chi-square quantile, the noise taken out."""
    if measured.tau is None or measured.df < 1:
        return None
    s, df = measured.sum_squares, measured.df
    low = max(0.0, s / chi2_quantile(1 - alpha, df) - measured.noise)
    high = max(0.0, s / chi2_quantile(alpha, df) - measured.noise)
    return math.sqrt(low), math.sqrt(high)
