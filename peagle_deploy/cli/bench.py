"""`peagle bench`: concurrency sweeps, configuration comparisons, K recommendations.

`peagle bench --url URL | --endpoint NAME ...` runs one sweep; `peagle bench compare`
runs several labelled targets (or reads earlier results) into the published table;
`peagle bench recommend-k` turns a sweep over K into the spec's speculative settings
(`peagle emulator loopback` serves a stand-in server to try it on). The engine (aiohttp, boto3,
matplotlib) is imported inside the commands so `peagle --help` stays fast.

Everything a command is given (flags, the targets file, the dataset, the output paths) is
checked before the first request; a refusal is one line naming the flag or the key.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from peagle_deploy.cli import output
from peagle_deploy.cli.bench_flags import JsonOpt, RunFlags, given, number, sweep_flags
from peagle_deploy.cli.bench_outputs import check_outputs, emit, write_outputs
from peagle_deploy.cli.bench_targets import (
    TargetEntry,
    check_entry,
    check_model_and_region,
    compare_entries,
    pairs,
)
from peagle_deploy.errors import InputError, PeagleError

if TYPE_CHECKING:
    from peagle_deploy.bench.compare import Comparison
    from peagle_deploy.bench.datasets import Dataset
    from peagle_deploy.bench.runner import SweepResult
    from peagle_deploy.bench.settings import SweepConfig

bench_app = typer.Typer(
    name="bench",
    help=(
        "Measure tokens/s and latency over concurrency levels, as `vllm bench serve` does."
        "\n\nA closed loop per level, against an OpenAI-compatible URL or a SageMaker "
        "endpoint."
    ),
    no_args_is_help=True,
    add_completion=False,
)


@bench_app.callback(invoke_without_command=True)
@sweep_flags
def bench_command(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option("--url", help="OpenAI-compatible base URL (…/v1).", parser=given("--url")),
    ] = None,
    endpoint: Annotated[
        str | None,
        typer.Option("--endpoint", help="SageMaker endpoint name.", parser=given("--endpoint")),
    ] = None,
    label: Annotated[
        str | None,
        typer.Option(
            "--label",
            help="Name of this configuration (e.g. peagle-k7; default: the model).",
            parser=given("--label"),
        ),
    ] = None,
    *,
    flags: RunFlags,
) -> None:
    """Sweep one target over concurrency levels and print vLLM-named metrics per level."""
    if ctx.invoked_subcommand is not None:
        return
    if (url is None) == (endpoint is None):
        raise InputError(
            "--url/--endpoint", "give exactly one of them", "--url URL, --endpoint NAME"
        )
    from peagle_deploy.bench.compare import Comparison
    from peagle_deploy.bench.runner import run_sweep

    config = flags.config()
    entry = TargetEntry(label, url or f"endpoint:{endpoint}", flags.model, flags.region)
    check_entry(entry, "--url" if url else "--endpoint", label_field="--label")
    data = _dataset(config)
    check_outputs(flags.json_path, flags.report)
    target = flags.target(entry.address, label=label, model=flags.model, region=flags.region)
    run = run_sweep(target, config, dataset=data, progress=flags.listener())
    comparison = Comparison([_labelled(run, None)])
    result = comparison.runs[0]
    write_outputs(result.to_dict(), comparison, flags.json_path, flags.report)
    if flags.json_path != "-":
        _print_levels(result)
    _explain_missing_acceptance(comparison.runs)
    _require_completions(comparison.runs)


@bench_app.command("compare")
@sweep_flags
def compare_command(
    targets: Annotated[
        list[str] | None,
        typer.Option(
            "--target",
            "-t",
            help="label=URL or label=endpoint:NAME (repeat). Labels classify: peagle-k7, "
            "eagle3-k7, baseline.",
            parser=given("--target", "label=URL, label=endpoint:NAME"),
        ),
    ] = None,
    file: Annotated[
        str | None,
        typer.Option(
            "--file",
            "-f",
            help="YAML/JSON file with a `targets:` list.",
            parser=given("--file", "a YAML or JSON file"),
        ),
    ] = None,
    results: Annotated[
        list[str] | None,
        typer.Option(
            "--results",
            help="Compare earlier results JSON files instead (repeat); LABEL=PATH renames "
            "the run of a one-run file.",
            parser=given("--results", "PATH, LABEL=PATH"),
        ),
    ] = None,
    kinds: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            help="label=p-eagle|eagle3|baseline|other (repeat).",
            parser=given("--kind", "label=kind"),
        ),
    ] = None,
    *,
    flags: RunFlags,
) -> None:
    """Run several labelled configurations and print the published-shape table."""
    kind_of = pairs(kinds or [], "--kind")
    if results:
        if targets or file:
            raise InputError("--results", "cannot be combined with --target/--file")
        comparison = _earlier_results(results, kind_of, flags)
    else:
        comparison = _run_targets(targets or [], file, kind_of, flags)
    write_outputs(comparison.to_dict(), comparison, flags.json_path, flags.report)
    if flags.json_path != "-":
        _print_comparison(comparison)
    if not results:
        _explain_missing_acceptance(comparison.runs)
    _require_completions(comparison.runs)


def _earlier_results(results: list[str], kind_of: dict[str, str], flags: RunFlags) -> Comparison:
    """`--results`: the runs of earlier results files, relabelled by --kind."""
    from peagle_deploy.bench.compare import Comparison

    check_outputs(flags.json_path, flags.report)
    comparison = Comparison.load(results)
    _check_kind_labels(kind_of, [run.label for run in comparison.runs])
    for run in comparison.runs:
        if run.label in kind_of:
            _labelled(run, kind_of[run.label])
    return comparison


def _run_targets(
    targets: list[str], file: str | None, kind_of: dict[str, str], flags: RunFlags
) -> Comparison:
    """One sweep per target (--target, --file), every input checked before the first
    request."""
    from peagle_deploy.bench.compare import Comparison
    from peagle_deploy.bench.runner import run_sweep

    config = flags.config()
    check_model_and_region(flags.model, flags.region)
    entries = compare_entries(targets, Path(file) if file is not None else None)
    _check_kind_labels(kind_of, [str(entry.label) for entry in entries])
    data = _dataset(config)
    check_outputs(flags.json_path, flags.report)
    listener = flags.listener()
    planned = [
        (
            entry,
            flags.target(
                entry.address,
                label=entry.label,
                model=entry.model or flags.model,
                region=entry.region or flags.region,
            ),
        )
        for entry in entries
    ]
    runs: list[SweepResult] = []
    for entry, target in planned:
        run = run_sweep(target, config, dataset=data, progress=listener)
        run.k = entry.k
        runs.append(_labelled(run, kind_of.get(str(entry.label)) or entry.kind))
    return Comparison(runs)


@bench_app.command("recommend-k")
def recommend_k_command(
    results: Annotated[
        list[str],
        typer.Option(
            "--results",
            help="Results JSON of a sweep over K (repeat for several; LABEL=PATH renames).",
            parser=given("--results", "PATH, LABEL=PATH"),
        ),
    ],
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind",
            help="p-eagle or eagle3 (default: p-eagle when present).",
            parser=given("--kind", "p-eagle, eagle3"),
        ),
    ] = None,
    tolerance: Annotated[
        float,
        typer.Option(
            "--tolerance",
            help="Keep the previous level's K when within this fraction of best.",
            parser=number("--tolerance", float, "0 <= tolerance < 1"),
        ),
    ] = 0.0,
    instances: Annotated[
        int,
        typer.Option(
            "--instances",
            help="Instances behind the endpoint (batch = conc / N).",
            parser=number("--instances", int, ">= 1"),
        ),
    ] = 1,
    json_path: JsonOpt = None,
) -> None:
    """Best K per concurrency, and the spec's `speculative:` snippet (one K for P-EAGLE)."""
    from peagle_deploy.bench.compare import Comparison, classify
    from peagle_deploy.bench.recommend import recommend_k

    check_outputs(json_path, None)
    comparison = Comparison.load(results)
    rec = recommend_k(
        comparison,
        kind=classify("", kind) if kind else None,
        tolerance=tolerance,
        instances=instances,
    )
    doc = rec.to_dict()
    doc["yaml"] = rec.to_yaml()
    if json_path:
        emit(doc, json_path)
    for note in rec.notes:
        output.warn(note)
    if json_path == "-":
        return
    from rich.table import Table

    table = Table(title=f"Best K per concurrency ({rec.kind})")
    for col in ("concurrency", "batch size", "best K", "output tok/s", "tok/s by K"):
        table.add_column(col, justify="right" if col != "tok/s by K" else "left")
    for ch in rec.choices:
        by_k = ", ".join(f"K{k}: {v:,.0f}" for k, v in sorted(ch.candidates.items()))
        table.add_row(
            str(ch.concurrency), str(ch.batch_size), str(ch.k), f"{ch.output_throughput:,.0f}", by_k
        )
    output.print_table(table)
    if len(rec.measured_ks) == 1:
        heading = "Spec snippet (the one K measured):"
    elif rec.schedule:
        heading = "Spec snippet (vLLM picks K by the engine's running batch size):"
    else:
        heading = "Spec snippet (one K for every batch size):"
    output.console.print(heading)
    output.console.print(rec.to_yaml(), markup=False, highlight=False)


