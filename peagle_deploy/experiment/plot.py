"""The experiment over time, as a PNG: both variants' speed and latency, and the difference.

Three panels sharing the time axis (hours since both variants serve):
1. decode speed per stream (tokens/s) of each variant in each block;
2. median time to first token of each variant in each block;
3. the estimated difference (candidate / incumbent - 1) after each block, with its
   confidence sequence, the margin a promotion must clear, and the ends of cycles: the
   rule reads the band at those ends only.

Each block is drawn at the end of what was measured in it: its end, or the time of the
reading for the block still under way (a plot 20 s after the start has its one point at
20 s, not at the end of the first hour). The axis is in minutes until two hours have
passed, then in hours; it spans the time since both variants serve.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from peagle_deploy.experiment.histogram import merge_all
from peagle_deploy.experiment.observations import VariantSample, span_index, windows
from peagle_deploy.experiment.stats import confidence_sequence

if TYPE_CHECKING:
    from peagle_deploy.experiment.lifecycle import ExperimentStatus


def _ttft_by_window(
    lines: Sequence[VariantSample], variant: str, start_ms: int, window_s: float
) -> dict[int, float]:
    groups: dict[int, list[VariantSample]] = {}
    for o in lines:
        if o.variant == variant and o.timestamp_ms > start_ms:
            index = span_index(o.timestamp_ms, start_ms=start_ms, width_s=window_s)
            groups.setdefault(index, []).append(o)
    out: dict[int, float] = {}
    for index, group in groups.items():
        merged = merge_all(o.histograms["ttft_s"] for o in group if "ttft_s" in o.histograms)
        p50 = merged.quantile(0.5) if merged is not None else None
        if p50 is not None:
            out[index] = p50 * 1000
    return out


FORMATS = ("png", "pdf", "svg")
"""What --plot writes, by the file's extension (formats matplotlib draws with no other
package); anything else is refused before any AWS call."""
MINUTES_UNTIL_S = 2 * 3600.0
"""Below this much time since the start the axis is in minutes, above it in hours."""


def plot_format(path: str | Path) -> str | None:
    """The format `path`'s extension asks for, None when it is not one of `FORMATS`."""
    suffix = Path(path).suffix.lower().lstrip(".")
    return suffix if suffix in FORMATS else None


def _measured_at(index: int, block_s: float, elapsed_s: float) -> float:
    """Seconds since the start at which block `index` was last measured: its end, or now
    for the block still under way."""
    return min((index + 1) * block_s, elapsed_s)


def _variant_panels(status: ExperimentStatus, speed: Any, ttft: Any, unit_s: float) -> None:
    """Decode speed and median TTFT of each variant, block by block."""
    record = status.record
    assert record.started_at is not None and status.analysis is not None
    elapsed = status.analysis.elapsed_s
    start_ms = int(record.started_at.timestamp() * 1000)
    block_s = record.settings.block_minutes * 60
    per_block = windows(status.observations, start_ms=start_ms, window_s=block_s)
    names = {"incumbent": record.incumbent_variant, "candidate": record.candidate_variant}
    for role, variant in names.items():
        series = sorted(
            (i, w.speed) for i, w in per_block.get(variant, {}).items() if w.speed is not None
        )
        speed.plot(
            [_measured_at(i, block_s, elapsed) / unit_s for i, _ in series],
            [s for _, s in series],
            marker=".",
            linewidth=1,
            label=f"{role} ({variant})",
        )
        latency = sorted(_ttft_by_window(status.observations, variant, start_ms, block_s).items())
        ttft.plot(
            [_measured_at(i, block_s, elapsed) / unit_s for i, _ in latency],
            [v for _, v in latency],
            marker=".",
            linewidth=1,
        )
    speed.set_ylabel("decode tokens/s per stream")
    speed.set_ylim(bottom=0)
    _legend(speed, "lower right")
    ttft.set_ylabel("median TTFT (ms)")
    ttft.set_ylim(bottom=0)


def _difference_panel(status: ExperimentStatus, diff: Any, unit_s: float) -> None:
    """The confidence sequence after each block, the margin, and the looks (cycle ends)."""
    analysis, settings = status.analysis, status.record.settings
    assert analysis is not None
    xs, mids, lows, highs = [], [], [], []
    pairs = analysis.pairs
    spread = analysis.decision.spread
    fleet_sd = spread.fleet_sd if spread is not None and not settings.calibration else 0.0
    for n in range(2, len(pairs) + 1):
        result = confidence_sequence(
            [b.log_ratio for b in pairs[:n]],
            alpha=settings.alpha,
            weights=[b.weight for b in pairs[:n]],
            fleet_sd=fleet_sd,
        )
        if result is None or not result.finite:
            continue
        at = _measured_at(pairs[n - 1].number, analysis.block_s, analysis.elapsed_s)
        xs.append(at / unit_s)
        mids.append(100 * math.expm1(result.mean_log_ratio))
        low, high = result.ci
        lows.append(100 * low)
        highs.append(100 * high)
    if xs:
        diff.fill_between(xs, lows, highs, alpha=0.25, label=f"{1 - settings.alpha:.0%} CS")
        diff.plot(xs, mids, label="candidate vs incumbent")
    diff.axhline(0, color="grey", linewidth=0.8)
    diff.axhline(settings.margin_percent, color="green", linewidth=0.8, linestyle="--")
    for k in range(1, analysis.decision.cycles + 1):
        diff.axvline(k * analysis.cycle_s / unit_s, color="grey", linestyle=":", linewidth=0.8)
    diff.set_ylabel("decode speed difference (%)")
    _legend(diff, "upper right")


def _legend(axes: Any, where: str) -> None:
    """A legend when something labelled was drawn (matplotlib warns about an empty one)."""
    handles, _ = axes.get_legend_handles_labels()
    if handles:
        axes.legend(loc=where)


def plot_experiment(status: ExperimentStatus, path: str | Path) -> Path:
    """Write the plot of a running or ended experiment to `path` (PNG, PDF or SVG, by
    its extension: `FORMATS`)."""
    fmt = plot_format(path)
    if fmt is None:
        raise ValueError(f"{path}: not one of {', '.join(FORMATS)}")
    fig = draw(status)
    out = Path(path)
    fig.savefig(out, dpi=100, format=fmt)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return out


def draw(status: ExperimentStatus) -> Any:
    """The experiment's figure (matplotlib's Agg backend: no display needed)."""
    from peagle_deploy.extras import require

    require("matplotlib", "the experiment's plot (--plot)")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    record, analysis = status.record, status.analysis
    if analysis is None or record.started_at is None:
        raise ValueError("the experiment has no data yet: nothing to plot")
    settings = record.settings
    span_s = max(analysis.elapsed_s, 1.0)
    unit_s, unit = (3600.0, "hours") if span_s >= MINUTES_UNTIL_S else (60.0, "minutes")
    fig, (speed, ttft, diff) = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    _variant_panels(status, speed, ttft, unit_s)
    _difference_panel(status, diff, unit_s)
    diff.set_xlim(0, span_s / unit_s)  # shared: every panel spans the time measured
    diff.set_xlabel(f"{unit} since both variants serve (dotted: ends of cycles, where it decides)")
    fig.suptitle(
        f"{record.endpoint_name}: {settings.mode} experiment ({analysis.decision.verdict}); "
        f"candidate {settings.candidate.model_dump(exclude_none=True)}",
        fontsize=10,
    )
    fig.tight_layout()
    return fig
