"""Latency histograms as the container reports them: merged across lines, read as quantiles.

Each metric line carries, per latency, vLLM's bucket bounds and the interval's count in
each bucket (`peagle_serve.serving`). Percentiles of a variant are read from the sum of
all its lines' buckets (never an average of per-line percentiles), interpolated inside
the bucket as Prometheus' `histogram_quantile` does.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

_NORMAL = NormalDist()


@dataclass(frozen=True)
class Histogram:
    bounds: tuple[float, ...]
    """Finite upper bounds, ascending."""
    counts: tuple[float, ...]
    """Count per bucket; the last is above the largest bound (one longer than `bounds`)."""
    total: float = 0.0
    """Sum of the observations."""

    @property
    def count(self) -> float:
        return sum(self.counts)

    @classmethod
    def from_line(cls, doc: Mapping[str, Any]) -> Histogram | None:
        """The histogram of a line's `{"le": [...], "counts": [...], "sum": x}`, if well formed."""
        try:
            bounds = tuple(float(b) for b in doc["le"])
            counts = tuple(float(c) for c in doc["counts"])
            total = float(doc.get("sum", 0.0))
        except (KeyError, TypeError, ValueError):
            return None
        if len(counts) != len(bounds) + 1 or any(c < 0 for c in counts):
            return None
        if list(bounds) != sorted(bounds):
            return None
        return cls(bounds, counts, total)

    @classmethod
    def from_samples(cls, bounds: Iterable[float], samples: Iterable[float]) -> Histogram:
        """Bucket raw observations as vLLM's Prometheus histogram does (`value <= le`)."""
        return cls.from_weighted(bounds, ((value, 1) for value in samples))

    @classmethod
    def from_weighted(
        cls, bounds: Iterable[float], samples: Iterable[tuple[float, int]]
    ) -> Histogram:
        """Like `from_samples`, each value observed `weight` times."""
        edges = tuple(bounds)
        counts = [0.0] * (len(edges) + 1)
        total = 0.0
        for value, weight in samples:
            total += value * weight
            counts[bisect.bisect_left(edges, value)] += weight
        return cls(edges, tuple(counts), total)

    def merge(self, other: Histogram) -> Histogram:
        if other.bounds != self.bounds:
            raise ValueError("cannot merge histograms with different bucket bounds")
        return Histogram(
            self.bounds,
            tuple(a + b for a, b in zip(self.counts, other.counts, strict=True)),
            self.total + other.total,
        )

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0 < q < 1), None without observations.

        Linear inside the bucket that holds rank q * count, from the previous bound (0 for
        the first bucket); in the overflow bucket, the largest bound (as Prometheus does).
        """
        n = self.count
        if n <= 0:
            return None
        rank = q * n
        seen = 0.0
        for i, c in enumerate(self.counts):
            if c > 0 and seen + c >= rank:
                if i == len(self.bounds):
                    return self.bounds[-1] if self.bounds else None
                low = self.bounds[i - 1] if i > 0 else 0.0
                return low + (self.bounds[i] - low) * (rank - seen) / c
            seen += c
        return self.bounds[-1] if self.bounds else None

    def _scores(self) -> list[float | None]:
        """Per bound, the normal score of the share of observations at or below it (None
        where that share is 0 or 1)."""
        n, below, out = self.count, 0.0, []
        for c in self.counts[:-1]:
            below += c
            out.append(_NORMAL.inv_cdf(below / n) if 0 < below < n else None)
        return out

    def tail_value(self, tail: float, *, high: bool) -> float | None:
        """The value with `tail` observations beyond it, read inside its bucket.

        vLLM's latency buckets are wide (0.1 to 0.25 s, 1 to 2.5 s), and a tail falls
        steeply across one, so a linear reading (Prometheus') puts a p99 far too high.
        Here the bucket is read as a local log-normal: the normal score of the share at
        or below x, linear in log x through the shares observed at the bucket's bounds
        (exact when latencies are log-normal, near it for the skewed shapes latencies
        have). With nothing observed beyond the bucket, the line through the two bounds
        below it is extended (never past the bucket's own bounds). A bucket that cannot
        be read so (the first starts at 0) takes its own bound on the safe side: its top
        when `high` (an upper bound), else its bottom. In the overflow bucket, None when
        `high` (nothing bounds it), else the largest bound.
        """
        n = self.count
        if n <= 0 or not self.bounds:
            return None
        rank = n - tail  # observations at or below the value
        index = next((i for i, below in enumerate(self._cumulative()) if below >= rank), None)
        if index is None:
            return None if high else self.bounds[-1]
        low = self.bounds[index - 1] if index > 0 else 0.0
        top = self.bounds[index]
        line = self._line(index)
        if low <= 0 or line is None or not 0 < rank < n:
            return top if high else low
        (x0, z0), (x1, z1) = line
        share = (_NORMAL.inv_cdf(rank / n) - z0) / (z1 - z0)
        value = math.exp(math.log(x0) + share * (math.log(x1) - math.log(x0)))
        return min(top, max(low, value))

    def _cumulative(self) -> list[float]:
        out, below = [], 0.0
        for c in self.counts[:-1]:
            below += c
            out.append(below)
        return out

    def _line(self, index: int) -> tuple[tuple[float, float], ...] | None:
        """Two (bound, score) points to read bucket `index` on: its own bounds, else (its
        top has no score) the two bounds below it."""
        scores = self._scores()
        for a, b in ((index - 1, index), (index - 2, index - 1)):
            if a < 0 or self.bounds[a] <= 0:
                continue
            za, zb = scores[a], scores[b]
            if za is not None and zb is not None and zb > za:
                return (self.bounds[a], za), (self.bounds[b], zb)
        return None


def merge_all(histograms: Iterable[Histogram]) -> Histogram | None:
    """The sum of histograms with the same bounds (others are skipped), or None."""
    merged: Histogram | None = None
    for h in histograms:
        if merged is None:
            merged = h
        elif h.bounds == merged.bounds:
            merged = merged.merge(h)
    return merged
