"""The promotion: source manifest -> source checks -> gates -> deploy (or spec file) -> record.

Order matters for safety. Everything that can refuse the promotion (bad options,
missing or corrupted manifest, source not serving, a gate failing) happens before the
first write to the target; the target manifest is only written after the target
endpoint is InService on the new configuration. So a refused or failed promotion
leaves the target exactly as it was.

Every AWS call goes through boto3 clients built from the environment (the SDK's), so
`AWS_ENDPOINT_URL` pointing at the embedded moto server is the only difference between
the local rehearsal and a real run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field
from rich.console import Console

from peagle_deploy.errors import DeployError, PeagleError, SpecError
from peagle_deploy.promote.evaluate import (
    GateReport,
    LevelMeasurement,
    SmokeOutcome,
    baseline_from_measurements,
    evaluate_gates,
)
from peagle_deploy.promote.gates import BenchSettings, SmokeGate, StageGates
from peagle_deploy.promote.report import render_report, report_json
from peagle_deploy.spec.stage import check_stage_name

PromotionStatus = Literal["promoted", "unchanged", "refused", "dry-run", "spec-written"]
TargetAction = Literal["create", "update", "none"]

SmokeRunner = Callable[[str, SmokeGate], SmokeOutcome]
BenchRunner = Callable[[str, BenchSettings], list[LevelMeasurement]]


@dataclass(frozen=True)
class PromoteOptions:
    """What `peagle promote` was asked to do."""

    source_stage: str
    target_stage: str
    source_endpoint: str | None = None
    """None: the only endpoint of the source stage that has a manifest."""
    target_endpoint: str | None = None
    """None: derived from the source (`-dev` suffix -> `-staging`, or the spec default)."""
    role_arn: str | None = None
    """Execution role of the target; None keeps the source spec's role."""
    region: str | None = None
    dry_run: bool = False
    write_spec: Path | None = None
    bench_logs_delay_s: float | None = None
    """How long the bench waits for CloudWatch metric lines (None: bench default)."""
    bench_progress: bool = True
    poll_interval_s: float | None = None
    """DescribeEndpoint polling while the target deploys (None: the SDK's default)."""


class StageState(BaseModel):
    """One side of the promotion as found (source) or as it was before (target)."""

    stage: str
    endpoint_name: str
    status: str | None = None
    """SageMaker EndpointStatus; None when the endpoint does not exist."""
    endpoint_config_name: str | None = None
    content_hash: str | None = None


class PromotionResult(BaseModel):
    """Outcome of one `peagle promote`, printed as a table or as JSON."""

    status: PromotionStatus
    action: TargetAction
    """What happened (or, for dry runs and refusals, would have happened) to the target."""
    source: StageState
    target: StageState
    target_names: dict[str, str] = Field(default_factory=dict)
    """Model, endpoint config and endpoint names of the target plan."""
    changes: list[str] = Field(default_factory=list)
    """Human-readable list of what changes in the target."""
    gates_planned: list[str] = Field(default_factory=list)
    report: GateReport | None = None
    manifest_parameter: str | None = None
    spec_file: str | None = None
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude={"report"})
        data["report"] = None if self.report is None else report_json(self.report)
        return data


# --------------------------------------------------------------------------- helpers

_BUSY = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack", "Deleting"})
"""Target states in which a promotion must not start (SageMaker is mid-change)."""

STAGE_OWNED_FIELDS: tuple[str, ...] = (
    "initial_instance_count",
    "scaling",
    "rollout",
    "execution_role_arn",
    "vpc",
    "kms_key_id",
    "tags",
)
"""Spec fields that belong to a stage, not to the configuration being promoted.

A promotion carries what was measured - model, image, drafter, speculative settings, K,
instance type, tensor parallelism, limits, container env - and keeps the target's own
capacity, rollout policy, identity, network and encryption: promoting dev's one-instance,
all-at-once spec must not shrink prod to one instance or drop its canary and alarms.
"""


def _target_stage_settings(
    target_manifest: Any, write_spec: Path | None
) -> tuple[dict[str, Any], str | None]:
    """The target stage's own settings and where they came from (None: nowhere yet).

    For CDK users (`--write-spec`), from the stage file about to be overwritten: it is
    what `cdk deploy` will apply. Otherwise from what the target serves now (its
    manifest).
    """
    if write_spec is not None and Path(write_spec).is_file():
        from peagle_deploy.spec import load_spec

        try:
            doc = load_spec(Path(write_spec)).model_dump(mode="json")
        except SpecError as exc:
            raise SpecError(
                "--write-spec",
                f"{write_spec} exists, and its stage settings cannot be read ({exc})",
                "a stage spec file, or a new path",
            ) from None
        origin = str(write_spec)
    elif target_manifest is not None:
        doc = target_manifest.spec.model_dump(mode="json")
        origin = f"{target_manifest.stage}/{target_manifest.endpoint_name} (its manifest)"
    else:
        return {}, None
    return {k: doc[k] for k in STAGE_OWNED_FIELDS if k in doc}, origin


