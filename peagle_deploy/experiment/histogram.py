"""Latency histograms as the container reports them: merged across lines, read as quantiles.

Each metric line carries, per latency, vLLM's bucket bounds and the interval's count in
each bucket (`peagle_serve.serving`). Percentiles of a variant are read from the sum of
all its lines' buckets (never an average of per-line percentiles), interpolated inside
the bucket as Prometheus' `histogram_quantile` does.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


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


def merge_all(histograms: Iterable[Histogram]) -> Histogram | None:
    """The sum of histograms with the same bounds (others are skipped), or None."""
    merged: Histogram | None = None
    for h in histograms:
        if merged is None:
            merged = h
        elif h.bounds == merged.bounds:
            merged = merged.merge(h)
    return merged
