"""The decision rule of an experiment: a sequential test that may be read at any time.

The evidence is a series of paired windows (one minute by default) in which both
variants finished requests. In each window, each variant's decode speed is the output
tokens per second of one stream while it decodes: requests / sum of per-request TPOT
(vLLM's `request_time_per_output_token` histogram, sum and count). The paired
difference of log speeds, d = log(candidate) - log(incumbent), cancels what both
variants share in that minute (traffic mix, prompt and output lengths, load).

Test: the mixture sequential probability ratio test (mSPRT; H. Robbins 1970; R. Johari,
P. Koomen, L. Pekelis, D. Walsh, "Peeking at A/B tests", KDD 2017) for the mean of d,
with a normal mixture N(0, tau^2) over the effect and the variance estimated from the
data. Its p-value is *always valid*: reading the status every minute and acting on the
first p <= alpha still declares a winner, when there is no difference, at most alpha of
the time. The confidence interval is the matching confidence sequence, valid at any
time too. `tests/experiment/test_decision_simulation.py` measures both properties over
emulated experiments.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

MIXTURE_SCALE = 0.1
"""tau, the spread of the effects the test expects on the log scale (0.1 ~ +/-10 %):
K changes move decode speed by a few to a few tens of percent."""

MIN_WINDOWS = 30
"""Paired windows before the test is read: below this the variance estimate is too rough
for the plug-in mSPRT to keep its error rate."""

_VARIANCE_FLOOR = 1e-12

Verdict = Literal["running", "candidate", "incumbent", "inconclusive"]


@dataclass(frozen=True)
class SequentialResult:
    """The test after `windows` paired windows."""

    windows: int
    mean_log_ratio: float
    sd_log_ratio: float
    alpha: float
    p_value: float
    """Always-valid p-value: the smallest 1/likelihood-ratio seen so far (capped at 1)."""
    ci_log_ratio: tuple[float, float]
    """Confidence sequence for the mean log ratio at level 1 - alpha (now)."""

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
    def significant(self) -> bool:
        return self.p_value <= self.alpha


def _log_likelihood_ratio(n: int, mean: float, var: float, tau: float) -> float:
    """log of the normal-mixture likelihood ratio for H0: mean 0, after n samples."""
    spread = var + n * tau * tau
    return 0.5 * math.log(var / spread) + (n * n * tau * tau * mean * mean) / (2 * var * spread)


def _half_width(n: int, var: float, tau: float, alpha: float) -> float:
    """Half-width of the confidence sequence: every theta whose mSPRT stays below 1/alpha."""
    spread = var + n * tau * tau
    bound = math.log(1 / alpha) + 0.5 * math.log(spread / var)
    return math.sqrt(2 * var * spread * bound / (n * n * tau * tau))


def sequential_test(
    diffs: Sequence[float],
    *,
    alpha: float,
    tau: float = MIXTURE_SCALE,
    min_windows: int = MIN_WINDOWS,
) -> SequentialResult | None:
    """The mSPRT over `diffs` in time order, or None before `min_windows` windows."""
    if not 0 < alpha < 1:
        raise ValueError("alpha must be within (0, 1)")
    if len(diffs) < max(2, min_windows):
        return None
    total = squares = 0.0
    p_value = 1.0
    mean = var = 0.0
    for n, d in enumerate(diffs, start=1):
        total += d
        squares += d * d
        if n < max(2, min_windows):
            continue
        mean = total / n
        var = max((squares - n * mean * mean) / (n - 1), _VARIANCE_FLOOR)
        llr = _log_likelihood_ratio(n, mean, var, tau)
        p_value = min(p_value, math.exp(-llr) if llr < 700 else 0.0)
    n = len(diffs)
    half = _half_width(n, var, tau, alpha)
    return SequentialResult(
        windows=n,
        mean_log_ratio=mean,
        sd_log_ratio=math.sqrt(var),
        alpha=alpha,
        p_value=min(1.0, p_value),
        ci_log_ratio=(mean - half, mean + half),
    )


@dataclass(frozen=True)
class Decision:
    """What the rule says now; `final` when the experiment must end (conclude, max duration)."""

    verdict: Verdict
    reason: str
    result: SequentialResult | None
    missing: tuple[str, ...] = ()
    """What the minimums still need ("12.0 more minutes", ...); empty once they are met."""

    @property
    def winner(self) -> Literal["candidate", "incumbent"] | None:
        if self.verdict == "candidate":
            return "candidate"
        if self.verdict == "incumbent":
            return "incumbent"
        return None


@dataclass(frozen=True)
class Minimums:
    """What must be seen before a winner may be declared."""

    duration_s: float
    requests: int
    """Finished requests per variant."""


def decide(
    diffs: Sequence[float],
    *,
    alpha: float,
    elapsed_s: float,
    requests: tuple[int, int],
    minimums: Minimums,
    max_duration_s: float,
    final: bool = False,
) -> Decision:
    """Apply the rule: a winner once the minimums are met and the test is significant.

    `requests` is (incumbent, candidate). Without significance the experiment runs on
    until `max_duration_s` (or `final`), then ends inconclusive: the incumbent stays.
    """
    result = sequential_test(diffs, alpha=alpha)
    short: list[str] = []
    if elapsed_s < minimums.duration_s:
        short.append(f"{(minimums.duration_s - elapsed_s) / 60:.1f} more minutes")
    fewest = min(requests)
    if fewest < minimums.requests:
        short.append(f"{minimums.requests - fewest} more requests per variant")
    if result is None:
        short.append(f"{max(2, MIN_WINDOWS) - len(diffs)} more paired windows")
    if not short and result is not None and result.significant:
        winner: Verdict = "candidate" if result.mean_log_ratio > 0 else "incumbent"
        return Decision(
            winner,
            f"{winner} is faster: p = {result.p_value:.3g} <= alpha = {alpha} (mSPRT)",
            result,
        )
    missing = tuple(short)
    ended = final or elapsed_s >= max_duration_s
    if not ended:
        why = "needs " + ", ".join(short) if short else "no significant difference yet"
        return Decision("running", why, result, missing)
    if short:
        why = "ended before the minimums (" + ", ".join(short) + "): no winner"
    else:
        p = result.p_value if result is not None else 1.0
        why = f"no significant difference (p = {p:.3g} > alpha = {alpha}): no winner"
    return Decision("inconclusive", why, result, missing)