def _check_stage(flag: str, stage: str) -> None:
    check_stage_name(stage, flag)


def derive_target_endpoint_name(
    source_endpoint: str, source_spec_endpoint: str | None, source_stage: str, target_stage: str
) -> str | None:
    """The target's endpoint name, or None to let the plan use its default.

    The default (`peagle-<model>-<stage>`) already contains the stage; an explicit name
    is carried over by swapping a trailing `-<source stage>`. Anything else is ambiguous
    and must be given with `--target-name`, because guessing could point the promotion
    at an unrelated endpoint.
    """
    if source_spec_endpoint is None:
        return None
    suffix = f"-{source_stage}"
    if source_spec_endpoint.endswith(suffix):
        return source_spec_endpoint[: -len(suffix)] + f"-{target_stage}"
    raise SpecError(
        "--target-name",
        f"cannot derive the {target_stage} endpoint name from {source_endpoint!r} "
        f"(it does not end with {suffix!r})",
        "an explicit --target-name",
    )


def check_spec_destination(path: Path) -> None:
    """`--write-spec` must be writable before the gates run, not after (no AWS call)."""
    if path.is_dir():
        raise SpecError("--write-spec", f"{path} is a directory", "a YAML file path")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        problem = f"cannot create {path.parent}: {exc.strerror or exc}"
        raise SpecError("--write-spec", problem, "a YAML file path") from None


def check_bench_dataset(gates: StageGates, target_stage: str) -> None:
    """Load the gates' benchmark prompts now, before any AWS call.

    A missing or malformed JSONL file would otherwise surface only after the smoke chat,
    halfway through a promotion (and never in a dry run), named after `peagle bench`'s
    `--dataset` flag instead of the gates file's field.
    """
    if gates.bench is None:
        return
    from peagle_deploy.bench.datasets import load_dataset

    try:
        load_dataset(gates.bench.dataset)
    except SpecError as exc:
        raise SpecError(
            f"gates.stages.{target_stage}.bench.dataset", exc.problem, exc.allowed
        ) from None


def _describe(sm: Any, endpoint_name: str) -> dict[str, Any] | None:
    """DescribeEndpoint, or None when the endpoint does not exist."""
    from peagle_deploy.aws import is_not_found

    try:
        return dict(sm.describe_endpoint(EndpointName=endpoint_name))
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise


# --------------------------------------------------------------------------- the promotion


