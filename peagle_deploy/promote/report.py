"""Rendering a gate report: a rich table for people, a JSON document for CI.

The table is what a reviewer sees in a CI log when a promotion is refused, so each row
says the gate, the level, what was measured, what was required, and the verdict.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from peagle_deploy.promote.evaluate import GateReport, GateResult
from peagle_deploy.terminal import escaped, literal

_STATUS_STYLE = {"pass": "[green]PASS[/]", "fail": "[bold red]FAIL[/]", "skip": "[yellow]skip[/]"}


def _measured(result: GateResult) -> str:
    value = result.measured
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if result.kind == "error_rate":
        return f"{value:.2%}"
    if result.kind == "acceptance_length":
        return f"{value:.2f}"
    if result.kind == "p99_ttft_ms":
        return f"{value:,.1f} ms"
    return f"{value:,.1f} tok/s"


def gate_table(report: GateReport, title: str | None = None) -> Table:
    """The per-gate table (also used by the rehearsal)."""
    table = Table(
        title=title
        or escaped(
            f"gates for {report.target_stage} (measured on {report.source_stage} endpoint "
            f"{report.source_endpoint})"
        ),
        title_justify="left",
        show_lines=False,
    )
    table.add_column("gate", no_wrap=True)
    table.add_column("conc", justify="right")
    table.add_column("measured", justify="right")
    table.add_column("required")
    table.add_column("result", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for r in report.results:
        table.add_row(
            r.kind,
            "-" if r.concurrency is None else str(r.concurrency),
            literal(_measured(r)),
            literal(r.required),
            _STATUS_STYLE[r.status],
            # may quote the endpoint's answer or an error: its control characters are
            # shown escaped, never sent to the terminal
            literal(r.detail),
        )
    return table


def verdict(report: GateReport) -> str:
    """One line: how many gates passed, failed and were skipped (a skip is not a pass)."""
    counts = {status: sum(r.status == status for r in report.results) for status in _STATUS_STYLE}
    total = len(report.results)
    if counts["fail"]:
        names = ", ".join(f.name for f in report.failures)
        return f"{counts['fail']} of {total} gates failed: {names}"
    if not counts["skip"]:
        return f"all {total} gates passed"
    skipped = ", ".join(r.name for r in report.results if r.status == "skip")
    return (
        f"{counts['pass']} of {total} gates passed, {counts['skip']} skipped ({skipped}), "
        "none failed"
    )


def render_report(report: GateReport, console: Console, title: str | None = None) -> None:
    """Print the table and a one-line verdict."""
    console.print(gate_table(report, title))
    style = "bold red" if report.failures else "green"
    console.print(f"[{style}]{escaped(verdict(report))}[/]", highlight=False)


def report_json(report: GateReport) -> dict[str, Any]:
    """The machine form: the report plus derived `passed` flags."""
    data = report.model_dump(mode="json")
    data["passed"] = report.passed
    for row, result in zip(data["results"], report.results, strict=True):
        row["passed"] = result.passed
    return data