# --- helpers --------------------------------------------------------------------------
def _dataset(config: SweepConfig) -> Dataset:
    """The prompts, read once before any request (and shared by every target)."""
    from peagle_deploy.bench.datasets import load_dataset

    return load_dataset(config.settings.dataset)


def _labelled(run: SweepResult, kind: str | None) -> SweepResult:
    from peagle_deploy.bench.compare import label_run

    return label_run(run, kind)


def _check_kind_labels(kind_of: dict[str, str], labels: list[str]) -> None:
    """Every --kind names a configuration of this comparison and a real kind: a typo
    would otherwise be ignored and the run silently classified from its label."""
    from peagle_deploy.bench.compare import classify

    for label, kind in kind_of.items():
        if label not in labels:
            raise InputError("--kind", f"no configuration is labelled {label!r}", labels)
        classify(label, kind)


def _fmt(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{float(value):,.{digits}f}"


def _print_levels(result: SweepResult) -> None:
    from rich.table import Table

    # Labels, targets and dataset names come from the user or a results file: plain text.
    title = f"{result.label}  ({result.target}, dataset {result.dataset})"
    table = Table(title=escape(title))
    cols = (
        "conc", "done", "failed", "out tok/s", "req/s", "TTFT med ms", "TTFT p99 ms",
        "TPOT med ms", "ITL med ms", "E2EL p99 ms", "accept %", "accept len",
    )  # fmt: skip
    for col in cols:
        table.add_column(col, justify="right")
    with_cost = any(lv.cost_per_million_output_tokens is not None for lv in result.levels)
    if with_cost:
        table.add_column("cost / 1M tok", justify="right")
    for lv in result.levels:
        d = lv.to_dict()
        row = [
            str(lv.concurrency), str(d["completed"]), str(d["failed"]),
            _fmt(d["output_throughput"], 0), _fmt(d["request_throughput"], 2),
            _fmt(d["median_ttft_ms"]), _fmt(d["p99_ttft_ms"]), _fmt(d["median_tpot_ms"], 2),
            _fmt(d["median_itl_ms"], 2), _fmt(d["p99_e2el_ms"], 0),
            _fmt(d.get("spec_decode_acceptance_rate")),
            _fmt(d.get("spec_decode_acceptance_length"), 2),
        ]  # fmt: skip
        if with_cost:
            row.append(_fmt(d.get("cost_per_million_output_tokens"), 4))
        table.add_row(*row)
    output.print_table(table)
    for lv in result.levels:
        for reason, count in (lv.metrics.get("errors") or {}).items():
            output.warn(f"c={lv.concurrency}: {count} failed: {reason}")


def _explain_missing_acceptance(runs: Sequence[SweepResult]) -> None:
    """Say why a SageMaker target has no acceptance figures instead of a silent `-`.

    They come from the container's metric lines in CloudWatch Logs, one per interval
    (60 s by default): levels shorter than that often have none.
    """
    for run in runs:
        if not run.target.startswith("endpoint:") or not any(
            lv.metrics.get("completed") for lv in run.levels
        ):
            continue
        missing = [lv.concurrency for lv in run.levels if lv.acceptance is None]
        if missing:
            name = run.target.removeprefix("endpoint:")
            output.warn(
                f"{run.label}: no acceptance figures at concurrency "
                f"{', '.join(map(str, missing))}: no container metric lines in "
                f"/aws/sagemaker/Endpoints/{name} during those levels (the peagle-serve image "
                "writes one every PEAGLE_METRICS_INTERVAL_SECONDS, 60 s by default; use a "
                "longer --duration or a larger --logs-delay)"
            )


def _require_completions(runs: Sequence[SweepResult]) -> None:
    """A target that answered no request at all measured nothing: exit non-zero.

    The results (with the error reasons) are written and printed first.
    """
    dead = [
        run.label or run.target
        for run in runs
        if not any(lv.metrics.get("completed") for lv in run.levels)
    ]
    if dead:
        raise PeagleError(f"no request completed on {', '.join(dead)}: nothing was measured")


def _print_comparison(comparison: Comparison) -> None:
    from rich.table import Table

    runs = comparison.ordered_runs
    table = Table(title="Output tokens/s per configuration")
    table.add_column("conc", justify="right")
    for run in runs:
        table.add_column(escape(run.label), justify="right")
    table.add_column("P/E3", justify="right")
    table.add_column("P/base", justify="right")
    for row in comparison.table():
        cells = [str(row["concurrency"])]
        cells += [_fmt(row["output_throughput"][r.label], 0) for r in runs]
        cells += [_fmt(row["peagle_over_eagle3"], 2), _fmt(row["peagle_over_baseline"], 2)]
        table.add_row(*cells)
    output.print_table(table)
    failed = sum(r.total_failed for r in runs)
    if failed:
        output.warn(f"{failed} requests failed; see the report's Errors section")


def register(app: typer.Typer) -> None:
    """Add `peagle bench` to the root app."""
    app.add_typer(bench_app, name="bench")