def promote(
    options: PromoteOptions,
    gates: StageGates,
    *,
    console: Console | None = None,
    smoke_runner: SmokeRunner | None = None,
    bench_runner: BenchRunner | None = None,
) -> PromotionResult:
    """Promote `options.source_stage` to `options.target_stage` through `gates`.

    Returns the result (status `refused` when a gate failed; the caller decides the
    exit code). Raises PeagleError when the promotion cannot even be attempted
    (source missing, manifest unreadable) or when the target deployment fails or rolls
    back; the message then says what the target serves now.
    """
    from peagle_deploy.plan import build_plan
    from peagle_deploy.promote import store
    from peagle_deploy.spec.loader import spec_from_dict

    out = console or Console(stderr=True)
    _check_stage("--from", options.source_stage)
    _check_stage("--to", options.target_stage)
    if options.source_stage == options.target_stage:
        raise SpecError("--to", "is the same stage as --from", "a different stage")
    check_bench_dataset(gates, options.target_stage)
    if options.write_spec is not None:
        check_spec_destination(Path(options.write_spec))

    clients = store.Clients.create(options.region)

    # 1. What the source runs, from its manifest.
    source_name = options.source_endpoint or store.only_endpoint_in_stage(
        clients, options.source_stage
    )
    manifest = store.read_source_manifest(clients, options.source_stage, source_name)
    out.print(
        f"[bold]source[/] {options.source_stage}/{source_name}: spec {manifest.content_hash} "
        f"(model {manifest.spec.model}, {manifest.spec.instance_type or 'default instance'})",
        highlight=False,
    )

    # 2. The source endpoint must be serving exactly that.
    described = _describe(clients.sagemaker, source_name)
    if described is None:
        raise PeagleError(
            f"source endpoint {source_name} ({options.source_stage}) is not deployed; its "
            f"manifest {store.parameter_name(options.source_stage, source_name)} is stale. "
            f"Deploy {options.source_stage} first (peagle deploy ... --stage "
            f"{options.source_stage}); nothing was changed."
        )
    status = str(described.get("EndpointStatus"))
    running_config = str(described.get("EndpointConfigName"))
    if status != "InService":
        raise PeagleError(
            f"source endpoint {source_name} ({options.source_stage}) is {status}, not "
            "InService; gates can only run against a serving endpoint. Nothing was changed."
        )
    if running_config != manifest.endpoint_config_name:
        raise PeagleError(
            f"source endpoint {source_name} runs endpoint config {running_config}, but its "
            f"manifest describes {manifest.endpoint_config_name} (spec "
            f"{manifest.content_hash}); redeploy {options.source_stage} so the manifest "
            "matches what serves. Nothing was changed."
        )
    source_state = StageState(
        stage=options.source_stage,
        endpoint_name=source_name,
        status=status,
        endpoint_config_name=running_config,
        content_hash=manifest.content_hash,
    )

    # 3. The target plan: the source's serving configuration with the target stage's own
    #    settings (capacity, rollout, network, identity), when the target has any.
    target_spec_endpoint = options.target_endpoint or derive_target_endpoint_name(
        source_name, manifest.spec.endpoint_name, options.source_stage, options.target_stage
    )
    source_doc = manifest.spec.model_dump(mode="json")
    first_try = spec_from_dict(
        {**source_doc, "stage": options.target_stage, "endpoint_name": target_spec_endpoint}
    )
    target_endpoint = build_plan(first_try).endpoint_name
    if target_endpoint == source_name:
        raise SpecError(
            "--target-name",
            f"the target endpoint would be the source endpoint {source_name}",
            "a name for the target stage",
        )
    target_manifest = store.read_optional_manifest(clients, options.target_stage, target_endpoint)
    stage_doc, stage_origin = _target_stage_settings(target_manifest, options.write_spec)
    update: dict[str, Any] = {
        "stage": options.target_stage,
        **stage_doc,
        "endpoint_name": target_spec_endpoint,
    }
    if options.role_arn:
        update["execution_role_arn"] = options.role_arn
    target_spec = spec_from_dict({**source_doc, **update})
    target_plan = build_plan(target_spec)
    target_described = _describe(clients.sagemaker, target_plan.endpoint_name)
    target_state = StageState(
        stage=options.target_stage,
        endpoint_name=target_plan.endpoint_name,
        status=None if target_described is None else str(target_described["EndpointStatus"]),
        endpoint_config_name=None
        if target_described is None
        else str(target_described.get("EndpointConfigName")),
    )
    if target_manifest is not None:
        target_state.content_hash = target_manifest.content_hash
    if target_state.status in _BUSY:
        # Checked before the gates: their measurements would be wasted, and the SDK
        # refuses to interleave two deployments anyway.
        raise PeagleError(
            f"target endpoint {target_state.endpoint_name} ({options.target_stage}) is "
            f"{target_state.status}; promote again once it has settled. Nothing was changed."
        )
    action, changes = _diff(target_state, target_plan)
    changes.append(
        f"stage settings ({', '.join(STAGE_OWNED_FIELDS)}) from {stage_origin}"
        if stage_origin
        else f"stage settings copied from {options.source_stage} (no {options.target_stage} "
        "configuration recorded yet)"
    )
    names = {
        "model": target_plan.model_name,
        "endpoint_config": target_plan.endpoint_config_name,
        "endpoint": target_plan.endpoint_name,
    }
    parameter = store.parameter_name(options.target_stage, target_plan.endpoint_name)
    base = {
        "action": action,
        "source": source_state,
        "target": target_state,
        "target_names": names,
        "changes": changes,
        "gates_planned": _planned_gates(gates),
        "manifest_parameter": parameter,
    }

    if options.dry_run:
        if options.write_spec is not None:
            changes.append(f"write {options.write_spec} (instead of deploying)")
        return PromotionResult(
            status="dry-run",
            message="no gate was run and nothing was changed",
            **base,
        )

    # 4. Gates against the source endpoint.
    report = run_gates(
        gates,
        source_state,
        options,
        clients=clients,
        console=out,
        smoke_runner=smoke_runner,
        bench_runner=bench_runner,
        target_manifest=target_manifest,
    )
    if not report.passed:
        names_failed = ", ".join(r.name for r in report.failures)
        return PromotionResult(
            status="refused",
            report=report,
            message=f"promotion refused by {len(report.failures)} gate(s): {names_failed}; "
            f"{options.target_stage} was not changed",
            **base,
        )

    # 5a. CDK users: write the target spec, deploy nothing.
    if options.write_spec is not None:
        written = write_stage_spec(options.write_spec, target_spec, source_state, report)
        return PromotionResult(
            status="spec-written",
            report=report,
            spec_file=str(written),
            message=f"gates passed; wrote {written} for `cdk deploy` (nothing deployed)",
            **base,
        )

    # 5b. Deploy through the SDK (create, blue/green update, or no-op).
    origin = f"{source_state.stage}/{source_state.endpoint_name}"
    store.promotion_manifest(target_plan, report, origin)  # fits in SSM? (else stop here)
    out.print(
        f"[bold]deploy[/] {options.target_stage}/{target_plan.endpoint_name}: {action} "
        f"({target_plan.endpoint_config_name})",
        highlight=False,
    )
    try:
        store.deploy(
            target_spec,
            clients=clients,
            wait=True,  # the promotion is recorded only once the target serves
            region=options.region,
            deployed_by=f"peagle promote {options.source_stage}->{options.target_stage}",
            poll_interval_s=options.poll_interval_s,
        )
    except PeagleError as exc:
        raise DeployError(_failed_deploy_message(clients, target_plan, target_state, exc)) from exc

    # 6. Record.
    store.record_promotion(clients, target_plan, report, origin)
    return PromotionResult(
        status="unchanged" if action == "none" else "promoted",
        report=report,
        message=(
            f"{options.target_stage} already ran {target_plan.endpoint_config_name}; "
            "promotion recorded"
            if action == "none"
            else f"promoted {options.source_stage} -> {options.target_stage} "
            f"({target_plan.endpoint_config_name}); recorded in {parameter}"
        ),
        **base,
    )


