"""`peagle experiment status` for people: one table per reading, then the decision."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape

from peagle_deploy.experiment.stats import duration_text
from peagle_deploy.terminal import escaped, harmless, literal

if TYPE_CHECKING:
    from rich.console import Console

    from peagle_deploy.experiment.analysis import Analysis
    from peagle_deploy.experiment.lifecycle import ExperimentStatus
    from peagle_deploy.experiment.spread import Spread


def _fmt(value: float | None, unit: str = "", digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}{unit}"


def _rows(analysis: Any) -> list[tuple[str, Any, Any]]:
    """The per-variant table's rows: (label, incumbent, candidate)."""
    inc, cand = analysis.incumbent, analysis.candidate
    rows: list[tuple[str, Any, Any]] = [
        ("variant", inc.variant, cand.variant),
        ("instances seen", inc.instances, cand.instances),
        (
            "requests (invocations)",
            _fmt(inc.invocations, digits=0),
            _fmt(cand.invocations, digits=0),
        ),
        ("requests finished", _fmt(inc.requests, digits=0), _fmt(cand.requests, digits=0)),
        (
            "output tokens/s per instance",
            _fmt(inc.output_tokens_per_s_per_instance),
            _fmt(cand.output_tokens_per_s_per_instance),
        ),
        (
            "decode tokens/s per stream",
            _fmt(inc.decode_tokens_per_s),
            _fmt(cand.decode_tokens_per_s),
        ),
        (
            "mean acceptance length",
            _fmt(inc.mean_acceptance_length, digits=2),
            _fmt(cand.mean_acceptance_length, digits=2),
        ),
    ]
    for label, key in (("TTFT", "ttft_ms"), ("ITL", "itl_ms")):
        for p in ("p50", "p90", "p99"):
            rows.append(
                (
                    f"{label} {p} (ms)",
                    _fmt(getattr(inc, key)[p]),
                    _fmt(getattr(cand, key)[p]),
                )
            )
    rows.append(
        (
            "error rate (5xx, stream errors)",
            _fmt(None if inc.error_rate is None else 100 * inc.error_rate, "%", 2),
            _fmt(None if cand.error_rate is None else 100 * cand.error_rate, "%", 2),
        )
    )
    return rows


def render_status(status: ExperimentStatus, console: Console) -> None:
    """The per-variant table, the difference, the decision and any guardrail crossed."""
    from rich.table import Table

    record = status.record
    settings = record.settings
    console.print(
        f"[bold]{escape(record.endpoint_name)}[/] {escape(settings.mode)} experiment: "
        f"{escape(record.state)} (endpoint {escape(status.endpoint_status)})",
        highlight=False,
    )
    analysis = status.analysis
    if analysis is None:
        text = status.note or "the variants are not both serving"
        prefix = "" if record.state == "running" else "no data yet: "
        console.print(harmless(prefix + text), highlight=False, markup=False)
        return
    table = Table(title=f"after {analysis.elapsed_s / 60:.1f} minutes")
    table.add_column("")
    for role in ("incumbent", "candidate"):
        table.add_column(role, justify="right")
    for label, a, b in _rows(analysis):
        table.add_row(label, literal(a), literal(b))
    console.print(table)
    _render_decision(analysis, settings.alpha, console)
    if status.note:
        console.print(f"note: {harmless(status.note)}", highlight=False, markup=False)
    for series in status.series or ():
        line = series.text()
        if line is not None:
            console.print(f"detailed metrics: {harmless(line)}", highlight=False, markup=False)
    for breach in analysis.breaches:
        console.print(
            f"[yellow]guardrail crossed:[/] {escaped(breach.guardrail)}: {escaped(breach.detail)}",
            highlight=False,
        )


def _spread_line(spread: Spread, calibration: bool) -> str:
    """What the instances differ by, and what the interval allows for it."""
    measured = spread.measured
    seen = (
        f"the instances show sd {100 * measured.tau:.2f}% ({measured.df} degrees of freedom)"
        if measured.tau is not None
        else "no fleet has two instances to compare"
    )
    if calibration:
        return f"instance spread: {seen}; instance_spread_percent is {100 * spread.prior:g}%"
    mi, mc = spread.instances
    return (
        f"instance spread: sd {100 * spread.per_instance:.2f}% per instance "
        f"({spread.source}; {seen}); fleets of {mi} and {mc} instances differ by sd "
        f"{100 * spread.fleet_sd:.2f}%, which the interval allows for"
    )


def _render_decision(analysis: Analysis, alpha: float, console: Console) -> None:
    """The difference with its confidence sequence, the schedule, the decision."""
    decision = analysis.decision
    block_min = analysis.block_s / 60
    looks = f"{decision.cycles} whole cycle{'s' if decision.cycles != 1 else ''} of " + (
        f"{analysis.cycle_s / 3600:g} h"
        if analysis.cycle_s >= 3600
        else f"{analysis.cycle_s / 60:g} min"
    )
    shown = decision.result if decision.result is not None else decision.current
    if shown is not None:
        low, high = shown.ci
        bounds = (
            f"{100 * low:+.1f}% to {100 * high:+.1f}%"
            if shown.finite
            else "unbounded: too few blocks yet"
        )
        read = "decides on these" if decision.result is not None else "shown, not decided on"
        console.print(
            f"decode speed, candidate vs incumbent: {100 * shown.relative_difference:+.1f}% "
            f"({1 - alpha:.0%} confidence sequence {bounds}; {shown.blocks} blocks of "
            f"{block_min:g} min, {read})",
            highlight=False,
            markup=False,
        )
    spread = decision.spread
    if spread is not None:
        console.print(_spread_line(spread, decision.calibration), highlight=False, markup=False)
    nxt = decision.next_look_s
    console.print(
        f"blocks counted {len(analysis.pairs)}; {looks} seen"
        + (f"; next look in {duration_text(nxt)}" if nxt is not None else "")
        + (
            ""
            if decision.calibration
            else f"; promotes when the lower bound clears +{100 * decision.margin:g}%"
        ),
        highlight=False,
        markup=False,
    )
    label = "calibration (A/A)" if decision.calibration else "decision"
    console.print(
        f"[bold]{label}:[/] {escape(decision.verdict)}: {escape(decision.reason)}",
        highlight=False,
    )
