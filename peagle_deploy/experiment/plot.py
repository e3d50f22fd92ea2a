"""The experiment over time, as a PNG: both variants' speed and latency, and the difference.

Three panels sharing the time axis (minutes since both variants serve):
1. decode speed per stream (tokens/s) of each variant in each window;
2. median time to first token of each variant in each window;
3. the estimated difference (candidate / incumbent - 1) after each window, with its
   always-valid confidence interval: the band the decision rule reads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from peagle_deploy.experiment.histogram import merge_all
from peagle_deploy.experiment.observations import LineObservation, windows
from peagle_deploy.experiment.stats import sequential_test

if TYPE_CHECKING:
    from peagle_deploy.experiment.lifecycle import ExperimentStatus


def _ttft_by_window(
    lines: Sequence[LineObservation], variant: str, start_ms: int, window_s: float
) -> dict[int, float]:
    groups: dict[int, list[LineObservation]] = {}
    for o in lines:
        if o.variant == variant and o.timestamp_ms >= start_ms:
            groups.setdefault(int((o.timestamp_ms - start_ms) // (window_s * 1000)), []).append(o)
    out: dict[int, float] = {}
    for index, group in groups.items():
        merged = merge_all(o.histograms["ttft_s"] for o in group if "ttft_s" in o.histograms)
        p50 = merged.quantile(0.5) if merged is not None else None
        if p50 is not None:
            out[index] = p50 * 1000
    return out


def plot_experiment(status: ExperimentStatus, path: str | Path) -> Path:
    """Write the plot of a running or ended experiment to `path` (PNG)."""
    from peagle_deploy.extras import require

    require("matplotlib", "the experiment's plot (--plot)")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    record, analysis = status.record, status.analysis
    if analysis is None or record.started_at is None:
        raise ValueError("the experiment has no data yet: nothing to plot")
    settings = record.settings
    start_ms = int(record.started_at.timestamp() * 1000)
    window_s = float(settings.window_seconds)
    per_window = windows(status.observations, start_ms=start_ms, window_s=window_s)
    minutes = window_s / 60
    names = {"incumbent": record.incumbent_variant, "candidate": record.candidate_variant}
    fig, (speed, ttft, diff) = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    for role, variant in names.items():
        series = sorted(
            (i, w.speed) for i, w in per_window.get(variant, {}).items() if w.speed is not None
        )
        speed.plot(
            [(i + 1) * minutes for i, _ in series],
            [s for _, s in series],
            marker=".",
            linewidth=1,
            label=f"{role} ({variant})",
        )
        latency = sorted(_ttft_by_window(status.observations, variant, start_ms, window_s).items())
        ttft.plot([(i + 1) * minutes for i, _ in latency], [v for _, v in latency], linewidth=1)
    speed.set_ylabel("decode tokens/s per stream")
    speed.set_ylim(bottom=0)
    speed.legend(loc="lower right")
    ttft.set_ylabel("median TTFT (ms)")
    ttft.set_ylim(bottom=0)
    xs, mids, lows, highs = [], [], [], []
    pairs = analysis.pairs
    for n in range(1, len(pairs) + 1):
        result = sequential_test([d for _, d in pairs[:n]], alpha=settings.alpha)
        if result is None:
            continue
        xs.append((pairs[n - 1][0] + 1) * minutes)
        mids.append(100 * math.expm1(result.mean_log_ratio))
        low, high = result.ci
        lows.append(100 * low)
        highs.append(100 * high)
    if xs:
        diff.fill_between(xs, lows, highs, alpha=0.25, label=f"{1 - settings.alpha:.0%} CI")
        diff.plot(xs, mids, label="candidate vs incumbent")
    diff.axhline(0, color="grey", linewidth=0.8)
    diff.set_ylabel("decode speed difference (%)")
    diff.set_xlabel("minutes since both variants serve")
    diff.legend(loc="upper right")
    verdict = analysis.decision.verdict
    fig.suptitle(
        f"{record.endpoint_name}: {settings.mode} experiment ({verdict}); "
        f"candidate {settings.candidate.model_dump(exclude_none=True)}",
        fontsize=10,
    )
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