def _diff(target: StageState, plan: Any) -> tuple[TargetAction, list[str]]:
    if target.status is None:
        return "create", [
            f"create model {plan.model_name}",
            f"create endpoint config {plan.endpoint_config_name}",
            f"create endpoint {plan.endpoint_name}",
        ]
    if target.endpoint_config_name == plan.endpoint_config_name:
        return "none", [f"endpoint {plan.endpoint_name} already runs {plan.endpoint_config_name}"]
    return "update", [
        f"create model {plan.model_name}",
        f"create endpoint config {plan.endpoint_config_name}",
        f"blue/green update of {plan.endpoint_name}: {target.endpoint_config_name} -> "
        f"{plan.endpoint_config_name}",
    ]


def _planned_gates(gates: StageGates) -> list[str]:
    planned = ["smoke"] if gates.smoke.enabled else []
    if gates.bench is None:
        return planned
    t = gates.thresholds
    for c in gates.bench.concurrency:
        planned.append(f"error_rate@c{c}")
        if t.level_value("min_output_throughput", c) is not None:
            planned.append(f"output_throughput@c{c}")
        if t.min_throughput_ratio is not None:
            planned.append(f"throughput_ratio@c{c}")
        if t.level_value("max_p99_ttft_ms", c) is not None:
            planned.append(f"p99_ttft_ms@c{c}")
        if t.min_acceptance_length is not None:
            planned.append(f"acceptance_length@c{c}")
    return planned


