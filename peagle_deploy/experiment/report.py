"""`peagle experiment status` for people: one table per reading, then the decision."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape

from peagle_deploy.terminal import literal

if TYPE_CHECKING:
    from rich.console import Console

    from peagle_deploy.experiment.lifecycle import ExperimentStatus


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
        console.print(prefix + text, highlight=False, markup=False)
        return
    table = Table(title=f"after {analysis.elapsed_s / 60:.1f} minutes")
    table.add_column("")
    for role in ("incumbent", "candidate"):
        table.add_column(role, justify="right")
    for label, a, b in _rows(analysis):
        table.add_row(label, literal(a), literal(b))
    console.print(table)
    result = analysis.decision.result
    if result is not None:
        low, high = result.ci
        console.print(
            f"decode speed, candidate vs incumbent: {100 * result.relative_difference:+.1f}% "
            f"({1 - result.alpha:.0%} CI {100 * low:+.1f}% to {100 * high:+.1f}%, "
            f"{result.windows} paired windows, always-valid p = {result.p_value:.3g})",
            highlight=False,
            markup=False,
        )
    verdict = analysis.decision
    console.print(
        f"[bold]decision:[/] {escape(verdict.verdict)}: {escape(verdict.reason)}",
        highlight=False,
    )
    if status.note:
        console.print(f"note: {status.note}", highlight=False, markup=False)
    for breach in analysis.breaches:
        console.print(
            f"[yellow]guardrail crossed:[/] {escape(breach.guardrail)}: {escape(breach.detail)}",
            highlight=False,
        )