def run_gates(
    gates: StageGates,
    source: StageState,
    options: PromoteOptions,
    *,
    clients: Any,
    console: Console,
    smoke_runner: SmokeRunner | None = None,
    bench_runner: BenchRunner | None = None,
    target_manifest: Any = None,
) -> GateReport:
    """Smoke first (cheap), then the benchmark unless the smoke test already failed."""
    from peagle_deploy.promote import measure, store

    smoke: SmokeOutcome | None = None
    if gates.smoke.enabled:
        console.print(f"[bold]gate[/] smoke chat on {source.endpoint_name}", highlight=False)
        runner = smoke_runner or (
            lambda name, gate: measure.run_smoke(
                name, gate, region=options.region, boto_session=clients.session
            )
        )
        smoke = runner(source.endpoint_name, gates.smoke)
    levels: list[LevelMeasurement] = []
    smoke_failed = smoke is not None and (smoke.error is not None or not smoke.text.strip())
    if gates.bench is not None and not smoke_failed:
        console.print(
            f"[bold]gate[/] benchmark on {source.endpoint_name}: concurrency "
            f"{gates.bench.concurrency}, {gates.bench.num_prompts} prompts per level",
            highlight=False,
        )
        logs_delay_s = options.bench_logs_delay_s
        if logs_delay_s is None and gates.thresholds.min_acceptance_length is None:
            # Acceptance comes from CloudWatch Logs, which lag; without an acceptance gate
            # there is nothing to wait for (whatever has arrived is still reported).
            logs_delay_s = 0.0
        bench = bench_runner or (
            lambda name, settings: measure.run_bench(
                name,
                settings,
                region=options.region,
                logs_delay_s=logs_delay_s,
                progress=options.bench_progress,
            )
        )
        levels = bench(source.endpoint_name, gates.bench)

    baseline: dict[int, float] | None = None
    baseline_from: str | None = None
    if gates.thresholds.min_throughput_ratio is not None:
        baseline_stage = gates.baseline_stage or options.target_stage
        if baseline_stage == options.target_stage:
            recorded = target_manifest
        else:
            name = store.find_endpoint_in_stage(clients, baseline_stage)
            recorded = (
                None
                if name is None
                else store.read_optional_manifest(clients, baseline_stage, name)
            )
        previous = store.recorded_report(recorded)
        if previous is not None and previous.measurements:
            baseline = baseline_from_measurements(previous.measurements)
            baseline_from = f"{previous.target_stage}/{recorded.endpoint_name}"

    results = evaluate_gates(gates, smoke, levels, baseline, baseline_from)
    if smoke_failed and gates.bench is not None:
        # Say why the benchmark gates have no numbers instead of listing them as failed.
        from peagle_deploy.promote.evaluate import GateResult

        results = [
            *results[:1],
            GateResult(
                name="bench",
                kind="bench",
                measured=None,
                required="smoke gate passes first",
                status="skip",
                detail="not run: the smoke gate failed",
            ),
        ]
    return GateReport(
        source_stage=source.stage,
        target_stage=options.target_stage,
        source_endpoint=source.endpoint_name,
        results=results,
        measurements=levels,
        baseline_from=baseline_from,
    )


def _failed_deploy_message(clients: Any, plan: Any, before: StageState, exc: Exception) -> str:
    """Say what the target serves now, after a failed or rolled-back deployment."""
    now = _describe(clients.sagemaker, plan.endpoint_name)
    if now is None:
        serving = "the target endpoint does not exist"
    else:
        serving = (
            f"{plan.endpoint_name} is {now.get('EndpointStatus')} and serves "
            f"{now.get('EndpointConfigName')}"
        )
        if before.endpoint_config_name and now.get("EndpointConfigName") == (
            before.endpoint_config_name
        ):
            serving += " (the configuration it had before the promotion)"
    return (
        f"promotion to {before.stage} did not complete: {exc}\n{serving}; the promotion "
        "was not recorded"
    )


def write_stage_spec(path: Path, spec: Any, source: StageState, report: GateReport) -> Path:
    """Write the target spec (YAML, for `cdk deploy`) and its gate report beside it.

    The spec file is what the stage's CDK stack reads; the header says where it came
    from so a reviewer of the pull request sees the evidence without running anything.
    """
    import json

    import yaml

    path = Path(path)
    # Only what differs from the defaults: the file stays as short as a hand-written one.
    body = spec.model_dump(mode="json", exclude_defaults=True)
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    header = (
        f"# Written by `peagle promote --from {source.stage} --to {report.target_stage}` "
        f"at {stamp}.\n"
        f"# Source: {source.stage}/{source.endpoint_name}, spec {source.content_hash}, "
        f"endpoint config {source.endpoint_config_name}.\n"
        f"# All {len(report.results)} gates passed; report: {path.name}.gates.json\n"
    )
    report_path = path.with_name(path.name + ".gates.json")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header + yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
        report_path.write_text(json.dumps(report_json(report), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise PeagleError(
            f"--write-spec: the gates passed, but {path} could not be written "
            f"({exc.strerror or exc}); nothing was deployed"
        ) from None
    return path


def render_result(result: PromotionResult, console: Console) -> None:
    """The human form: what changes, the gate table, the verdict."""
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    src = result.source
    table.add_row(
        "source",
        f"{src.stage}/{src.endpoint_name} ({src.status}, {src.endpoint_config_name})",
    )
    tgt = result.target
    state = "absent" if tgt.status is None else f"{tgt.status}, {tgt.endpoint_config_name}"
    table.add_row("target", f"{tgt.stage}/{tgt.endpoint_name} ({state})")
    table.add_row("action", result.action)
    for change in result.changes:
        table.add_row("", f"- {change}")
    if result.status == "dry-run":
        table.add_row("gates", ", ".join(result.gates_planned) or "(none)")
    console.print(table)
    if result.report is not None:
        render_report(result.report, console)
    style = {"refused": "bold red", "dry-run": "yellow"}.get(result.status, "green")
    console.print(f"[{style}]{result.status}:[/] {result.message}", highlight=False)
